//! Slots as a resource (SPEC §10, §11): created, read, re-sized,
//! re-timed and deleted by admins, and listed page by page. Knows nothing
//! of HTTP.
//!
//! Every change takes the slot's row lock first (the hold path's own
//! lock, so a change and a hold or confirm are serialised), decides with a
//! `now` from a statement sent after the lock, and invalidates the
//! availability cache after the commit, never inside the transaction.

pub mod availability;
pub mod cursor;

use crate::booking::DEFAULT_BUDGET;
use crate::cache::AvailabilityCache;
use sqlx::MySqlPool;
use std::time::Instant;

/// The slot service. Cheap to clone; build it once per execution
/// environment and scope it to a request with [`Slots::until`].
#[derive(Clone)]
pub struct Slots {
    pool: MySqlPool,
    cache: Option<AvailabilityCache>,
    /// When the caller must have its answer; `None`: [`DEFAULT_BUDGET`]
    /// from the start of each operation.
    deadline: Option<Instant>,
}

impl Slots {
    pub fn new(pool: MySqlPool, cache: Option<AvailabilityCache>) -> Self {
        Self {
            pool,
            cache,
            deadline: None,
        }
    }

    /// This service, answering by `deadline`.
    pub fn until(&self, deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
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
        let deadline = self
            .deadline
            .unwrap_or_else(|| Instant::now() + DEFAULT_BUDGET);
        tokio::time::Instant::from_std(deadline)
    }
}
