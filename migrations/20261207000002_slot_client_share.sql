-- The per-slot share (SPEC §16): the most seats one client may have on one
-- slot in active holds, waiting entries and confirmed bookings. NULL: no
-- limit; otherwise 1 to capacity.
ALTER TABLE slots
    ADD COLUMN max_seats_per_client INT UNSIGNED NULL AFTER remaining;

-- The share's count, under the slot's lock: one client's confirmed and
-- held holds on one slot are two ranges of this index, as many rows as the
-- share allows (plus expired holds the sweeper has not yet given back),
-- whatever the slot's other clients hold.
ALTER TABLE holds
    ADD INDEX holds_slot_id_client_id_status_expires_at_index (slot_id, client_id, status, expires_at),
    ALGORITHM = INPLACE, LOCK = NONE;
