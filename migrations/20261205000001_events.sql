-- The change feed (SPEC §12). Every transaction that changes a hold or a
-- slot inserts its events here before it commits (an outbox): never an
-- event without its change, never a change without its event.
--
-- `id` is allocated when the row is inserted, which is not the order in
-- which the rows commit: a reader paging by id would skip a row whose
-- transaction allocated early and committed late. The feed is ordered by
-- `seq` instead, assigned after the commit by the sequencer
-- (shared/src/events/sequence.rs) under the lock of `event_feed`'s one
-- row, so that sequence numbers commit in their own order (docs/DESIGN.md,
-- "The change feed"). NULL: committed or not, not yet in the feed.
CREATE TABLE events (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    seq         BIGINT UNSIGNED NULL,
    type        VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- Who sees it besides admins: the hold's owner; NULL for a slot event,
    -- which every client sees.
    client_id   BIGINT UNSIGNED NULL,
    slot_id     BIGINT UNSIGNED NOT NULL,
    hold_id     BIGINT UNSIGNED NULL,
    occurred_at DATETIME(6)     NOT NULL,
    -- The resource after the change, as the API serves it.
    data        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (id),
    -- Not UNIQUE: a unique index's duplicate check would take locks a
    -- writer's insert can wait on; the sequencer's lock makes seq unique.
    -- Its NULL entries, in id order, are the sequencer's work list.
    KEY events_seq_index (seq),
    -- A booker's page: its holds' events, and (client_id NULL) the slots'.
    KEY events_client_id_seq_index (client_id, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The feed's one row. Writers of events never touch it, so its lock
-- serialises only the sequencer, retention and the publisher's progress.
--   sequenced_through: the last seq assigned;
--   purged_through:    the last seq retention deleted (a cursor below it
--                      has lost events: 410 cursor_expired);
--   published_through: the last seq the publisher sent to EventBridge.
CREATE TABLE event_feed (
    id                TINYINT UNSIGNED NOT NULL,
    sequenced_through BIGINT UNSIGNED NOT NULL DEFAULT 0,
    purged_through    BIGINT UNSIGNED NOT NULL DEFAULT 0,
    published_through BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    CONSTRAINT event_feed_one_row CHECK (id = 1)
) ENGINE = InnoDB;

INSERT INTO event_feed (id) VALUES (1);
