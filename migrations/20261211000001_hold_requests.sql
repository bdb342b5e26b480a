-- Which request created a hold, and which confirmed it (docs/DESIGN.md,
-- "Retried after an unseen COMMIT"): a random number per request, the
-- same on each of its attempts. A hold or a confirm made by one CALL
-- (hold_place, hold_confirm) learns its row only from the CALL's answer;
-- when that answer is lost, the retry finds the row and knows it for its
-- own by this number, not by a row it never saw. Never shown. Nullable and
-- last, so the ALTER only changes the table's metadata.
ALTER TABLE holds
    ADD COLUMN created_by BIGINT UNSIGNED NULL,
    ADD COLUMN confirmed_by BIGINT UNSIGNED NULL;
