//! Retention (SPEC §12): events older than `EVENT_RETENTION_DAYS` are
//! deleted oldest first, by feed position, and `purged_through` records
//! how far: a cursor below it has lost events (410 `cursor_expired`),
//! one at or above it has lost none. Where a publisher sends the feed to a
//! bus, retention deletes no event it has not sent: the bus gets every
//! event at least once (SPEC §12) even after an outage longer than the
//! retention, and the feed waits for it meanwhile. Nor does it delete an
//! event a webhook subscription's dispatcher has not passed yet
//! (`webhook_subscriptions.scanned_through`, SPEC §20): every event is
//! either given its deliveries or still in the feed, never dropped unseen;
//! a delivery whose event it deletes later ends `failed`, `expired`.

use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::{Connection, MySqlConnection};

/// The feed's lock: serialised with the sequencer (a number is never
/// deleted while being given), with other purges and with the publisher's
/// advance (what it has sent cannot change while this decides).
pub const PURGE_LOCK: &str =
    "SELECT purged_through, published_through FROM event_feed WHERE id = 1 FOR UPDATE";
/// The oldest kept events, by position, with when they happened.
pub const PURGE_SCAN: &str = "SELECT seq, occurred_at FROM events FORCE INDEX (events_seq_index) \
     WHERE seq > ? ORDER BY seq LIMIT ?";
pub const PURGE_DELETE: &str = "DELETE FROM events WHERE seq > ? AND seq <= ?";
pub const PURGE_ADVANCE: &str = "UPDATE event_feed SET purged_through = ? WHERE id = 1";
/// The slowest webhook subscription's cursor (NULL: none). A plain read:
/// a cursor only moves up, so a stale one only keeps more; a subscription
/// made meanwhile starts at `sequenced_through`, above anything purged.
pub const PURGE_WEBHOOKS: &str = "SELECT MIN(scanned_through) FROM webhook_subscriptions";

/// Events deleted per transaction.
const PURGE_BATCH: u32 = 1000;

/// Whether retention waits for the publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsent {
    /// The feed is sent to a bus: an event the publisher has not sent
    /// (above `published_through`) is kept, however old.
    Keep,
    /// No publisher (no bus, as locally): age alone decides.
    Purge,
}

/// What [`purge`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PurgeReport {
    pub deleted: u64,
    /// The last position deleted so far (0: none ever).
    pub purged_through: u64,
    /// Events past their retention were kept because the publisher has
    /// not sent them, or a webhook dispatcher has not passed them.
    pub waiting_for_publisher: bool,
}

/// Deletes, in position order, the events that happened before `cutoff`,
/// stopping at the first one that did not (so the kept events are a
/// suffix of the feed) and, with [`Unsent::Keep`], at the last one the
/// publisher sent; one batch per transaction, until `deadline`.
pub async fn purge(
    conn: &mut MySqlConnection,
    cutoff: DateTime<Utc>,
    unsent: Unsent,
    deadline: tokio::time::Instant,
) -> Result<PurgeReport, Error> {
    let mut report = PurgeReport::default();
    loop {
        sqlx::query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .execute(&mut *conn)
            .await?;
        let mut tx = conn.begin().await?;
        let (purged, published): (u64, u64) =
            sqlx::query_as(PURGE_LOCK).fetch_one(&mut *tx).await?;
        let oldest: Vec<(u64, DateTime<Utc>)> = sqlx::query_as(PURGE_SCAN)
            .bind(purged)
            .bind(PURGE_BATCH)
            .fetch_all(&mut *tx)
            .await?;
        // In position order: past their retention, a prefix; of those,
        // the ones the publisher has sent, a prefix again.
        let past_retention = oldest.iter().take_while(|(_, at)| *at < cutoff);
        let dispatched: Option<u64> = sqlx::query_scalar(PURGE_WEBHOOKS)
            .fetch_one(&mut *tx)
            .await?;
        let sent = |seq: u64| {
            (unsent == Unsent::Purge || seq <= published) && dispatched.is_none_or(|d| seq <= d)
        };
        if past_retention.clone().any(|(seq, _)| !sent(*seq)) {
            report.waiting_for_publisher = true;
        }
        let through = past_retention
            .take_while(|(seq, _)| sent(*seq))
            .last()
            .map(|(seq, _)| *seq);
        report.purged_through = purged;
        let Some(through) = through else {
            return Ok(report);
        };
        let deleted = sqlx::query(PURGE_DELETE)
            .bind(purged)
            .bind(through)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query(PURGE_ADVANCE)
            .bind(through)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        report.deleted += deleted;
        report.purged_through = through;
        let whole_batch = oldest.len() == PURGE_BATCH as usize
            && oldest.last().is_some_and(|(seq, _)| *seq == through);
        if !whole_batch || tokio::time::Instant::now() >= deadline {
            return Ok(report);
        }
    }
}
