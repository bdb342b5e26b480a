-- SPEC §9: a hold claims `quantity` seats, all or nothing. Existing holds
-- claimed one seat each, which the default says.
-- ADD COLUMN with a constant default is instant on MySQL 8 and MariaDB >=
-- 10.3: no table copy, no lock held while rows are rewritten. The range
-- (1 to HOLD_MAX_QUANTITY) is checked by the service before any statement;
-- a CHECK constraint added here would make the statement read the whole
-- table under a lock.
ALTER TABLE holds
    ADD COLUMN quantity INT UNSIGNED NOT NULL DEFAULT 1 AFTER client_id;
