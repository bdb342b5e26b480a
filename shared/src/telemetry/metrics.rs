//! The business metrics of SPEC §13 and their CloudWatch Embedded Metric
//! Format document: one per invocation at most, printed as one log line.
//!
//! A small module rather than `metrics_cloudwatch_embedded` 0.10 (read,
//! not measured: size and cold start would not stop it, every dependency
//! but `metrics` being in the tree already). That crate writes one
//! document per distinct label set (`Collector::flush`), so a hold that
//! was retried and then refused would print two, and the summary line
//! and the document could not share the invocation's reason. Here every
//! count of an invocation goes into one document: the plain counts under
//! the `function` dimension (and none, for stack-wide alarms), the hold
//! refusals under `function` × `reason`.

use serde_json::{Map, Value, json};

/// The namespace of every metric; alarms and the dashboard name it too.
pub const NAMESPACE: &str = "SlotBooking";

/// A count the service keeps (`HoldsRefused` has its own entry, by
/// reason: [`super::hold_refused`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    HoldsCreated,
    SeatsHeld,
    SeatsConfirmed,
    SeatsCancelled,
    CacheHit,
    CacheStale,
    CacheMiss,
    CacheBypass,
    /// A cold-cache reader whose owner did not publish within `cold_wait`,
    /// so it read the database itself (answered `miss`): routine under a
    /// burst, a problem only if it grows.
    CacheOwnerLate,
    /// A transaction run again after a deadlock, a lock wait time-out or a
    /// lost connection (`db::Run`).
    Retries,
    RateLimited,
    /// Answers 503 `service_unavailable`.
    ServiceUnavailable,
    /// Counters the sweeper found wrong and repaired: a bug, always.
    CounterRepairs,
    SweepSlotsFailed,
    HoldsDeleted,
    /// Holds that ended unconfirmed at their expiry, and their seats: what
    /// a hoarder leaves behind (SPEC §16), counted once each by the sweep.
    HoldsExpiredUnconfirmed,
    SeatsExpiredUnconfirmed,
    /// Seats of bookings their own clients cancelled (SPEC §23.8): what a
    /// loop of holds, confirms and cancels leaves behind, counted once
    /// each by the sweep with the expiries.
    SeatsCancelledAfterConfirm,
    /// The publisher's backlog when a run ends: numbered events not sent.
    EventsUnsent,
    /// How long the oldest of them has waited, in seconds (0: none).
    EventsUnsentAge,
    /// Webhook deliveries made in a run of `webhooks-deliver` (SPEC §20).
    WebhookDelivered,
    /// Its failed attempts (retried, or failed for good).
    WebhookFailedAttempts,
    /// The longest from an event to its delivery in the run, in ms.
    WebhookLagMs,
}

impl Metric {
    pub const ALL: [Metric; 23] = [
        Metric::HoldsCreated,
        Metric::SeatsHeld,
        Metric::SeatsConfirmed,
        Metric::SeatsCancelled,
        Metric::CacheHit,
        Metric::CacheStale,
        Metric::CacheMiss,
        Metric::CacheBypass,
        Metric::CacheOwnerLate,
        Metric::Retries,
        Metric::RateLimited,
        Metric::ServiceUnavailable,
        Metric::CounterRepairs,
        Metric::SweepSlotsFailed,
        Metric::HoldsDeleted,
        Metric::HoldsExpiredUnconfirmed,
        Metric::SeatsExpiredUnconfirmed,
        Metric::SeatsCancelledAfterConfirm,
        Metric::EventsUnsent,
        Metric::EventsUnsentAge,
        Metric::WebhookDelivered,
        Metric::WebhookFailedAttempts,
        Metric::WebhookLagMs,
    ];

    /// The CloudWatch metric name (template.yaml's alarms use these).
    pub fn name(self) -> &'static str {
        match self {
            Metric::HoldsCreated => "HoldsCreated",
            Metric::SeatsHeld => "SeatsHeld",
            Metric::SeatsConfirmed => "SeatsConfirmed",
            Metric::SeatsCancelled => "SeatsCancelled",
            Metric::CacheHit => "CacheHit",
            Metric::CacheStale => "CacheStale",
            Metric::CacheMiss => "CacheMiss",
            Metric::CacheBypass => "CacheBypass",
            Metric::CacheOwnerLate => "CacheOwnerLate",
            Metric::Retries => "Retries",
            Metric::RateLimited => "RateLimited",
            Metric::ServiceUnavailable => "ServiceUnavailable",
            Metric::CounterRepairs => "CounterRepairs",
            Metric::SweepSlotsFailed => "SweepSlotsFailed",
            Metric::HoldsDeleted => "HoldsDeleted",
            Metric::HoldsExpiredUnconfirmed => "HoldsExpiredUnconfirmed",
            Metric::SeatsExpiredUnconfirmed => "SeatsExpiredUnconfirmed",
            Metric::SeatsCancelledAfterConfirm => "SeatsCancelledAfterConfirm",
            Metric::EventsUnsent => "EventsUnsent",
            Metric::EventsUnsentAge => "EventsUnsentAge",
            Metric::WebhookDelivered => "WebhookDelivered",
            Metric::WebhookFailedAttempts => "WebhookFailedAttempts",
            Metric::WebhookLagMs => "WebhookLagMs",
        }
    }

    /// The CloudWatch unit: a count, but for the ages.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::EventsUnsentAge => "Seconds",
            Metric::WebhookLagMs => "Milliseconds",
            _ => "Count",
        }
    }
}

/// The name of the refusals' metric, published by `reason`.
pub const HOLDS_REFUSED: &str = "HoldsRefused";

/// What one invocation counted. A metric is in the document once it was
/// recorded, even with 0 (the sweeper reports its zeros: a heartbeat).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    values: [Option<u64>; Metric::ALL.len()],
    /// A hold refused, and why (one per request at most).
    refused: Option<(&'static str, u64)>,
}

impl Counts {
    pub fn add(&mut self, metric: Metric, n: u64) {
        let slot = &mut self.values[metric as usize];
        *slot = Some(slot.unwrap_or(0).saturating_add(n));
    }

    pub fn hold_refused(&mut self, reason: &'static str) {
        let n = match self.refused {
            Some((_, n)) => n + 1,
            None => 1,
        };
        self.refused = Some((reason, n));
    }

    pub fn get(&self, metric: Metric) -> Option<u64> {
        self.values[metric as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.refused.is_none() && self.values.iter().all(Option::is_none)
    }

    /// The EMF document, `None` when nothing was counted. `properties`
    /// (the request id, the cold start) are written beside the values so
    /// that the line reads like the invocation's other log lines.
    pub fn document(
        &self,
        function: &str,
        timestamp_ms: u64,
        properties: &[(&str, Value)],
    ) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        let mut root = Map::new();
        let mut directives = Vec::new();
        let counted: Vec<Value> = Metric::ALL
            .iter()
            .filter_map(|&metric| {
                let value = self.get(metric)?;
                root.insert(metric.name().into(), value.into());
                Some(json!({"Name": metric.name(), "Unit": metric.unit()}))
            })
            .collect();
        if !counted.is_empty() {
            directives.push(json!({
                "Namespace": NAMESPACE,
                // Per function, and once more without a dimension: the
                // stack-wide figure the alarms watch.
                "Dimensions": [["function"], []],
                "Metrics": counted,
            }));
        }
        if let Some((reason, n)) = self.refused {
            root.insert(HOLDS_REFUSED.into(), n.into());
            root.insert("reason".into(), reason.into());
            directives.push(json!({
                "Namespace": NAMESPACE,
                "Dimensions": [["function", "reason"], ["function"]],
                "Metrics": [{"Name": HOLDS_REFUSED, "Unit": "Count"}],
            }));
        }
        root.insert("function".into(), function.into());
        for (name, value) in properties {
            root.insert((*name).into(), value.clone());
        }
        root.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp_ms, "CloudWatchMetrics": directives}),
        );
        Some(Value::Object(root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_counted_prints_no_document() {
        assert_eq!(Counts::default().document("hold", 1, &[]), None);
    }

    #[test]
    fn one_document_carries_the_counts_and_the_refusal_under_its_reason() {
        let mut counts = Counts::default();
        counts.add(Metric::Retries, 1);
        counts.add(Metric::Retries, 2);
        counts.hold_refused("capacity_exhausted");
        let doc = counts
            .document("hold", 7, &[("request_id", "r-1".into())])
            .expect("a document");
        assert_eq!(doc["Retries"], 3);
        assert_eq!(doc["HoldsRefused"], 1);
        assert_eq!(doc["reason"], "capacity_exhausted");
        assert_eq!(doc["function"], "hold");
        assert_eq!(doc["request_id"], "r-1");
        let directives = doc["_aws"]["CloudWatchMetrics"].as_array().unwrap();
        assert_eq!(directives.len(), 2);
        assert_eq!(directives[0]["Namespace"], NAMESPACE);
        assert_eq!(directives[0]["Metrics"][0]["Name"], "Retries");
        assert_eq!(
            directives[1]["Dimensions"][0],
            json!(["function", "reason"])
        );
        assert_eq!(doc["_aws"]["Timestamp"], 7);
    }

    #[test]
    fn the_age_is_in_seconds_and_every_other_metric_a_count() {
        let mut counts = Counts::default();
        counts.add(Metric::EventsUnsent, 12);
        counts.add(Metric::EventsUnsentAge, 3600);
        let doc = counts
            .document("events-publish", 1, &[])
            .expect("a document");
        assert_eq!(
            (doc["EventsUnsent"].clone(), doc["EventsUnsentAge"].clone()),
            (json!(12), json!(3600))
        );
        let metrics = &doc["_aws"]["CloudWatchMetrics"][0]["Metrics"];
        assert_eq!(
            metrics,
            &json!([
                {"Name": "EventsUnsent", "Unit": "Count"},
                {"Name": "EventsUnsentAge", "Unit": "Seconds"}
            ])
        );
    }

    #[test]
    fn a_zero_that_was_recorded_is_published() {
        let mut counts = Counts::default();
        counts.add(Metric::CounterRepairs, 0);
        let doc = counts.document("sweep", 1, &[]).expect("a document");
        assert_eq!(doc["CounterRepairs"], 0);
        assert!(doc.get("HoldsRefused").is_none());
    }
}
