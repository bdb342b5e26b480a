-- The per-client cap on seats in active holds (SPEC §16, docs/DESIGN.md
-- "One client's cap").
--
-- NULL: the configured default (CLIENT_MAX_HELD_SEATS); 0: unlimited.
--
-- Capped holds lock their client's row (before the slot's). A revocation
-- locks the active admins: without an index it scans, and so locks, every
-- client row, where it would queue behind (and deadlock with) holds of any
-- client. With this index it locks the admins' rows only.
ALTER TABLE api_clients
    ADD COLUMN max_held_seats INT UNSIGNED NULL AFTER rate_limit_per_second,
    ADD INDEX api_clients_role_revoked_at_index (role, revoked_at);

-- The cap's count: a client's active holds are one range of this index
-- (client, 'held', expires_at after now), as many rows as its cap allows
-- at most, whatever its history of confirmed, cancelled and expired holds.
ALTER TABLE holds
    ADD INDEX holds_client_id_status_expires_at_index (client_id, status, expires_at),
    ALGORITHM = INPLACE, LOCK = NONE;
