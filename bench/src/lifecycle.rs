//! The booking lifecycle after the first booking (SPEC §17, §18), in one
//! run (`--only lifecycle`), each operation against the one it is judged
//! by, in alternating rounds on the same connections:
//! - a booking moved to another slot against a confirm;
//! - a cancel whose freed seat is offered to the slot's line against a
//!   plain cancel;
//! - the raw hold of a slot without a line, its claim guarded by
//!   `waiting = 0`, against the same sequence with the claim it had before
//!   the waiting list.
//!
//! A move locks two slot rows and claims on one while giving back on the
//! other; a confirm locks one and consumes on it. Everything runs on
//! 1,000 slots (in pairs for the moves), each operation on pre-made rows
//! of its own, used once, so that no arm queues behind another.

use crate::measure::Outcome;
use crate::raw::{self, Outbox, Statements};
use crate::report::Row;
use crate::scenarios::{HOLD_TTL_MICROS, Timing, alternate, refused};
use crate::setup::{Bench, ROOMY};
use serde_json::json;
use shared::domain::{HoldId, SlotId};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub const SCENARIO: &str = "lifecycle.spread_1000";
const SLOTS: usize = 1_000;

/// The arms, in the order of their rows.
#[derive(Clone, Copy)]
enum Arm {
    Confirm,
    MoveBooking,
    Cancel,
    CancelOffer,
    HoldRaw,
    HoldRawBeforeLine,
}

const ARMS: [Arm; 6] = [
    Arm::Confirm,
    Arm::MoveBooking,
    Arm::Cancel,
    Arm::CancelOffer,
    Arm::HoldRaw,
    Arm::HoldRawBeforeLine,
];

impl Arm {
    fn name(self) -> &'static str {
        match self {
            Self::Confirm => "confirm",
            Self::MoveBooking => "move_booking",
            Self::Cancel => "cancel",
            Self::CancelOffer => "cancel_offer",
            Self::HoldRaw => "hold_raw",
            Self::HoldRawBeforeLine => "hold_raw_before_line",
        }
    }
}

pub async fn run(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let envs = bench.envs(8).await?;
    // Enough pre-made rows for 5,000 operations/s during the whole case.
    let total_secs = (timing.seconds + timing.warmup).as_secs_f64();
    let per_arm = ((5_000.0 * total_secs) as usize).max(1_000);
    let per_slot = per_arm.div_ceil(SLOTS);
    for clients in [1, 8] {
        let slots = bench.insert_slots(SLOTS, ROOMY).await?;
        let later = bench.db_now_plus(Duration::from_secs(3_600)).await?;
        let holds = bench.insert_holds(&slots, per_slot, later).await?;
        let bookings = bench.insert_bookings(&slots, per_slot, later).await?;
        let cancels = bench.insert_holds(&slots, per_slot, later).await?;
        // Full slots whose every freed seat fits the first waiting entry.
        let full = bench.insert_slots(SLOTS, per_slot as u32).await?;
        let offering = bench.insert_holds(&full, per_slot, later).await?;
        bench.insert_entries(&full, per_slot).await?;
        // Each booking's target: the other slot of its pair.
        let partner = |i: usize| slots[(i % SLOTS) ^ 1];
        let paired = |ids: &[u64]| ids.iter().map(|&id| (id, 0)).collect::<Vec<_>>();
        let work: [Arc<Vec<(u64, u64)>>; 6] = [
            Arc::new(paired(&holds)),
            Arc::new(
                bookings
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| (b, partner(i)))
                    .collect(),
            ),
            Arc::new(paired(&cancels)),
            Arc::new(paired(&offering)),
            // The raw holds take a slot of their own, round robin.
            Arc::new(paired(&slots)),
            Arc::new(paired(&slots)),
        ];
        let cursors: [Arc<AtomicUsize>; 6] = Default::default();
        let envs = Arc::new(envs[..clients].to_vec());
        let op = |i: usize| {
            let (envs, work, cursor, arm) =
                (envs.clone(), work[i].clone(), cursors[i].clone(), ARMS[i]);
            move |client: usize| {
                let (envs, work) = (envs.clone(), work.clone());
                let next = cursor.fetch_add(1, Ordering::Relaxed);
                async move {
                    let env = &envs[client];
                    let statements = match arm {
                        Arm::HoldRaw => Statements::Current,
                        Arm::HoldRawBeforeLine => Statements::BeforeLine,
                        _ => return service(env, arm, work.get(next).copied()).await,
                    };
                    let slot = work[next % work.len()].0;
                    let key = uuid::Uuid::new_v4().to_string();
                    let (client, statements) = (env.client.0, (Outbox::On, statements));
                    raw::hold(
                        &env.pool,
                        client,
                        slot,
                        &key,
                        1,
                        HOLD_TTL_MICROS,
                        statements,
                    )
                    .await
                    .map_err(|e| e.to_string())
                }
            }
        };
        let samples = alternate(timing, clients, ARMS.len(), op).await;
        // The offers the offering cancels made: one each.
        let offered: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM waitlist_entries e JOIN holds h ON h.id = e.hold_id \
             WHERE e.slot_id BETWEEN ? AND ?",
        )
        .bind(full[0])
        .bind(full[full.len() - 1])
        .fetch_one(&bench.admin)
        .await
        .map_err(|e| e.to_string())?;
        for (i, arm) in ARMS.iter().enumerate() {
            let mut params = json!({ "slots": SLOTS, "premade": work[i].len() });
            if matches!(arm, Arm::CancelOffer) {
                params["offered"] = offered.into();
            }
            emit(Row::new(
                SCENARIO,
                arm.name(),
                clients,
                params,
                samples[i].stats(),
            ));
        }
    }
    let oversold = bench.oversold_slots().await?;
    if !oversold.is_empty() {
        return Err(format!(
            "lifecycle broke an invariant on slots {oversold:?}"
        ));
    }
    Ok(())
}

/// One operation of the service's, as a request gets it (the gate first),
/// on a pre-made row (`None`: they ran out).
async fn service(
    env: &crate::setup::Env,
    arm: Arm,
    row: Option<(u64, u64)>,
) -> Result<Outcome, String> {
    let Some((id, to)) = row else {
        return Ok(Outcome::Exhausted);
    };
    let caller = env.admit().await.map_err(|e| e.to_string())?;
    let booking = &env.app.booking;
    let done = match arm {
        Arm::Confirm => booking.confirm(&caller, HoldId(id)).await.map(|_| ()),
        Arm::MoveBooking => booking
            .move_hold(&caller, HoldId(id), SlotId(to))
            .await
            .map(|_| ()),
        _ => booking.cancel(&caller, HoldId(id)).await.map(|_| ()),
    };
    match done {
        Ok(()) => Ok(Outcome::Done("200")),
        Err(err) => refused(&err),
    }
}
