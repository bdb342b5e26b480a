//! The scale group's availability pages: one page over and over, whole
//! walks following `next`, and the cached call without parameters.

use crate::measure::{self, Budget, Outcome, Sample};
use crate::report::Row;
use crate::scenarios::{Timing, refused, rotated};
use crate::setup::{Bench, Env};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A window of `days` days starting `from_days` from now (negative: in
/// the past), as the database's clock has it.
async fn window(
    bench: &Bench,
    from_days: i64,
    days: i64,
) -> Result<shared::slots::cursor::Filters, String> {
    let day = Duration::from_secs(86_400);
    let from = if from_days >= 0 {
        bench.db_now_plus(day * from_days as u32).await?
    } else {
        bench.db_now_plus(Duration::ZERO).await? - chrono::Duration::days(-from_days)
    };
    Ok(shared::slots::cursor::Filters {
        from: Some(from),
        to: Some(from + chrono::Duration::days(days)),
        available: false,
    })
}

/// The pages: one page of 1,000 with `from`/`to` (a week from tomorrow;
/// also with `available=true`), read over and over; a whole walk of a
/// year-long window and of the not-ended default, following `next`; the
/// call without parameters served from a warm cache (with auth, as the
/// route serves it) and recomputed after an invalidation.
pub(super) async fn pages(
    bench: &Bench,
    envs: &[Env],
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    use shared::slots::availability::Query;
    let env = Arc::new(envs[0].clone());
    let week = window(bench, 1, 7).await?;
    for (variant, available) in [("from_to_week", false), ("from_to_week_available", true)] {
        let query = Query {
            filters: shared::slots::cursor::Filters { available, ..week },
            limit: 1000,
            cursor: None,
            scan: shared::slots::availability::DEFAULT_SCAN,
        };
        let env = env.clone();
        let sample = measure::run(1, Budget::Time(timing.seconds), move |_| {
            let env = env.clone();
            async move {
                env.admit().await.map_err(|e| e.to_string())?;
                match env.app.slots.availability(&query).await {
                    Ok(page) if page.next.is_some() => Ok(Outcome::Done("200+next")),
                    Ok(_) => Ok(Outcome::Done("200")),
                    Err(err) => refused(&err),
                }
            }
        })
        .await;
        emit(Row::new(
            "scale.page",
            variant,
            1,
            json!({"limit": 1000, "window_days": 7}),
            sample.stats(),
        ));
    }
    let year = window(bench, -182, 365).await?;
    for (variant, filters) in [
        ("walk_year_window", year),
        ("walk_not_ended", Default::default()),
    ] {
        let (sample, seen) = walk(&env, filters).await?;
        emit(Row::new(
            "scale.walk",
            variant,
            1,
            json!({"limit": 1000, "slots_seen": seen}),
            sample.stats(),
        ));
    }

    let hit = {
        let env = env.clone();
        move |_| {
            let env = env.clone();
            async move {
                let caller = env.identify().await.map_err(|e| e.to_string())?;
                match env.app.booking.availability_json(caller.limit()).await {
                    Ok(served) => Ok(Outcome::Done(served.status.as_str())),
                    Err(err) => refused(&err),
                }
            }
        }
    };
    measure::run(1, Budget::Calls(3), hit.clone()).await;
    let mut samples = [Sample::default(), Sample::default()];
    for round in 0..timing.rounds {
        for i in rotated(2, round) {
            let budget = Budget::Time(timing.seconds / timing.rounds);
            let sample = if i == 0 {
                measure::run(1, budget, hit.clone()).await
            } else {
                let env = env.clone();
                measure::run(1, budget, move |_| {
                    let env = env.clone();
                    async move {
                        let mut redis = env.redis.clone();
                        let keys = shared::cache::Keys::new(&env.app.config.cache_namespace);
                        let value: Option<Vec<u8>> =
                            redis::AsyncCommands::get(&mut redis, &keys.fresh)
                                .await
                                .map_err(|e| e.to_string())?;
                        Ok(Outcome::Done(if value.is_some() { "hit" } else { "miss" }))
                    }
                })
                .await
            };
            samples[i].merge(sample);
        }
    }
    let value_bytes = cached_bytes(&env).await;
    for (variant, sample) in ["service", "redis_get"].iter().zip(&samples) {
        emit(Row::new(
            "scale.no_parameters_hit",
            variant,
            1,
            json!({"value_bytes": value_bytes}),
            sample.stats(),
        ));
    }
    let miss = {
        let env = env.clone();
        move |_| {
            let env = env.clone();
            async move {
                if let Some(cache) = env.app.booking.cache() {
                    cache.invalidate().await;
                }
                let started = Instant::now();
                match env.app.booking.availability_json(None).await {
                    Ok(served) => Ok(Outcome::Timed(served.status.as_str(), started.elapsed())),
                    Err(err) => refused(&err),
                }
            }
        }
    };
    let sample = measure::run(1, Budget::Calls(20), miss).await;
    emit(Row::new(
        "scale.no_parameters_miss",
        "service",
        1,
        json!({}),
        sample.stats(),
    ));
    Ok(())
}

async fn cached_bytes(env: &Env) -> usize {
    let mut redis = env.redis.clone();
    let keys = shared::cache::Keys::new(&env.app.config.cache_namespace);
    redis::AsyncCommands::get::<_, Option<Vec<u8>>>(&mut redis, &keys.fresh)
        .await
        .ok()
        .flatten()
        .map_or(0, |v| v.len())
}

/// One walk to the end, following `next`: each page's latency, and how
/// many slots were seen (each once: the ids must only grow).
async fn walk(env: &Env, filters: shared::slots::cursor::Filters) -> Result<(Sample, u64), String> {
    use shared::slots::availability::Query;
    use shared::slots::cursor::Cursor;
    let mut sample = Sample::default();
    let started = Instant::now();
    let mut cursor = None;
    let mut seen = 0u64;
    let mut last = 0u64;
    loop {
        let query = Query {
            filters,
            limit: 1000,
            cursor,
            scan: shared::slots::availability::DEFAULT_SCAN,
        };
        let took = Instant::now();
        env.admit().await.map_err(|e| e.to_string())?;
        let page = env
            .app
            .slots
            .availability(&query)
            .await
            .map_err(|e| e.to_string())?;
        sample.calls.push(("200", took.elapsed()));
        let slots: Vec<serde_json::Value> =
            serde_json::from_slice(&page.body).map_err(|e| e.to_string())?;
        for slot in &slots {
            let id = slot["slot_id"].as_u64().unwrap_or(0);
            if id <= last {
                return Err(format!("walk: slot {id} after {last}"));
            }
            last = id;
        }
        seen += slots.len() as u64;
        match page.next {
            Some(next) => {
                cursor =
                    Some(Cursor::decode(&next, &filters).map_err(|e| format!("cursor: {e:?}"))?)
            }
            None => break,
        }
    }
    sample.elapsed = started.elapsed();
    Ok((sample, seen))
}

/// `from=1000-01-01T00:00:00Z&available=true`, the page a bot would ask for
/// to make the database scan the whole table (SPEC §16).
pub const SOLD_OUT_FROM: &str = "1000-01-01T00:00:00Z";

/// Every slot sold out, then the first page of [`SOLD_OUT_FROM`] with
/// `available=true`, over and over, as the route asks for it (its default
/// page of 100, the scan limit of `AVAILABILITY_SCAN_LIMIT`'s default):
/// nothing to find, so each page stops after the slots it may examine and
/// answers an empty page with `next`. Sold out by the counters, as bookings
/// leave a slot: `remaining` = `held` (every seat not held is booked), and
/// nothing expired still counted. Last: it changes the dataset.
pub(super) async fn sold_out(
    bench: &Bench,
    envs: &[Env],
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    use shared::slots::availability::{DEFAULT_SCAN, Query};
    let started = Instant::now();
    sqlx::query("UPDATE slots SET remaining = held, reclaimed_until = UTC_TIMESTAMP(6)")
        .execute(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    let sell_out_seconds = measure::round(started.elapsed().as_secs_f64(), 1);
    let from = chrono::DateTime::parse_from_rfc3339(SOLD_OUT_FROM)
        .map_err(|e| e.to_string())?
        .with_timezone(&chrono::Utc);
    let query = Query {
        filters: shared::slots::cursor::Filters {
            from: Some(from),
            to: None,
            available: true,
        },
        limit: 100,
        cursor: None,
        scan: DEFAULT_SCAN,
    };
    let env = Arc::new(envs[0].clone());
    let found = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sample = {
        let found = found.clone();
        measure::run(1, Budget::Time(timing.seconds), move |_| {
            let (env, found) = (env.clone(), found.clone());
            async move {
                env.admit().await.map_err(|e| e.to_string())?;
                match env.app.slots.availability(&query).await {
                    Ok(page) => {
                        let rows = serde_json::from_slice::<Vec<serde_json::Value>>(&page.body)
                            .map_err(|e| e.to_string())?
                            .len() as u64;
                        found.fetch_add(rows, std::sync::atomic::Ordering::Relaxed);
                        Ok(Outcome::Done(match (rows, page.next.is_some()) {
                            (0, true) => "200 empty+next",
                            (0, false) => "200 empty",
                            (_, true) => "200+next",
                            (_, false) => "200",
                        }))
                    }
                    Err(err) => refused(&err),
                }
            }
        })
        .await
    };
    emit(Row::new(
        "scale.page",
        "from_1000_available_sold_out",
        1,
        json!({
            "from": SOLD_OUT_FROM,
            "limit": 100,
            "scan_limit": DEFAULT_SCAN,
            "slots_found": found.load(std::sync::atomic::Ordering::Relaxed),
            "sell_out_seconds": sell_out_seconds,
        }),
        sample.stats(),
    ));
    Ok(())
}
