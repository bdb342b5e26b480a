//! The `scale` group: availability and slot administration at 1,000,000
//! slots and 10,000,000 holds of history (SPEC §10, §11), in a database of
//! its own (`slot_booking_bench_scale`), filled by the server itself from
//! MariaDB's sequence tables (`seq_0_to_N`) in a few minutes.
//!
//! The slots are a year of hourly windows of 115 docks, six months before
//! and after now, created in time order (ids follow `starts_at`, as an
//! admin's batch job makes them). Each has 10 holds of history: 6
//! confirmed, 2 cancelled, 2 that expired long ago (reclaimed); one slot in
//! 50 of those to come also has an active hold, and one in 500 a hold that
//! expired a minute ago and is still counted. `BENCH_SCALE_SLOTS` shrinks
//! it (for a quick look; the figures then say so).

use crate::measure::{self, Budget, Outcome, Sample};
use crate::report::Row;
use crate::scenarios::{Timing, refused, rotated};
use crate::setup::{Bench, Env};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Slots per hour: 115 docks, so that a year is about a million slots.
const DOCKS: u64 = 115;
const CAPACITY: u32 = 20;
const CONFIRMED_PER_SLOT: u32 = 6;
/// Slots filled per INSERT … SELECT (10 holds each).
const CHUNK: u64 = 100_000;
/// The 100-slot cached call, measured by this group.
pub const HIT_100_SLOTS: &str = "scale.availability_hit.100_slots";
/// Lambda's response payload limit (6 MB).
const LAMBDA_RESPONSE_LIMIT: usize = 6 * 1024 * 1024;

/// How many slots to make: `BENCH_SCALE_SLOTS`, else a million.
fn slot_count() -> u64 {
    crate::setup::count_from_env("BENCH_SCALE_SLOTS", 10_000, 1_000_000)
}

pub async fn run(
    server: &str,
    redis_url: &str,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let bench = Bench::create(server, "slot_booking_bench_scale", redis_url).await?;
    let done = measured(&bench, timing, emit).await;
    if std::env::var("BENCH_KEEP_DB").is_ok_and(|v| v == "1") {
        eprintln!("bench: kept database {}", bench.url);
    } else {
        bench.drop_database().await;
    }
    done
}

async fn measured(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    // The cached call at today's size first (100 slots, as the
    // projection group measures it), so that this group alone can judge
    // the hit against its figure before SPEC §11.
    bench.insert_slots(100, crate::setup::ROOMY).await?;
    let envs = bench.envs(8).await?;
    crate::reads::hits(bench, &envs, HIT_100_SLOTS, timing, emit).await?;
    drop(envs);
    bench.reset().await?;

    let slots = slot_count();
    let started = Instant::now();
    fill(bench, slots).await?;
    let holds: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM holds")
        .fetch_one(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query("ANALYZE TABLE slots, holds")
        .execute(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    emit(Row::info(
        "scale.dataset",
        "fill",
        json!({
            "slots": slots,
            "holds": holds,
            "fill_seconds": measure::round(started.elapsed().as_secs_f64(), 1),
            "innodb_buffer_pool_mib": buffer_pool_mib(bench).await,
        }),
    ));
    index_migration(bench, emit).await?;
    seed_list(bench, emit).await?;
    let envs = bench.envs(1).await?;
    pages(bench, &envs, timing, emit).await?;
    slot_admin(bench, &envs, timing, emit).await?;
    Ok(())
}

async fn buffer_pool_mib(bench: &Bench) -> u64 {
    sqlx::query_scalar::<_, u64>("SELECT @@innodb_buffer_pool_size")
        .fetch_one(&bench.admin)
        .await
        .map_or(0, |bytes| bytes / 1_048_576)
}

/// The dataset, written by the server from its sequence tables.
async fn fill(bench: &Bench, slots: u64) -> Result<(), String> {
    let exec = |sql: String| async move {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&bench.admin)
            .await
            .map_err(|e| e.to_string())
    };
    // One `now` for the whole dataset. Slot k starts at hour k / DOCKS of
    // the year around it.
    let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
        .fetch_one(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    let now = now.format("'%Y-%m-%d %H:%M:%S%.6f'").to_string();
    let half = slots / DOCKS / 2;
    let remaining = CAPACITY - CONFIRMED_PER_SLOT;
    exec(format!(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining, held, reclaimed_until, \
         checked_at, created_at, updated_at) \
         SELECT {now} - INTERVAL {half} HOUR + INTERVAL (seq DIV {DOCKS}) HOUR, \
         {now} - INTERVAL {half} HOUR + INTERVAL (seq DIV {DOCKS}) HOUR + INTERVAL 1 HOUR, \
         {CAPACITY}, {remaining}, 0, {now}, {now}, {now}, {now} \
         FROM seq_0_to_{} ORDER BY seq",
        slots - 1
    ))
    .await?;
    let key = |k: &str| {
        format!("CONCAT(LPAD(HEX(s.id), 8, '0'), '-0000-4000-8000-', LPAD(HEX({k}), 12, '0'))")
    };
    // History: made a day before the slot starts (or before now), each
    // hold's key in id order so the UNIQUE index is appended to.
    let made = format!("LEAST(s.starts_at, {now}) - INTERVAL 1 DAY");
    let mut lo = 0;
    while lo < slots {
        let hi = (lo + CHUNK).min(slots);
        exec(format!(
            "INSERT INTO holds (slot_id, client_id, quantity, idempotency_key, status, expires_at, \
             confirmed_at, cancelled_at, created_at, updated_at) \
             SELECT s.id, {client}, 1, {key}, \
             CASE WHEN k.seq < 6 THEN 'confirmed' WHEN k.seq < 8 THEN 'cancelled' ELSE 'held' END, \
             {made} + INTERVAL 5 MINUTE, \
             IF(k.seq < 6, {made} + INTERVAL 2 MINUTE, NULL), \
             IF(k.seq IN (6, 7), {made} + INTERVAL 3 MINUTE, NULL), {made}, {made} \
             FROM slots s JOIN seq_0_to_9 k WHERE s.id > {lo} AND s.id <= {hi} ORDER BY s.id, k.seq",
            client = bench.client.0,
            key = key("k.seq"),
        ))
        .await?;
        lo = hi;
        eprintln!("bench: scale: {hi} of {slots} slots have their history");
    }
    // Today's traffic on the slots to come: an active hold on one in 50,
    // and on one in 500 a hold that expired a minute ago, still counted
    // (its slot's watermark is older), as the reclaim and sweeper find them.
    exec(format!(
        "INSERT INTO holds (slot_id, client_id, quantity, idempotency_key, status, expires_at, \
         created_at, updated_at) \
         SELECT s.id, {client}, 1, {key}, 'held', {now} + INTERVAL 10 MINUTE, {now}, {now} \
         FROM slots s WHERE s.starts_at > {now} AND s.id % 50 = 0",
        client = bench.client.0,
        key = key("10"),
    ))
    .await?;
    exec(format!(
        "INSERT INTO holds (slot_id, client_id, quantity, idempotency_key, status, expires_at, \
         created_at, updated_at) \
         SELECT s.id, {client}, 1, {key}, 'held', {now} - INTERVAL 1 MINUTE, \
         {now} - INTERVAL 6 MINUTE, {now} - INTERVAL 6 MINUTE \
         FROM slots s WHERE s.starts_at > {now} AND s.id % 500 = 0",
        client = bench.client.0,
        key = key("11"),
    ))
    .await?;
    exec(format!(
        "UPDATE slots s SET s.held = (s.id % 50 = 0) + (s.id % 500 = 0), \
         s.reclaimed_until = IF(s.id % 500 = 0, {now} - INTERVAL 10 MINUTE, s.reclaimed_until) \
         WHERE s.starts_at > {now} AND s.id % 50 = 0"
    ))
    .await?;
    Ok(())
}

/// The list the seed served: every slot ever made, with what is bookable,
/// in one response (the projection as it was before SPEC §11; kept here
/// as the reference).
const SEED_LIST: &str = concat!(
    "SELECT s.id, s.capacity, CAST(GREATEST(",
    "CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) + COALESCE(e.n, 0), 0",
    ") AS UNSIGNED) AS bookable, s.starts_at, s.ends_at ",
    "FROM slots s LEFT JOIN (",
    "SELECT s.id AS slot_id, CAST(SUM(x.quantity) AS SIGNED) AS n, MIN(x.expires_at) AS due ",
    "FROM holds x JOIN slots s ON s.id = x.slot_id ",
    "WHERE x.status = 'held' AND x.expires_at > s.reclaimed_until AND x.expires_at <= UTC_TIMESTAMP(6) ",
    "AND x.expires_at > (SELECT MIN(m.reclaimed_until) FROM slots m WHERE m.held > 0) ",
    "GROUP BY s.id",
    ") e ON e.slot_id = s.id ORDER BY s.id"
);

type SeedRow = (
    u64,
    u32,
    u64,
    chrono::DateTime<chrono::Utc>,
    chrono::DateTime<chrono::Utc>,
);

/// The seed's unbounded list at this size: how long the query and its
/// JSON take, and how far the body is over Lambda's response limit.
async fn seed_list(bench: &Bench, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let mut took = Vec::new();
    let mut bytes = 0;
    let mut rows = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let listed: Vec<SeedRow> = sqlx::query_as(SEED_LIST)
            .fetch_all(&bench.admin)
            .await
            .map_err(|e| e.to_string())?;
        let body: Vec<shared::domain::SlotAvailability> = listed
            .into_iter()
            .map(
                |(id, capacity, bookable, starts_at, ends_at)| shared::domain::SlotAvailability {
                    slot_id: shared::domain::SlotId(id),
                    capacity,
                    remaining: u32::try_from(bookable).unwrap_or(capacity).min(capacity),
                    starts_at,
                    ends_at,
                },
            )
            .collect();
        rows = body.len();
        bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?.len();
        took.push(started.elapsed());
    }
    took.sort_unstable();
    emit(Row::info(
        "scale.seed_list",
        "unbounded",
        json!({
            "rows": rows,
            "body_bytes": bytes,
            "times_over_lambda_limit": measure::round(bytes as f64 / LAMBDA_RESPONSE_LIMIT as f64, 1),
            "seconds_best": measure::round(took[0].as_secs_f64(), 2),
            "seconds_worst": measure::round(took[took.len() - 1].as_secs_f64(), 2),
        }),
    ));
    Ok(())
}

/// The availability indexes' migration, timed on this table: the indexes
/// are dropped, then the migration's own statement runs while a writer
/// keeps updating and inserting slots, whose latencies show whether the
/// ALTER blocked writes.
async fn index_migration(bench: &Bench, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    const MIGRATION: &str =
        include_str!("../../migrations/20261204000001_availability_indexes.sql");
    sqlx::query(
        "ALTER TABLE slots DROP INDEX slots_starts_at_index, DROP INDEX slots_ends_at_index",
    )
    .execute(&bench.admin)
    .await
    .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (pool, stop) = (bench.admin.clone(), stop.clone());
        tokio::spawn(async move {
            let mut took = Vec::new();
            let mut n: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let started = Instant::now();
                let done = if n.is_multiple_of(10) {
                    sqlx::query(
                        "INSERT INTO slots (starts_at, ends_at, capacity, remaining) \
                         VALUES (UTC_TIMESTAMP(6) + INTERVAL 3000 DAY, \
                         UTC_TIMESTAMP(6) + INTERVAL 3001 DAY, 1, 1)",
                    )
                    .execute(&pool)
                    .await
                } else {
                    sqlx::query("UPDATE slots SET checked_at = checked_at WHERE id = ?")
                        .bind(n.wrapping_mul(7_919) % 1_000 + 1)
                        .execute(&pool)
                        .await
                };
                if done.is_ok() {
                    took.push(started.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            took
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    sqlx::raw_sql(MIGRATION)
        .execute(&bench.admin)
        .await
        .map_err(|e| format!("the index migration: {e}"))?;
    let alter = started.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let mut writes = writer.await.map_err(|e| e.to_string())?;
    writes.sort_unstable();
    sqlx::query("DELETE FROM slots WHERE starts_at > UTC_TIMESTAMP(6) + INTERVAL 2999 DAY")
        .execute(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query("ANALYZE TABLE slots")
        .execute(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
    emit(Row::info(
        "scale.index_migration",
        "alter_in_place",
        json!({
            "seconds": measure::round(alter.as_secs_f64(), 2),
            "writes_meanwhile": writes.len(),
            "write_p99_ms": measure::percentile_ms(&writes, 0.99),
            "write_max_ms": writes.last().map_or(0.0, |d| measure::ms(*d)),
        }),
    ));
    Ok(())
}

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
async fn pages(
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

/// `GET /slots/{id}` scattered over the million, and `POST /slots` with
/// 500 slots at a time (far in the future, made last), through the
/// service as the routes call it (the caller admitted first).
async fn slot_admin(
    bench: &Bench,
    envs: &[Env],
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let env = Arc::new(envs[0].clone());
    let slots = slot_count();
    let next = Arc::new(AtomicU64::new(0));
    let get = {
        let (env, next) = (env.clone(), next.clone());
        move |_| {
            let env = env.clone();
            let n = next.fetch_add(1, Ordering::Relaxed);
            let id = n.wrapping_mul(104_729) % slots + 1;
            async move {
                env.admit().await.map_err(|e| e.to_string())?;
                match env.app.slots.get(shared::domain::SlotId(id)).await {
                    Ok(_) => Ok(Outcome::Done("200")),
                    Err(err) => refused(&err),
                }
            }
        }
    };
    let sample = measure::run(1, Budget::Time(timing.seconds), get).await;
    emit(Row::new(
        "scale.get_slot",
        "service",
        1,
        json!({"slots": slots}),
        sample.stats(),
    ));

    let base = bench
        .db_now_plus(Duration::from_secs(86_400 * 2_000))
        .await?;
    let batch = Arc::new(AtomicU64::new(0));
    let create = {
        let (env, batch) = (env.clone(), batch.clone());
        move |_| {
            let env = env.clone();
            let b = batch.fetch_add(1, Ordering::Relaxed) as i64;
            async move {
                let new: Vec<shared::slots::NewSlot> = (0..500)
                    .map(|i| {
                        let starts_at = base + chrono::Duration::hours(b * 500 + i);
                        shared::slots::NewSlot {
                            starts_at,
                            ends_at: starts_at + chrono::Duration::hours(1),
                            capacity: CAPACITY,
                        }
                    })
                    .collect();
                env.admit().await.map_err(|e| e.to_string())?;
                match env.app.slots.create(&new).await {
                    Ok(made) if made.len() == 500 => Ok(Outcome::Done("201")),
                    Ok(made) => Err(format!("{} slots made of 500", made.len())),
                    Err(err) => refused(&err),
                }
            }
        }
    };
    let sample = measure::run(1, Budget::Calls(20), create).await;
    emit(Row::new(
        "scale.create_slots",
        "service_500",
        1,
        json!({"slots_per_call": 500}),
        sample.stats(),
    ));
    Ok(())
}
