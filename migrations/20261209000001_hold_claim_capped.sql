-- A capped hold's claim (SPEC §16; docs/DESIGN.md, "One client's cap"):
-- the client's allowance, then the slot's claim, in one CALL. One round
-- trip takes both locks in this order (the client's row before the
-- slot's), and the server runs statements it parsed once per connection:
-- the same two statements sent as one text packet are parsed on every
-- hold (docs/DESIGN.md, "One client's cap", Cost).
--
-- The allowance (booking/allowance.rs): its bound passes the hold and
-- moves by it, or stays; a missing row is made, its holds counted for
-- the next p_window seconds. The bound's new figure comes back as
-- `bound` (0: it did not pass, or the row was made). The slot's claim is
-- `Booking::HOLD_CLAIM` word for word (a unit test compares them): its
-- rows matched and its new `held` (when it matched).
--
-- SQL SECURITY INVOKER: it writes with the caller's own privileges; the
-- booking user holds EXECUTE for it (migrate/duty.rs). Called inside a
-- transaction a Tx began, never alone.
CREATE PROCEDURE hold_claim_capped(
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
    UPDATE slots SET held = LAST_INSERT_ID(held + p_quantity), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = p_slot AND held + p_quantity <= remaining;
    SET v_rows = ROW_COUNT();
    SELECT CAST(v_bound AS SIGNED) AS bound, v_rows AS slot_rows,
        CAST(IF(v_rows = 1, LAST_INSERT_ID(), 0) AS SIGNED) AS slot_held;
END;
