-- A lower bound of the earliest expiry among a slot's counted holds
-- (docs/DESIGN.md, "The projection's floor"): no `held` hold that expires
-- after the slot's watermark expires before it. While it is later than
-- now, none of the slot's counted holds has expired, so the availability
-- list need not look at its holds at all; only a slot with a hold that
-- really lapsed since its last reclaim pays the walk.
--
-- Its default is the earliest DATETIME: a lower bound of anything, so
-- every slot, and one written by hand, is walked as before until a claim
-- on its empty counter or the sweeper sets it. NOT NULL with a default and
-- last: MariaDB adds it without copying the table.
ALTER TABLE slots
    ADD COLUMN held_expires_min DATETIME(6) NOT NULL DEFAULT '1000-01-01 00:00:00.000000';
