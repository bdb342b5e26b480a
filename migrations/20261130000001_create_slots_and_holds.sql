-- Slots and holds, as SPEC §3. Valid on MySQL 8 and MariaDB >= 10.6.
-- All times are UTC, written by the application's SQL with UTC_TIMESTAMP(6):
-- the database's clock is the one clock that decides expiry.

CREATE TABLE slots (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    starts_at  DATETIME(6)     NOT NULL,
    ends_at    DATETIME(6)     NOT NULL,
    -- Both counters are UNSIGNED: the database refuses a negative value
    -- even if the application errs.
    capacity   INT UNSIGNED    NOT NULL,
    remaining  INT UNSIGNED    NOT NULL,
    created_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    CONSTRAINT slots_remaining_within_capacity CHECK (remaining <= capacity),
    CONSTRAINT slots_window_is_ordered CHECK (ends_at > starts_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE holds (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    slot_id         BIGINT UNSIGNED NOT NULL,
    -- The idempotency guarantee: two inserts with one key cannot both succeed.
    idempotency_key CHAR(36)        NOT NULL,
    status          ENUM('held', 'confirmed', 'cancelled') NOT NULL DEFAULT 'held',
    expires_at      DATETIME(6)     NOT NULL,
    confirmed_at    DATETIME(6)     NULL,
    cancelled_at    DATETIME(6)     NULL,
    created_at      DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at      DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    UNIQUE KEY holds_idempotency_key_unique (idempotency_key),
    -- Covers the hot count of a slot's active holds.
    KEY holds_slot_id_status_expires_at_index (slot_id, status, expires_at),
    CONSTRAINT holds_slot_id_foreign FOREIGN KEY (slot_id)
        REFERENCES slots (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
