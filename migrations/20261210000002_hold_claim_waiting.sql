-- The capped hold's claim again (migrations/…_hold_claim_capped.sql has
-- its argument), its slot claim now `Booking::HOLD_CLAIM` with the waiting
-- list's guard (SPEC §18): a slot with a line never passes it; its seats go
-- to the line first, on the locked path, and by the primary key alone
-- (read through the index on `waiting` it would lock every slot without a
-- line). Word for word the uncapped claim, as a unit test checks.
--
-- A new name, not the old one redefined: a DROP and CREATE would take the
-- booking user's EXECUTE with it (until the grants are kept again) while
-- the release before this one still calls `hold_claim_capped` during a
-- deploy. The old procedure stays until a later migration drops it.
CREATE PROCEDURE hold_claim_waiting(
    p_client   BIGINT UNSIGNED,
    p_window   INT UNSIGNED,
    p_quantity INT UNSIGNED,
    p_cap      INT UNSIGNED,
    p_slot     BIGINT UNSIGNED
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
    UPDATE slots FORCE INDEX (PRIMARY) SET held = LAST_INSERT_ID(held + p_quantity), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = p_slot AND held + p_quantity <= remaining AND waiting = 0;
    SET v_rows = ROW_COUNT();
    SELECT CAST(v_bound AS SIGNED) AS bound, v_rows AS slot_rows,
        CAST(IF(v_rows = 1, LAST_INSERT_ID(), 0) AS SIGNED) AS slot_held;
END;
