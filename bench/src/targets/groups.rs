//! The targets of the groups that run on their own datasets or outages:
//! the cache down (SPEC §4), a million slots (§10, §11), the feed (§12), fair use (§16).

use super::{Target, at_least};
use crate::report::{Row, find, ops};

/// The hit of the call without parameters before SPEC §11 (docs at
/// f43b54d: 1 env, with auth), and its ratio to a raw Redis GET of the
/// same value then. Absolute figures move ±30 % between runs on this
/// machine, so the hit is judged by its ratio to the GET in the same run.
const HIT_BEFORE_OPS: f64 = 14_538.0;
const HIT_BEFORE_RATIO: f64 = 0.98;

/// Issue 28: the hot slot's hold and confirm stay within 5 % of their
/// statements before it (the same run, alternating rounds).
pub(super) fn revision_targets(rows: &[Row]) -> Vec<Target> {
    let cases = [
        ("revision.hold.one_slot", "hold, one slot,"),
        ("revision.confirm.one_slot", "confirm, one slot,"),
        ("revision.confirm.spread_1000", "confirm, 1,000 slots,"),
    ];
    cases
        .into_iter()
        .flat_map(|(scenario, what)| [(scenario, what, 1), (scenario, what, 8)])
        .map(|(scenario, what, clients)| {
            at_least(
                rows,
                format!("{what} today ≥ 0.95 × before issue 28 ({clients} env)"),
                (scenario, scenario),
                ("raw", "raw_before"),
                clients,
                0.95,
            )
        })
        .collect()
}

/// Issue 13's targets at 1,000,000 slots and 10,000,000 holds (`scale`).
/// SPEC §12: the outbox costs a booking little, and a page stays cheap at
/// 10 M events. Issue 32 restates issue 14's line: the service, its event
/// written in its one CALL, ≥ 0.9 × the raw statements that write the same
/// event (both arms pay the row). What the event costs against none
/// (raw against raw_no_outbox) is in the ratios, reported, not judged.
pub(super) fn feed_targets(rows: &[Row]) -> Vec<Target> {
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
            format!(
                "{what} the service with its event in the outbox ≥ 0.9 × raw statements \
                 writing the same event ({clients} env)"
            ),
            (scenario, scenario),
            ("service", "raw"),
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

pub(super) fn scale_targets(rows: &[Row]) -> Vec<Target> {
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
        crate::reads::HIT_SCENARIO
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
        p99_under(
            "availability, every slot sold out, from=1000-01-01 and available=true, the first \
             page: p99 < 50 ms",
            "scale.page",
            "from_1000_available_sold_out",
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

/// p99 of reads and of writes with the cache dead, sequential and parallel
/// alike, within the limit of the way it is dead.
pub(super) fn cache_down_targets(rows: &[Row]) -> Vec<Target> {
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

/// SPEC §16's: a hold with the cap in force ≥ 0.9 × one without, no capped
/// client near its cap (a refused hold would be cheaper); a refusal known
/// already costs no round trip, its first one did.
pub(super) fn fair_use_targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    for (scenario, what) in [
        ("fair_use.hold_cap.one_slot", "hot"),
        ("fair_use.hold_cap.spread_1000", "spread"),
    ] {
        for clients in [1, 8] {
            let capped = find(rows, scenario, "service_capped", Some(clients));
            let free = find(rows, scenario, "service_uncapped", Some(clients));
            let most = find(rows, scenario, &format!("capped_clients@{clients}"), None);
            let judged = match (capped, free, most) {
                (Some(capped), Some(free), Some(most)) if ops(free) > 0.0 => {
                    let (a, b) = (ops(capped), ops(free));
                    let refused = capped
                        .stats
                        .as_ref()
                        .map_or(0, |s| s.outcomes.get("409").copied().unwrap_or(0));
                    let seats = most.params["most_seats_one_client_held"]
                        .as_i64()
                        .unwrap_or(-1);
                    let cap = most.params["cap"].as_i64().unwrap_or(0);
                    Some((
                        format!(
                            "{a:.0} vs {b:.0} ops/s = {:.2}; {refused} refused, the most one \
                             capped client held {seats} of {cap}",
                            a / b
                        ),
                        a / b >= 0.9 && refused == 0 && (0..cap).contains(&seats),
                    ))
                }
                _ => None,
            };
            out.push(Target::new(
                format!(
                    "hold with the per-client cap in force ≥ 0.9 × without, {what} ({clients} env)"
                ),
                judged,
            ));
        }
    }
    for (variant, target) in [
        (
            "rate_limited_429.cache_commands",
            "a 429 answered again on a warm environment: 0 cache round trips",
        ),
        (
            "unknown_key_401.database_statements",
            "an unknown key refused again within 10 s: 0 database round trips",
        ),
    ] {
        let judged = find(rows, "fair_use.refusals", variant, None).map(|row| {
            let first = row.params["first_refusal"].as_u64().unwrap_or(0);
            let then = row.params["round_trips"].as_u64().unwrap_or(u64::MAX);
            let calls = row.params["counted_refusals"].as_u64().unwrap_or(0);
            (
                format!("{then} in {calls} refusals (the first: {first}), counted by the server"),
                then == 0 && first >= 1 && calls > 0,
            )
        });
        out.push(Target::new(target, judged));
    }
    out
}

/// SPEC §17's and §18's costs: a booking's move at most twice a confirm's
/// p50, a cancel that offers at most twice a plain one's, and the hold of
/// a slot without a line at least 0.95 × its throughput before the line's
/// guard (raw arms, the same run).
pub(super) fn lifecycle_targets(rows: &[Row]) -> Vec<Target> {
    let scenario = crate::lifecycle::SCENARIO;
    let mut out = Vec::new();
    for clients in [1, 8] {
        let stat = |variant, of: fn(&crate::measure::Stats) -> f64| {
            find(rows, scenario, variant, Some(clients))
                .and_then(|row| row.stats.as_ref())
                .map(of)
        };
        let p50 = |variant| stat(variant, |stats| stats.p50_ms);
        let at_most_twice = |slow: Option<f64>, fast: Option<f64>| match (slow, fast) {
            (Some(slow), Some(fast)) if fast > 0.0 => {
                let r = slow / fast;
                Some((format!("{slow:.3} vs {fast:.3} ms = {r:.2}"), r <= 2.0))
            }
            _ => None,
        };
        out.push(Target::new(
            format!("move of a booking: p50 ≤ 2 × a confirm's ({clients} env)"),
            at_most_twice(p50("move_booking"), p50("confirm")),
        ));
        out.push(Target::new(
            format!("cancel that offers: p50 ≤ 2 × a plain cancel's ({clients} env)"),
            at_most_twice(p50("cancel_offer"), p50("cancel")),
        ));
        let ops = |variant| stat(variant, |stats| stats.ops_per_s);
        let judged = match (ops("hold_raw"), ops("hold_raw_before_line")) {
            (Some(now), Some(before)) if before > 0.0 => {
                let r = now / before;
                Some((format!("{now:.0} vs {before:.0} ops/s = {r:.2}"), r >= 0.95))
            }
            _ => None,
        };
        out.push(Target::new(
            format!(
                "hold on a slot without a line: ≥ 0.95 × before the line's guard ({clients} env)"
            ),
            judged,
        ));
    }
    out
}
