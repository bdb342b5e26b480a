//! The targets with pass/fail, judged on one run's rows.

use crate::report::{Row, find, ops};
use serde::Serialize;
use serde_json::json;

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub target: String,
    pub measured: String,
    /// `None`: not measured in this run (filtered out, or not built).
    pub pass: Option<bool>,
}

impl Target {
    fn new(target: impl Into<String>, measured: Option<(String, bool)>) -> Self {
        let (measured, pass) = match measured {
            Some((text, pass)) => (text, Some(pass)),
            None => ("not measured".into(), None),
        };
        Self {
            target: target.into(),
            measured,
            pass,
        }
    }

    pub fn verdict(&self) -> &'static str {
        match self.pass {
            Some(true) => "pass",
            Some(false) => "FAIL",
            None => "n/a",
        }
    }
}

/// `measured` ≥ `min` × `reference` in ops/s, both rows of `scenario` (or
/// of `scenarios`: measured's, reference's) at `clients`.
fn at_least(
    rows: &[Row],
    target: String,
    (scenario, reference_scenario): (&str, &str),
    (measured, reference): (&str, &str),
    clients: usize,
    min: f64,
) -> Target {
    let a = find(rows, scenario, measured, Some(clients));
    let b = find(rows, reference_scenario, reference, Some(clients));
    let judged = match (a, b) {
        (Some(a), Some(b)) if ops(b) > 0.0 => {
            let (a, b) = (ops(a), ops(b));
            let r = a / b;
            Some((format!("{a:.0} vs {b:.0} ops/s = {r:.2}"), r >= min))
        }
        _ => None,
    };
    Target::new(target, judged)
}

/// The targets, judged on this run's rows. *service* is a request
/// with auth on (the key look-up warm, the rate limit checked); *raw* is
/// the same SQL alone.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    for clients in [1, 8, 32] {
        out.push(at_least(
            rows,
            format!("hold, 5,000 active holds on the slot ≥ 0.8 × none ({clients} env)"),
            ("hold.one_slot.active_5000", "hold.one_slot.active_0"),
            ("service", "service"),
            clients,
            0.8,
        ));
    }
    for (scenario, what) in [
        ("hold.one_slot.active_0", "hold, hot"),
        ("hold.spread_1000", "hold, spread"),
        ("confirm.one_slot", "confirm, hot"),
        ("confirm.spread_1000", "confirm, spread"),
    ] {
        for clients in [1, 8] {
            out.push(at_least(
                rows,
                format!("{what}: service with auth on ≥ 0.9 × raw ({clients} env)"),
                (scenario, scenario),
                ("service", "raw"),
                clients,
                0.9,
            ));
        }
    }
    for (scenario, what) in [
        ("hold.quantity.one_slot", "hold, hot"),
        ("hold.quantity.spread_1000", "hold, spread"),
    ] {
        for clients in [1, 8] {
            out.push(at_least(
                rows,
                format!("{what}: quantity 5 ≥ 0.9 × quantity 1 ({clients} env)"),
                (scenario, scenario),
                ("service_quantity_5", "service_quantity_1"),
                clients,
                0.9,
            ));
        }
    }
    // Counted by the server, not inferred from timings: exactly one
    // statement per call, never a BEGIN/COMMIT or a second read.
    let statements = find(rows, "read.hold_by_id", "service", None).and_then(|row| {
        let counted = row.params["statements_counted"].as_u64()?;
        let calls = row.params["counted_calls"].as_u64()?;
        Some((
            format!(
                "{} ({counted} statements in {calls} calls of get_hold, the session's Questions)",
                row.params["statements_per_call"]
            ),
            counted == calls,
        ))
    });
    out.push(Target::new(
        "GET /holds/{id}: statements per call = 1",
        statements,
    ));
    // Judged with 8 environments, the bench's usual fleet: with more, on
    // 2 cores, a call mostly waits for a core (the point_read floor at the
    // same concurrency shows how much); the row lock waits show the 409s
    // never queue on the slot's lock at any fleet size.
    let storm = find(rows, "storm.sold_out", "service", Some(8)).map(|row| {
        let p99 = row.params["p99_409_ms"].as_f64().unwrap_or(f64::MAX);
        let waits = row.params["row_lock_waits"].as_u64();
        let others: Vec<String> = [20, 100]
            .iter()
            .filter_map(|&n| {
                let service = find(rows, "storm.sold_out", "service", Some(n))?;
                let floor = find(rows, "storm.sold_out", "point_read", Some(n))?;
                Some(format!(
                    "{n} envs: {} ms, point-read floor {} ms",
                    service.params["p99_409_ms"], floor.params["p99_409_ms"]
                ))
            })
            .collect();
        (
            format!(
                "p99 of the 409s {p99:.2} ms (8 envs), row lock waits {}; {}",
                waits.map_or("?".into(), |w| w.to_string()),
                others.join("; ")
            ),
            p99 <= 5.0 && waits == Some(0),
        )
    });
    out.push(Target::new("sold-out storm: p99 of the 409s ≤ 5 ms", storm));
    let storms: Vec<&Row> = rows
        .iter()
        .filter(|r| r.scenario.contains("storm") && r.variant != "point_read")
        .collect();
    let storm_count = |r: &Row| r.params["storms"].as_u64().unwrap_or(1);
    let oversell = (!storms.is_empty()).then(|| {
        let oversold: u64 = storms
            .iter()
            .filter(|r| r.params["oversold"] != json!(false))
            .map(|r| storm_count(r))
            .sum();
        let total: u64 = storms.iter().map(|r| storm_count(r)).sum();
        let winners: Vec<String> = storms
            .iter()
            .map(|r| {
                let won = r.params["won"].as_u64().unwrap_or_else(|| {
                    r.stats
                        .as_ref()
                        .and_then(|s| s.outcomes.get("201"))
                        .copied()
                        .unwrap_or(0)
                });
                format!(
                    "{} {}@{}: {} won in {}",
                    r.scenario,
                    r.variant,
                    r.clients.unwrap_or(0),
                    won,
                    storm_count(r)
                )
            })
            .collect();
        (
            format!(
                "{oversold} of {total} storms oversold ({})",
                winners.join(", ")
            ),
            oversold == 0,
        )
    });
    out.push(Target::new("sold-out storm: zero oversell", oversell));
    const HIT: &str = "availability_hit.100_slots";
    for clients in [1, 8] {
        out.push(at_least(
            rows,
            format!("availability hit with auth on ≥ 0.9 × without auth ({clients} env)"),
            (HIT, HIT),
            ("service", "service_no_auth"),
            clients,
            0.9,
        ));
        out.push(at_least(
            rows,
            format!("availability hit with auth on ≥ 0.5 × raw Redis GET ({clients} env)"),
            (HIT, HIT),
            ("service", "redis_get"),
            clients,
            0.5,
        ));
    }
    let miss = find(
        rows,
        "projection.10000_slots.100000_holds",
        "miss_path",
        Some(1),
    )
    .and_then(|r| r.stats.as_ref());
    out.push(Target::new(
        "projection (miss) < 50 ms at 10k slots / 100k holds",
        miss.map(|s| {
            (
                format!(
                    "p50 {:.1} ms, p99 {:.1} ms (whole miss path, 1 env)",
                    s.p50_ms, s.p99_ms
                ),
                s.p50_ms < 50.0,
            )
        }),
    ));
    let cold: Vec<&Row> = rows
        .iter()
        .filter(|r| r.scenario.starts_with("cold_start"))
        .collect();
    let worst = |path: &[&str], field: &str| {
        cold.iter()
            .filter_map(|r| path.iter().fold(&r.params, |v, k| &v[*k])[field].as_f64())
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    out.push(Target::new(
        "cold start: exec → first poll < 30 ms",
        worst(&["exec_to_first_poll_ms"], "median").map(|median| {
            let max = worst(&["exec_to_first_poll_ms"], "max").unwrap_or(median);
            (
                format!("median {median:.1} ms, max {max:.1} ms"),
                median < 30.0,
            )
        }),
    ));
    out.push(Target::new(
        "RSS after the first invocation < 30 MB",
        worst(&["rss_after_first_invocation_mb"], "max")
            .map(|max| (format!("max {max:.1} MB"), max < 30.0)),
    ));
    // 5 MB read strictly, as `make sam-build` checks it: 5,000,000 bytes.
    let zips = find(rows, "bootstrap_zips.arm64", "size", None).and_then(|r| {
        let bytes = r.params["bytes"].as_object()?;
        let all_arm64 = r.params["not_aarch64"]
            .as_array()
            .is_some_and(|names| names.is_empty());
        let largest = bytes
            .iter()
            .filter_map(|(n, b)| Some((n, b.as_u64()?)))
            .max_by_key(|(_, b)| *b)?;
        Some((
            format!(
                "{} zips{}, largest {} {} bytes",
                bytes.len(),
                if all_arm64 {
                    ", all aarch64"
                } else {
                    ", NOT all aarch64"
                },
                largest.0,
                largest.1
            ),
            all_arm64 && largest.1 < 5_000_000,
        ))
    });
    out.push(Target::new("every arm64 bootstrap.zip < 5 MB", zips));
    out.extend(cache_down_targets(rows));
    out.extend(scale_targets(rows));
    out.extend(feed_targets(rows));
    out
}

/// The hit of the call without parameters before SPEC §11 (docs at
/// f43b54d: 1 env, with auth), and its ratio to a raw Redis GET of the
/// same value then. Absolute figures move ±30 % between runs on this
/// machine, so the hit is judged by its ratio to the GET in the same run.
const HIT_BEFORE_OPS: f64 = 14_538.0;
const HIT_BEFORE_RATIO: f64 = 0.98;

/// Issue 13's targets at 1,000,000 slots and 10,000,000 holds (`scale`).
/// SPEC §12: the outbox costs a booking little, and a page stays cheap at
/// 10 M events.
fn feed_targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    let cases = [
        ("outbox.hold.spread_1000", "hold, 1,000 slots,"),
        ("outbox.hold.one_slot", "hold, one slot,"),
        ("outbox.confirm.spread_1000", "confirm, 1,000 slots,"),
        ("outbox.confirm.one_slot", "confirm, one slot,"),
    ];
    for (scenario, what, clients) in cases
        .into_iter()
        .flat_map(|(scenario, what)| [(scenario, what, 1), (scenario, what, 8)])
    {
        out.push(at_least(
            rows,
            format!("{what} with the outbox ≥ 0.9 × without it ({clients} env)"),
            (scenario, scenario),
            ("raw", "raw_no_outbox"),
            clients,
            0.9,
        ));
    }
    // The figure is one poll's latency: one poller. Eight at once
    // on this machine's two cores are in the table, for the load.
    for (variant, clients) in [("admin_page", 1), ("booker_page", 1)] {
        let stats = find(rows, "feed.page_100", variant, Some(clients))
            .and_then(|r| r.stats.as_ref())
            .filter(|s| s.errors == 0 && s.ops > 0);
        out.push(Target::new(
            format!(
                "GET /events, a page of 100 at 10 M events ({variant}, one poller): p99 < 20 ms"
            ),
            stats.map(|s| {
                (
                    format!(
                        "p50 {:.2} ms, p99 {:.2} ms, {} calls",
                        s.p50_ms, s.p99_ms, s.ops
                    ),
                    s.p99_ms < 20.0,
                )
            }),
        ));
    }
    out
}

fn scale_targets(rows: &[Row]) -> Vec<Target> {
    let stats = |scenario: &str, variant: &str| {
        find(rows, scenario, variant, Some(1))
            .and_then(|r| r.stats.as_ref())
            .filter(|s| s.errors == 0 && s.ops > 0)
    };
    let size = find(rows, "scale.dataset", "fill", None).map_or(String::new(), |r| {
        format!(
            " ({} slots, {} holds)",
            r.params["slots"], r.params["holds"]
        )
    });
    let p99_under = |target: &str, scenario: &str, variant: &str, limit: f64| {
        Target::new(
            format!("{target}{size}"),
            stats(scenario, variant).map(|s| {
                (
                    format!(
                        "p50 {:.2} ms, p99 {:.2} ms, {} calls",
                        s.p50_ms, s.p99_ms, s.ops
                    ),
                    s.p99_ms < limit,
                )
            }),
        )
    };
    // This group's own hit at 100 slots, else the projection group's.
    let hit_scenario = if stats(crate::scale::HIT_100_SLOTS, "service").is_some() {
        crate::scale::HIT_100_SLOTS
    } else {
        HIT_SCENARIO
    };
    let hit = match (
        stats(hit_scenario, "service"),
        stats(hit_scenario, "redis_get"),
    ) {
        (Some(hit), Some(get)) if get.ops_per_s > 0.0 => {
            let ratio = hit.ops_per_s / get.ops_per_s;
            Some((
                format!(
                    "{:.0} ops/s (before: {HIT_BEFORE_OPS:.0}); {ratio:.2} × a raw GET of the \
                     same value in this run (before: {HIT_BEFORE_RATIO:.2})",
                    hit.ops_per_s
                ),
                ratio >= HIT_BEFORE_RATIO * 0.9,
            ))
        }
        _ => None,
    };
    vec![
        p99_under(
            "availability, a page of 1,000 with from/to: p99 < 50 ms",
            "scale.page",
            "from_to_week",
            50.0,
        ),
        Target::new(
            "availability without parameters (cached hit, 100 slots): unchanged within 10 %",
            hit,
        ),
        p99_under(
            "POST /slots with 500 slots < 1 s",
            "scale.create_slots",
            "service_500",
            1_000.0,
        ),
        p99_under(
            "GET /slots/{id}: p99 < 10 ms",
            "scale.get_slot",
            "service",
            10.0,
        ),
    ]
}

const HIT_SCENARIO: &str = "availability_hit.100_slots";

/// p99 of reads and of writes with the cache dead, sequential and parallel
/// alike, within the limit of the way it is dead.
fn cache_down_targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    for (scenario, limit) in crate::cachedown::MODES {
        let how = if scenario.ends_with("hanging") {
            "hanging"
        } else {
            "refusing connections"
        };
        for what in ["reads", "writes"] {
            let figures: Option<Vec<(String, bool)>> = ["sequential", "parallel"]
                .iter()
                .map(|order| {
                    let row = find(rows, scenario, &format!("{what}.{order}"), None)?;
                    let s = row.stats.as_ref()?;
                    let clean = s.errors == 0 && s.ops > 0;
                    let reference = find(rows, scenario, &format!("{what}.{order}.no_cache"), None)
                        .and_then(|r| r.stats.as_ref())
                        .map_or(String::new(), |r| format!(", no cache p99 {:.1}", r.p99_ms));
                    Some((
                        format!(
                            "{order} p99 {:.1} ms (max {:.1}{reference})",
                            s.p99_ms, s.max_ms
                        ),
                        clean && s.p99_ms <= *limit,
                    ))
                })
                .collect();
            out.push(Target::new(
                format!(
                    "cache {how}: p99 of {what} ≤ {limit:.0} ms ({} env)",
                    crate::cachedown::ENVS
                ),
                figures.map(|f| {
                    let text = f.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>();
                    (text.join(", "), f.iter().all(|(_, pass)| *pass))
                }),
            ));
        }
    }
    out
}
