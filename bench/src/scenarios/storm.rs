//! The sold-out storm: 1,000 holds at once on a slot with no seat left.

use super::Variant;
use crate::measure::{self, Budget, Outcome, Sample};
use crate::report::Row;
use crate::setup::{Bench, Env};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// What a storm call runs: the service's hold, the raw sequence on the
/// same connection, or the floor: the slot's row read by primary key (one
/// InnoDB point read at the same concurrency, on the same connections).
#[derive(Debug, Clone, Copy)]
enum StormCall {
    Hold(Variant),
    PointRead,
}

impl StormCall {
    fn name(self) -> &'static str {
        match self {
            Self::Hold(variant) => variant.name(),
            Self::PointRead => "point_read",
        }
    }

    /// What the floor's calls are counted as: a read, not a refusal.
    const READ: &'static str = "read";

    /// The answers whose latency the storm reports: the 409s, or for the
    /// floor its reads.
    fn measured(self) -> &'static str {
        match self {
            Self::Hold(_) => "409",
            Self::PointRead => Self::READ,
        }
    }

    async fn call(self, env: &Env, slot: u64) -> Result<Outcome, String> {
        match self {
            Self::Hold(variant) => variant.hold(env, slot, 1).await,
            Self::PointRead => sqlx::query("SELECT remaining FROM slots WHERE id = ?")
                .bind(slot)
                .execute(&env.pool)
                .await
                .map(|_| Outcome::Done(Self::READ))
                .map_err(|e| e.to_string()),
        }
    }
}

/// The sold-out storm: 1,000 holds released at once on a slot with no
/// seat left (and, as a check, on a slot with its last seat), served by
/// `envs` warm environments; several storms per variant, alternating, on
/// a fresh slot each. The latency is each call's own time; the makespan is
/// the time until the last of a storm's 1,000 was answered.
pub async fn storm(bench: &Bench, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    const CALLS: u64 = 1_000;
    const CAPACITY: u32 = 10;
    const STORMS: usize = 5;
    bench.reset().await?;
    for (scenario, envs_n, held) in [
        ("storm.sold_out", 8, CAPACITY),
        ("storm.sold_out", 20, CAPACITY),
        ("storm.sold_out", 100, CAPACITY),
        ("storm.last_seat", 20, CAPACITY - 1),
    ] {
        let envs = Arc::new(bench.envs(envs_n).await?);
        let later = bench.db_now_plus(Duration::from_secs(300)).await?;
        let mut calls = vec![
            StormCall::Hold(Variant::Service),
            StormCall::Hold(Variant::Raw),
        ];
        if held == CAPACITY {
            calls.push(StormCall::PointRead);
        }
        // Warm environments, as a storm finds them: each has answered a
        // hold on a sold-out slot before (its statements are prepared on
        // its connection). A cold start is measured on its own.
        let warm_slot = bench.insert_slots(1, CAPACITY).await?[0];
        bench
            .insert_holds(&[warm_slot], CAPACITY as usize, later)
            .await?;
        for call in &calls {
            let (envs, call) = (envs.clone(), *call);
            let warm = measure::run(envs_n, Budget::Calls(envs_n as u64 * 2), move |client| {
                let envs = envs.clone();
                async move { call.call(&envs[client], warm_slot).await }
            })
            .await;
            if warm.errors > 0 {
                return Err(format!("storm warm-up: {:?}", warm.first_error));
            }
        }
        let mut samples = vec![Sample::default(); calls.len()];
        let mut makespans = vec![Vec::new(); calls.len()];
        let mut won = vec![0i64; calls.len()];
        // InnoDB's count of row lock waits: a 409 that queued on the
        // slot's row lock would show here.
        let mut lock_waits = vec![0u64; calls.len()];
        let mut oversold = false;
        for _ in 0..STORMS {
            for (i, call) in calls.iter().enumerate() {
                let slot = bench.insert_slots(1, CAPACITY).await?[0];
                bench.insert_holds(&[slot], held as usize, later).await?;
                let (envs, call) = (envs.clone(), *call);
                let waits_before = bench.row_lock_waits().await?;
                let sample = measure::run(envs_n, Budget::Calls(CALLS), move |client| {
                    let envs = envs.clone();
                    async move { call.call(&envs[client], slot).await }
                })
                .await;
                lock_waits[i] += bench.row_lock_waits().await? - waits_before;
                let active = bench.active_holds(slot).await?;
                won[i] += active - i64::from(held);
                oversold |= active > i64::from(CAPACITY);
                makespans[i].push(measure::ms(sample.elapsed));
                samples[i].merge(sample);
            }
        }
        oversold |= !bench.oversold_slots().await?.is_empty();
        for (i, call) in calls.iter().enumerate() {
            let refusals = samples[i].stats_of(call.measured());
            let params = json!({
                "calls_per_storm": CALLS,
                "storms": STORMS,
                "capacity": CAPACITY,
                "active_before": held,
                "won": won[i],
                "row_lock_waits": lock_waits[i],
                "oversold": oversold,
                "makespans_ms": makespans[i],
                "p50_409_ms": refusals.p50_ms,
                "p99_409_ms": refusals.p99_ms,
                "max_409_ms": refusals.max_ms,
            });
            emit(Row::new(
                scenario,
                call.name(),
                envs_n,
                params,
                samples[i].stats(),
            ));
        }
        drop(envs);
    }
    Ok(())
}
