//! The sequencer: gives committed events their place in the feed.
//!
//! An event's `id` is allocated when its row is inserted, which is not the
//! order in which writers commit. `seq` is: it is assigned here, to
//! committed rows only, by transactions that take `event_feed`'s row lock
//! first and assign numbers above the last one that lock protects. So the
//! sequencer's transactions commit one after another, each with numbers
//! above all earlier ones, and any snapshot sees exactly the numbers
//! `1..=sequenced_through` of that snapshot: a prefix, never one with a
//! hole that a later commit fills (docs/DESIGN.md, "The change feed").
//!
//! Who runs it: every `GET /events` that finds committed, unsequenced
//! events, the publisher and the sweeper. Never a writer of events: a
//! booking never waits on the feed's lock.

use crate::error::Error;
use sqlx::{Connection, MySqlConnection};

/// The lock of the feed, first. SKIP LOCKED: if another sequencer holds
/// it, it is assigning numbers to what is committed; this caller need not
/// queue behind it (and a poll never waits).
pub const SEQUENCE_LOCK: &str =
    "SELECT sequenced_through FROM event_feed WHERE id = 1 FOR UPDATE SKIP LOCKED";
/// The committed events without a number, oldest id first. A row whose
/// writer has not committed is locked by its insert and skipped: it gets
/// its number in a later run, after its commit, above every number given
/// meanwhile. Sent in READ COMMITTED, where this takes no gap locks, so a
/// writer's INSERT never waits on it.
pub const SEQUENCE_PICK: &str = "SELECT id FROM events FORCE INDEX (events_seq_index) \
     WHERE seq IS NULL ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED";
/// One run of consecutive picked ids, `first..=last`, numbered from
/// `base + 1` in id order: every row in the range is one this transaction
/// picked and locked, so the UPDATE waits on nothing.
pub const SEQUENCE_ASSIGN: &str =
    "UPDATE events SET seq = ? + (id - ?) WHERE id BETWEEN ? AND ? AND seq IS NULL";
pub const SEQUENCE_ADVANCE: &str = "UPDATE event_feed SET sequenced_through = ? WHERE id = 1";
/// Is there anything to sequence? A plain read: committed rows only.
pub const SEQUENCE_PENDING: &str =
    "SELECT EXISTS (SELECT 1 FROM events FORCE INDEX (events_seq_index) WHERE seq IS NULL)";

/// Events numbered per run: keeps the feed's lock short.
pub const SEQUENCE_BATCH: u32 = 1000;

/// One run of the sequencer on `conn`: numbers up to [`SEQUENCE_BATCH`]
/// committed events. Returns how many it numbered, or `None` when another
/// sequencer held the feed's lock (it does the same work).
pub async fn sequence(conn: &mut MySqlConnection) -> Result<Option<u32>, Error> {
    let pending: bool = sqlx::query_scalar(SEQUENCE_PENDING)
        .fetch_one(&mut *conn)
        .await?;
    if !pending {
        return Ok(Some(0));
    }
    // For this transaction only: no gap locks on `events`.
    sqlx::query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .execute(&mut *conn)
        .await?;
    let mut tx = conn.begin().await?;
    // 1. The feed's lock: sequencers run one at a time, each numbering
    //    above the last committed number.
    let Some(through): Option<u64> = sqlx::query_scalar(SEQUENCE_LOCK)
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(None);
    };
    // 2. The committed, unnumbered rows, locked so that no other run can
    //    number them (none can: it would wait at 1) and retention cannot
    //    delete them meanwhile.
    let ids: Vec<u64> = sqlx::query_scalar(SEQUENCE_PICK)
        .bind(SEQUENCE_BATCH)
        .fetch_all(&mut *tx)
        .await?;
    if ids.is_empty() {
        return Ok(Some(0));
    }
    // 3. Numbers in id order, one statement per run of consecutive ids.
    let mut base = through;
    for (first, last) in runs(&ids) {
        sqlx::query(SEQUENCE_ASSIGN)
            .bind(base + 1)
            .bind(first)
            .bind(first)
            .bind(last)
            .execute(&mut *tx)
            .await?;
        base += last - first + 1;
    }
    // 4. The last number, under the same lock; the commit publishes all of
    //    them at once.
    sqlx::query(SEQUENCE_ADVANCE)
        .bind(base)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(u32::try_from(ids.len()).unwrap_or(u32::MAX)))
}

/// Maximal runs of consecutive ids in an ascending list.
fn runs(ids: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == id => *last = id,
            _ => runs.push((id, id)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_split_at_every_gap() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[4]), vec![(4, 4)]);
        assert_eq!(runs(&[1, 2, 3, 7, 8, 10]), vec![(1, 3), (7, 8), (10, 10)]);
    }
}
