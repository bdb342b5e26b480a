//! The scale group's dataset: its fill, the seed's unbounded list at this
//! size, and the availability indexes' migration timed on it.

use super::CAPACITY;
use crate::measure;
use crate::report::Row;
use crate::setup::Bench;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Slots per hour: 115 docks, so that a year is about a million slots.
const DOCKS: u64 = 115;
const CONFIRMED_PER_SLOT: u32 = 6;
/// Slots filled per INSERT … SELECT (10 holds each).
const CHUNK: u64 = 100_000;
/// Lambda's response payload limit (6 MB).
const LAMBDA_RESPONSE_LIMIT: usize = 6 * 1024 * 1024;

/// The dataset, written by the server from its sequence tables.
pub(super) async fn fill(bench: &Bench, slots: u64) -> Result<(), String> {
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
pub(super) async fn seed_list(bench: &Bench, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
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
pub(super) async fn index_migration(
    bench: &Bench,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    const MIGRATION: &str =
        include_str!("../../../migrations/20261204000001_availability_indexes.sql");
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
