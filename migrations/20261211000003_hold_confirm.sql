-- A confirm's common path in one CALL (SPEC §8; docs/DESIGN.md, "One CALL
-- under the lock"): the slot's lock, the hold's, the decision, the
-- decrement, the mark, the row read back, its `hold.confirmed` event and
-- the COMMIT, inside the server: the slot's row lock is held for no round
-- trip to the client. Each statement reads its own `now` when it starts,
-- so the expiry is decided after the slot's lock, as `LOCK_HOLD` decides
-- it when sent alone.
--
-- The locks are `LOCK_SLOT`'s and `LOCK_HOLD`'s rows, in that order; the
-- writes are `Booking::CONFIRM_CONSUME` and `CONFIRM_MARK` word for word
-- (a unit test compares). A hold that is not plainly confirmable here
-- (gone, moved to another slot, no longer held, expired, offered to a
-- waiting entry, or a decrement that finds no seats) ends with a ROLLBACK
-- and 'declined': the caller's locked sequence (booking/confirm.rs)
-- decides and answers it.
--
-- The event's `data` is the hold resource as serde writes it, byte for
-- byte (a test compares): keys are 36 hex digits and hyphens (the API
-- parses them so), nothing to escape; times with six decimals and `Z`.
--
-- SQL SECURITY INVOKER: the booking user's own privileges; it holds
-- EXECUTE for it (migrate/duty.rs). It begins its own transaction
-- (`Tx::begun_by`): called outside one, never inside.
CREATE PROCEDURE hold_confirm(
    p_hold    BIGINT UNSIGNED,
    p_slot    BIGINT UNSIGNED,
    p_request BIGINT UNSIGNED
)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
confirm: BEGIN
    DECLARE v_found BOOLEAN DEFAULT TRUE;
    DECLARE v_waiting, v_quantity INT UNSIGNED;
    DECLARE v_slot, v_client, v_entry BIGINT UNSIGNED;
    DECLARE v_status VARCHAR(16);
    DECLARE v_expired BOOLEAN;
    DECLARE v_key CHAR(36) CHARACTER SET ascii;
    DECLARE v_expires, v_confirmed, v_created, v_updated DATETIME(6);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_found = FALSE;
    -- Its own transaction, begun here: no BEGIN round trip before it.
    START TRANSACTION;
    -- `LOCK_SLOT`: the slot's lock, first (its line is not read here).
    SELECT waiting INTO v_waiting FROM slots WHERE id = p_slot FOR UPDATE;
    SELECT slot_id, client_id, status, quantity, entry_id, expires_at <= UTC_TIMESTAMP(6)
    INTO v_slot, v_client, v_status, v_quantity, v_entry, v_expired
    FROM holds WHERE id = p_hold FOR UPDATE;
    IF NOT v_found OR v_slot <> p_slot OR v_status <> 'held' OR v_expired OR v_entry IS NOT NULL THEN
        ROLLBACK;
        SELECT 'declined' AS ended;
        LEAVE confirm;
    END IF;
    UPDATE slots SET remaining = remaining - v_quantity, held = held - LEAST(held, v_quantity), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = p_slot AND remaining >= v_quantity;
    IF ROW_COUNT() = 0 THEN
        ROLLBACK;
        SELECT 'declined' AS ended;
        LEAVE confirm;
    END IF;
    UPDATE holds SET status = 'confirmed', confirmed_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6), confirmed_by = p_request WHERE id = p_hold;
    SELECT idempotency_key, expires_at, confirmed_at, created_at, updated_at
    INTO v_key, v_expires, v_confirmed, v_created, v_updated
    FROM holds WHERE id = p_hold;
    INSERT INTO events (type, client_id, slot_id, hold_id, occurred_at, data)
    VALUES ('hold.confirmed', v_client, p_slot, p_hold, v_updated, CONCAT(
        '{"id":', p_hold, ',"slot_id":', p_slot, ',"status":"confirmed","quantity":', v_quantity,
        ',"active":false,"idempotency_key":"', v_key,
        '","expires_at":"', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ'),
        '","confirmed_at":"', DATE_FORMAT(v_confirmed, '%Y-%m-%dT%H:%i:%s.%fZ'),
        '","cancelled_at":null,"created_at":"', DATE_FORMAT(v_created, '%Y-%m-%dT%H:%i:%s.%fZ'),
        '","updated_at":"', DATE_FORMAT(v_updated, '%Y-%m-%dT%H:%i:%s.%fZ'), '"}'));
    -- The answer, then the COMMIT, last: an error the CALL answers is
    -- then never one after the COMMIT (nothing was committed).
    SELECT 'confirmed' AS ended, v_expires AS expires_at, v_confirmed AS confirmed_at,
        v_updated AS updated_at;
    COMMIT;
END;
