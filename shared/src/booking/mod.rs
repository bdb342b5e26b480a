//! The booking use cases: availability, hold, confirm, cancel, extend,
//! move, and the sweeper. Each knows nothing of HTTP. The order of statements inside
//! each transaction is the point of these modules and is commented where
//! it is (docs/DESIGN.md has the proof).

#[macro_use]
mod sql;
#[macro_use]
mod transition;
mod allowance;
mod cancel;
mod confirm;
mod confirm_call;
mod extend;
mod fair;
mod hoarding;
mod hold;
mod hold_call;
mod r#move;
mod read;
mod reclaim;
mod replay;
mod revoke;
mod sweep;
mod sweep_rotation;
mod waitlist;
mod written;

pub use hoarding::{ClientExpired, Hoarding};
pub(crate) use reclaim::reclaim_locked;
pub use reclaim::{RECLAIM_APPLY, RECLAIM_COUNT, RECLAIM_LOCK};
pub use revoke::CLIENT_SLOTS;
pub(crate) use revoke::{give_back, lock_slots};
pub use sql::{ACTIVE_HOLD, FIND_BY_ID, FIND_BY_KEY, HoldRow, LOCK_HOLD, LOCK_SLOT};
pub use sweep::{SweepLimits, SweepReport};
pub use waitlist::{Joined, Left};
pub(crate) use waitlist::{expire_waiting, offer_locked};

use crate::cache::{AvailabilityCache, CacheStatus, Limit, Served};
use crate::config::HoldRules;
use crate::db::counter::slot_bookable;
use crate::db::{self, Deadline};
use crate::domain::{Hold, SlotAvailability, SlotId};
use crate::error::Error;
use crate::slots::availability::Query;
use chrono::Utc;
use sqlx::MySqlPool;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The booking service. Cheap to clone; build it once per execution
/// environment, and scope it to one request's deadline with
/// [`Booking::until`].
#[derive(Clone)]
pub struct Booking {
    pool: MySqlPool,
    hold_ttl: Duration,
    rules: HoldRules,
    cache: Option<AvailabilityCache>,
    /// How many projection queries this instance ran: lets operators and
    /// tests see the cache absorbing reads.
    projections: Arc<AtomicU64>,
    /// The capped clients refused here at their cap (`allowance.rs`).
    at_cap: allowance::AtCap,
    /// When the caller must have its answer.
    deadline: Deadline,
}

pub use crate::db::DEFAULT_BUDGET;

/// See [`Booking::availability_json`].
const CUT_GRACE: Duration = Duration::from_millis(50);

/// What `hold` did: a new hold (201) or the replay of the key's hold (200,
/// `Idempotent-Replayed: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldOutcome {
    pub hold: Hold,
    pub created: bool,
}

/// What `confirm` or `cancel` did: `changed` is false for an idempotent
/// replay (already confirmed / already cancelled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub hold: Hold,
    pub changed: bool,
}

impl Booking {
    pub fn new(pool: MySqlPool, hold_ttl: Duration, cache: Option<AvailabilityCache>) -> Self {
        Self {
            pool,
            hold_ttl,
            rules: HoldRules::default(),
            cache,
            projections: Arc::default(),
            at_cap: allowance::AtCap::default(),
            deadline: Deadline::default(),
        }
    }

    /// This service with these quantity, lifetime and retention rules
    /// (SPEC §9; [`HoldRules::default`] otherwise).
    pub fn with_rules(self, rules: HoldRules) -> Self {
        Self { rules, ..self }
    }

    pub fn rules(&self) -> HoldRules {
        self.rules
    }

    /// This service, answering by `deadline`: every operation then returns
    /// (503 `service_unavailable` if it must) before it, whatever the
    /// database and the cache do.
    pub fn until(&self, deadline: Instant) -> Self {
        Self {
            deadline: Deadline::at(deadline),
            ..self.clone()
        }
    }

    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    pub fn cache(&self) -> Option<&AvailabilityCache> {
        self.cache.as_ref()
    }

    /// Projection queries run by this instance so far.
    pub fn projections_run(&self) -> u64 {
        self.projections.load(Ordering::Relaxed)
    }

    /// When an operation starting now must be done.
    fn deadline(&self) -> tokio::time::Instant {
        self.deadline.due()
    }

    /// A confirm's or cancel's deadline, with room for its invalidation.
    fn deadline_before_invalidation(&self) -> tokio::time::Instant {
        self.deadline.before_invalidation()
    }

    /// The call without parameters (SPEC §4, §11): the first page of the
    /// slots that have not ended, encoded with its ETag and next cursor,
    /// through the cache when there is one. Everything (the cache's waits,
    /// the database) before the deadline. With a `limit`, the caller's
    /// rate limit is checked in the same cache round trip as the read (no
    /// limit without a cache: fail open).
    pub async fn availability_json(&self, limit: Option<Limit>) -> Result<Served, Error> {
        let deadline = self.deadline();
        // The read inside keeps this very deadline, also when the caller set
        // none (its default would otherwise start later, past the cut below).
        let compute = || async {
            self.projections.fetch_add(1, Ordering::Relaxed);
            let query = Query {
                scan: self.rules.availability_scan,
                ..Query::first_page()
            };
            query.page(&self.pool, deadline).await
        };
        let served = async {
            match &self.cache {
                Some(cache) => cache.get_or_compute(limit, compute).await,
                None => Ok(Served {
                    page: compute().await?,
                    status: CacheStatus::Bypass,
                    age: Duration::ZERO,
                }),
            }
        };
        // The database read stops at the deadline itself (and discards its
        // connection); this bounds the cache's waits, a moment later so
        // that the read is never cut from outside.
        db::within("availability", deadline + CUT_GRACE, served).await
    }

    /// What one slot has bookable now, by the hold path's own query
    /// (`None`: no such slot). Not clamped: a negative figure would be an
    /// oversell, which the tests look for.
    pub async fn bookable(&self, slot_id: SlotId) -> Result<Option<i64>, Error> {
        Ok(sqlx::query_scalar(slot_bookable!())
            .bind(slot_id.0)
            .fetch_one(&self.pool)
            .await?)
    }

    /// The statement of the call without parameters on a large window
    /// (binds: `0`, `10000`, `1001`).
    pub const PROJECTION: &'static str = crate::slots::availability::FIRST_PAGE;

    /// The first page of the slots that have not ended (by the database's
    /// clock), with what a client can still book: `remaining` minus the
    /// slot's active holds, never below 0, ordered by slot id. One query;
    /// its cost does not grow with the number of active holds.
    pub async fn availability(&self) -> Result<Vec<SlotAvailability>, Error> {
        self.projections.fetch_add(1, Ordering::Relaxed);
        let query = Query {
            scan: self.rules.availability_scan,
            ..Query::first_page()
        };
        let (slots, _) = query.slots(&self.pool, self.deadline()).await?;
        Ok(slots)
    }

    /// After a confirm or cancel, never inside its transaction: a reader
    /// recomputing in between would cache the pre-commit figures for a
    /// whole TTL. Invalidated unless the answer proves nothing changed
    /// lately: a change (`changed`), a failure after which the COMMIT may
    /// have happened unseen (a lost acknowledgement, the deadline firing
    /// after COMMIT was sent), and a replay of a final state reached
    /// recently (the request that reached it may have died before its own
    /// invalidation) all invalidate. A hold does not invalidate: the
    /// authoritative check is made at hold time, and a stream of holds
    /// must not keep the cache empty.
    /// A retry that found the hold (or its slot) gone, after an attempt
    /// that recorded its change and lost its answer: a slot deleted once
    /// that change was done (a cancelled hold no longer keeps it) takes
    /// the hold with it. Its event, which outlives both, tells whether the
    /// change was this request's. The fate of the lost attempt is settled
    /// by then: the deletion took the slot's lock after it.
    async fn gone_since(
        &self,
        written: &written::Written,
        kind: crate::events::EventType,
        deadline: tokio::time::Instant,
        outcome: Result<Transition, Error>,
    ) -> Result<Transition, Error> {
        if !matches!(
            outcome,
            Err(Error::HoldNotFound(_) | Error::SlotNotFound(_))
        ) || written.hold().is_none()
        {
            return outcome;
        }
        let found = db::transact!(&self.pool, "hold gone", deadline, |conn| {
            written.announced(&mut conn, kind).await
        });
        match found {
            Ok(Some(hold)) => Ok(Transition {
                hold,
                changed: true,
            }),
            Ok(None) => outcome,
            Err(err) => Err(written.unknown_if_sent(err)),
        }
    }

    /// After a transaction that may have committed offers to a waiting
    /// line (a hold's, a join's, a sweep's): they change the list like a
    /// cancel (SPEC §19.4).
    async fn invalidate_after_offers(&self, offered: bool) {
        if let (true, Some(cache)) = (offered, &self.cache) {
            cache.invalidate().await;
        }
    }

    async fn invalidate_unless_unchanged(&self, outcome: &Result<Transition, Error>) {
        let Some(cache) = &self.cache else { return };
        let may_have_changed = match outcome {
            Ok(done) => done.changed || changed_within(&done.hold, cache.stale_lifetime()),
            Err(Error::Unavailable(_) | Error::Internal(_) | Error::OutcomeUnknown(_)) => true,
            Err(_) => false,
        };
        if may_have_changed {
            cache.invalidate().await;
        }
    }
}

/// Whether the hold's last change is recent enough that a cached copy from
/// before it may still be served. The database wrote `updated_at`; this
/// compares it with the function's clock, which only decides whether to
/// drop a cache entry, so a skew costs at most one extra invalidation: the
/// margin covers the skew.
fn changed_within(hold: &Hold, lifetime: Duration) -> bool {
    const CLOCK_MARGIN: Duration = Duration::from_secs(60);
    let age = Utc::now().signed_duration_since(hold.updated_at);
    age.to_std()
        .map_or(true, |age| age < lifetime + CLOCK_MARGIN)
}
