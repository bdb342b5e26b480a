//! The scale group's slot administration at a million slots.

use super::{CAPACITY, slot_count};
use crate::measure::{self, Budget, Outcome};
use crate::report::Row;
use crate::scenarios::{Timing, refused};
use crate::setup::{Bench, Env};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// `GET /slots/{id}` scattered over the million, and `POST /slots` with
/// 500 slots at a time (far in the future, made last), through the
/// service as the routes call it (the caller admitted first).
pub(super) async fn slot_admin(
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
                            max_seats_per_client: None,
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
