//! A subject's head (docs/DESIGN.md, "Webhooks: the delivery protocol"):
//! only a subject's oldest pending delivery has a `next_attempt_at`. When
//! it ends (recorded delivered or failed by `record.rs`, or expired by
//! `claim.rs` because retention deleted its event) the subject's next
//! delivery becomes its head, due now. Both callers hold the
//! subscription's row lock, in their own transaction.

use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::MySqlConnection;

/// A head whose event retention deleted (`claim.rs`): no attempt made.
pub const RECORD_EXPIRED: &str = "UPDATE webhook_deliveries SET status = 'failed', \
     last_error = 'expired', next_attempt_at = NULL, leased_until = NULL \
     WHERE id = ? AND status = 'pending'";
/// The subject's next delivery, behind the one that ended: pending (a
/// subject's deliveries end in order), and now its head.
pub const PROMOTE_NEXT: &str = "SELECT id FROM webhook_deliveries \
     FORCE INDEX (webhook_deliveries_subscription_id_subject_seq_index) \
     WHERE subscription_id = ? AND subject = ? AND seq > ? ORDER BY seq LIMIT 1";
pub const PROMOTE: &str = "UPDATE webhook_deliveries SET next_attempt_at = ? \
     WHERE id = ? AND status = 'pending' AND next_attempt_at IS NULL";
/// Ends a head whose event retention deleted (`failed`, `expired`, no
/// attempt made) and promotes the subject's next delivery. In the
/// caller's transaction, under the subscription's lock.
pub(super) async fn expire(
    tx: &mut MySqlConnection,
    subscription: u64,
    delivery: u64,
    subject: &str,
    seq: u64,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let done = sqlx::query(RECORD_EXPIRED)
        .bind(delivery)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if done == 1 {
        promote(tx, subscription, subject, seq, now).await?;
    }
    Ok(())
}

/// The subject's next delivery (if any) becomes its head, due now.
pub(super) async fn promote(
    tx: &mut MySqlConnection,
    subscription: u64,
    subject: &str,
    seq: u64,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let next: Option<u64> = sqlx::query_scalar(PROMOTE_NEXT)
        .bind(subscription)
        .bind(subject)
        .bind(seq)
        .fetch_optional(&mut *tx)
        .await?;
    if let Some(next) = next {
        sqlx::query(PROMOTE)
            .bind(now)
            .bind(next)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}
