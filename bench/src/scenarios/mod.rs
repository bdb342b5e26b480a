//! The write scenarios in process: hold and confirm through the service
//! as a request reaches it (the gate: the caller by its key, its rate
//! limit; then `shared::Booking`) against the raw statement sequences on
//! the same connections, the seed's count-based hold as a reference, and
//! the sold-out storm.
//!
//! Service and raw run in alternating rounds, the order rotating each
//! round, on twin slots (each variant its own, seeded alike), so drift of
//! the machine during a scenario weighs on both the same way.

use crate::measure::{self, Budget, Sample};
use crate::report::Row;
use crate::setup::{Bench, Env, ROOMY};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod confirm;
mod storm;
mod variant;
pub(crate) use variant::HOLD_TTL_MICROS;

pub(crate) use confirm::confirm_cases;
pub use confirm::{confirms, outbox, revision};
pub use storm::storm;
pub(crate) use variant::Variant;
pub use variant::refused;

/// How the bench runs: time per measured variant, split in rounds.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub seconds: Duration,
    pub rounds: u32,
    pub warmup: Duration,
}

impl Timing {
    pub(crate) fn round(&self) -> Duration {
        self.seconds / self.rounds
    }

    /// A comparison whose target (≥ 0.9) sits within a few per cent of the
    /// cost it judges: the outbox's, the cap's. One 4-second run of two
    /// arms scattered by about ±5 % on this machine; three times as long,
    /// in three times as many rounds, the outbox's control arm (the same
    /// SQL against itself) read 0.98 to 1.07 in its 24 cases over three
    /// runs.
    pub(crate) fn close(self) -> Self {
        Self {
            seconds: self.seconds * 3,
            rounds: self.rounds * 3,
            warmup: self.warmup,
        }
    }
}

/// What the holds of a scenario find on their slot when it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Preload {
    /// This many active holds per slot.
    Active(usize),
    /// This many holds per slot that all expired at the same instant, just
    /// before the run (and that no reclaim or sweeper has counted yet).
    ExpiredAtOnce(usize),
}

/// One measured line of a hold comparison: a variant on its own slot(s),
/// seeded as `preload` says, holding `quantity` seats per hold.
pub(crate) struct Arm {
    pub(crate) scenario: String,
    /// The row's variant: the variant's name, unless arms of one variant
    /// differ in quantity.
    pub(crate) name: &'static str,
    pub(crate) preload: Preload,
    pub(crate) variant: Variant,
    pub(crate) quantity: u32,
}

/// Arms that run in alternating rounds, so that drift of the machine
/// (other work, the disk's fsync latency) weighs on all of them alike.
pub(crate) struct HoldCase {
    pub(crate) clients: usize,
    pub(crate) slots: usize,
    pub(crate) capacity: u32,
    pub(crate) arms: Vec<Arm>,
}

const ALL: &[Variant] = &[Variant::Service, Variant::Raw, Variant::SeedCount];

fn arms(scenario: &str, preload: Preload) -> Vec<Arm> {
    ALL.iter()
        .map(|variant| Arm {
            scenario: scenario.to_string(),
            name: variant.name(),
            preload,
            variant: *variant,
            quantity: 1,
        })
        .collect()
}

/// The quantities the quantity scenarios compare, and their rows' names.
const QUANTITIES: [(u32, &str); 2] = [(5, "service_quantity_5"), (1, "service_quantity_1")];

/// The service holding 5 seats at a time and 1, on twin slots.
fn quantity_arms(scenario: &str) -> Vec<Arm> {
    QUANTITIES
        .iter()
        .map(|&(quantity, name)| Arm {
            scenario: scenario.to_string(),
            name,
            preload: Preload::Active(0),
            variant: Variant::Service,
            quantity,
        })
        .collect()
}

/// hold: one slot with active holds piling up (0 and 5,000 to start
/// with, measured side by side), holds that all expired at once, holds
/// spread over 1,000 slots, and holds of 5 seats against holds of 1.
pub async fn holds(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let envs = bench.envs(32).await?;
    for clients in [1, 8, 32] {
        let mut both = arms("hold.one_slot.active_0", Preload::Active(0));
        both.extend(arms("hold.one_slot.active_5000", Preload::Active(5_000)));
        let case = HoldCase {
            clients,
            slots: 1,
            capacity: ROOMY,
            arms: both,
        };
        compare_holds(bench, &envs, timing, case, emit).await?;
    }
    for clients in [1, 8] {
        let case = HoldCase {
            clients,
            slots: 1_000,
            capacity: ROOMY,
            arms: arms("hold.spread_1000", Preload::Active(0)),
        };
        compare_holds(bench, &envs, timing, case, emit).await?;
    }
    // Full by the counter: the first hold reclaims the 5,000 expired
    // seats under the lock; roomy: nothing reclaims them, and every
    // pre-check counts them until the sweeper runs.
    for (name, capacity) in [("full", 5_000), ("roomy", ROOMY)] {
        let case = HoldCase {
            clients: 8,
            slots: 1,
            capacity,
            arms: arms(
                &format!("hold.expired_at_once_5000.{name}"),
                Preload::ExpiredAtOnce(5_000),
            ),
        };
        compare_holds(bench, &envs, timing, case, emit).await?;
    }
    // Last, so that the cases above run where they always have: a hold of
    // 5 seats is the same statements as a hold of 1, the counter moved by
    // 5. Roomy slots: neither runs short within the run.
    for (scenario, slot_count) in [
        ("hold.quantity.one_slot", 1),
        ("hold.quantity.spread_1000", 1_000),
    ] {
        for clients in [1, 8] {
            let case = HoldCase {
                clients,
                slots: slot_count,
                capacity: ROOMY,
                arms: quantity_arms(scenario),
            };
            compare_holds(bench, &envs, timing, case, emit).await?;
        }
    }
    Ok(())
}

pub(crate) async fn compare_holds(
    bench: &Bench,
    envs: &[Env],
    timing: Timing,
    case: HoldCase,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    // Each case on empty tables, so that cases differ only in what they
    // say they differ in.
    bench.reset().await?;
    // Its own slot(s) per arm.
    let mut slots = Vec::new();
    let mut expiring = Vec::new();
    for arm in &case.arms {
        let ids = bench.insert_slots(case.slots, case.capacity).await?;
        if let Preload::Active(n) | Preload::ExpiredAtOnce(n) = arm.preload
            && n > 0
        {
            let later = bench.db_now_plus(Duration::from_secs(300)).await?;
            bench.insert_holds(&ids, n, later).await?;
        }
        if let Preload::ExpiredAtOnce(_) = arm.preload {
            expiring.extend(ids.iter().copied());
        }
        slots.push(Arc::new(ids));
    }
    if !expiring.is_empty() {
        // One statement, one UTC_TIMESTAMP(6): the same instant for all.
        let mut sql = sqlx::QueryBuilder::<sqlx::MySql>::new(
            "UPDATE holds SET expires_at = UTC_TIMESTAMP(6) WHERE slot_id IN (",
        );
        let mut list = sql.separated(", ");
        for id in &expiring {
            list.push_bind(*id);
        }
        sql.push(")");
        sql.build()
            .execute(&bench.admin)
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // What a bare commit costs right now: a lone environment pays it on
    // every hold (the redo log is shared with whatever else the server runs).
    let (commit_p50, _) = bench.commit_latency().await?;
    let envs = Arc::new(envs[..case.clients].to_vec());
    let next = Arc::new(AtomicU64::new(0));
    let op = |arm: &Arm, slots: Arc<Vec<u64>>| {
        let (envs, next) = (envs.clone(), next.clone());
        let (variant, quantity) = (arm.variant, arm.quantity);
        move |client: usize| {
            let (envs, slots) = (envs.clone(), slots.clone());
            // Scattered over the slots, not in step.
            let n = next.fetch_add(1, Ordering::Relaxed);
            let slot = slots[(n.wrapping_mul(7_919) % slots.len() as u64) as usize];
            async move { variant.hold(&envs[client], slot, quantity).await }
        }
    };
    let mut samples: Vec<Sample> = vec![Sample::default(); case.arms.len()];
    let mut start_active = vec![None; case.arms.len()];
    for round in 0..timing.rounds {
        for i in rotated(case.arms.len(), round) {
            let arm = &case.arms[i];
            if round == 0 {
                let warm = Budget::Time(timing.warmup);
                measure::run(case.clients, warm, op(arm, slots[i].clone())).await;
                if case.slots == 1 {
                    start_active[i] = Some(bench.active_holds(slots[i][0]).await?);
                }
            }
            let budget = Budget::Time(timing.round());
            samples[i].merge(measure::run(case.clients, budget, op(arm, slots[i].clone())).await);
        }
    }
    for (i, arm) in case.arms.iter().enumerate() {
        let mut params = json!({
            "slots": case.slots,
            "capacity": case.capacity,
            "quantity": arm.quantity,
            "bare_commit_p50_ms": commit_p50,
        });
        match arm.preload {
            Preload::Active(n) => params["preloaded_active"] = n.into(),
            Preload::ExpiredAtOnce(n) => params["preloaded_expired_at_once"] = n.into(),
        }
        if case.slots == 1 {
            params["active_at_start"] = start_active[i].into();
            params["active_at_end"] = bench.active_holds(slots[i][0]).await?.into();
        }
        emit(Row::new(
            &arm.scenario,
            arm.name,
            case.clients,
            params,
            samples[i].stats(),
        ));
    }
    Ok(())
}

/// `arms` operations (`op(i)` makes arm `i`'s) at `clients`, measured in
/// alternating rounds in [`rotated`] order, each warmed up before its
/// first round: their samples, in the arms' order.
pub(crate) async fn alternate<O, F, Fut>(
    timing: Timing,
    clients: usize,
    arms: usize,
    op: O,
) -> Vec<Sample>
where
    O: Fn(usize) -> F,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<crate::measure::Outcome, String>> + Send + 'static,
{
    let mut samples = vec![Sample::default(); arms];
    for round in 0..timing.rounds {
        for i in rotated(arms, round) {
            if round == 0 {
                measure::run(clients, Budget::Time(timing.warmup), op(i)).await;
            }
            samples[i].merge(measure::run(clients, Budget::Time(timing.round()), op(i)).await);
        }
    }
    samples
}

/// The arms' order in a round: each round starts one further on, so that
/// no arm always runs right after the same other (a checkpoint or purge it
/// left behind would always land on the same one).
pub(crate) fn rotated(arms: usize, round: u32) -> impl Iterator<Item = usize> {
    let start = round as usize % arms.max(1);
    (0..arms).map(move |k| (start + k) % arms)
}
