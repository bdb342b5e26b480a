//! The publisher's trigger right after a commit (SPEC §12): a function
//! that changed a hold or a slot puts one small "publish requested" event
//! (source [`TRIGGER_SOURCE`]) on the feed's bus (`EVENT_BUS_NAME`), whose
//! rule in the template invokes the publisher asynchronously, so that the
//! bus hears of the change in well under the schedule's minute.
//!
//! Through the bus rather than Lambda's Invoke API: the publisher already
//! needs the EventBridge client, and the Lambda SDK crate would cost every
//! build minutes (its features rebuild the other SDK crates) for one call.
//! Consumers never see these events: the feed's events have the source
//! `slot-booking`, and an EventBridge pattern matches a source exactly.
//!
//! Never in the request's way: the request is spawned, never awaited, and
//! its failure is only logged (the schedule sends what a missed trigger
//! would have). Debounced: at most one trigger a second per process, since
//! one publisher run sends everything committed before it reads, and a
//! second run finds the first at work and returns.
//!
//! In Lambda, an execution environment is frozen once its answer is sent,
//! so a trigger still in flight then completes when the environment is
//! next thawed (or times out): the trigger is a shortcut, the schedule the
//! guarantee.

use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The trigger's `source`; the template's rule for the publisher matches it.
pub const TRIGGER_SOURCE: &str = "slot-booking.publisher";
/// Its `detail-type`.
pub const TRIGGER_DETAIL_TYPE: &str = "publish requested";

/// At most one trigger per this long, per process.
pub const TRIGGER_INTERVAL: Duration = Duration::from_secs(1);

/// The routes whose success wrote events: only they trigger the publisher.
pub const ROUTES_WRITING_EVENTS: [&str; 10] = [
    "POST /slots/{id}/hold",
    "POST /holds/{id}/confirm",
    "DELETE /holds/{id}",
    "POST /holds/{id}/extend",
    "POST /holds/{id}/move",
    "POST /slots/{id}/waitlist",
    "DELETE /waitlist/{id}",
    "POST /slots",
    "PATCH /slots/{id}",
    "DELETE /slots/{id}",
];

/// Cheap to clone: every clone shares the debounce.
#[derive(Clone)]
pub struct PublishTrigger {
    client: Client,
    bus: Arc<str>,
    last: Arc<Mutex<Option<Instant>>>,
}

impl std::fmt::Debug for PublishTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishTrigger")
            .field("bus", &self.bus)
            .finish_non_exhaustive()
    }
}

impl PublishTrigger {
    pub fn new(client: Client, bus: &str) -> Self {
        Self {
            client,
            bus: bus.into(),
            last: Arc::default(),
        }
    }

    /// After `route` answered `status`: sends the trigger when the route
    /// wrote events (a 2xx of [`ROUTES_WRITING_EVENTS`]) and the last one
    /// is over [`TRIGGER_INTERVAL`] old. Must be called inside a Tokio
    /// runtime. Returns whether it fired.
    pub fn after(&self, route: &str, status: u16) -> bool {
        (200..300).contains(&status) && ROUTES_WRITING_EVENTS.contains(&route) && self.fire()
    }

    /// Sends the trigger unless one fired less than [`TRIGGER_INTERVAL`] ago.
    pub fn fire(&self) -> bool {
        if !due(&self.last, Instant::now()) {
            return false;
        }
        let (client, bus) = (self.client.clone(), self.bus.clone());
        tokio::spawn(async move {
            let entry = PutEventsRequestEntry::builder()
                .event_bus_name(&*bus)
                .source(TRIGGER_SOURCE)
                .detail_type(TRIGGER_DETAIL_TYPE)
                .detail("{}")
                .build();
            let failure = match client.put_events().entries(entry).send().await {
                Ok(put) if put.failed_entry_count() == 0 => return,
                Ok(put) => put
                    .entries()
                    .iter()
                    .find_map(|e| e.error_message().map(str::to_string))
                    .unwrap_or_else(|| "the entry was refused".into()),
                Err(err) => crate::aws::describe_sdk_error(&err),
            };
            tracing::warn!(
                bus = %bus,
                error = %failure,
                "could not trigger the publisher; its schedule will send the events"
            );
        });
        true
    }
}

/// Whether a trigger may fire at `now`; if so, records it.
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
