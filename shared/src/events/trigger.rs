//! The publisher's trigger right after a commit (SPEC §12): a function
//! that changed a hold or a slot asks Lambda to run the publisher
//! (`EVENT_PUBLISHER_FUNCTION`) asynchronously, so that the bus hears of
//! the change in well under the schedule's minute.
//!
//! Never in the request's way: the invoke is spawned, never awaited, and
//! its failure is only logged (the schedule sends what a missed trigger
//! would have). Debounced: at most one invoke a second per process, since
//! one publisher run sends everything committed before it reads, and a
//! second run finds the first at work and returns.
//!
//! In Lambda, an execution environment is frozen once its answer is sent,
//! so an invoke still in flight then completes when the environment is
//! next thawed (or times out): the trigger is a shortcut, the schedule the
//! guarantee.

use aws_sdk_lambda::Client;
use aws_sdk_lambda::types::InvocationType;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// At most one invoke per this long, per process.
pub const TRIGGER_INTERVAL: Duration = Duration::from_secs(1);

/// The routes whose success wrote events: only they trigger the publisher.
pub const ROUTES_WRITING_EVENTS: [&str; 7] = [
    "POST /slots/{id}/hold",
    "POST /holds/{id}/confirm",
    "DELETE /holds/{id}",
    "POST /holds/{id}/extend",
    "POST /slots",
    "PATCH /slots/{id}",
    "DELETE /slots/{id}",
];

/// Cheap to clone: every clone shares the debounce.
#[derive(Clone)]
pub struct PublishTrigger {
    client: Client,
    function: Arc<str>,
    last: Arc<Mutex<Option<Instant>>>,
}

impl std::fmt::Debug for PublishTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishTrigger")
            .field("function", &self.function)
            .finish_non_exhaustive()
    }
}

impl PublishTrigger {
    pub fn new(client: Client, function: &str) -> Self {
        Self {
            client,
            function: function.into(),
            last: Arc::default(),
        }
    }

    /// After `route` answered `status`: fires the invoke when the route
    /// wrote events (a 2xx of [`ROUTES_WRITING_EVENTS`]) and the last one
    /// is over [`TRIGGER_INTERVAL`] old. Must be called inside a Tokio
    /// runtime. Returns whether it fired.
    pub fn after(&self, route: &str, status: u16) -> bool {
        (200..300).contains(&status) && ROUTES_WRITING_EVENTS.contains(&route) && self.fire()
    }

    /// Fires the invoke unless one fired less than [`TRIGGER_INTERVAL`] ago.
    pub fn fire(&self) -> bool {
        if !due(&self.last, Instant::now()) {
            return false;
        }
        let (client, function) = (self.client.clone(), self.function.clone());
        tokio::spawn(async move {
            let invoked = client
                .invoke()
                .function_name(&*function)
                .invocation_type(InvocationType::Event)
                .send()
                .await;
            if let Err(err) = invoked {
                tracing::warn!(
                    function = %function,
                    error = %crate::aws::describe_sdk_error(&err),
                    "could not trigger the publisher; its schedule will send the events"
                );
            }
        });
        true
    }
}

/// Whether an invoke may fire at `now`; if so, records it.
fn due(last: &Mutex<Option<Instant>>, now: Instant) -> bool {
    let mut last = last
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match *last {
        Some(at) if now.saturating_duration_since(at) < TRIGGER_INTERVAL => false,
        _ => {
            *last = Some(now);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_one_a_second() {
        let last = Mutex::new(None);
        let start = Instant::now();
        assert!(due(&last, start));
        assert!(!due(&last, start + Duration::from_millis(10)));
        assert!(!due(&last, start + Duration::from_millis(999)));
        assert!(due(&last, start + Duration::from_millis(1000)));
        assert!(!due(&last, start + Duration::from_millis(1500)));
        assert!(due(&last, start + Duration::from_secs(5)));
    }
}
