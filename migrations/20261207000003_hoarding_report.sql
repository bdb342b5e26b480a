-- Watching for hoarding (SPEC §16): each sweep reports the holds that
-- ended unconfirmed at their expiry since the last report, once each. This
-- row is how far the reports have counted; its lock serialises two sweeps
-- that overlap.
CREATE TABLE sweep_reports (
    id             TINYINT UNSIGNED NOT NULL,
    reported_until DATETIME(6)      NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT INTO sweep_reports (id, reported_until) VALUES (1, UTC_TIMESTAMP(6));
