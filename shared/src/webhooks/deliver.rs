//! The worker's loop (SPEC §20): rounds of dispatch, claims and attempts.
//!
//! A round dispatches (a batch of subscriptions, a page each) and claims
//! the due heads of a batch of subscriptions with due work; each claimed
//! attempt runs as a task of its own (prepare, send, record), so a
//! receiver that hangs holds back only its own subscription's attempts
//! (up to `WEBHOOK_CONCURRENCY` of its leases), never the loop. The steps
//! are public so that the tests can stop between them.

use super::claim::{Claimed, claim};
use super::dispatch::{DispatchReport, dispatch};
use super::invoke::Invoke;
use super::prepare::{NotSent, prepare};
use super::prune::prune;
use super::record::{Recorded, record};
use super::send::{Answer, send};
use super::settings::DeliverySettings;
use super::{Rules, SealKey};
use crate::error::Error;
use sqlx::MySqlPool;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Enabled subscriptions with a due head, a batch at a time from `after`:
/// one index probe each, no lock.
pub const WORK_PICK: &str = "SELECT s.id FROM webhook_subscriptions s \
     WHERE s.status = 'enabled' AND s.id > ? AND EXISTS (SELECT 1 FROM webhook_deliveries d \
     FORCE INDEX (webhook_deliveries_subscription_id_status_next_index) \
     WHERE d.subscription_id = s.id AND d.status = 'pending' \
     AND d.next_attempt_at <= UTC_TIMESTAMP(6)) ORDER BY s.id LIMIT ?";

/// Subscriptions per round, for the dispatch and for the claims.
pub const ROUND_BATCH: u32 = 100;

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunReport {
    pub rounds: u64,
    pub dispatched: u64,
    pub delivered: u64,
    pub failed_attempts: u64,
    /// Deliveries failed for good.
    pub failed: u64,
    /// Ended deliveries deleted with their events (SPEC §23.3).
    pub pruned: u64,
    /// The largest time from an event to its delivery in this run, ms.
    pub max_lag_ms: u64,
}

/// The engine: the database, the settings, the key that opens secrets
/// and the address rules.
#[derive(Clone)]
pub struct Deliverer {
    inner: Arc<Inner>,
}

struct Inner {
    pool: MySqlPool,
    settings: DeliverySettings,
    key: SealKey,
    rules: Rules,
    sender: Sender,
}

/// How a signed request leaves: from this process (`make dev`, the
/// tests), or by the sender function (on AWS, where the VPC has no route
/// out).
#[derive(Clone, Debug, Default)]
pub enum Sender {
    #[default]
    Direct,
    Invoke(Invoke),
}

/// One attempt's end, for the run's report.
pub struct Attempted {
    pub recorded: Option<Recorded>,
    pub lag_ms: u64,
}

/// Where the round's batches resume.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursors {
    dispatch: u64,
    work: u64,
    prune: u64,
}

impl Deliverer {
    pub fn new(pool: MySqlPool, settings: DeliverySettings, key: SealKey, rules: Rules) -> Self {
        Self::sending(pool, settings, key, rules, Sender::Direct)
    }

    /// As [`new`](Self::new), its requests sent by `sender`.
    pub fn sending(
        pool: MySqlPool,
        settings: DeliverySettings,
        key: SealKey,
        rules: Rules,
        sender: Sender,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                pool,
                settings,
                key,
                rules,
                sender,
            }),
        }
    }

    pub fn settings(&self) -> &DeliverySettings {
        &self.inner.settings
    }

    /// A dispatch pass (a batch of subscriptions, a page each).
    pub async fn dispatch(&self, cursors: &mut Cursors) -> Result<DispatchReport, Error> {
        let (report, last) = dispatch(&self.inner.pool, cursors.dispatch, ROUND_BATCH).await?;
        cursors.dispatch = last;
        Ok(report)
    }

    /// Deletes a batch of subscriptions' ended deliveries whose events the
    /// feed no longer keeps.
    pub async fn prune(&self, cursors: &mut Cursors) -> Result<u64, Error> {
        let (deleted, next) = prune(&self.inner.pool, cursors.prune, ROUND_BATCH).await?;
        cursors.prune = next;
        Ok(deleted)
    }

    /// Claims a batch of subscriptions' due heads.
    pub async fn claim(&self, cursors: &mut Cursors) -> Result<Vec<Claimed>, Error> {
        let mut conn = self.inner.pool.acquire().await?;
        let ids: Vec<u64> = sqlx::query_scalar(WORK_PICK)
            .bind(cursors.work)
            .bind(ROUND_BATCH)
            .fetch_all(&mut *conn)
            .await?;
        cursors.work = if ids.len() < ROUND_BATCH as usize {
            0
        } else {
            ids.last().copied().unwrap_or(0)
        };
        let mut claimed = Vec::new();
        for id in ids {
            claimed.extend(claim(&mut conn, &self.inner.settings, id).await?);
        }
        Ok(claimed)
    }

    /// The request of one claimed attempt, sent: `None` when it was not
    /// made (or its answer did not come back from the sender function)
    /// for our own trouble (the lease runs out, it is tried again).
    pub async fn send(&self, claimed: &Claimed) -> Option<Answer> {
        let timeout_ms = self.inner.settings.timeout.as_millis() as u64;
        let timestamp = chrono::Utc::now().timestamp();
        match prepare(
            claimed,
            &self.inner.key,
            &self.inner.rules,
            timeout_ms,
            timestamp,
        )
        .await
        {
            Ok(outgoing) => match &self.inner.sender {
                Sender::Direct => Some(send(&outgoing).await),
                // `None`: no answer came back; as an unrecorded attempt.
                Sender::Invoke(invoke) => invoke.send(&outgoing).await,
            },
            Err(NotSent::Refused(error)) => Some(Answer::refused(error)),
            Err(NotSent::Internal(why)) => {
                tracing::error!(
                    subscription = claimed.subscription,
                    delivery = claimed.delivery,
                    %why,
                    "webhook attempt not made"
                );
                None
            }
        }
    }

    /// Records an attempt's answer, under its lease.
    pub async fn record(&self, claimed: &Claimed, answer: &Answer) -> Result<Recorded, Error> {
        let mut conn = self.inner.pool.acquire().await?;
        record(&mut conn, &self.inner.settings, claimed, answer).await
    }

    /// One attempt, start to end.
    pub async fn attempt(&self, claimed: Claimed) -> Attempted {
        let lag_ms = (chrono::Utc::now() - claimed.event.occurred_at)
            .num_milliseconds()
            .max(0) as u64;
        let Some(answer) = self.send(&claimed).await else {
            return Attempted {
                recorded: None,
                lag_ms,
            };
        };
        let recorded = match self.record(&claimed, &answer).await {
            Ok(recorded) => Some(recorded),
            Err(err) => {
                // Unrecorded: the lease runs out and the attempt is made
                // again under the same id (at least once).
                tracing::error!(delivery = claimed.delivery, %err, "webhook attempt not recorded");
                None
            }
        };
        Attempted { recorded, lag_ms }
    }

    /// One round: dispatch, claim, and the claimed attempts started in
    /// `attempts`. Returns how many were started.
    pub async fn round(
        &self,
        cursors: &mut Cursors,
        attempts: &mut JoinSet<Attempted>,
        report: &mut RunReport,
    ) -> Result<usize, Error> {
        report.rounds += 1;
        report.dispatched += self.dispatch(cursors).await?.deliveries;
        let claimed = self.claim(cursors).await?;
        let started = claimed.len();
        for claimed in claimed {
            let this = self.clone();
            attempts.spawn(async move { this.attempt(claimed).await });
        }
        Ok(started)
    }

    /// Rounds every `pause` until `deadline`; claims stop a lease's length
    /// before it, so every attempt started ends (or times out) by then,
    /// and the run waits for them.
    pub async fn run_until(&self, deadline: Instant, pause: Duration) -> Result<RunReport, Error> {
        let mut report = RunReport::default();
        let mut cursors = Cursors::default();
        let mut attempts = JoinSet::new();
        let last_claim = deadline.checked_sub(self.inner.settings.lease());
        let outcome = async {
            // Once a run: retention moves once a minute at most.
            report.pruned = self.prune(&mut cursors).await?;
            loop {
                self.round(&mut cursors, &mut attempts, &mut report).await?;
                while let Some(done) = attempts.try_join_next() {
                    tally(&mut report, done);
                }
                if last_claim.is_none_or(|last| Instant::now() + pause >= last) {
                    return Ok::<_, Error>(());
                }
                tokio::time::sleep(pause).await;
            }
        }
        .await;
        while let Some(done) = attempts.join_next().await {
            tally(&mut report, done);
        }
        outcome.map(|()| report)
    }
}

fn tally(report: &mut RunReport, done: Result<Attempted, tokio::task::JoinError>) {
    let Ok(done) = done else {
        return;
    };
    match done.recorded {
        Some(Recorded::Delivered) => {
            report.delivered += 1;
            report.max_lag_ms = report.max_lag_ms.max(done.lag_ms);
        }
        Some(Recorded::Retry) => report.failed_attempts += 1,
        Some(Recorded::Failed) => {
            report.failed_attempts += 1;
            report.failed += 1;
        }
        Some(Recorded::LeaseLost) | None => {}
    }
}
