//! Deliveries last as long as their events (SPEC §23.3): the ended ones
//! whose events retention has deleted (`seq <= purged_through`) go, per
//! subscription, a bounded batch at a time.
//!
//! Only ended rows are deleted, and a subject's ended rows are a prefix of
//! it (`dispatch.rs`, "Heads"), so what is left still answers "is the
//! latest pending?" and "which is next?" as before. Under the
//! subscription's row lock, first, like every other writer of its
//! deliveries: in REPEATABLE READ the DELETE keeps locks on the pending
//! rows it scans, and a record holding the row lock and promoting one of
//! them must not meet it in the other order.

use crate::error::Error;
use sqlx::{Connection, MySqlPool};

pub const PRUNE_BOUNDS: &str = "SELECT purged_through FROM event_feed WHERE id = 1";
pub const PRUNE_PICK: &str =
    "SELECT id FROM webhook_subscriptions WHERE id > ? ORDER BY id LIMIT ?";
pub const PRUNE_LOCK: &str = "SELECT id FROM webhook_subscriptions WHERE id = ? FOR UPDATE";
pub const PRUNE_DELETE: &str = "DELETE FROM webhook_deliveries \
     WHERE subscription_id = ? AND seq <= ? AND status <> 'pending' ORDER BY seq LIMIT ?";

/// Rows deleted per subscription per pass.
const PRUNE_ROWS: u32 = 1000;

/// One pass over up to `batch` subscriptions after `after`: the deleted
/// count, and where the next pass starts (0: from the first again).
pub async fn prune(pool: &MySqlPool, after: u64, batch: u32) -> Result<(u64, u64), Error> {
    let mut conn = pool.acquire().await?;
    let purged: u64 = sqlx::query_scalar(PRUNE_BOUNDS)
        .fetch_one(&mut *conn)
        .await?;
    let ids: Vec<u64> = sqlx::query_scalar(PRUNE_PICK)
        .bind(after)
        .bind(batch)
        .fetch_all(&mut *conn)
        .await?;
    let mut deleted = 0;
    if purged > 0 {
        for &id in &ids {
            let mut tx = conn.begin().await?;
            sqlx::query(PRUNE_LOCK).bind(id).execute(&mut *tx).await?;
            deleted += sqlx::query(PRUNE_DELETE)
                .bind(id)
                .bind(purged)
                .bind(PRUNE_ROWS)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
        }
    }
    let next = if ids.len() < batch as usize {
        0
    } else {
        ids.last().copied().unwrap_or(0)
    };
    Ok((deleted, next))
}
