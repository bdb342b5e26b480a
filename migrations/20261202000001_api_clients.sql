-- Clients, keys and ownership (SPEC §8). Every hold gets an owner; the
-- idempotency key becomes unique per client.
--
-- A key is never stored: key_hash is the lowercase hex SHA-256 of its
-- bytes. NULL for the built-in `anonymous` client, which has no key (it is
-- who a request without a key is in AUTH_MODE=open).
CREATE TABLE api_clients (
    id                    BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name                  VARCHAR(100)    NOT NULL,
    role                  ENUM('booker', 'admin') NOT NULL DEFAULT 'booker',
    key_hash              CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    -- NULL: the configured default (RATE_LIMIT_PER_SECOND); 0: unlimited.
    rate_limit_per_second INT UNSIGNED    NULL,
    created_at            DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    revoked_at            DATETIME(6)     NULL,
    PRIMARY KEY (id),
    UNIQUE KEY api_clients_name_unique (name),
    UNIQUE KEY api_clients_key_hash_unique (key_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Id 1 is `anonymous` everywhere (shared/src/clients: ANONYMOUS), so that
-- holds.client_id can default to it.
INSERT INTO api_clients (id, name, role, created_at)
VALUES (1, 'anonymous', 'booker', UTC_TIMESTAMP(6));

-- Existing holds, and rows written with §3's columns alone, belong to
-- `anonymous`: the seed's API was anonymous. The new unique index is added
-- before the old one goes, in the same statement, so no moment exists
-- where two holds could share a key. One statement: a failure leaves
-- nothing half applied. Adding a foreign key copies the table (MySQL and
-- MariaDB build FKs in place only with foreign_key_checks off); holds is
-- read-locked meanwhile, seconds at a few million rows.
ALTER TABLE holds
    ADD COLUMN client_id BIGINT UNSIGNED NOT NULL DEFAULT 1 AFTER slot_id,
    ADD UNIQUE KEY holds_client_id_idempotency_key_unique (client_id, idempotency_key),
    DROP INDEX holds_idempotency_key_unique,
    ADD CONSTRAINT holds_client_id_foreign FOREIGN KEY (client_id) REFERENCES api_clients (id);
