-- A capped client's allowance (SPEC §16, docs/DESIGN.md "One client's
-- cap"): an upper bound of the seats in its active holds, so that a hold
-- under its cap reads none of them.
--
-- held: the exact count of the client's seats in active holds at
-- counted_at, plus the seats of every capped hold since. Confirms,
-- cancels and expiries leave it alone (it only over-counts); a hold the
-- bound would refuse counts again, exactly, under this row's lock, and
-- sets it. Until a count at or after recount_after (a cap changed, a
-- deploy), every capped hold counts: an environment may still read the
-- client as uncapped and hold without this row meanwhile.
--
-- Its row's lock is the client's: capped holds take it first, extensions
-- share it. No foreign key: a child row's check would lock api_clients.
CREATE TABLE client_allowances (
    client_id     BIGINT UNSIGNED NOT NULL,
    held          INT UNSIGNED    NOT NULL,
    counted_at    DATETIME(6)     NOT NULL,
    recount_after DATETIME(6)     NOT NULL DEFAULT '1000-01-01 00:00:00',
    PRIMARY KEY (client_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Every client has its row from here on (made with the client, or by its
-- first capped hold), so an extension's shared lock is on a record, never
-- on a gap. Counted first: its holds were made without it.
INSERT INTO client_allowances (client_id, held, counted_at, recount_after)
SELECT id, 0, '1000-01-01', UTC_TIMESTAMP(6) + INTERVAL 15 MINUTE FROM api_clients;
