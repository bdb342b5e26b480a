-- The sweeper's self-check (docs/DESIGN.md, "Counters that heal") visits
-- every slot in turn, least recently checked first, besides the slots
-- that have expired holds to reclaim.
-- One statement, so a failure leaves nothing half applied. ADD COLUMN with
-- a constant default is instant on MySQL 8 and MariaDB >= 10.3; ADD INDEX
-- is built in place without blocking writes (LOCK=NONE), reading the table
-- once (seconds at a million slots).
ALTER TABLE slots
    ADD COLUMN checked_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000',
    ADD INDEX slots_checked_at_index (checked_at);
