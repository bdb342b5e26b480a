//! Issue 32's targets: the hot slot's hold and confirm in one CALL, and
//! what that change may not cost the rest (spread holds, the cached hit).

use super::groups::HIT_SCENARIO;
use super::{Target, at_least};
use crate::report::{Row, find};

/// One hot slot's holds and confirms, the service against today's
/// statements (the raw arm), at 0.5 ms added per round trip ≥ 2 × at 8
/// environments and ≥ 2.5 × at 32, and straight ≥ 1.25 × at 8. Unmet
/// until the hold keeps its slot's lock for no client round trip.
pub(super) fn hot_targets(rows: &[Row]) -> Vec<Target> {
    let cases = [(0, 8, 1.25), (500, 8, 2.0), (500, 32, 2.5)];
    [("hold", crate::hot::SCENARIO), ("confirm", crate::hot::CONFIRM)]
        .into_iter()
        .flat_map(|what| cases.map(|case| (what, case)))
        .map(|((what, prefix), (delay_us, clients, floor))| {
            let scenario = format!("{prefix}.delay_{delay_us}us");
            let ops = |variant| {
                find(rows, &scenario, variant, Some(clients))
                    .and_then(|row| row.stats.as_ref())
                    .map(|stats| stats.ops_per_s)
            };
            let judged = match (ops("service"), ops("raw")) {
                (Some(service), Some(raw)) if raw > 0.0 => {
                    let r = service / raw;
                    Some((format!("{service:.0} vs {raw:.0} ops/s = {r:.2}"), r >= floor))
                }
                _ => None,
            };
            Target::new(
                format!(
                    "hot slot's {what}, {delay_us} µs added: ≥ {floor} × the locked sequence ({clients} env)"
                ),
                judged,
            )
        })
        .collect()
}

/// The cached availability hit's ratio to a raw Redis GET of the same
/// value, in the last full run before issue 32 (docs at 0d32494), at 1
/// and 8 environments. The hit's absolute rate moves ±30 % between runs on
/// this machine; its ratio to the GET beside it in the same run does not.
const HIT_RATIO_BEFORE: [(usize, f64); 2] = [(1, 0.98), (8, 0.75)];

/// "Spread holds and availability hits within 5 %": a hold spread over
/// 1,000 slots, where the lock is rarely contended, in one CALL (the
/// service, auth on) at least 0.95 × the locked sequence it replaced (the
/// raw arm, same run, alternating rounds); and the cached hit, a path
/// the change does not touch, at least 0.95 × its ratio to a raw GET
/// before the change.
pub(super) fn neighbour_targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    for clients in [1, 8] {
        out.push(at_least(
            rows,
            format!(
                "hot slot's change, spread holds: service ≥ 0.95 × the locked sequence \
                 ({clients} env)"
            ),
            ("hold.spread_1000", "hold.spread_1000"),
            ("service", "raw"),
            clients,
            0.95,
        ));
    }
    for (clients, before) in HIT_RATIO_BEFORE {
        let ops = |variant| {
            find(rows, HIT_SCENARIO, variant, Some(clients))
                .and_then(|row| row.stats.as_ref())
                .filter(|stats| stats.errors == 0 && stats.ops > 0)
                .map(|stats| stats.ops_per_s)
        };
        let judged = match (ops("service"), ops("redis_get")) {
            (Some(hit), Some(get)) if get > 0.0 => {
                let ratio = hit / get;
                Some((
                    format!(
                        "{hit:.0} vs a raw GET's {get:.0} ops/s = {ratio:.2} (before: {before:.2})"
                    ),
                    ratio >= before * 0.95,
                ))
            }
            _ => None,
        };
        out.push(Target::new(
            format!(
                "hot slot's change, availability hit: its ratio to a raw GET ≥ 0.95 × before \
                 ({clients} env)"
            ),
            judged,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Stats;

    fn row(scenario: &str, variant: &str, clients: usize, ops_per_s: f64) -> Row {
        let stats = Stats {
            ops: 1_000,
            ops_per_s,
            ..Stats::default()
        };
        Row::new(scenario, variant, clients, serde_json::Value::Null, stats)
    }

    #[test]
    fn a_hit_judged_by_its_ratio_to_the_get_not_its_rate() {
        let rows = [
            row(HIT_SCENARIO, "service", 1, 9_000.0),
            row(HIT_SCENARIO, "redis_get", 1, 10_000.0),
            row(HIT_SCENARIO, "service", 8, 70_000.0),
            row(HIT_SCENARIO, "redis_get", 8, 100_000.0),
        ];
        let verdicts: Vec<_> = neighbour_targets(&rows)
            .iter()
            .filter(|t| t.target.contains("availability"))
            .map(|t| t.pass)
            .collect();
        // 0.90 < 0.95 × 0.98; 0.70 < 0.95 × 0.75 = 0.7125.
        assert_eq!(verdicts, [Some(false), Some(false)]);
        let rows = [
            row(HIT_SCENARIO, "service", 1, 9_400.0),
            row(HIT_SCENARIO, "redis_get", 1, 10_000.0),
            row(HIT_SCENARIO, "service", 8, 72_000.0),
            row(HIT_SCENARIO, "redis_get", 8, 100_000.0),
        ];
        let verdicts: Vec<_> = neighbour_targets(&rows)
            .iter()
            .filter(|t| t.target.contains("availability"))
            .map(|t| t.pass)
            .collect();
        assert_eq!(verdicts, [Some(true), Some(true)]);
    }

    #[test]
    fn spread_holds_judged_against_the_locked_sequence() {
        let rows = [
            row("hold.spread_1000", "service", 1, 940.0),
            row("hold.spread_1000", "raw", 1, 1_000.0),
        ];
        let spread = &neighbour_targets(&rows)[0];
        assert_eq!(spread.pass, Some(false), "{}", spread.measured);
        assert_eq!(neighbour_targets(&rows)[1].pass, None, "8 env not measured");
    }
}
