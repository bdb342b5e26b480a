//! Lambda function: the publisher, `events::publish`. Sends the change
//! feed to the EventBridge bus (`EVENT_BUS_NAME`), at least once and in
//! order per hold, and records how far it got.
//!
//! Triggered by a schedule every minute (the stragglers: whatever a run
//! could not send, EventBridge being slow or down). Bookings never wait on
//! it: they never call EventBridge.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde_json::{Value, json};
use shared::config::PublisherSettings;
use shared::telemetry::{self, Metric};
use std::time::{Duration, SystemTime};

/// The run stops sending this long before Lambda's deadline (a PutEvents
/// call in flight is bounded by the SDK's timeouts, `shared::aws`); at
/// most this long in all when the deadline is unknown.
const MARGIN: Duration = Duration::from_secs(8);
const LONGEST_RUN: Duration = Duration::from_secs(45);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let mut app = shared::App::from_env_or_exit().await;
    telemetry::exit_quietly_on_sigterm();
    let settings = &match PublisherSettings::from_env() {
        Ok(settings) => settings,
        Err(err) => {
            tracing::error!("refusing to start: {err}");
            std::process::exit(1);
        }
    };
    // The SDK configuration the App's look-ups loaded, when they did.
    let client = &aws_sdk_eventbridge::Client::new(&app.sdk_config().await);
    let app = &app;
    let served = run(service_fn(|event: LambdaEvent<Value>| async move {
        let request_id = event.context.request_id.clone();
        let publish = publish(app, client, &settings.bus, event.context.deadline());
        telemetry::invoke(request_id, "schedule", publish, |_| None).await
    }))
    .await;
    telemetry::exit_on_error(served)
}

/// One run, within what is left of the invocation. A run that could not
/// send everything fails the invocation (the errors alarm), after
/// recording what it did send; the next run starts where it stopped.
async fn publish(
    app: &shared::App,
    client: &aws_sdk_eventbridge::Client,
    bus: &str,
    deadline: SystemTime,
) -> Result<Value, Error> {
    // A deadline that cannot be one (`cargo lambda watch` sends 600 s
    // after the epoch) leaves the longest run.
    let left = deadline
        .duration_since(SystemTime::now())
        .map_or(LONGEST_RUN, |left| left.saturating_sub(MARGIN));
    let until = tokio::time::Instant::now() + left.min(LONGEST_RUN);
    let pool = app.booking.pool();
    // Boxed: like the sweep's, the run's future is deep enough to overflow
    // the compiler's layout depth limit when inlined into the runtime's.
    let report = match Box::pin(shared::events::publish(pool, client, bus, until)).await {
        Ok(report) => report,
        Err(err) => {
            telemetry::refused(err.reason(), &err, true);
            return Err(err.into());
        }
    };
    tracing::info!(?report, "publish done");
    // The backlog, from the run that held the lock (a busy run measured
    // nothing): its alarm is the bus falling behind, whatever the cause.
    if !report.busy {
        telemetry::count(Metric::EventsUnsent, report.unsent);
        telemetry::count(Metric::EventsUnsentAge, report.oldest_unsent_s);
    }
    match &report.failure {
        Some(failure) => {
            let err = format!(
                "EventBridge refused or did not answer; {} sent, the rest waits: {failure}",
                report.published
            );
            telemetry::refused("event_bus_unavailable", &err, true);
            Err(err.into())
        }
        None => Ok(json!(report)),
    }
}
