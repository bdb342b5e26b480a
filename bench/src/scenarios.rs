//! The write scenarios in process: hold and confirm through the service
//! as a request reaches it (the gate: the caller by its key, its rate
//! limit; then `shared::Booking`) against the raw statement sequences on
//! the same connections, the seed's count-based hold as a reference, and
//! the sold-out storm.
//!
//! Service and raw run in alternating rounds, the order rotating each
//! round, on twin slots (each variant its own, seeded alike), so drift of
//! the machine during a scenario weighs on both the same way.

use crate::measure::{self, Budget, Outcome, Sample};
use crate::raw;
use crate::report::Row;
use crate::setup::{Bench, Env, ROOMY};
use serde_json::json;
use shared::domain::{HoldId, IdempotencyKey, SlotId};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How the bench runs: time per measured variant, split in rounds.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub seconds: Duration,
    pub rounds: u32,
    pub warmup: Duration,
}

impl Timing {
    fn round(&self) -> Duration {
        self.seconds / self.rounds
    }
}

const HOLD_TTL_MICROS: i64 = 300_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// The gate, then the service: a request with auth on.
    Service,
    /// The gate, then the service on the same connection with no cache
    /// (confirm only).
    ServiceNoCache,
    /// The SQL only (no key look-up, no rate limit), the change's event
    /// included.
    Raw,
    /// The same SQL without the event: what the outbox costs (SPEC §12).
    RawNoOutbox,
    /// The seed's count-based sequence (reference).
    SeedCount,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::ServiceNoCache => "service_no_cache",
            Self::Raw => "raw",
            Self::RawNoOutbox => "raw_no_outbox",
            Self::SeedCount => "seed_count",
        }
    }

    fn outbox(self) -> raw::Outbox {
        if self == Self::RawNoOutbox {
            raw::Outbox::Off
        } else {
            raw::Outbox::On
        }
    }

    /// A hold of `quantity` seats (the seed's sequence holds one).
    async fn hold(self, env: &Env, slot: u64, quantity: u32) -> Result<Outcome, String> {
        let key = uuid::Uuid::new_v4().to_string();
        match self {
            Self::Service | Self::ServiceNoCache => {
                let caller = env.admit().await.map_err(|e| e.to_string())?;
                let key = IdempotencyKey::parse(&key).ok_or("bad key")?;
                match env
                    .app
                    .booking
                    .hold(&caller, SlotId(slot), quantity, &key)
                    .await
                {
                    Ok(done) => Ok(Outcome::Done(if done.created { "201" } else { "200" })),
                    Err(err) => refused(&err),
                }
            }
            Self::Raw | Self::RawNoOutbox => raw::hold(
                &env.pool,
                env.client.0,
                slot,
                &key,
                quantity,
                HOLD_TTL_MICROS,
                self.outbox(),
            )
            .await
            .map_err(|e| e.to_string()),
            Self::SeedCount => raw::seed_hold(&env.pool, env.client.0, slot, &key, HOLD_TTL_MICROS)
                .await
                .map_err(|e| e.to_string()),
        }
    }

    async fn confirm(self, env: &Env, hold: u64) -> Result<Outcome, String> {
        let booking = match self {
            Self::Service => &env.app.booking,
            Self::ServiceNoCache => &env.uncached,
            Self::Raw | Self::RawNoOutbox | Self::SeedCount => {
                let keys = env.app.booking.cache().ok_or("no cache")?.keys();
                return raw::confirm(&env.pool, &mut env.redis.clone(), keys, hold, self.outbox())
                    .await
                    .map_err(|e| e.to_string());
            }
        };
        let caller = env.admit().await.map_err(|e| e.to_string())?;
        match booking.confirm(&caller, HoldId(hold)).await {
            Ok(_) => Ok(Outcome::Done("200")),
            Err(err) => refused(&err),
        }
    }
}

/// A refusal the API answers with a 4xx is an outcome; a 5xx is an error.
pub fn refused(err: &shared::Error) -> Result<Outcome, String> {
    match err.status() {
        404 => Ok(Outcome::Done("404")),
        409 => Ok(Outcome::Done("409")),
        422 => Ok(Outcome::Done("422")),
        _ => Err(err.to_string()),
    }
}

/// What the holds of a scenario find on their slot when it starts.
#[derive(Debug, Clone, Copy)]
enum Preload {
    /// This many active holds per slot.
    Active(usize),
    /// This many holds per slot that all expired at the same instant, just
    /// before the run (and that no reclaim or sweeper has counted yet).
    ExpiredAtOnce(usize),
}

/// One measured line of a hold comparison: a variant on its own slot(s),
/// seeded as `preload` says, holding `quantity` seats per hold.
struct Arm {
    scenario: String,
    /// The row's variant: the variant's name, unless arms of one variant
    /// differ in quantity.
    name: &'static str,
    preload: Preload,
    variant: Variant,
    quantity: u32,
}

/// Arms that run in alternating rounds, so that drift of the machine
/// (other work, the disk's fsync latency) weighs on all of them alike.
struct HoldCase {
    clients: usize,
    slots: usize,
    capacity: u32,
    arms: Vec<Arm>,
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

async fn compare_holds(
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

/// The arms' order in a round: each round starts one further on, so that
/// no arm always runs right after the same other (a checkpoint or purge it
/// left behind would always land on the same one).
pub(crate) fn rotated(arms: usize, round: u32) -> impl Iterator<Item = usize> {
    let start = round as usize % arms.max(1);
    (0..arms).map(move |k| (start + k) % arms)
}

/// confirm: holds on one slot (every confirm queues on its row lock) and
/// spread over 1,000 slots, at 1 and 8 clients.
pub async fn confirms(
    bench: &Bench,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    bench.reset().await?;
    let variants = [Variant::Service, Variant::ServiceNoCache, Variant::Raw];
    let cases = [("confirm.one_slot", 1), ("confirm.spread_1000", 1_000)];
    confirm_cases(bench, timing, emit, &variants, &cases, &[1, 8]).await
}

/// SPEC §12's cost: the service's statements with their change's event
/// (the outbox) and without it, in alternating rounds on twin slots, for
/// hold and confirm, one slot and spread, 1 and 8 environments.
pub async fn outbox(
    bench: &Bench,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let envs = bench.envs(8).await?;
    let arms = |scenario: &str| -> Vec<Arm> {
        [Variant::Raw, Variant::RawNoOutbox]
            .iter()
            .map(|variant| Arm {
                scenario: scenario.to_string(),
                name: variant.name(),
                preload: Preload::Active(0),
                variant: *variant,
                quantity: 1,
            })
            .collect()
    };
    for (scenario, slots) in [
        ("outbox.hold.one_slot", 1),
        ("outbox.hold.spread_1000", 1_000),
    ] {
        for clients in [1, 8] {
            let case = HoldCase {
                clients,
                slots,
                capacity: ROOMY,
                arms: arms(scenario),
            };
            compare_holds(bench, &envs, timing, case, emit).await?;
        }
    }
    let variants = [Variant::Raw, Variant::RawNoOutbox];
    let cases = [
        ("outbox.confirm.one_slot", 1),
        ("outbox.confirm.spread_1000", 1_000),
    ];
    confirm_cases(bench, timing, emit, &variants, &cases, &[1, 8]).await
}

/// Confirms of pre-made holds by each of `variants`, in alternating
/// rounds, for each `(scenario, slots)` of `cases` at each of `clients`.
async fn confirm_cases(
    bench: &Bench,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
    variants: &[Variant],
    cases: &[(&str, usize)],
    client_counts: &[usize],
) -> Result<(), String> {
    let envs = bench.envs(8).await?;
    // Enough pre-made holds for 2,500 confirms/s during the whole case.
    let total_secs = (timing.seconds + timing.warmup).as_secs_f64() * variants.len() as f64;
    let per_case = ((2_500.0 * total_secs) as usize).max(1_000);
    for &(scenario, slot_count) in cases {
        for &clients in client_counts {
            let slots = bench.insert_slots(slot_count, ROOMY).await?;
            let later = bench.db_now_plus(Duration::from_secs(3_600)).await?;
            let holds = bench
                .insert_holds(&slots, per_case.div_ceil(slot_count), later)
                .await?;
            let holds = Arc::new(holds);
            let (commit_p50, _) = bench.commit_latency().await?;
            let cursor = Arc::new(AtomicUsize::new(0));
            let envs = Arc::new(envs[..clients].to_vec());
            let op = |variant: Variant| {
                let (envs, holds, cursor) = (envs.clone(), holds.clone(), cursor.clone());
                move |client: usize| {
                    let (envs, holds) = (envs.clone(), holds.clone());
                    let next = cursor.fetch_add(1, Ordering::Relaxed);
                    async move {
                        match holds.get(next) {
                            Some(&hold) => variant.confirm(&envs[client], hold).await,
                            None => Ok(Outcome::Exhausted),
                        }
                    }
                }
            };
            let mut samples = vec![Sample::default(); variants.len()];
            for round in 0..timing.rounds {
                for i in rotated(variants.len(), round) {
                    let variant = &variants[i];
                    if round == 0 {
                        measure::run(clients, Budget::Time(timing.warmup), op(*variant)).await;
                    }
                    samples[i].merge(
                        measure::run(clients, Budget::Time(timing.round()), op(*variant)).await,
                    );
                }
            }
            for (i, variant) in variants.iter().enumerate() {
                let params = json!({
                    "slots": slot_count,
                    "premade_holds": holds.len(),
                    "bare_commit_p50_ms": commit_p50,
                });
                emit(Row::new(
                    scenario,
                    variant.name(),
                    clients,
                    params,
                    samples[i].stats(),
                ));
            }
        }
    }
    let oversold = bench.oversold_slots().await?;
    if !oversold.is_empty() {
        return Err(format!(
            "confirm scenarios broke an invariant on slots {oversold:?}"
        ));
    }
    Ok(())
}

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
