-- A booking its own client cancelled counts against that client's cap for
-- CLIENT_CANCEL_WINDOW after its cancellation (SPEC §23.8, docs/DESIGN.md
-- "One client's cap"): counts_until is the cancellation's now plus the
-- window of the function that cancelled it (then the window's end is
-- decided once, whatever other functions are configured with), set only
-- for a booking (confirmed) that its own client cancelled. NULL for every
-- other hold: one an admin cancelled for its client, one cancelled before
-- it was confirmed, one never cancelled. A window of 0 sets it to the
-- cancellation's own now: reported, never counted.
--
-- The client's count reads one range of the first index (its
-- cancellations still counting, whatever its history); the hoarding
-- report one range of the second (the cancellations of its window).
-- Nullable and last: adding the column changes only the table's metadata;
-- the indexes are built online.
ALTER TABLE holds
    ADD COLUMN counts_until DATETIME(6) NULL,
    ADD INDEX holds_client_id_counts_until_index (client_id, counts_until),
    ADD INDEX holds_cancelled_at_index (cancelled_at);
