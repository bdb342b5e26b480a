-- A hold's common path in one CALL (migrations/…_hold_place.sql says
-- what it does and why), its INSERT now a simple one: the guard the
-- `INSERT … SELECT` carried (the slot started, or has a share) is read
-- first, under the slot's lock, and the hold is inserted from that read's
-- `now` by `VALUES`, as the locked path's `Booking::HOLD_GUARD` and
-- `HOLD_INSERT` do (a unit test compares them word for word).
--
-- Why: in InnoDB's consecutive AUTO-INC mode (MariaDB's default) an
-- `INSERT … SELECT` holds the table's AUTO-INC lock to its end, lock
-- waits included; every simple INSERT into the table then queues behind
-- it, and one that holds a row the waiting statement needs (a capped
-- client's `api_clients` row, which the foreign key locks shared)
-- deadlocks with it, answered as error 1467 (docs/DESIGN.md, "The
-- implicit locks"). A simple INSERT takes only the counter's latch.
--
-- A new name, not the old one redefined: a DROP and CREATE would take the
-- booking user's EXECUTE with it while the release before this one still
-- calls `hold_place` during a deploy. The old procedure stays until a
-- later migration drops it.
CREATE PROCEDURE hold_place_simple(
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
    UPDATE slots FORCE INDEX (PRIMARY) SET held = LAST_INSERT_ID(held + p_quantity), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = p_slot AND held + p_quantity <= remaining AND waiting = 0;
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
