//! hot: one hot slot at cloud latency (issue 32). Through RDS Proxy every
//! round trip costs 0.3–1 ms, and a hold keeps its slot's row lock across
//! several: one slot's holds per second are then bounded by the round
//! trips under the lock, not by the database. The service's hold and
//! confirm (one CALL each) against the raw statements of the locked
//! sequences (`raw.rs`), the previous design, in alternating rounds on twin slots, at 8 and 32 environments, straight to the
//! database and through a delay line that adds 0.5 ms to each round trip
//! (`delay.rs`; what it added, measured, is on each row).

use crate::delay::{self, DelayLine};
use crate::measure::round;
use crate::report::Row;
use crate::scenarios::{Arm, HoldCase, Preload, Timing, Variant, compare_holds, confirm_cases};
use crate::setup::{Bench, ROOMY};
use serde_json::json;
use std::time::Duration;

pub const SCENARIO: &str = "hot.hold.one_slot";
pub const CONFIRM: &str = "hot.confirm.one_slot";

/// The added round trips measured: none, and RDS Proxy's typical half
/// millisecond.
const DELAYS: [Duration; 2] = [Duration::ZERO, Duration::from_micros(500)];

pub async fn run(bench: &Bench, timing: Timing, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    for delay in DELAYS {
        let (envs, added) = if delay.is_zero() {
            (bench.envs(32).await?, 0.0)
        } else {
            let line = DelayLine::start(&bench.url, delay)?;
            let envs = bench.envs_at(32, &line.url(&bench.url)).await?;
            let added = delay::added_round_trip(&envs[0].pool, &bench.admin).await?;
            (envs, added)
        };
        let scenario = format!("{SCENARIO}.delay_{}us", delay.as_micros());
        for clients in [8, 32] {
            let arms = [Variant::Service, Variant::Raw]
                .into_iter()
                .map(|variant| Arm {
                    scenario: scenario.clone(),
                    name: variant.name(),
                    preload: Preload::Active(0),
                    variant,
                    quantity: 1,
                })
                .collect();
            let case = HoldCase {
                clients,
                slots: 1,
                capacity: ROOMY,
                arms,
            };
            let mut tagged = |mut row: Row| {
                row.params["added_round_trip_ms"] = json!(round(added, 3));
                emit(row);
            };
            compare_holds(bench, &envs, timing, case, &mut tagged).await?;
        }
        // Confirms of pre-made holds on one slot, the same arms.
        let confirms = format!("{CONFIRM}.delay_{}us", delay.as_micros());
        let mut tagged = |mut row: Row| {
            row.params["added_round_trip_ms"] = json!(round(added, 3));
            emit(row);
        };
        let arms = [Variant::Service, Variant::Raw];
        let cases = [(confirms.as_str(), 1)];
        confirm_cases(bench, &envs, timing, &mut tagged, &arms, &cases, &[8, 32]).await?;
    }
    Ok(())
}
