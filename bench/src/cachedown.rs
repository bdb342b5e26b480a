//! A dead cache, fleet-wide: 20 environments, each a `shared::App` built as
//! a function builds it (its own pool, its own cache client with the
//! production settings), whose cache is (a) a listener that accepts and
//! never answers, (b) a closed port. Reads (`availability_json`) and
//! writes (confirms and cancels alternating, each invalidating after
//! commit) are timed sequentially (one caller going round the 20
//! environments) and in parallel (one caller per environment). The
//! environments start cold and keep their cache client through all four
//! phases of a mode, so each crosses several skip windows: what a fleet
//! pays is one contact per environment per outage, or one per window.
//! Each phase alternates rounds with the same service on the same
//! connections without a cache (`.no_cache`): what this machine's
//! database alone costs at that concurrency. Every call authenticates as
//! a request does (the gate, with the environment's cache for its rate
//! limit: dead, so unchecked).

use crate::measure::{self, Budget, Outcome, Sample};
use crate::report::Row;
use crate::scenarios::{Timing, refused};
use crate::setup::{Bench, ROOMY};
use serde_json::json;
use shared::booking::DEFAULT_BUDGET;
use shared::clients::{Caller, Gate, Needs};
use shared::domain::HoldId;
use shared::{App, Booking, Config};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub const ENVS: usize = 20;
/// The scenario names, and the p99 each must stay within.
pub const MODES: &[(&str, f64)] = &[("cache_down.hanging", 200.0), ("cache_down.refused", 100.0)];
/// Per phase at least this long: with the windows at 1, 2, 4, 8, 8… s, a
/// mode's four phases make each environment cross about seven.
const MIN_PHASE: Duration = Duration::from_secs(10);
/// Rounds per phase, alternating the dead cache and no cache.
const ROUNDS: usize = 4;

/// A cache that accepts connections and never says a word.
async fn hanging() -> Result<(String, tokio::task::JoinHandle<()>), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "redis://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let task = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    Ok((url, task))
}

async fn closed_port() -> Result<String, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "redis://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    drop(listener);
    Ok(url)
}

/// `count` cold environments whose cache is at `url`; their database
/// connection is open (a warm pool is not what is measured here).
async fn envs(bench: &Bench, url: &str) -> Result<Vec<App>, String> {
    let mut apps = Vec::with_capacity(ENVS);
    for _ in 0..ENVS {
        let app = App::new(Config {
            database_url: bench.url.clone(),
            redis_url: Some(url.to_string()),
            cache_ttl: Duration::from_secs(10),
            hold_ttl: Duration::from_secs(300),
            holds: shared::config::HoldRules::default(),
            access: Default::default(),
            cache_namespace: bench.name.clone(),
            cache_user: None,
            webhooks: shared::config::WebhookRules::default(),
        })
        .map_err(|e| e.to_string())?;
        sqlx::query("SELECT 1")
            .execute(app.booking.pool())
            .await
            .map_err(|e| format!("environment cannot reach the database: {e}"))?;
        apps.push(app);
    }
    Ok(apps)
}

pub async fn run(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let phase = (timing.seconds * 5 / 2).max(MIN_PHASE);
    for (scenario, _) in MODES {
        bench.reset().await?;
        let slots = bench.insert_slots(100, ROOMY).await?;
        let later = bench.db_now_plus(Duration::from_secs(3_600)).await?;
        // Enough for 3,000 writes/s through both write phases.
        let per_slot = (6_000.0 * phase.as_secs_f64() / slots.len() as f64) as usize;
        let holds = Arc::new(bench.insert_holds(&slots, per_slot, later).await?);
        let (url, listener) = if scenario.ends_with("hanging") {
            let (url, task) = hanging().await?;
            (url, Some(task))
        } else {
            (closed_port().await?, None)
        };
        let apps = envs(bench, &url).await?;
        let bearer: Arc<str> = bench.bearer.as_str().into();
        let dead: Vec<Side> = apps
            .iter()
            .map(|a| Side {
                gate: a.gate.clone(),
                booking: a.booking.clone(),
                bearer: bearer.clone(),
            })
            .collect();
        // The reference: the same service on the same connections, no cache.
        let off: Vec<Side> = apps
            .iter()
            .map(|a| {
                let pool = a.booking.pool().clone();
                Side {
                    gate: Gate::new(pool.clone(), a.config.access, None),
                    booking: Booking::new(pool, a.config.hold_ttl, None),
                    bearer: bearer.clone(),
                }
            })
            .collect();
        let sides = [Arc::new(dead), Arc::new(off)];
        // Reads count turns; writes also take the next pre-made hold.
        let (turns, next_hold) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for (what, callers) in [
            ("reads", 1),
            ("reads", ENVS),
            ("writes", 1),
            ("writes", ENVS),
        ] {
            // Dead cache and no cache in alternating rounds: drift in the
            // machine's load hits both alike.
            let mut samples = [Sample::default(), Sample::default()];
            for round in 0..ROUNDS {
                for side in [round % 2, 1 - round % 2] {
                    let envs = sides[side].clone();
                    let budget = Budget::Time(phase / ROUNDS as u32);
                    samples[side].merge(if what == "reads" {
                        measure::run(callers, budget, reads(envs, &turns, callers == 1)).await
                    } else {
                        let op = writes(envs, holds.clone(), &next_hold, callers == 1);
                        measure::run(callers, budget, op).await
                    });
                }
            }
            let connects: Vec<u64> = apps
                .iter()
                .filter_map(|a| a.booking.cache().map(|c| c.connects()))
                .collect();
            let [dead, reference] = samples;
            emit(row(scenario, what, "", callers, phase, &dead, &connects));
            emit(row(
                scenario,
                what,
                ".no_cache",
                callers,
                phase,
                &reference,
                &[],
            ));
        }
        if let Some(task) = listener {
            task.abort();
        }
        let oversold = bench.oversold_slots().await?;
        if !oversold.is_empty() {
            return Err(format!(
                "{scenario} broke an invariant on slots {oversold:?}"
            ));
        }
    }
    Ok(())
}

/// One environment's way in: its gate (the key look-up, the rate limit in
/// its cache) and its service.
struct Side {
    gate: Gate,
    booking: Booking,
    bearer: Arc<str>,
}

impl Side {
    async fn caller(&self, admit: bool) -> Result<Caller, shared::Error> {
        let deadline = tokio::time::Instant::now() + DEFAULT_BUDGET;
        let bearer = Some(&*self.bearer);
        if admit {
            self.gate.admit(bearer, Needs::Booker, deadline).await
        } else {
            self.gate.identify(bearer, Needs::Booker, deadline).await
        }
    }
}

/// One availability read, as the route serves it: the caller, then the
/// read with its rate limit. A parallel caller is its own environment;
/// the sequential caller takes the next one each call.
fn reads(
    envs: Arc<Vec<Side>>,
    cursor: &Arc<AtomicUsize>,
    sequential: bool,
) -> impl Fn(usize) -> std::pin::Pin<Box<dyn Future<Output = Result<Outcome, String>> + Send>>
+ Send
+ Sync
+ 'static {
    let cursor = cursor.clone();
    move |client: usize| {
        let envs = envs.clone();
        let turn = cursor.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            let env = &envs[if sequential {
                turn % envs.len()
            } else {
                client
            }];
            let caller = env.caller(false).await.map_err(|e| e.to_string())?;
            let served = env.booking.availability_json(caller.limit()).await;
            served
                .map(|s| Outcome::Done(s.status.as_str()))
                .map_err(|e| e.to_string())
        })
    }
}

/// One confirm or cancel of a pre-made hold, alternating, after the
/// gate: both commit a change and invalidate the cache after it.
fn writes(
    envs: Arc<Vec<Side>>,
    holds: Arc<Vec<u64>>,
    cursor: &Arc<AtomicUsize>,
    sequential: bool,
) -> impl Fn(usize) -> std::pin::Pin<Box<dyn Future<Output = Result<Outcome, String>> + Send>>
+ Send
+ Sync
+ 'static {
    let cursor = cursor.clone();
    move |client: usize| {
        let (envs, holds) = (envs.clone(), holds.clone());
        let turn = cursor.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            let Some(&hold) = holds.get(turn) else {
                return Ok(Outcome::Exhausted);
            };
            let env = &envs[if sequential {
                turn % envs.len()
            } else {
                client
            }];
            let caller = env.caller(true).await.map_err(|e| e.to_string())?;
            let done = if turn.is_multiple_of(2) {
                env.booking
                    .confirm(&caller, HoldId(hold))
                    .await
                    .map(|_| "confirm 200")
            } else {
                env.booking
                    .cancel(&caller, HoldId(hold))
                    .await
                    .map(|_| "cancel 200")
            };
            done.map(Outcome::Done).or_else(|err| refused(&err))
        })
    }
}

fn row(
    scenario: &str,
    what: &str,
    suffix: &str,
    callers: usize,
    phase: Duration,
    sample: &Sample,
    connects: &[u64],
) -> Row {
    let variant = format!(
        "{what}.{}{suffix}",
        if callers == 1 {
            "sequential"
        } else {
            "parallel"
        }
    );
    let mut params = json!({ "environments": ENVS, "phase_s": phase.as_secs_f64() });
    if !connects.is_empty() {
        params["cache_connects_per_env_so_far"] = json!({
            "min": connects.iter().min(),
            "max": connects.iter().max(),
        });
    }
    Row::new(scenario, &variant, callers, params, sample.stats())
}
