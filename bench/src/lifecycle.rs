//! The booking lifecycle after the first booking (SPEC §17), in one run
//! (`--only lifecycle`): a booking moved to another slot against a
//! confirm, the operation it is judged by, in alternating rounds on the
//! same connections.
//!
//! A move locks two slot rows and claims on one while giving back on the
//! other; a confirm locks one and consumes on it. Both run on 1,000 slots
//! in pairs, each operation on pre-made rows of its own (a confirm's held
//! holds, a move's bookings, each moved once to its pair's other slot),
//! so neither queues behind the other.

use crate::measure::Outcome;
use crate::report::Row;
use crate::scenarios::{Timing, alternate, refused};
use crate::setup::{Bench, ROOMY};
use serde_json::json;
use shared::domain::{HoldId, SlotId};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub const SCENARIO: &str = "lifecycle.spread_1000";
const SLOTS: usize = 1_000;

/// The two arms.
#[derive(Clone, Copy)]
enum Arm {
    Confirm,
    MoveBooking,
}

impl Arm {
    fn name(self) -> &'static str {
        match self {
            Self::Confirm => "confirm",
            Self::MoveBooking => "move_booking",
        }
    }
}

pub async fn run(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let envs = bench.envs(8).await?;
    let arms = [Arm::Confirm, Arm::MoveBooking];
    // Enough pre-made rows for 5,000 operations/s during the whole case.
    let total_secs = (timing.seconds + timing.warmup).as_secs_f64();
    let per_arm = ((5_000.0 * total_secs) as usize).max(1_000);
    for clients in [1, 8] {
        let slots = bench.insert_slots(SLOTS, ROOMY).await?;
        let later = bench.db_now_plus(Duration::from_secs(3_600)).await?;
        let per_slot = per_arm.div_ceil(SLOTS);
        let holds = bench.insert_holds(&slots, per_slot, later).await?;
        let bookings = bench.insert_bookings(&slots, per_slot, later).await?;
        // Each booking's target: the other slot of its pair.
        let partner = |i: usize| slots[(i % SLOTS) ^ 1];
        let work: [Arc<Vec<(u64, u64)>>; 2] = [
            Arc::new(holds.iter().map(|&h| (h, 0)).collect()),
            Arc::new(
                bookings
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| (b, partner(i)))
                    .collect(),
            ),
        ];
        let cursors = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
        let envs = Arc::new(envs[..clients].to_vec());
        let op = |i: usize| {
            let (envs, work, cursor, arm) =
                (envs.clone(), work[i].clone(), cursors[i].clone(), arms[i]);
            move |client: usize| {
                let (envs, work) = (envs.clone(), work.clone());
                let next = cursor.fetch_add(1, Ordering::Relaxed);
                async move {
                    let Some(&(id, to)) = work.get(next) else {
                        return Ok(Outcome::Exhausted);
                    };
                    let env = &envs[client];
                    let caller = env.admit().await.map_err(|e| e.to_string())?;
                    let done = match arm {
                        Arm::Confirm => env.app.booking.confirm(&caller, HoldId(id)).await,
                        Arm::MoveBooking => {
                            env.app
                                .booking
                                .move_hold(&caller, HoldId(id), SlotId(to))
                                .await
                        }
                    };
                    match done {
                        Ok(_) => Ok(Outcome::Done("200")),
                        Err(err) => refused(&err),
                    }
                }
            }
        };
        let samples = alternate(timing, clients, arms.len(), op).await;
        for (i, arm) in arms.iter().enumerate() {
            let params = json!({ "slots": SLOTS, "premade": work[i].len() });
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
