-- Availability at any size (SPEC §11): a page of GET /slots/availability
-- with `from`/`to` picks its slot ids from the starts_at index alone (the
-- window's entries, never the table); ends_at serves the "not ended"
-- default when few slots are left to end.
--
-- Built in place without blocking writes (ALGORITHM=INPLACE, LOCK=NONE:
-- the statement fails rather than take a stronger lock). Measured on
-- MariaDB 10.11 with 1,000,000 slots and 2,000,000 holds: 1.5 s, during
-- which an INSERT and an UPDATE of slots each committed in milliseconds.
-- One statement, so a failure leaves nothing half applied.
ALTER TABLE slots
    ADD INDEX slots_starts_at_index (starts_at),
    ADD INDEX slots_ends_at_index (ends_at),
    ALGORITHM = INPLACE, LOCK = NONE;
