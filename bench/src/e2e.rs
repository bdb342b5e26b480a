//! End to end over HTTP: the function binaries served by `cargo lambda
//! watch` (as `make dev` serves them: dev profile unless
//! `BENCH_E2E_RELEASE=1`, 20 instances per function), each endpoint at 1
//! and 8 clients, and the sold-out storm of 1,000 concurrent holds. With
//! auth on (`AUTH_MODE=api-key`, as deployed): every request carries the
//! bench client's key.

use crate::measure::{self, Budget, Outcome, Sample};
use crate::report::Row;
use crate::scenarios::Timing;
use crate::setup::{Bench, ROOMY};
use serde_json::json;
pub use slot_booking_tests::watch::workspace_root;
use slot_booking_tests::watch::{Watch, WatchOptions};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Function instances per function, as `make dev` runs them.
const CONCURRENCY: u32 = 20;
/// The warm-up of each endpoint: every instance busy, this long.
const WARM_CLIENTS: usize = CONCURRENCY as usize;
const WARM_UP: Duration = Duration::from_secs(3);

async fn serve(bench: &Bench, release: bool) -> Result<Watch, String> {
    Watch::start(WatchOptions {
        database_url: &bench.url,
        redis_url: &bench.redis_url,
        concurrency: CONCURRENCY,
        emulator_timeout_secs: None,
        release,
        log_prefix: "bench-watch",
        auth_mode: "api-key",
        application_log_level: None,
    })
    .await
}

/// An HTTP client whose every request carries the bench client's key.
fn http_client(bench: &Bench, timeout: Duration, idle: usize) -> Result<reqwest::Client, String> {
    let mut value =
        reqwest::header::HeaderValue::from_str(&bench.bearer).map_err(|e| e.to_string())?;
    value.set_sensitive(true);
    let headers = reqwest::header::HeaderMap::from_iter([(reqwest::header::AUTHORIZATION, value)]);
    reqwest::Client::builder()
        .timeout(timeout)
        .pool_max_idle_per_host(idle)
        .default_headers(headers)
        .build()
        .map_err(|e| e.to_string())
}

fn label(status: u16) -> &'static str {
    match status {
        200 => "200",
        201 => "201",
        404 => "404",
        409 => "409",
        401 => "401",
        422 => "422",
        413 => "413",
        429 => "429",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        // Rare statuses: a few distinct strings for the whole run.
        other => Box::leak(other.to_string().into_boxed_str()),
    }
}

#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Availability,
    Hold,
    Confirm,
    Cancel,
}

impl Endpoint {
    fn scenario(self) -> &'static str {
        match self {
            Self::Availability => "e2e.GET_availability",
            Self::Hold => "e2e.POST_hold",
            Self::Confirm => "e2e.POST_confirm",
            Self::Cancel => "e2e.DELETE_hold",
        }
    }
}

/// What the endpoints work on: slots to hold on, pre-made holds to
/// confirm and to cancel (each used once).
struct Fixture {
    slots: Vec<u64>,
    to_confirm: Vec<u64>,
    to_cancel: Vec<u64>,
    confirm_at: AtomicUsize,
    cancel_at: AtomicUsize,
}

async fn call(
    base: &str,
    http: &reqwest::Client,
    endpoint: Endpoint,
    fixture: &Fixture,
    n: u64,
) -> Result<Outcome, String> {
    let request = match endpoint {
        Endpoint::Availability => http.get(format!("{base}/slots/availability")),
        Endpoint::Hold => {
            let slot = fixture.slots[(n.wrapping_mul(7_919) % fixture.slots.len() as u64) as usize];
            http.post(format!("{base}/slots/{slot}/hold"))
                .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        }
        Endpoint::Confirm => match fixture
            .to_confirm
            .get(fixture.confirm_at.fetch_add(1, Ordering::Relaxed))
        {
            Some(id) => http.post(format!("{base}/holds/{id}/confirm")),
            None => return Ok(Outcome::Exhausted),
        },
        Endpoint::Cancel => match fixture
            .to_cancel
            .get(fixture.cancel_at.fetch_add(1, Ordering::Relaxed))
        {
            Some(id) => http.delete(format!("{base}/holds/{id}")),
            None => return Ok(Outcome::Exhausted),
        },
    };
    let response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    response.bytes().await.map_err(|e| e.to_string())?;
    Ok(Outcome::Done(label(status)))
}

pub async fn run(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let release = std::env::var("BENCH_E2E_RELEASE").is_ok_and(|v| v == "1");
    let profile = if release { "release" } else { "dev" };
    bench.reset().await?;
    let slots = bench.insert_slots(100, ROOMY).await?;
    let later = bench.db_now_plus(Duration::from_secs(3_600)).await?;
    // Enough for 1,500 calls/s during the warm-up and both client counts.
    let per_endpoint = (1_500.0 * (WARM_UP + timing.seconds * 2).as_secs_f64()) as usize;
    let to_confirm = bench
        .insert_holds(&slots, per_endpoint.div_ceil(100), later)
        .await?;
    let to_cancel = bench
        .insert_holds(&slots, per_endpoint.div_ceil(100), later)
        .await?;
    let fixture = Arc::new(Fixture {
        slots,
        to_confirm,
        to_cancel,
        confirm_at: AtomicUsize::new(0),
        cancel_at: AtomicUsize::new(0),
    });

    let watch = serve(bench, release).await?;
    let outcome = measure_endpoints(bench, &watch, fixture, timing, profile, emit).await;
    let storm = match outcome {
        // 100 in flight first: 1,000 at once may break the emulator.
        Ok(()) => match storm(bench, &watch, 100, profile, emit).await {
            Ok(()) => storm(bench, &watch, 1_000, profile, emit).await,
            Err(err) => Err(err),
        },
        Err(err) => Err(err),
    };
    let log = watch.log.clone();
    watch.stop().await;
    storm.map_err(|e| format!("{e} (watch log: {})", log.display()))
}

async fn measure_endpoints(
    bench: &Bench,
    watch: &Watch,
    fixture: Arc<Fixture>,
    timing: Timing,
    profile: &str,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let base: Arc<str> = watch.base.clone().into();
    for endpoint in [
        Endpoint::Availability,
        Endpoint::Hold,
        Endpoint::Confirm,
        Endpoint::Cancel,
    ] {
        // The warm-up keeps every instance of the function busy at once,
        // so all of them are started (their cold starts, through `cargo
        // run`, are not measured here).
        for clients in [WARM_CLIENTS, 1, 8] {
            // Each client its own HTTP connection, kept alive.
            let https: Arc<Vec<reqwest::Client>> = Arc::new(
                (0..clients)
                    .map(|_| http_client(bench, Duration::from_secs(30), usize::MAX))
                    .collect::<Result<_, _>>()?,
            );
            let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let op = || {
                let (base, https, fixture, counter) = (
                    base.clone(),
                    https.clone(),
                    fixture.clone(),
                    counter.clone(),
                );
                move |client: usize| {
                    let (base, https, fixture) = (base.clone(), https.clone(), fixture.clone());
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    async move { call(&base, &https[client], endpoint, &fixture, n).await }
                }
            };
            if clients == WARM_CLIENTS {
                measure::run(clients, Budget::Time(WARM_UP), op()).await;
                continue;
            }
            let mut sample = Sample::default();
            for _ in 0..timing.rounds {
                sample.merge(
                    measure::run(clients, Budget::Time(timing.seconds / timing.rounds), op()).await,
                );
            }
            let params = json!({ "profile": profile, "instances_per_function": CONCURRENCY });
            emit(Row::new(
                endpoint.scenario(),
                "http",
                clients,
                params,
                sample.stats(),
            ));
        }
    }
    Ok(())
}

/// 1,000 holds on a sold-out slot, `in_flight` at a time (1,000: all at
/// once), each in flight on its own connection; latency as the client
/// sees it, queueing for one of the 20 instances included. The function
/// instances that crashed (the emulator's fault, see the log) are counted.
async fn storm(
    bench: &Bench,
    watch: &Watch,
    in_flight: usize,
    profile: &str,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    const CALLS: usize = 1_000;
    let panics = |log: &str| log.matches("panicked at").count();
    let panics_before = panics(&std::fs::read_to_string(&watch.log).unwrap_or_default());
    const CAPACITY: u32 = 10;
    let slot = bench.insert_slots(1, CAPACITY).await?[0];
    let later = bench.db_now_plus(Duration::from_secs(300)).await?;
    bench
        .insert_holds(&[slot], CAPACITY as usize, later)
        .await?;
    let http = http_client(bench, Duration::from_secs(60), CALLS)?;
    let base: Arc<str> = watch.base.clone().into();
    let sample = measure::run(in_flight, Budget::Calls(CALLS as u64), move |_| {
        let (base, http) = (base.clone(), http.clone());
        async move {
            let response = http
                .post(format!("{base}/slots/{slot}/hold"))
                .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            response.bytes().await.map_err(|e| e.to_string())?;
            Ok(Outcome::Done(label(status)))
        }
    })
    .await;
    let active = bench.active_holds(slot).await?;
    let oversold = bench.oversold_slots().await?;
    let refusals = sample.stats_of("409");
    let log = std::fs::read_to_string(&watch.log).unwrap_or_default();
    let params = json!({
        "instance_exits_in_log": log.matches("command exited").count(),
        "instance_panics_in_log": panics(&log),
        "instance_panics_before_storm": panics_before,
        "profile": profile,
        "instances_per_function": CONCURRENCY,
        "calls": CALLS,
        "in_flight": in_flight,
        "capacity": CAPACITY,
        "active_before": CAPACITY,
        "active_after": active,
        "oversold": !oversold.is_empty() || active > i64::from(CAPACITY),
        "makespan_ms": measure::ms(sample.elapsed),
        "p50_409_ms": refusals.p50_ms,
        "p99_409_ms": refusals.p99_ms,
        "max_409_ms": refusals.max_ms,
    });
    emit(Row::new(
        "e2e.storm.sold_out",
        "http",
        in_flight,
        params,
        sample.stats(),
    ));
    Ok(())
}
