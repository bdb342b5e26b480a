//! Slots as a resource (SPEC §10, §11): created, read, re-sized,
//! re-timed and deleted by admins, and listed page by page. Knows nothing
//! of HTTP.
//!
//! Every change takes the slot's row lock first (the hold path's own
//! lock, so a change and a hold or confirm are serialised), decides with a
//! `now` from a statement sent after the lock, and invalidates the
//! availability cache after the commit, never inside the transaction.

mod admin;
pub mod availability;
pub mod cursor;
pub mod input;
mod ledger;
mod purge;

pub use admin::{BOOKINGS, CHANGE_SLOT, DELETE_SLOT, LOCK_FOR_CHANGE};
pub use input::{NewSlot, NewSlots, SlotChange};
pub use ledger::{READ_NEW_SLOTS, READ_SLOT};
pub use purge::{PURGE_BATCH, PURGE_HOLDS, PURGE_NEXT};

use crate::cache::AvailabilityCache;
use crate::db::Deadline;
use crate::error::Error;
use sqlx::MySqlPool;
use std::time::Instant;

/// What an attempt that reached its COMMIT got: the answer, or the
/// COMMIT's own failure. That one is not retried: the COMMIT may have
/// been applied with its acknowledgement lost, and a batch of slots made
/// again would be made twice.
type Committed<T> = Result<T, sqlx::Error>;

/// The answer of a change whose attempt reached its COMMIT.
fn committed<T>(outcome: Committed<T>) -> Result<T, Error> {
    outcome.map_err(|err| {
        tracing::error!(error = %err, "the COMMIT failed; whether it was applied is unknown");
        crate::db::unknown_if_lost(err)
    })
}

/// The slot service. Cheap to clone; build it once per execution
/// environment and scope it to a request with [`Slots::until`].
#[derive(Clone)]
pub struct Slots {
    pool: MySqlPool,
    cache: Option<AvailabilityCache>,
    /// When the caller must have its answer.
    deadline: Deadline,
    /// `AVAILABILITY_SCAN_LIMIT`.
    scan: u32,
    /// `HOLD_TTL_SECONDS`: the holds a capacity raised offers to a slot's
    /// waiting line (SPEC §18) live this long.
    hold_ttl: std::time::Duration,
}

impl Slots {
    pub fn new(pool: MySqlPool, cache: Option<AvailabilityCache>) -> Self {
        Self {
            pool,
            cache,
            deadline: Deadline::default(),
            scan: availability::DEFAULT_SCAN,
            hold_ttl: std::time::Duration::from_secs(300),
        }
    }

    /// The lifetime of the holds its offers make (`HOLD_TTL_SECONDS`).
    pub fn with_hold_ttl(self, hold_ttl: std::time::Duration) -> Self {
        Self { hold_ttl, ..self }
    }

    /// The most slots a page of the availability list examines.
    pub fn with_scan(self, scan: u32) -> Self {
        Self { scan, ..self }
    }

    /// This service, answering by `deadline`.
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

    /// When an operation starting now must be done.
    fn deadline(&self) -> tokio::time::Instant {
        self.deadline.due()
    }

    /// A change's deadline, with room for its invalidation.
    fn deadline_before_invalidation(&self) -> tokio::time::Instant {
        self.deadline.before_invalidation()
    }

    /// After a change, never inside its transaction: a reader recomputing
    /// in between would cache the old figures for a whole TTL. Also after
    /// a failure after which the COMMIT may have happened unseen (a lost
    /// acknowledgement, the deadline firing after COMMIT was sent); a
    /// refusal changed nothing.
    async fn invalidate_after<T>(&self, outcome: &Result<T, Error>) {
        let Some(cache) = &self.cache else { return };
        if matches!(
            outcome,
            Ok(_) | Err(Error::Unavailable(_) | Error::Internal(_) | Error::OutcomeUnknown(_))
        ) {
            cache.invalidate().await;
        }
    }
}
