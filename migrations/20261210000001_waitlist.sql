-- The waiting list (SPEC §18; docs/DESIGN.md, "The waiting list").
--
-- An entry asks for `quantity` seats of a full slot; it is offered them,
-- first fit in arrival order (`id`), as a hold made for its client.
-- `status`: waiting → offered (its hold made) → fulfilled (confirmed) or
-- expired (its hold ended unconfirmed); waiting → left (its client left),
-- or expired (the slot started, shrank below it, or was deleted).
CREATE TABLE waitlist_entries (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    slot_id         BIGINT UNSIGNED NOT NULL,
    client_id       BIGINT UNSIGNED NOT NULL,
    quantity        INT UNSIGNED    NOT NULL,
    idempotency_key CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status          ENUM('waiting', 'offered', 'fulfilled', 'expired', 'left') NOT NULL DEFAULT 'waiting',
    hold_id         BIGINT UNSIGNED NULL,
    created_at      DATETIME(6)     NOT NULL,
    updated_at      DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    -- A client's keys: its own space, apart from its holds' (SPEC §18).
    UNIQUE KEY waitlist_entries_client_id_idempotency_key_unique (client_id, idempotency_key),
    -- First fit: the slot's waiting entries in arrival order, those that
    -- fit `free` seats read first by quantity.
    KEY waitlist_entries_slot_id_status_quantity_id_index (slot_id, status, quantity, id),
    -- A position: the slot's waiting entries before this one.
    KEY waitlist_entries_slot_id_status_id_index (slot_id, status, id),
    -- The cap's count of a client's waiting seats (SPEC §16).
    KEY waitlist_entries_client_id_status_index (client_id, status),
    -- An offered hold's entry, when its hold is confirmed or ends.
    KEY waitlist_entries_hold_id_index (hold_id),
    CONSTRAINT waitlist_entries_slot_id_foreign FOREIGN KEY (slot_id)
        REFERENCES slots (id) ON DELETE CASCADE,
    CONSTRAINT waitlist_entries_client_id_foreign FOREIGN KEY (client_id)
        REFERENCES api_clients (id),
    CONSTRAINT waitlist_entries_quantity_check CHECK (quantity >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The slot's line, summarised under its lock with every change of an
-- entry from or to `waiting`: the seats its waiting entries ask for (the
-- slot resource's `waiting`) and the smallest of them (NULL: none). A
-- hold's claim passes only on a slot with `waiting = 0`; anything else
-- goes to the locked path, which offers first (nobody jumps the line).
ALTER TABLE slots
    ADD COLUMN waiting INT UNSIGNED NOT NULL DEFAULT 0 AFTER held,
    ADD COLUMN waiting_min INT UNSIGNED NULL AFTER waiting,
    -- The sweeper's lines of slots that started: few rows past `waiting > 0`.
    ADD INDEX slots_waiting_starts_at_index (waiting, starts_at);

-- The entry a hold was offered to: read with the hold's row, so that a
-- confirm, a cancel and the reclaim know an offered hold without a
-- statement of their own.
ALTER TABLE holds
    ADD COLUMN entry_id BIGINT UNSIGNED NULL AFTER client_id;
