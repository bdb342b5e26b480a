-- Webhooks (SPEC §20, §23.1–3; docs/DESIGN.md, "Webhooks").
--
-- A subscription is a client's endpoint. It receives exactly what its
-- client's feed shows (§12), filtered by `event_types`. The feed is the
-- only source: the dispatcher reads it past `scanned_through` and writes
-- one delivery per event due, advancing the cursor in the same
-- transaction, so an event is either before the cursor with its delivery
-- row or after it, never lost between the two.
CREATE TABLE webhook_subscriptions (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    client_id       BIGINT UNSIGNED NOT NULL,
    url             VARCHAR(2048)   NOT NULL,
    -- A JSON list of types and `prefix.*` patterns; NULL: every type.
    event_types     TEXT CHARACTER SET ascii COLLATE ascii_bin NULL,
    description     VARCHAR(500)    NOT NULL DEFAULT '',
    status          ENUM('enabled', 'disabled') NOT NULL DEFAULT 'enabled',
    disabled_reason ENUM('failing', 'gone', 'by_client') NULL,
    -- The signing secret, sealed (AES-256-GCM: nonce, ciphertext, tag);
    -- never stored in the clear. After a rotation the previous secret
    -- keeps signing until `previous_until` (24 h).
    secret_sealed   VARBINARY(255)  NOT NULL,
    previous_sealed VARBINARY(255)  NULL,
    previous_until  DATETIME(6)     NULL,
    -- Every event with seq <= scanned_through has its delivery row, or
    -- was not due to this subscription. Starts at the feed's
    -- sequenced_through when the subscription is created.
    scanned_through BIGINT UNSIGNED NOT NULL,
    created_at      DATETIME(6)     NOT NULL,
    updated_at      DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    -- A client's subscriptions, paged by id; its count against
    -- WEBHOOK_MAX_PER_CLIENT.
    KEY webhook_subscriptions_client_id_id_index (client_id, id),
    CONSTRAINT webhook_subscriptions_client_id_foreign FOREIGN KEY (client_id)
        REFERENCES api_clients (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per (subscription, event) due to it. `webhook-id` is the
-- event's id on every attempt. `subject` names what the event is about
-- ('hold:12', 'entry:3', 'slot:7', 'basket:9'): a subject's deliveries
-- go one at a time in `seq` (feed) order; different subjects go side by
-- side. A worker claims a delivery by setting `leased_until`; a worker
-- that dies before recording its attempt leaves the lease to run out,
-- and the delivery is attempted again under the same id.
CREATE TABLE webhook_deliveries (
    id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    subscription_id  BIGINT UNSIGNED NOT NULL,
    event_id         BIGINT UNSIGNED NOT NULL,
    seq              BIGINT UNSIGNED NOT NULL,
    event_type       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    subject          VARCHAR(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status           ENUM('pending', 'delivered', 'failed') NOT NULL DEFAULT 'pending',
    attempts         INT UNSIGNED    NOT NULL DEFAULT 0,
    last_status_code SMALLINT UNSIGNED NULL,
    last_error       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
    last_attempt_at  DATETIME(6)     NULL,
    next_attempt_at  DATETIME(6)     NULL,
    leased_until     DATETIME(6)     NULL,
    delivered_at     DATETIME(6)     NULL,
    created_at       DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    -- Exactly one delivery per event and subscription: the dispatcher's
    -- insert is idempotent under a retried or concurrent run.
    UNIQUE KEY webhook_deliveries_subscription_id_event_id_unique (subscription_id, event_id),
    -- A subject's head: its oldest delivery not yet ended.
    KEY webhook_deliveries_subscription_id_subject_seq_index (subscription_id, subject, seq),
    -- Due work: a subscription's pending deliveries by their next attempt.
    KEY webhook_deliveries_subscription_id_status_next_index (subscription_id, status, next_attempt_at),
    -- The deliveries log, newest first.
    KEY webhook_deliveries_subscription_id_seq_index (subscription_id, seq),
    CONSTRAINT webhook_deliveries_subscription_id_foreign FOREIGN KEY (subscription_id)
        REFERENCES webhook_subscriptions (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
