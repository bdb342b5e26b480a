//! A deleted slot's history, purged in bounded batches before the slot's
//! row goes (issue 45; docs/DESIGN.md, "Slots administered").
//!
//! `holds.slot_id` cascades (SPEC §3), and a cascade is one statement in
//! one transaction: a slot with millions of ended holds was deleted row by
//! row under the request's time limit, killed there, and then rolled back
//! for minutes holding its locks. So the delete, once it has decided under
//! the slot's row lock (no booking, no active hold), keeps that lock and
//! deletes the slot's holds from a second connection, in batches that
//! each commit on their own; the slot's own `DELETE` then cascades over
//! nothing. Each batch is one short statement and
//! one small transaction, so a deadline stops the purge between batches
//! and leaves nothing running or rolling back.
//!
//! Why the slot's lock is enough: every hold, confirm, cancel, extension,
//! move, change and sweep of the slot takes it first, so while the delete
//! holds it no row of the slot's holds can be made, revived or counted;
//! every row it has is ended (its `BOOKINGS` were 0) and goes with the
//! slot anyway. Deleting a hold takes no lock on its slot (a child's
//! delete locks no parent), so the two connections never wait for each
//! other.
//!
//! A purge the deadline cut answers 503: the slot stays (its rollback is
//! the delete's own few rows), without the ended holds deleted so far
//! (their keys no longer replay: what retention does to them later), and
//! the admin's retry goes on where it stopped.

use crate::db;
use crate::domain::SlotId;
use crate::error::Error;
use chrono::{NaiveDate, NaiveDateTime};
use sqlx::{MySqlConnection, MySqlPool};
use tokio::time::Instant;

/// The end of the next batch: the `expires_at` of the batch's last row in
/// `(slot_id, status, expires_at)` order, after the last batch's end.
/// A keyset, not `DELETE … LIMIT` from the range's start again: the
/// delete's open transaction keeps InnoDB from purging the rows deleted
/// so far, and every batch would walk over all of them.
pub const PURGE_NEXT: &str = "SELECT MAX(expires_at) FROM (SELECT expires_at FROM holds \
     FORCE INDEX (holds_slot_id_status_expires_at_index) \
     WHERE slot_id = ? AND status = ? AND expires_at > ? ORDER BY expires_at LIMIT ?) batch";
/// One batch of a deleted slot's holds, all ended (see above): those of
/// one status up to the batch's end (rows sharing its `expires_at` to the
/// microsecond go with it).
pub const PURGE_HOLDS: &str = "DELETE FROM holds WHERE slot_id = ? AND status = ? \
     AND expires_at > ? AND expires_at <= ?";
/// Rows per batch: about 0.1 s of the server's time.
pub const PURGE_BATCH: u32 = 5000;
/// A batch is not started with less than this left: it and the slot's own
/// delete must end before the deadline.
const PURGE_RESERVE: std::time::Duration = std::time::Duration::from_millis(600);

/// Whether the slot has more holds than one batch: a bounded read.
pub const HISTORY_LONGER_THAN: &str =
    "SELECT COUNT(*) FROM (SELECT 1 FROM holds WHERE slot_id = ? LIMIT ?) h";

/// Under the slot's lock (held by `locked`, the delete's connection): a
/// history of at most one batch is left to the cascade; a longer one is
/// deleted in batches on a connection of its own, opened with `pool`'s
/// options (an environment's pool has one connection, the one holding
/// the lock), status by status in `expires_at` order. Err(503) if the
/// deadline comes first.
pub(super) async fn purge_history(
    locked: &mut MySqlConnection,
    pool: &MySqlPool,
    slot: SlotId,
    deadline: Instant,
) -> Result<u64, Error> {
    let rows: i64 = sqlx::query_scalar(HISTORY_LONGER_THAN)
        .bind(slot.0)
        .bind(PURGE_BATCH + 1)
        .fetch_one(&mut *locked)
        .await?;
    if rows <= i64::from(PURGE_BATCH) {
        return Ok(0);
    }
    let side = db::connect_lazy_with((*pool.connect_options()).clone(), 1);
    let purged = purge_batches(&side, slot, deadline).await;
    side.close().await;
    purged
}

async fn purge_batches(pool: &MySqlPool, slot: SlotId, deadline: Instant) -> Result<u64, Error> {
    // One attempt on one connection (its statement limit set once from
    // the deadline); each statement commits on its own. A retry after a
    // lost connection starts over from the least `expires_at` left.
    db::transact!(pool, "slot delete purge", deadline, |conn| {
        let mut purged = 0;
        for status in ["cancelled", "held"] {
            // The first batch starts at DATETIME's least value: a row
            // there, if any, goes with the slot's cascade.
            let mut after = NaiveDate::from_ymd_opt(1000, 1, 1)
                .and_then(|day| day.and_hms_opt(0, 0, 0))
                .unwrap_or_default();
            loop {
                if Instant::now() + PURGE_RESERVE >= deadline {
                    tracing::warn!(
                        slot_id = slot.0,
                        purged,
                        "a slot's delete ran out of time purging its history; a retry goes on"
                    );
                    // Not retried by `transact!` (a lost connection would
                    // be): the next attempt would find no time left either.
                    return Err(Error::Unavailable(sqlx::Error::PoolTimedOut));
                }
                // Each batch's limit is what is left now: one set at the
                // attempt's start would let the last batch outlive the
                // deadline (seen at 2.4 M rows).
                let left =
                    db::left(deadline).ok_or(Error::Unavailable(sqlx::Error::PoolTimedOut))?;
                db::fit(&mut conn, left).await?;
                let end: Option<NaiveDateTime> = sqlx::query_scalar(PURGE_NEXT)
                    .bind(slot.0)
                    .bind(status)
                    .bind(after)
                    .bind(PURGE_BATCH)
                    .fetch_one(&mut *conn)
                    .await?;
                let Some(end) = end else {
                    break;
                };
                purged += sqlx::query(PURGE_HOLDS)
                    .bind(slot.0)
                    .bind(status)
                    .bind(after)
                    .bind(end)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected();
                after = end;
            }
        }
        Ok(purged)
    })
}
