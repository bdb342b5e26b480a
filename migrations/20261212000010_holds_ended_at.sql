-- Retention that reads only what it deletes (issue 45; docs/DESIGN.md,
-- "Counters that heal"): when a hold that was never a booking ended, as a
-- column the sweeper's retention reads by range. NULL for a booking
-- (`confirmed_at` set, even if cancelled since; or a row written as
-- `confirmed`): retention never deletes one. A `held` hold's end is its
-- expiry (later than now while it is active); a cancelled one's the
-- earlier of its cancellation and its expiry.
--
-- VIRTUAL: computed, never written, so a row written with the contract's
-- columns alone (SPEC §8) has it too. Adding it is instant; the index is
-- built in place without blocking writes (LOCK=NONE: MariaDB does not
-- combine that with adding a virtual column, hence two statements).
ALTER TABLE holds
    ADD COLUMN ended_at DATETIME(6) AS (IF(status <> 'confirmed' AND confirmed_at IS NULL,
        LEAST(expires_at, COALESCE(cancelled_at, expires_at)), NULL)) VIRTUAL;

ALTER TABLE holds
    ADD INDEX holds_slot_id_ended_at_index (slot_id, ended_at),
    ALGORITHM = INPLACE, LOCK = NONE;
