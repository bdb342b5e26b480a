-- The hold's two procedures again (migrations/…_hold_place_simple.sql and
-- …_hold_claim_waiting.sql say what each does and why), their slot claim
-- now `Booking::HOLD_CLAIM` with the projection's floor
-- (…_held_expires_min.sql): the claim lowers `held_expires_min` to its
-- now plus the TTL, or sets it there when the counter was empty (no
-- counted hold then). The claim's now precedes its lock wait, so the
-- INSERT's, which makes the hold's expiry, is never earlier: the floor
-- stays at or below every counted expiry. A unit test compares the
-- claims word for word; the capped claim takes the TTL as its last
-- argument.
--
-- New names, not the old ones redefined: a DROP and CREATE would take the
-- booking user's EXECUTE with it while the release before this one still
-- calls `hold_place_simple` and `hold_claim_waiting` during a deploy. The
-- old procedures stay until a later migration drops them.
CREATE PROCEDURE hold_place_floor(
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
    DECLARE v_closed, v_shared BOOLEAN;
    DECLARE v_now, v_expires, v_created, v_updated DATETIME(6);
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
    UPDATE slots FORCE INDEX (PRIMARY) SET held_expires_min = LEAST(IF(held = 0, TIMESTAMP'9999-12-31 00:00:00', held_expires_min), UTC_TIMESTAMP(6) + INTERVAL p_ttl MICROSECOND), held = LAST_INSERT_ID(held + p_quantity), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = p_slot AND held + p_quantity <= remaining AND waiting = 0;
    IF ROW_COUNT() = 0 THEN
        ROLLBACK;
        SELECT 'claim' AS ended;
        LEAVE place;
    END IF;
    IF LAST_INSERT_ID() = p_quantity THEN
        UPDATE slots SET reclaimed_until = GREATEST(reclaimed_until, UTC_TIMESTAMP(6)) WHERE id = p_slot;
    END IF;
    -- The guard, then a simple INSERT from its `now`: never an
    -- `INSERT … SELECT`, which would hold the table's AUTO-INC lock while
    -- the INSERT waits for its foreign key's shared lock on the client's
    -- row or the key's UNIQUE index.
    SELECT UTC_TIMESTAMP(6) AS now, starts_at <= UTC_TIMESTAMP(6) AS closed, max_seats_per_client IS NOT NULL AS shared INTO v_now, v_closed, v_shared FROM slots WHERE id = p_slot FOR UPDATE;
    IF v_closed OR v_shared THEN
        ROLLBACK;
        SELECT 'guard' AS ended;
        LEAVE place;
    END IF;
    INSERT INTO holds (slot_id, client_id, quantity, idempotency_key, status, expires_at, created_at, updated_at, created_by) VALUES (p_slot, p_client, p_quantity, p_key, 'held', v_now + INTERVAL p_ttl MICROSECOND, v_now, v_now, p_request);
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
CREATE PROCEDURE hold_claim_floor(
    p_client   BIGINT UNSIGNED,
    p_window   INT UNSIGNED,
    p_quantity INT UNSIGNED,
    p_cap      INT UNSIGNED,
    p_slot     BIGINT UNSIGNED,
    p_ttl      BIGINT
)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE v_bound BIGINT UNSIGNED;
    DECLARE v_rows BIGINT;
    -- LAST_INSERT_ID is the session's: 0 unless the bound passes below.
    DO LAST_INSERT_ID(0);
    INSERT INTO client_allowances (client_id, held, counted_at, recount_after)
    VALUES (p_client, 0, '1000-01-01', UTC_TIMESTAMP(6) + INTERVAL p_window SECOND)
    ON DUPLICATE KEY UPDATE held = IF(held + p_quantity <= p_cap AND counted_at >= recount_after,
        LAST_INSERT_ID(held + p_quantity), held);
    SET v_bound = LAST_INSERT_ID();
    UPDATE slots FORCE INDEX (PRIMARY) SET held_expires_min = LEAST(IF(held = 0, TIMESTAMP'9999-12-31 00:00:00', held_expires_min), UTC_TIMESTAMP(6) + INTERVAL p_ttl MICROSECOND), held = LAST_INSERT_ID(held + p_quantity), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = p_slot AND held + p_quantity <= remaining AND waiting = 0;
    SET v_rows = ROW_COUNT();
    SELECT CAST(v_bound AS SIGNED) AS bound, v_rows AS slot_rows,
        CAST(IF(v_rows = 1, LAST_INSERT_ID(), 0) AS SIGNED) AS slot_held;
END;
