//! Lambda function: the webhooks' delivery engine (SPEC §20), rounds of
//! `webhooks::Deliverer` for the whole invocation.
//!
//! Scheduled every minute (template.yaml), each run loops for up to
//! [`LONGEST_RUN`], a round every [`PAUSE`]: a committed event reaches a
//! healthy receiver within about a second plus the sequencer's next run
//! (a round runs it). Runs are 60 s and the schedule's rate 1 minute, so
//! consecutive runs overlap by a moment rather than leave a gap; two runs
//! at once are safe (every claim and record holds its subscription's row
//! lock, and leases keep an attempt to one worker). Under `make dev` it is
//! invoked again as soon as a run ends, each run `WEBHOOK_RUN_SECONDS`
//! (2) long, so that a stop waits only moments for the run in flight
//! (scripts/dev.sh).

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde_json::{Value, json};
use shared::telemetry::{self, Metric};
use shared::webhooks::invoke::{Invoke, SENDER_VARIABLE};
use shared::webhooks::{Deliverer, DeliverySettings, Sender};
use std::time::{Duration, SystemTime};

const PAUSE: Duration = Duration::from_secs(1);
const LONGEST_RUN: Duration = Duration::from_secs(60);
/// A run's length: `LONGEST_RUN` unless `WEBHOOK_RUN_SECONDS` (1 to 60)
/// says shorter.
const RUN_VARIABLE: &str = "WEBHOOK_RUN_SECONDS";
/// The run stops claiming this long (plus a lease) before Lambda's
/// deadline.
const MARGIN: Duration = Duration::from_secs(3);
/// Connections: the rounds' one, and the attempts' records.
const CONNECTIONS: u32 = 4;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let app = shared::App::from_env_or_exit().await;
    telemetry::exit_quietly_on_sigterm();
    // The key the cold start read (WEBHOOK_SECRET_KEY, or on AWS the
    // secret WEBHOOK_SECRET_KEY_ARN names).
    let (settings, key) = match (DeliverySettings::from_env(), app.webhooks.seal_key()) {
        (Ok(settings), Some(key)) => (settings, key.clone()),
        (Err(err), _) => refuse(&err.to_string()),
        (_, None) => refuse("WEBHOOK_SECRET_KEY is not set: no secret can be opened"),
    };
    let options = (*app.booking.pool().connect_options()).clone();
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(CONNECTIONS)
        .connect_lazy_with(options);
    let sender = sender().await;
    let longest = run_length();
    let deliverer = &Deliverer::sending(pool, settings, key, app.config.webhooks, sender);
    let served = run(service_fn(|event: LambdaEvent<Value>| async move {
        let request_id = event.context.request_id.clone();
        let rounds = rounds(deliverer, event.context.deadline(), longest);
        telemetry::invoke(request_id, "schedule", rounds, |_| None).await
    }))
    .await;
    telemetry::exit_on_error(served)
}

/// On AWS, `WEBHOOK_SENDER_FUNCTION` names the sender function outside
/// the VPC (which has no route out); unset, requests go out from here
/// (`make dev`).
async fn sender() -> Sender {
    match std::env::var(SENDER_VARIABLE) {
        Ok(function) if !function.is_empty() => {
            match Invoke::new(&shared::aws::load().await, &function) {
                Ok(invoke) => Sender::Invoke(invoke),
                Err(why) => refuse(&why),
            }
        }
        _ => Sender::Direct,
    }
}

fn run_length() -> Duration {
    match std::env::var(RUN_VARIABLE) {
        Err(_) => LONGEST_RUN,
        Ok(raw) => match raw.parse::<u64>() {
            Ok(seconds @ 1..=60) => Duration::from_secs(seconds),
            _ => refuse(&format!(
                "{RUN_VARIABLE} must be a whole number of seconds from 1 to 60"
            )),
        },
    }
}

fn refuse(why: &str) -> ! {
    tracing::error!("refusing to start: {why}");
    std::process::exit(1);
}

async fn rounds(
    deliverer: &Deliverer,
    deadline: SystemTime,
    longest: Duration,
) -> Result<Value, Error> {
    // A deadline that cannot be one (`cargo lambda watch` sends 600 s
    // after the epoch) leaves the longest run.
    let left = deadline
        .duration_since(SystemTime::now())
        .map_or(longest, |left| left.saturating_sub(MARGIN));
    let until = tokio::time::Instant::now() + left.min(longest);
    let report = match Box::pin(deliverer.run_until(until, PAUSE)).await {
        Ok(report) => report,
        Err(err) => {
            telemetry::refused(err.reason(), &err, true);
            return Err(err.into());
        }
    };
    tracing::info!(?report, "webhook rounds done");
    // Zeros included: a heartbeat, as the sweeper's.
    telemetry::count(Metric::WebhookDelivered, report.delivered);
    telemetry::count(Metric::WebhookFailedAttempts, report.failed_attempts);
    telemetry::count(Metric::WebhookLagMs, report.max_lag_ms);
    Ok(json!(report))
}
