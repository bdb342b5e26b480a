-- The sweeper's self-check of the clients' allowances (issue 45; SPEC §8,
-- §9; docs/DESIGN.md, "Counters that heal"): a rotation, least recently
-- checked first, as `slots.checked_at`. One statement: the column with a
-- constant default is instant, the index built in place without blocking
-- writes.
ALTER TABLE client_allowances
    ADD COLUMN checked_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00.000000',
    ADD INDEX client_allowances_checked_at_index (checked_at),
    ALGORITHM = INPLACE, LOCK = NONE;
