//! Issue 45: the sweeper's check of one slot does not grow with the slot's
//! history. Two slots, one with 1,000 ended holds and one with 1,000,000
//! (cancelled within the retention, or expired before the watermark: rows
//! no counter counts and retention keeps), each with the same few active
//! holds; the check of each (`Booking::check_one`: lock, recount, line,
//! retention, commit) called by turns, call by call, so that both arms
//! share every mood of the machine. The ratio is the short history's mean
//! time over the long one's (1.0: no difference).

use crate::measure::{self, Budget, Outcome, Sample};
use crate::report::Row;
use crate::scenarios::Timing;
use crate::setup::Bench;
use serde_json::json;
use shared::domain::SlotId;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const SCENARIO: &str = "sweep.ended_history";
pub const SHORT: u64 = 1_000;
pub const LONG: u64 = 1_000_000;

const DIGITS: &str = "(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
     UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
     UNION ALL SELECT 8 UNION ALL SELECT 9)";

/// A slot with `rows` ended holds and 3 active ones, its counters true.
async fn slot_with_history(bench: &Bench, rows: u64) -> Result<SlotId, String> {
    let e = |err: sqlx::Error| err.to_string();
    let slot = sqlx::query(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining) VALUES \
         (UTC_TIMESTAMP() + INTERVAL 1 DAY, UTC_TIMESTAMP() + INTERVAL 25 HOUR, 10, 10)",
    )
    .execute(&bench.admin)
    .await
    .map_err(e)?
    .last_insert_id();
    let numbers = format!(
        "SELECT a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 10000 * f.n AS i \
         FROM {DIGITS} a, {DIGITS} b, {DIGITS} c, {DIGITS} d, {DIGITS} f"
    );
    // In chunks of 100,000 (0 ≤ i < n, each once): one statement's undo
    // stays small; 1 M ended holds span 2.3 days, within the retention.
    let mut written = 0;
    while written < rows {
        let n = (rows - written).min(100_000);
        let insert = format!(
            "INSERT INTO holds (slot_id, client_id, idempotency_key, status, expires_at, \
             cancelled_at, created_at, updated_at) \
             SELECT ?, ?, UUID(), IF(i % 2 = 0, 'cancelled', 'held'), \
             UTC_TIMESTAMP(6) - INTERVAL 60 SECOND - INTERVAL (i + ?) * 200000 MICROSECOND, \
             IF(i % 2 = 0, UTC_TIMESTAMP(6) - INTERVAL 120 SECOND - INTERVAL (i + ?) * 200000 MICROSECOND, NULL), \
             UTC_TIMESTAMP(6) - INTERVAL 400 SECOND - INTERVAL (i + ?) * 200000 MICROSECOND, \
             UTC_TIMESTAMP(6) FROM ({numbers}) numbers WHERE i < {n}"
        );
        sqlx::query(sqlx::AssertSqlSafe(insert))
            .bind(slot)
            .bind(bench.client.0)
            .bind(written)
            .bind(written)
            .bind(written)
            .execute(&bench.admin)
            .await
            .map_err(e)?;
        written += n;
    }
    sqlx::query(
        "INSERT INTO holds (slot_id, client_id, idempotency_key, status, expires_at, created_at, \
         updated_at) SELECT ?, ?, UUID(), 'held', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, \
         UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) t",
    )
    .bind(slot)
    .bind(bench.client.0)
    .execute(&bench.admin)
    .await
    .map_err(e)?;
    sqlx::query("UPDATE slots SET held = 3, reclaimed_until = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(slot)
        .execute(&bench.admin)
        .await
        .map_err(e)?;
    Ok(SlotId(slot))
}

pub async fn run(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    bench.reset().await?;
    let started = Instant::now();
    let short = slot_with_history(bench, SHORT).await?;
    let long = slot_with_history(bench, LONG).await?;
    eprintln!(
        "bench: {SHORT} + {LONG} ended holds written in {:?}",
        started.elapsed()
    );
    let envs = Arc::new(bench.envs(1).await?);
    let turn = Arc::new(AtomicU64::new(0));
    let op = {
        let (envs, turn) = (envs.clone(), turn.clone());
        move |_client: usize| {
            let (envs, turn) = (envs.clone(), turn.clone());
            async move {
                let (slot, label) = if turn.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
                    (short, "ended_1k")
                } else {
                    (long, "ended_1m")
                };
                let started = Instant::now();
                let found = envs[0]
                    .app
                    .booking
                    .check_one(slot)
                    .await
                    .map_err(|err| format!("{label}: {err}"))?;
                if !found {
                    return Err(format!("{label}: the slot is gone"));
                }
                Ok(Outcome::Timed(label, started.elapsed()))
            }
        }
    };
    measure::run(1, Budget::Time(timing.warmup), op.clone()).await;
    let sample = measure::run(1, Budget::Time(timing.seconds), op).await;
    emit(row(&sample));
    bench.reset().await
}

/// The short arm's figures, and both means with their ratio
/// (`long_per_short`: the short history's mean time over the long one's,
/// the long slot's rate as a share of the short one's).
fn row(sample: &Sample) -> Row {
    let mean_us = |label: &str| {
        let (n, total) = sample
            .calls
            .iter()
            .filter(|(l, _)| *l == label)
            .fold((0u32, Duration::ZERO), |(n, t), (_, d)| (n + 1, t + *d));
        total.as_secs_f64() * 1e6 / f64::from(n.max(1))
    };
    let (short, long) = (mean_us("ended_1k"), mean_us("ended_1m"));
    let params = json!({
        "ended_short": SHORT,
        "ended_long": LONG,
        "short_mean_us": measure::round(short, 1),
        "long_mean_us": measure::round(long, 1),
        "long_per_short": if long > 0.0 { measure::round(short / long, 3) } else { 0.0 },
        "errors": sample.errors,
    });
    Row::new(SCENARIO, "paired", 1, params, sample.stats_of("ended_1k"))
}
