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

use crate::measure;
use crate::report::Row;
use crate::scenarios::Timing;
use crate::setup::Bench;
use serde_json::json;
use std::time::Instant;

mod admin;
mod dataset;
mod pages;

/// Each slot's capacity.
const CAPACITY: u32 = 20;
/// The 100-slot cached call, measured by this group.
pub const HIT_100_SLOTS: &str = "scale.availability_hit.100_slots";

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
    dataset::fill(bench, slots).await?;
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
    dataset::index_migration(bench, emit).await?;
    dataset::seed_list(bench, emit).await?;
    let envs = bench.envs(1).await?;
    pages::pages(bench, &envs, timing, emit).await?;
    admin::slot_admin(bench, &envs, timing, emit).await?;
    pages::sold_out(bench, &envs, timing, emit).await?;
    Ok(())
}

async fn buffer_pool_mib(bench: &Bench) -> u64 {
    sqlx::query_scalar::<_, u64>("SELECT @@innodb_buffer_pool_size")
        .fetch_one(&bench.admin)
        .await
        .map_or(0, |bytes| bytes / 1_048_576)
}
