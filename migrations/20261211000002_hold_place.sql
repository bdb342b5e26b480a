-- A hold's common path in one CALL (SPEC §9; docs/DESIGN.md, "One CALL
-- under the lock"): a capped client's allowance, the slot's claim, the
-- watermark when the counter was empty, the guarded INSERT, the row read
-- back, its `hold.created` event and the COMMIT. The slot's row lock is
-- taken by the claim and released by the COMMIT inside the server: no
-- round trip to the client happens while it is held. Every statement here
-- reads its own `now` when it starts, so each after the claim's lock wait
-- reads a `now` after the lock, as the statements the Rust caller sends
-- one by one do.
--
-- The statements are `Booking::HOLD_CLAIM`, `HOLD_WATERMARK` and
-- `HOLD_INSERT` (the share unchecked: a slot with one is not placed here) and the allowance of
-- `hold_claim_waiting`, word for word (a unit test compares them). Any
-- other path ends here with a ROLLBACK and a row that says where
-- (`ended`): 'allowance' (the cap's bound did not pass), 'claim' (full by
-- the counter, or a line waits), 'guard' (the slot started, or has a
-- share); the caller then runs the locked sequence (booking/hold.rs). An
-- error (the key's UNIQUE index) leaves the transaction open, as the
-- INSERT sent alone would; the COMMIT is the last statement, so an error
-- answered means nothing was committed.
--
-- The event's `data` is the hold resource as serde writes it, byte for
-- byte (a test compares): keys are 36 hex digits and hyphens, nothing to
-- escape; times with six decimals and `Z`.
--
-- SQL SECURITY INVOKER: it writes with the caller's own privileges; the
-- booking user holds EXECUTE for it (migrate/duty.rs). It begins its own
-- transaction (`Tx::begun_by`): called outside one, never inside.
CREATE PROCEDURE hold_place(
    p_client   BIGINT UNSIGNED,
    p_cap      INT UNSIGNED,
    p_window   INT UNSIGNED,
    p_quantity INT UNSIGNED,
    p_slot     BIGINT UNSIGNED,
    p_key      CHAR(36) CHARACTER SET ascii,
    p_ttl      BIGINT,
    p_request  BIGINT UNSIGNED
)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
place: BEGIN
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_active BOOLEAN;
    DECLARE v_expires, v_created, v_updated DATETIME(6);
    -- Its own transaction, begun here: no BEGIN round trip before it.
    START TRANSACTION;
    IF p_cap IS NOT NULL THEN
        -- LAST_INSERT_ID is the session's: 0 unless the bound passes.
        DO LAST_INSERT_ID(0);
        INSERT INTO client_allowances (client_id, held, counted_at, recount_after)
        VALUES (p_client, 0, '1000-01-01', UTC_TIMESTAMP(6) + INTERVAL p_window SECOND)
        ON DUPLICATE KEY UPDATE held = IF(held + p_quantity <= p_cap AND counted_at >= recount_after,
            LAST_INSERT_ID(held + p_quantity), held);
        IF LAST_INSERT_ID() = 0 THEN
            ROLLBACK;
            SELECT 'allowance' AS ended;
            LEAVE place;
        END IF;
    END IF;
    UPDATE slots FORCE INDEX (PRIMARY) SET held = LAST_INSERT_ID(held + p_quantity), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = p_slot AND held + p_quantity <= remaining AND waiting = 0;
    IF ROW_COUNT() = 0 THEN
        ROLLBACK;
        SELECT 'claim' AS ended;
        LEAVE place;
    END IF;
    IF LAST_INSERT_ID() = p_quantity THEN
        UPDATE slots SET reclaimed_until = GREATEST(reclaimed_until, UTC_TIMESTAMP(6)) WHERE id = p_slot;
    END IF;
    INSERT INTO holds (slot_id, client_id, quantity, idempotency_key, status, expires_at, created_at, updated_at, created_by)
    SELECT id, p_client, p_quantity, p_key, 'held', UTC_TIMESTAMP(6) + INTERVAL p_ttl MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), p_request
    FROM slots WHERE id = p_slot AND starts_at > UTC_TIMESTAMP(6) AND (max_seats_per_client IS NULL OR FALSE);
    IF ROW_COUNT() = 0 THEN
        ROLLBACK;
        SELECT 'guard' AS ended;
        LEAVE place;
    END IF;
    SET v_id = LAST_INSERT_ID();
    -- Read back as `FIND_BY_ID` reads it, under the lock: `active` by
    -- this statement's `now`, as the answer and the event both say.
    SELECT expires_at, created_at, updated_at, expires_at > UTC_TIMESTAMP(6)
    INTO v_expires, v_created, v_updated, v_active
    FROM holds WHERE id = v_id;
    INSERT INTO events (type, client_id, slot_id, hold_id, occurred_at, data)
    VALUES ('hold.created', p_client, p_slot, v_id, v_updated, CONCAT(
        '{"id":', v_id, ',"slot_id":', p_slot, ',"status":"held","quantity":', p_quantity,
        ',"active":', IF(v_active, 'true', 'false'), ',"idempotency_key":"', p_key,
        '","expires_at":"', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ'),
        '","confirmed_at":null,"cancelled_at":null,"created_at":"', DATE_FORMAT(v_created, '%Y-%m-%dT%H:%i:%s.%fZ'),
        '","updated_at":"', DATE_FORMAT(v_updated, '%Y-%m-%dT%H:%i:%s.%fZ'), '"}'));
    -- The answer, then the COMMIT, last: an error the CALL answers is
    -- then never one after the COMMIT (nothing was committed).
    SELECT 'placed' AS ended, v_id AS id, v_active AS active,
        v_expires AS expires_at, v_created AS created_at, v_updated AS updated_at;
    COMMIT;
END;
