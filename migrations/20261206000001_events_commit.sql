-- A booking's last statement (SPEC §12): its event, then its COMMIT, in
-- one CALL (events::commit_with). One prepared statement, its values
-- bound, one answer; `INSERT …; COMMIT` sent as one text packet is parsed
-- as text (the resource hex-encoded) and answered twice, and costs a
-- booking more (docs/DESIGN.md, "F1 costs a booking one INSERT").
--
-- SQL SECURITY INVOKER: it inserts with the caller's own privileges; the
-- application user holds EXECUTE for it (migrate/users.rs). An INSERT
-- that fails ends the CALL with its error before the COMMIT: the
-- transaction is still open, its connection is closed (db::Tx) and the
-- server rolls it back. Never called outside a transaction a Tx began.
CREATE PROCEDURE events_commit(
    p_type        VARCHAR(32) CHARACTER SET ascii,
    p_client_id   BIGINT UNSIGNED,
    p_slot_id     BIGINT UNSIGNED,
    p_hold_id     BIGINT UNSIGNED,
    p_occurred_at DATETIME(6),
    p_data        LONGTEXT CHARACTER SET utf8mb4
)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    INSERT INTO events (type, client_id, slot_id, hold_id, occurred_at, data)
    VALUES (p_type, p_client_id, p_slot_id, p_hold_id,
            COALESCE(p_occurred_at, UTC_TIMESTAMP(6)), p_data);
    COMMIT;
END;
