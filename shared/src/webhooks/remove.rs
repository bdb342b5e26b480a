//! `DELETE /webhooks/{id}` in bounded steps, like `DELETE /slots/{id}`
//! (`slots/purge.rs`).
//!
//! `webhook_deliveries.subscription_id` cascades, and a cascade is one
//! statement in one transaction: an admin's subscription has a delivery
//! per event of everyone's, kept as long as the event (7 days), and its
//! row's DELETE would delete them all there, under the request's time
//! limit, then roll back for minutes. Deleting the row first would make
//! the deliveries unreachable to the workers, but that DELETE *is* the
//! cascade. So the row goes last, or rather never within the request:
//!
//! 1. The mark, one short transaction under the row's lock (the lock every
//!    dispatcher, claim and recorded attempt of the subscription takes
//!    first): `deleted_at`, `status = 'disabled'` (a claim sends only for
//!    an enabled subscription), `scanned_through` past any sequence (the
//!    dispatcher picks only a subscription the feed has moved past, so
//!    none writes a delivery for it again; and retention, which waits for
//!    the least `scanned_through`, never waits for it), and the secrets
//!    dropped. Once
//!    it commits, no worker claims a delivery of it; an attempt claimed
//!    before can still be on the wire (nothing can recall it) and its
//!    record finds its row gone or ends it. The subscription now exists
//!    for no route but this one (`store.rs`'s reads, `page.rs`).
//!    `disabled_reason` is kept: every enabled subscription has none and
//!    every disabled one has one, so the status it had is still known.
//! 2. The purge: its deliveries in batches, each one short statement that
//!    commits on its own, in `seq` order. The deadline stops it between
//!    batches with nothing running or rolling back: 503, and the retry
//!    goes on where it stopped (its mark is there already).
//! 3. The answer, 200 + the subscription as it was before the mark. The
//!    row stays as its tombstone, without a secret or a delivery, so that
//!    a retry after a lost answer finds it done and answers the same; a
//!    later delete by the same client removes its tombstones a day old
//!    (each has no delivery left to cascade over: [`TOMBSTONES`]).

use super::Webhooks;
use super::subscription::{
    Row, Status, Subscription, WebhookId, subscription, subscription_columns,
};
use crate::clients::Caller;
use crate::db;
use crate::error::Error;
use sqlx::{Connection, MySqlConnection, MySqlPool};
use std::time::Duration;
use tokio::time::Instant;

/// The row, deleted or not, locked: the lock order of every writer of
/// the subscription (this row, then its deliveries).
const LOCK_ANY: &str = concat!(subscription_columns!(), " WHERE id = ? FOR UPDATE");
const DELETED: &str = "SELECT deleted_at IS NOT NULL FROM webhook_subscriptions WHERE id = ?";
/// The mark (step 1 above). `updated_at` is kept: the answer is the
/// subscription as it was.
const MARK: &str = "UPDATE webhook_subscriptions SET deleted_at = UTC_TIMESTAMP(6), \
     status = 'disabled', scanned_through = ?, secret_sealed = '', previous_sealed = NULL, \
     previous_until = NULL WHERE id = ?";
/// Past any sequence the feed will give, and still a valid `BIGINT`
/// (signed or not) for any reader that adds one to it.
pub const SCANNED_FOREVER: u64 = i64::MAX as u64;

/// The end of the next batch: the `seq` of its last row, from `from` on.
/// A keyset rather than `DELETE … LIMIT` from the start again: the rows
/// deleted so far stay in the index until InnoDB's purge reaches them,
/// and every batch would walk over them.
pub const PURGE_NEXT: &str = "SELECT MAX(seq) FROM (SELECT seq FROM webhook_deliveries \
     FORCE INDEX (webhook_deliveries_subscription_id_seq_index) \
     WHERE subscription_id = ? AND seq >= ? ORDER BY seq LIMIT ?) batch";
/// One batch (`seq` is one event's: one row per value).
pub const PURGE_DELIVERIES: &str =
    "DELETE FROM webhook_deliveries WHERE subscription_id = ? AND seq >= ? AND seq <= ?";
/// Rows per batch: about 0.1 s of the server's time.
pub const PURGE_BATCH: u32 = 5000;
/// A batch is not started with less than this left.
const PURGE_RESERVE: Duration = Duration::from_millis(600);
/// The client's tombstones a day old, a few at a time: each has no
/// delivery left (a tombstone whose purge was never finished keeps its
/// row until a retry finishes it), so its DELETE cascades over nothing.
const TOMBSTONES: &str = "DELETE FROM webhook_subscriptions \
     WHERE client_id = ? AND deleted_at < UTC_TIMESTAMP(6) - INTERVAL 1 DAY \
     AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d \
         WHERE d.subscription_id = webhook_subscriptions.id) \
     LIMIT 100";

impl Webhooks {
    /// `DELETE /webhooks/{id}` → the subscription as it was; 503 while
    /// its deliveries are still being purged (a retry goes on).
    pub async fn delete(
        &self,
        caller: &Caller,
        id: WebhookId,
        deadline: Instant,
    ) -> Result<Subscription, Error> {
        // The mark is the same however many times it runs: a retried
        // attempt, or request, finds it made.
        let gone = db::transact!(&self.pool, "webhook delete", deadline, |conn| {
            mark_once(&mut conn, caller, id).await
        })?;
        purge(&self.pool, id, deadline).await?;
        db::transact!(&self.pool, "webhook tombstones", deadline, |conn| {
            sqlx::query(TOMBSTONES)
                .bind(gone.client_id.0)
                .execute(&mut *conn)
                .await?;
            Ok(())
        })?;
        Ok(gone)
    }
}

async fn mark_once(
    conn: &mut MySqlConnection,
    caller: &Caller,
    id: WebhookId,
) -> Result<Subscription, Error> {
    let mut tx = conn.begin().await?;
    let row: Option<Row> = sqlx::query_as(LOCK_ANY)
        .bind(id.0)
        .fetch_optional(&mut *tx)
        .await?;
    let mut was = row
        .map(subscription)
        .transpose()?
        .filter(|found| caller.may_touch(found.client_id))
        .ok_or(Error::NotFound("webhook"))?;
    let deleted: bool = sqlx::query_scalar(DELETED)
        .bind(id.0)
        .fetch_one(&mut *tx)
        .await?;
    if deleted {
        was.status = match was.disabled_reason {
            None => Status::Enabled,
            Some(_) => Status::Disabled,
        };
    } else {
        sqlx::query(MARK)
            .bind(SCANNED_FOREVER)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(was)
}

/// Step 2: every delivery of the marked subscription, in batches within
/// `deadline`; Err(503) if it comes first.
async fn purge(pool: &MySqlPool, id: WebhookId, deadline: Instant) -> Result<u64, Error> {
    // Each statement commits on its own; a retry after a lost connection
    // starts over from the least `seq` left.
    db::transact!(pool, "webhook delete purge", deadline, |conn| {
        let mut purged = 0;
        let mut from = 0u64;
        loop {
            if Instant::now() + PURGE_RESERVE >= deadline {
                tracing::warn!(
                    webhook_id = id.0,
                    purged,
                    "a webhook's delete ran out of time purging its deliveries; a retry goes on"
                );
                // Not retried by `transact!`: no time is left for it.
                return Err(Error::Unavailable(sqlx::Error::PoolTimedOut));
            }
            // Each batch's limit is what is left now.
            let left = db::left(deadline).ok_or(Error::Unavailable(sqlx::Error::PoolTimedOut))?;
            db::fit(&mut conn, left).await?;
            let end: Option<u64> = sqlx::query_scalar(PURGE_NEXT)
                .bind(id.0)
                .bind(from)
                .bind(PURGE_BATCH)
                .fetch_one(&mut *conn)
                .await?;
            let Some(end) = end else {
                return Ok(purged);
            };
            purged += sqlx::query(PURGE_DELIVERIES)
                .bind(id.0)
                .bind(from)
                .bind(end)
                .execute(&mut *conn)
                .await?
                .rows_affected();
            from = end + 1;
        }
    })
}
