//! The confirm scenarios, and what the outbox costs hold and confirm: the
//! same alternating rounds as the holds, on confirms of pre-made holds.

use super::{Arm, HoldCase, Preload, Timing, Variant, alternate, compare_holds};
use crate::measure::Outcome;
use crate::report::Row;
use crate::setup::{Bench, Env, ROOMY};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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
    confirm_cases(
        bench,
        &bench.envs(8).await?,
        timing,
        emit,
        &variants,
        &cases,
        &[1, 8],
    )
    .await
}

/// The outbox's arms: the service (its event written in its one CALL),
/// the raw statements with the same event, without it, and without it
/// again (the control: how far two identical arms read apart in one run).
const OUTBOX_ARMS: [Variant; 4] = [
    Variant::Service,
    Variant::Raw,
    Variant::RawNoOutbox,
    Variant::RawNoOutboxAgain,
];

/// SPEC §12's cost: the service against the raw statements that write the
/// same event, and those statements with their change's event (the
/// outbox) and without it, in alternating rounds on twin slots, for
/// hold and confirm, one slot and spread, 1 and 8 environments.
pub async fn outbox(
    bench: &Bench,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let timing = timing.close();
    let envs = bench.envs(8).await?;
    let arms = |scenario: &str| -> Vec<Arm> {
        OUTBOX_ARMS
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
    let variants = OUTBOX_ARMS;
    let cases = [
        ("outbox.confirm.one_slot", 1),
        ("outbox.confirm.spread_1000", 1_000),
    ];
    confirm_cases(
        bench,
        &bench.envs(8).await?,
        timing,
        emit,
        &variants,
        &cases,
        &[1, 8],
    )
    .await
}

/// Issue 28's cost: the raw sequences with today's statements and with
/// those of before it, in alternating rounds on twin slots, and the same
/// SQL against itself (the control), for the hot slot's hold and for
/// confirm, one slot and spread, 1 and 8 environments.
pub async fn revision(
    bench: &Bench,
    timing: Timing,
    emit: &mut dyn FnMut(Row),
) -> Result<(), String> {
    const ARMS: [Variant; 2] = [Variant::Raw, Variant::RawBefore];
    let timing = timing.close();
    let envs = bench.envs(8).await?;
    for clients in [1, 8] {
        let case = HoldCase {
            clients,
            slots: 1,
            capacity: ROOMY,
            arms: ARMS
                .iter()
                .map(|variant| Arm {
                    scenario: "revision.hold.one_slot".to_string(),
                    name: variant.name(),
                    preload: Preload::Active(0),
                    variant: *variant,
                    quantity: 1,
                })
                .collect(),
        };
        compare_holds(bench, &envs, timing, case, emit).await?;
    }
    let cases = [
        ("revision.confirm.one_slot", 1),
        ("revision.confirm.spread_1000", 1_000),
    ];
    confirm_cases(
        bench,
        &bench.envs(8).await?,
        timing,
        emit,
        &ARMS,
        &cases,
        &[1, 8],
    )
    .await
}

/// Confirms of pre-made holds by each of `variants`, in alternating
/// rounds, for each `(scenario, slots)` of `cases` at each of `clients`,
/// by the first of `envs`.
pub(crate) async fn confirm_cases(
    bench: &Bench,
    envs: &[Env],
    timing: Timing,
    emit: &mut dyn FnMut(Row),
    variants: &[Variant],
    cases: &[(&str, usize)],
    client_counts: &[usize],
) -> Result<(), String> {
    // Enough pre-made holds for 5,000 confirms/s during the whole case:
    // an arm that runs out stops early and reads slower than it is.
    let total_secs = (timing.seconds + timing.warmup).as_secs_f64() * variants.len() as f64;
    let per_case = ((5_000.0 * total_secs) as usize).max(1_000);
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
            let samples = alternate(timing, clients, variants.len(), |i| op(variants[i])).await;
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
