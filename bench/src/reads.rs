//! The read scenarios in process: `GET /holds/{id}` against its one
//! statement (and the statements it sends, counted by the server), the
//! availability projection (the cache's miss path) against the raw query,
//! a full cache miss, and the cache hit with auth on against the hit
//! without it and a raw Redis `GET` of the same ~10 KB value.

use crate::measure::{self, Budget, Outcome, Sample};
use crate::raw;
use crate::report::Row;
use crate::scenarios::{Timing, alternate, refused};
use crate::setup::{Bench, Env, ROOMY};
use redis::AsyncCommands;
use serde_json::json;
use shared::domain::HoldId;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const HOLDS: usize = 100_000;

/// The calls of `get_hold` whose statements the server counts.
pub const COUNTED_CALLS: u64 = 200;

/// `GET /holds/{id}` in process: *service* is the gate, then
/// `Booking::get_hold`; *raw* its one statement on the same connection;
/// over 10,000 held holds on 100 slots, read scattered, at 1 and 8
/// environments in alternating rounds. Each row also says how many
/// statements one `get_hold` sends, as the server counts them.
pub async fn hold_reads(
    bench: &Bench,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    const VARIANTS: [&str; 2] = ["service", "raw"];
    bench.reset().await?;
    let envs = bench.envs(8).await?;
    let slots = bench.insert_slots(100, ROOMY).await?;
    let later = bench.db_now_plus(Duration::from_secs(3_600)).await?;
    let holds = Arc::new(bench.insert_holds(&slots, 100, later).await?);
    let counted = statements(&envs[0], &holds).await?;
    let next = Arc::new(AtomicU64::new(0));
    for clients in [1, 8] {
        let envs = Arc::new(envs[..clients].to_vec());
        let op = |variant: &'static str| {
            let (envs, holds, next) = (envs.clone(), holds.clone(), next.clone());
            move |client: usize| {
                let (envs, holds) = (envs.clone(), holds.clone());
                // Scattered over the holds, not in step.
                let n = next.fetch_add(1, Ordering::Relaxed);
                let hold = holds[(n.wrapping_mul(7_919) % holds.len() as u64) as usize];
                async move {
                    let env = &envs[client];
                    if variant == "raw" {
                        return raw::hold_by_id(&env.pool, hold)
                            .await
                            .map_err(|e| e.to_string());
                    }
                    let caller = env.admit().await.map_err(|e| e.to_string())?;
                    match env.app.booking.get_hold(&caller, HoldId(hold)).await {
                        Ok(_) => Ok(Outcome::Done("200")),
                        Err(err) => refused(&err),
                    }
                }
            }
        };
        let samples = alternate(timing, clients, VARIANTS.len(), |i| op(VARIANTS[i])).await;
        let params = json!({
            "holds": holds.len(),
            "statements_per_call": measure::round(counted as f64 / COUNTED_CALLS as f64, 3),
            "statements_counted": counted,
            "counted_calls": COUNTED_CALLS,
        });
        for (variant, sample) in VARIANTS.iter().zip(&samples) {
            emit(Row::new(
                "read.hold_by_id",
                variant,
                clients,
                params.clone(),
                sample.stats(),
            ));
        }
    }
    Ok(())
}

/// The statements [`COUNTED_CALLS`] calls of `get_hold` send, as the
/// server counts them on the environment's one connection: its session's
/// `Questions` before and after, less the second read itself. The caller
/// is admitted before (a warm gate sends none; it is not what is counted),
/// and each statement has been prepared once already. `Questions` leaves
/// out the pool's ping before each acquire, which is no statement.
async fn statements(env: &Env, holds: &[u64]) -> Result<u64, String> {
    let caller = env.admit().await.map_err(|e| e.to_string())?;
    let get = |hold: u64| env.app.booking.get_hold(&caller, HoldId(hold));
    get(holds[0]).await.map_err(|e| e.to_string())?;
    let connection = || async {
        sqlx::query_scalar::<_, u64>("SELECT CONNECTION_ID()")
            .fetch_one(&env.pool)
            .await
            .map_err(|e| e.to_string())
    };
    let questions = || async {
        let (_, value): (String, String) = sqlx::query_as("SHOW SESSION STATUS LIKE 'Questions'")
            .fetch_one(&env.pool)
            .await
            .map_err(|e| e.to_string())?;
        value
            .parse::<u64>()
            .map_err(|_| format!("Questions = {value}: not a number"))
    };
    questions().await?;
    let before_on = connection().await?;
    let before = questions().await?;
    for n in 0..COUNTED_CALLS {
        let hold = holds[n as usize % holds.len()];
        get(hold).await.map_err(|e| e.to_string())?;
    }
    let after = questions().await?;
    if connection().await? != before_on {
        return Err(
            "the environment's connection changed while its statements were counted".into(),
        );
    }
    Ok(after.saturating_sub(before + 1))
}

/// The projection at 100 and 10,000 slots, with no active holds and with
/// 100,000 spread over the slots; the cache hit at 100 slots.
pub async fn projections(
    bench: &Bench,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let envs = bench.envs(8).await?;
    for slot_count in [100, 10_000] {
        bench.reset().await?;
        let slots = bench.insert_slots(slot_count, ROOMY).await?;
        for holds in [0, HOLDS] {
            if holds > 0 {
                let later = bench.db_now_plus(Duration::from_secs(3_600)).await?;
                bench
                    .insert_holds(&slots, holds / slot_count, later)
                    .await?;
            }
            let scenario = format!("projection.{slot_count}_slots.{holds}_holds");
            let params = json!({ "slots": slot_count, "active_holds": holds });
            for clients in [1, 8] {
                let envs = Arc::new(envs[..clients].to_vec());
                let service = |envs: Arc<Vec<Env>>| {
                    move |client: usize| {
                        let envs = envs.clone();
                        async move {
                            let rows = envs[client].app.booking.availability().await;
                            rows.map(|_| Outcome::Done("ok")).map_err(|e| e.to_string())
                        }
                    }
                };
                let direct = |envs: Arc<Vec<Env>>| {
                    move |client: usize| {
                        let envs = envs.clone();
                        async move {
                            let rows = raw::projection(&envs[client].pool).await;
                            rows.map(|_| Outcome::Done("ok")).map_err(|e| e.to_string())
                        }
                    }
                };
                let (mut s, mut r) = (Sample::default(), Sample::default());
                measure::run(clients, Budget::Time(timing.warmup), service(envs.clone())).await;
                measure::run(clients, Budget::Time(timing.warmup), direct(envs.clone())).await;
                for _ in 0..timing.rounds {
                    let round = Budget::Time(timing.seconds / timing.rounds);
                    s.merge(measure::run(clients, round, service(envs.clone())).await);
                    r.merge(measure::run(clients, round, direct(envs.clone())).await);
                }
                emit(Row::new(
                    &scenario,
                    "service",
                    clients,
                    params.clone(),
                    s.stats(),
                ));
                emit(Row::new(
                    &scenario,
                    "raw",
                    clients,
                    params.clone(),
                    r.stats(),
                ));
            }
            // The whole miss path of GET /slots/availability: cache GET,
            // lock, projection, JSON, store. The invalidation that makes
            // each call a miss is left out of its time.
            let env = Arc::new(envs[0].clone());
            let miss = measure::run(1, Budget::Time(timing.seconds), move |_| {
                let env = env.clone();
                async move {
                    let cache = env.app.booking.cache().ok_or("no cache")?;
                    cache.invalidate().await;
                    let started = Instant::now();
                    let served = env
                        .app
                        .booking
                        .availability_json(None)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(Outcome::Timed(served.status.as_str(), started.elapsed()))
                }
            })
            .await;
            emit(Row::new(
                &scenario,
                "miss_path",
                1,
                params.clone(),
                miss.stats(),
            ));
            if slot_count == 100 && holds == 0 {
                hits(bench, &envs, HIT_SCENARIO, timing, emit).await?;
            }
        }
    }
    Ok(())
}

/// The cached hit at today's size, the figure the hit's targets judge.
pub const HIT_SCENARIO: &str = "availability_hit.100_slots";

/// `GET /slots/availability` served from the cache, as a request with
/// auth on is served (the caller by its key, then its rate limit and the
/// GET in one script), against the same hit without auth (one GET, the
/// stored bytes checked and returned) and a raw `GET` of the same key on
/// a Redis connection of the same environment; the three in alternating
/// rounds, the order rotating. Then the hit and the raw GET call by call
/// (*paired*). The rows are `scenario`'s.
pub async fn hits(
    bench: &Bench,
    envs: &[Env],
    scenario: &str,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    const VARIANTS: [Hit; 3] = [Hit::Service, Hit::ServiceNoAuth, Hit::RedisGet];
    let keys = Arc::new(bench.cache_keys());
    for clients in [1, 8] {
        let envs = Arc::new(envs[..clients].to_vec());
        let op = |hit: Hit| {
            let (envs, keys) = (envs.clone(), keys.clone());
            move |client: usize| {
                let (envs, keys) = (envs.clone(), keys.clone());
                async move { hit.call(&envs[client], &keys).await }
            }
        };
        let mut samples = vec![Sample::default(); VARIANTS.len()];
        let mut pairs = Sample::default();
        let mut bytes = 0;
        for round in 0..timing.rounds {
            // A fresh copy at every round: a run never outlives the TTL.
            let cache = envs[0].app.booking.cache().ok_or("no cache")?;
            cache.invalidate().await;
            envs[0]
                .app
                .booking
                .availability_json(None)
                .await
                .map_err(|e| e.to_string())?;
            let mut redis = envs[0].redis.clone();
            let value: Option<Vec<u8>> = redis.get(&keys.fresh).await.map_err(|e| e.to_string())?;
            bytes = value.map_or(0, |v| v.len());
            for i in crate::scenarios::rotated(VARIANTS.len(), round) {
                if round == 0 {
                    measure::run(clients, Budget::Time(timing.warmup), op(VARIANTS[i])).await;
                }
                let budget = Budget::Time(timing.seconds / timing.rounds);
                samples[i].merge(measure::run(clients, budget, op(VARIANTS[i])).await);
            }
            pairs.merge(paired(&envs, &keys, clients, timing.seconds / timing.rounds).await);
        }
        let params = json!({ "slots": 100, "value_bytes": bytes });
        for (hit, sample) in VARIANTS.iter().zip(&samples) {
            emit(Row::new(
                scenario,
                hit.name(),
                clients,
                params.clone(),
                sample.stats(),
            ));
        }
        emit(paired_row(scenario, clients, params, &pairs));
    }
    Ok(())
}

/// The hit and the raw GET, call by call on every environment: on this
/// machine a rate moves by ±30 % from one half-second to the next (the
/// scheduler's moods), so even alternating rounds can catch the two in
/// different moods; calls that alternate share every mood.
async fn paired(
    envs: &Arc<Vec<Env>>,
    keys: &Arc<shared::cache::Keys>,
    clients: usize,
    time: Duration,
) -> Sample {
    let turn = Arc::new(AtomicU64::new(0));
    let (envs, keys) = (envs.clone(), keys.clone());
    measure::run(clients, Budget::Time(time), move |client: usize| {
        let (envs, keys, turn) = (envs.clone(), keys.clone(), turn.clone());
        async move {
            let hit = if turn.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
                Hit::Service
            } else {
                Hit::RedisGet
            };
            let started = Instant::now();
            match hit.call(&envs[client], &keys).await? {
                Outcome::Done("hit") => Ok(Outcome::Timed(hit.name(), started.elapsed())),
                other => Err(format!("{} answered {other:?}, not a hit", hit.name())),
            }
        }
    })
    .await
}

/// The *paired* row: the hits' own figures, and the two means whose ratio
/// (`service_per_get`, the GET's mean over the hit's) is the hit's rate
/// as a share of the GET's.
fn paired_row(
    scenario: &str,
    clients: usize,
    mut params: serde_json::Value,
    sample: &Sample,
) -> Row {
    let mean_us = |label: &str| {
        let (n, total) = sample
            .calls
            .iter()
            .filter(|(l, _)| *l == label)
            .fold((0u32, Duration::ZERO), |(n, t), (_, d)| (n + 1, t + *d));
        total.as_secs_f64() * 1e6 / f64::from(n.max(1))
    };
    let (hit, get) = (mean_us(Hit::Service.name()), mean_us(Hit::RedisGet.name()));
    params["service_mean_us"] = json!(measure::round(hit, 1));
    params["redis_get_mean_us"] = json!(measure::round(get, 1));
    params["service_per_get"] = json!(if hit > 0.0 {
        measure::round(get / hit, 3)
    } else {
        0.0
    });
    Row::new(
        scenario,
        "paired",
        clients,
        params,
        sample.stats_of(Hit::Service.name()),
    )
}

/// One cache hit, three ways.
#[derive(Debug, Clone, Copy)]
enum Hit {
    /// `gate.identify`, then `availability_json(caller.limit())`: the
    /// route's own path, the limit check and the GET one script.
    Service,
    /// `availability_json(None)`: the hit without auth, one GET.
    ServiceNoAuth,
    /// A raw `GET` of the key.
    RedisGet,
}

impl Hit {
    fn name(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::ServiceNoAuth => "service_no_auth",
            Self::RedisGet => "redis_get",
        }
    }

    async fn call(self, env: &Env, keys: &shared::cache::Keys) -> Result<Outcome, String> {
        let limit = match self {
            Self::Service => {
                let caller = env.identify().await.map_err(|e| e.to_string())?;
                // Unlimited, the limit script would not run at all.
                Some(caller.limit().ok_or("the bench client has no rate limit")?)
            }
            Self::ServiceNoAuth => None,
            Self::RedisGet => {
                let mut redis = env.redis.clone();
                let value: Option<Vec<u8>> =
                    redis.get(&keys.fresh).await.map_err(|e| e.to_string())?;
                return Ok(Outcome::Done(if value.is_some() { "hit" } else { "miss" }));
            }
        };
        let served = env.app.booking.availability_json(limit).await;
        served
            .map(|s| Outcome::Done(s.status.as_str()))
            .map_err(|e| e.to_string())
    }
}
