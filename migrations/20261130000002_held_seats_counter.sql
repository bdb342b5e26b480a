-- The held-seats counter (docs/DESIGN.md): the hold path claims a seat with
-- a conditional increment instead of counting the slot's active holds under
-- its row lock.
--
-- slots.held            = the slot's holds with status 'held' whose
--                         expires_at is after slots.reclaimed_until
-- slots.reclaimed_until = the reclaim watermark: holds that expired at or
--                         before it have been subtracted from held
ALTER TABLE slots
    ADD COLUMN held INT UNSIGNED NOT NULL DEFAULT 0 AFTER remaining,
    ADD COLUMN reclaimed_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00' AFTER held;

-- Existing holds: every 'held' one is after the initial watermark.
UPDATE slots s
SET s.held = (SELECT COUNT(*) FROM holds h WHERE h.slot_id = s.id AND h.status = 'held');

-- For the sweeper's look-up of slots with expired, still-counted holds.
CREATE INDEX holds_status_expires_at_index ON holds (status, expires_at);
