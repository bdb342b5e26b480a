//! The worker's claim (SPEC §20): a subscription's due heads, leased.
//!
//! In one short transaction, under the subscription's row lock (so claims,
//! dispatches and records of one subscription go one at a time): how many
//! of its attempts are in flight (unexpired leases), its due heads oldest
//! first, and for up to `concurrency` minus that many, the lease:
//! `leased_until = next_attempt_at = now + timeout + margin`. Two workers
//! racing for one subscription queue on its row; the second reads after
//! the first committed and finds the leased heads no longer due. The
//! lease's UPDATE is conditioned on the row still being due anyway, so no
//! interleaving can hand one head to two workers at once: each claim is
//! decided by the row's latest version, and one of two UPDATEs of a row
//! waits for the other's commit and then finds it not due. The lease
//! value is the claim's token: an attempt is recorded only where
//! `leased_until` is still the one it got (`record.rs`).

use super::heads::expire;
use super::settings::DeliverySettings;
use crate::error::Error;
use crate::events::{Event, event_by_id};
use chrono::{DateTime, Utc};
use sqlx::{Connection, MySqlConnection};

/// The subscription, first (the lock order: this row, then its
/// deliveries).
pub const CLAIM_LOCK: &str = "SELECT status, url, secret_sealed, previous_sealed, previous_until \
     FROM webhook_subscriptions WHERE id = ? FOR UPDATE";
/// Attempts in flight: a lease sets `next_attempt_at` to its end too, so
/// they are in `(now, now + lease]` of the due index, with the retries
/// due within a lease's length, and nothing else.
pub const CLAIM_IN_FLIGHT: &str = "SELECT COUNT(*) FROM webhook_deliveries \
     FORCE INDEX (webhook_deliveries_subscription_id_status_next_index) \
     WHERE subscription_id = ? AND status = 'pending' AND next_attempt_at > ? \
     AND next_attempt_at <= ? AND leased_until > ?";
/// Due heads, oldest first: only a head has a `next_attempt_at` (the
/// dispatcher's), so this range holds no delivery queued behind another.
pub const CLAIM_DUE: &str = "SELECT id, event_id, seq, subject, attempts FROM webhook_deliveries \
     FORCE INDEX (webhook_deliveries_subscription_id_status_next_index) \
     WHERE subscription_id = ? AND status = 'pending' AND next_attempt_at <= ? \
     ORDER BY next_attempt_at, id LIMIT ?";
/// The lease, only if still due: the row's latest version decides.
pub const CLAIM_LEASE: &str = "UPDATE webhook_deliveries SET leased_until = ?, next_attempt_at = ? \
     WHERE id = ? AND status = 'pending' AND next_attempt_at <= ?";

/// Expired heads ended per claim beyond its attempts (each promotes its
/// subject's next): a subscription enabled again after retention works
/// through its expired backlog this many at a time.
const EXPIRE_PER_CLAIM: u32 = 100;

/// One attempt a worker owns until `lease`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub subscription: u64,
    pub delivery: u64,
    pub seq: u64,
    pub subject: String,
    /// Attempts recorded before this one.
    pub attempts: u32,
    /// The token: `leased_until` as this claim set it.
    pub lease: DateTime<Utc>,
    /// The database's now at the claim: the attempt's `last_attempt_at`.
    pub claimed_at: DateTime<Utc>,
    /// The subscription's URL at the claim (SPEC §23.2: a change applies
    /// to retries).
    pub url: String,
    pub secret_sealed: Vec<u8>,
    /// The secret before a rotation, while it still signs.
    pub previous_sealed: Option<Vec<u8>>,
    /// The body's source: the event as the feed serves it.
    pub event: Event,
}

type SubscriptionRow = (
    String,
    String,
    Vec<u8>,
    Option<Vec<u8>>,
    Option<DateTime<Utc>>,
);

/// Claims up to `concurrency` minus those in flight of `subscription`'s
/// due heads. Heads whose events retention has deleted end `failed`,
/// `expired`, here.
pub async fn claim(
    conn: &mut MySqlConnection,
    settings: &DeliverySettings,
    subscription: u64,
) -> Result<Vec<Claimed>, Error> {
    let mut tx = conn.begin().await?;
    let Some((status, url, secret_sealed, previous_sealed, previous_until)): Option<
        SubscriptionRow,
    > = sqlx::query_as(CLAIM_LOCK)
        .bind(subscription)
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(Vec::new());
    };
    if status != "enabled" {
        return Ok(Vec::new());
    }
    // Now, after the lock (its wait is not part of any lease).
    let now: DateTime<Utc> = sqlx::query_scalar(super::dispatch::NOW)
        .fetch_one(&mut *tx)
        .await?;
    let lease = now + chrono::Duration::from_std(settings.lease()).unwrap_or_default();
    let in_flight: i64 = sqlx::query_scalar(CLAIM_IN_FLIGHT)
        .bind(subscription)
        .bind(now)
        .bind(lease)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
    let free = i64::from(settings.concurrency)
        .saturating_sub(in_flight)
        .max(0) as u32;
    if free == 0 {
        return Ok(Vec::new());
    }
    let due: Vec<(u64, u64, u64, String, u32)> = sqlx::query_as(CLAIM_DUE)
        .bind(subscription)
        .bind(now)
        .bind(free + EXPIRE_PER_CLAIM)
        .fetch_all(&mut *tx)
        .await?;
    let previous_sealed =
        previous_sealed.filter(|_| previous_until.is_some_and(|until| until > now));
    let mut claimed = Vec::new();
    for (delivery, event_id, seq, subject, attempts) in due {
        if claimed.len() >= free as usize {
            break;
        }
        let Some(event) = event_by_id(&mut tx, event_id).await? else {
            // Gone with the feed's retention (SPEC §20): failed, expired;
            // the subject's next delivery becomes its head.
            expire(&mut tx, subscription, delivery, &subject, seq, now).await?;
            continue;
        };
        let leased = sqlx::query(CLAIM_LEASE)
            .bind(lease)
            .bind(lease)
            .bind(delivery)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if leased == 1 {
            claimed.push(Claimed {
                subscription,
                delivery,
                seq,
                subject,
                attempts,
                lease,
                claimed_at: now,
                url: url.clone(),
                secret_sealed: secret_sealed.clone(),
                previous_sealed: previous_sealed.clone(),
                event,
            });
        }
    }
    tx.commit().await?;
    Ok(claimed)
}
