//! When a service operation must have its answer: the request's deadline,
//! or a default budget from the operation's start.

use super::OPERATION_DEADLINE;
use std::time::{Duration, Instant};

/// The time an operation may take when its caller set no deadline: under
/// the function timeout (`template.yaml`, 10 s) with room to answer.
pub const DEFAULT_BUDGET: Duration = OPERATION_DEADLINE;

/// Kept back from a change's budget for the cache invalidation that
/// follows its commit (the cache's own time-outs bound it well below
/// this).
pub const INVALIDATION_RESERVE: Duration = Duration::from_millis(300);

/// A service's deadline: set by [`Deadline::at`] for one request, else
/// [`DEFAULT_BUDGET`] from the start of each operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    pub fn at(deadline: Instant) -> Self {
        Self(Some(deadline))
    }

    /// When an operation starting now must be done.
    pub fn due(self) -> tokio::time::Instant {
        let deadline = self.0.unwrap_or_else(|| Instant::now() + DEFAULT_BUDGET);
        tokio::time::Instant::from_std(deadline)
    }

    /// A change's deadline, with room for the invalidation after its
    /// commit.
    pub fn before_invalidation(self) -> tokio::time::Instant {
        self.due()
            .checked_sub(INVALIDATION_RESERVE)
            .unwrap_or_else(tokio::time::Instant::now)
    }
}
