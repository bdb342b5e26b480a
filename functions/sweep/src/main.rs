//! Lambda function: the scheduled sweeper, `Booking::sweep`.
//!
//! Correctness never waits for it (expiry is exact without it); it keeps
//! the "expired but still counted" holds few, so reads stay cheap, and it
//! re-checks every maintained counter against the holds table.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde_json::{Value, json};
use shared::booking::SweepLimits;
use shared::telemetry::{self, Metric};
use std::time::{Duration, SystemTime};

/// Slots per run, each in one short transaction: the due ones, and as many
/// of the least recently checked others.
const DUE_PER_RUN: u32 = 500;
const SAMPLE_PER_RUN: u32 = 500;
/// The run stops taking slots this long before Lambda's deadline; at most
/// this long in all when the deadline is unknown.
const MARGIN: Duration = Duration::from_secs(10);
const LONGEST_RUN: Duration = Duration::from_secs(45);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = &shared::App::from_env_or_exit().await;
    telemetry::exit_quietly_on_sigterm();
    let served = run(service_fn(|event: LambdaEvent<Value>| async move {
        let request_id = event.context.request_id.clone();
        let sweep = sweep(app, event.context.deadline());
        telemetry::invoke(request_id, "schedule", sweep, |_| None).await
    }))
    .await;
    telemetry::exit_on_error(served)
}

/// One run, within what is left of the invocation. Its figures become
/// metrics (zeros included: a heartbeat); the repairs have an alarm.
async fn sweep(app: &shared::App, deadline: SystemTime) -> Result<Value, Error> {
    // A deadline that cannot be one (`cargo lambda watch` sends 600 s
    // after the epoch) leaves the longest run.
    let left = deadline
        .duration_since(SystemTime::now())
        .map_or(LONGEST_RUN, |left| left.saturating_sub(MARGIN));
    let limits = SweepLimits {
        max_due: DUE_PER_RUN,
        sample: SAMPLE_PER_RUN,
        budget: left.min(LONGEST_RUN),
    };
    // Boxed: the sweep's future is deep enough to overflow the compiler's
    // layout depth limit when inlined into the runtime's.
    let report = match Box::pin(app.booking.sweep(limits)).await {
        Ok(report) => report,
        Err(err) => {
            telemetry::refused(err.reason(), &err, true);
            return Err(err.into());
        }
    };
    tracing::info!(?report, "sweep done");
    telemetry::count(Metric::CounterRepairs, report.repaired);
    telemetry::count(Metric::SweepSlotsFailed, report.failed);
    telemetry::count(Metric::HoldsDeleted, report.deleted);
    // Who let holds expire unconfirmed since the last run (SPEC §16): one
    // line, the ten clients with the most seats first.
    let hoarding = match Box::pin(app.booking.hoarding_report()).await {
        Ok(hoarding) => hoarding,
        Err(err) => {
            telemetry::refused(err.reason(), &err, true);
            return Err(err.into());
        }
    };
    telemetry::count(Metric::HoldsExpiredUnconfirmed, hoarding.holds);
    telemetry::count(Metric::SeatsExpiredUnconfirmed, hoarding.seats);
    telemetry::count(Metric::SeatsCancelledAfterConfirm, hoarding.cancelled_seats);
    tracing::info!(
        holds = hoarding.holds,
        seats = hoarding.seats,
        top = %json!(hoarding.top),
        "holds expired unconfirmed"
    );
    // And who cancelled its own bookings (SPEC §23.8: hold, confirm and
    // cancel in a loop), the same way.
    tracing::info!(
        holds = hoarding.cancelled,
        seats = hoarding.cancelled_seats,
        top = %json!(hoarding.top_cancelled),
        "bookings cancelled by their clients"
    );
    let mut answer = json!(report);
    answer["expired_unconfirmed"] = json!(hoarding);
    Ok(answer)
}
