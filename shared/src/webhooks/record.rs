//! Recording an attempt (SPEC §20), in one short transaction after the
//! request, conditioned on the attempt's own lease.
//!
//! The subscription's row is locked first (the order: it, then its
//! deliveries), as the dispatcher and the claim lock it: a head that ends
//! here promotes its subject's next delivery (gives it its
//! `next_attempt_at`), and the dispatcher, which decides "head or
//! behind" by the subject's latest delivery, is never between the two.
//! The update matches only while `leased_until` is this attempt's lease:
//! a worker whose lease ran out (and whose delivery another worker
//! claimed again) records nothing.

use super::claim::Claimed;
use super::heads::promote;
use super::send::{Answer, SendError};
use super::settings::DeliverySettings;
use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::{Connection, MySqlConnection};

pub const RECORD_LOCK: &str = "SELECT created_at, last_delivered_at \
     FROM webhook_subscriptions WHERE id = ? FOR UPDATE";
pub const RECORD_DELIVERED: &str = "UPDATE webhook_deliveries SET status = 'delivered', \
     attempts = attempts + 1, last_status_code = ?, last_error = NULL, last_attempt_at = ?, \
     delivered_at = ?, next_attempt_at = NULL, leased_until = NULL \
     WHERE id = ? AND status = 'pending' AND leased_until = ?";
pub const RECORD_RETRY: &str = "UPDATE webhook_deliveries SET attempts = attempts + 1, \
     last_status_code = ?, last_error = ?, last_attempt_at = ?, next_attempt_at = ?, \
     leased_until = NULL WHERE id = ? AND status = 'pending' AND leased_until = ?";
pub const RECORD_FAILED: &str = "UPDATE webhook_deliveries SET status = 'failed', \
     attempts = attempts + 1, last_status_code = ?, last_error = ?, last_attempt_at = ?, \
     next_attempt_at = NULL, leased_until = NULL \
     WHERE id = ? AND status = 'pending' AND leased_until = ?";
pub const SUBSCRIPTION_DELIVERED: &str =
    "UPDATE webhook_subscriptions SET last_delivered_at = ? WHERE id = ?";
pub const SUBSCRIPTION_DISABLE: &str = "UPDATE webhook_subscriptions SET status = 'disabled', \
     disabled_reason = ?, updated_at = ? WHERE id = ? AND status = 'enabled'";

/// What recording did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Delivered,
    /// Failed; attempted again at its `next_attempt_at`.
    Retry,
    /// Failed for good: the subject's next delivery is its head now.
    Failed,
    /// The lease had run out and another worker has the delivery (or the
    /// subscription is gone): nothing written.
    LeaseLost,
}

/// Records `answer` for `claimed`. A 410 disables the subscription
/// (`gone`); the attempt counts as failed (retried once it is enabled).
pub async fn record(
    conn: &mut MySqlConnection,
    settings: &DeliverySettings,
    claimed: &Claimed,
    answer: &Answer,
) -> Result<Recorded, Error> {
    let mut tx = conn.begin().await?;
    let Some((created_at, last_delivered_at)): Option<(DateTime<Utc>, Option<DateTime<Utc>>)> =
        sqlx::query_as(RECORD_LOCK)
            .bind(claimed.subscription)
            .fetch_optional(&mut *tx)
            .await?
    else {
        return Ok(Recorded::LeaseLost);
    };
    let now: DateTime<Utc> = sqlx::query_scalar(super::dispatch::NOW)
        .fetch_one(&mut *tx)
        .await?;
    let delivered = answer.error.is_none()
        && answer
            .status_code
            .is_some_and(|code| (200..300).contains(&code));
    let error = answer.error.map(SendError::as_str);
    let outcome = if delivered {
        let done = sqlx::query(RECORD_DELIVERED)
            .bind(answer.status_code)
            .bind(claimed.claimed_at)
            .bind(now)
            .bind(claimed.delivery)
            .bind(claimed.lease)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if done == 0 {
            return Ok(Recorded::LeaseLost);
        }
        promote(
            &mut tx,
            claimed.subscription,
            &claimed.subject,
            claimed.seq,
            now,
        )
        .await?;
        sqlx::query(SUBSCRIPTION_DELIVERED)
            .bind(now)
            .bind(claimed.subscription)
            .execute(&mut *tx)
            .await?;
        Recorded::Delivered
    } else {
        let attempt = claimed.attempts as usize + 1;
        let outcome = match settings.retries.get(attempt - 1) {
            Some(wait) => {
                let next = now + chrono::Duration::from_std(*wait).unwrap_or_default();
                let done = sqlx::query(RECORD_RETRY)
                    .bind(answer.status_code)
                    .bind(error)
                    .bind(claimed.claimed_at)
                    .bind(next)
                    .bind(claimed.delivery)
                    .bind(claimed.lease)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if done == 0 {
                    return Ok(Recorded::LeaseLost);
                }
                Recorded::Retry
            }
            None => {
                let done = sqlx::query(RECORD_FAILED)
                    .bind(answer.status_code)
                    .bind(error)
                    .bind(claimed.claimed_at)
                    .bind(claimed.delivery)
                    .bind(claimed.lease)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if done == 0 {
                    return Ok(Recorded::LeaseLost);
                }
                promote(
                    &mut tx,
                    claimed.subscription,
                    &claimed.subject,
                    claimed.seq,
                    now,
                )
                .await?;
                // Failed for good, and nothing delivered for
                // WEBHOOK_DISABLE_AFTER (since it was made, if never).
                let quiet_since = last_delivered_at.unwrap_or(created_at);
                let limit = chrono::Duration::from_std(settings.disable_after).unwrap_or_default();
                if quiet_since <= now - limit {
                    disable(&mut tx, claimed.subscription, "failing", now).await?;
                }
                Recorded::Failed
            }
        };
        if answer.status_code == Some(410) {
            disable(&mut tx, claimed.subscription, "gone", now).await?;
        }
        outcome
    };
    tx.commit().await?;
    Ok(outcome)
}

async fn disable(
    tx: &mut MySqlConnection,
    subscription: u64,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    sqlx::query(SUBSCRIPTION_DISABLE)
        .bind(reason)
        .bind(now)
        .bind(subscription)
        .execute(&mut *tx)
        .await?;
    Ok(())
}
