//! Results: one JSON line per scenario on stdout, the service/raw ratios,
//! the targets with pass/fail, and `docs/BENCHMARKS.md`.

use crate::measure::Stats;
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write;

/// One measured scenario (or, for cold start and zips, one set of facts).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: String,
    pub variant: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clients: Option<usize>,
    pub params: Value,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
}

impl Row {
    pub fn new(scenario: &str, variant: &str, clients: usize, params: Value, stats: Stats) -> Self {
        Self {
            scenario: scenario.into(),
            variant: variant.into(),
            clients: Some(clients),
            params,
            stats: Some(stats),
        }
    }

    pub fn info(scenario: &str, variant: &str, params: Value) -> Self {
        Self {
            scenario: scenario.into(),
            variant: variant.into(),
            clients: None,
            params,
            stats: None,
        }
    }
}

/// Prints a JSON line tagged with its kind.
pub fn print_line(kind: &str, value: &impl Serialize) {
    let mut value = serde_json::to_value(value).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("kind".into(), kind.into());
    }
    println!("{value}");
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub scenario: String,
    pub clients: usize,
    pub service: String,
    pub reference: String,
    pub service_ops_per_s: f64,
    pub reference_ops_per_s: f64,
    pub ratio: f64,
}

/// service/raw for every scenario measured both ways (and the cache hit
/// against the raw GET).
pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut out = Vec::new();
    const PAIRS: &[(&str, &str)] = &[
        ("service", "raw"),
        ("service_no_cache", "raw"),
        ("service", "redis_get"),
        ("service", "seed_count"),
    ];
    for (measured, reference) in PAIRS {
        for row in rows.iter().filter(|r| r.variant == *measured) {
            let Some(other) = find(rows, &row.scenario, reference, row.clients) else {
                continue;
            };
            let (s, r) = (ops(row), ops(other));
            out.push(Ratio {
                scenario: row.scenario.clone(),
                clients: row.clients.unwrap_or(0),
                service: (*measured).into(),
                reference: (*reference).into(),
                service_ops_per_s: s,
                reference_ops_per_s: r,
                ratio: if r > 0.0 {
                    crate::measure::round(s / r, 2)
                } else {
                    0.0
                },
            });
        }
    }
    let order = |scenario: &str| rows.iter().position(|r| r.scenario == scenario);
    out.sort_by_key(|r| (order(&r.scenario), r.clients));
    out
}

fn find<'r>(
    rows: &'r [Row],
    scenario: &str,
    variant: &str,
    clients: Option<usize>,
) -> Option<&'r Row> {
    rows.iter().find(|r| {
        r.scenario == scenario
            && r.variant == variant
            && (clients.is_none() || r.clients == clients)
    })
}

fn ops(row: &Row) -> f64 {
    row.stats.as_ref().map_or(0.0, |s| s.ops_per_s)
}

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

/// The targets, judged on this run's rows.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    let ratio = |a: Option<&Row>, b: Option<&Row>| match (a, b) {
        (Some(a), Some(b)) if ops(b) > 0.0 => Some((ops(a), ops(b), ops(a) / ops(b))),
        _ => None,
    };
    for clients in [1, 8, 32] {
        let r = ratio(
            find(rows, "hold.one_slot.active_5000", "service", Some(clients)),
            find(rows, "hold.one_slot.active_0", "service", Some(clients)),
        );
        out.push(Target::new(
            format!("hold, 5,000 active holds on the slot ≥ 0.8 × none ({clients} env)"),
            r.map(|(a, b, r)| (format!("{a:.0} vs {b:.0} ops/s = {r:.2}"), r >= 0.8)),
        ));
    }
    for (scenario, what) in [
        ("hold.one_slot.active_0", "hold, hot"),
        ("hold.spread_1000", "hold, spread"),
        ("confirm.one_slot", "confirm, hot"),
        ("confirm.spread_1000", "confirm, spread"),
    ] {
        for clients in [1, 8] {
            let r = ratio(
                find(rows, scenario, "service", Some(clients)),
                find(rows, scenario, "raw", Some(clients)),
            );
            out.push(Target::new(
                format!("{what}: service ≥ 0.9 × raw ({clients} env)"),
                r.map(|(a, b, r)| (format!("{a:.0} vs {b:.0} ops/s = {r:.2}"), r >= 0.9)),
            ));
        }
    }
    let storm = find(rows, "storm.sold_out", "service", Some(20)).map(|row| {
        let p99 = row.params["p99_409_ms"].as_f64().unwrap_or(f64::MAX);
        (format!("p99 of the 409s {p99:.2} ms (20 envs)"), p99 <= 5.0)
    });
    out.push(Target::new("sold-out storm: p99 of the 409s ≤ 5 ms", storm));
    let storms: Vec<&Row> = rows
        .iter()
        .filter(|r| r.scenario.contains("storm"))
        .collect();
    let oversell = (!storms.is_empty()).then(|| {
        let oversold = storms
            .iter()
            .filter(|r| r.params["oversold"] != json!(false))
            .count();
        let winners: Vec<String> = storms
            .iter()
            .map(|r| {
                let won = r
                    .stats
                    .as_ref()
                    .and_then(|s| s.outcomes.get("201"))
                    .copied()
                    .unwrap_or(0);
                format!("{}@{}: {} won", r.scenario, r.clients.unwrap_or(0), won)
            })
            .collect();
        (
            format!(
                "{oversold} of {} storms oversold ({})",
                storms.len(),
                winners.join(", ")
            ),
            oversold == 0,
        )
    });
    out.push(Target::new("sold-out storm: zero oversell", oversell));
    for clients in [1, 8] {
        let r = ratio(
            find(rows, "availability_hit.100_slots", "service", Some(clients)),
            find(
                rows,
                "availability_hit.100_slots",
                "redis_get",
                Some(clients),
            ),
        );
        out.push(Target::new(
            format!("availability hit ≥ 0.5 × raw Redis GET ({clients} env)"),
            r.map(|(a, b, r)| (format!("{a:.0} vs {b:.0} ops/s = {r:.2}"), r >= 0.5)),
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
    let zips = find(rows, "bootstrap_zips.arm64", "size", None).and_then(|r| {
        let bytes = r.params["bytes"].as_object()?;
        let largest = bytes
            .iter()
            .filter_map(|(n, b)| Some((n, b.as_u64()?)))
            .max_by_key(|(_, b)| *b)?;
        Some((
            format!(
                "{} zips, largest {} {:.2} MB",
                bytes.len(),
                largest.0,
                largest.1 as f64 / 1_048_576.0
            ),
            largest.1 < 5 * 1_048_576,
        ))
    });
    out.push(Target::new("every arm64 bootstrap.zip < 5 MB", zips));
    out
}

/// Where and when the figures were taken.
#[derive(Debug, Clone, Serialize)]
pub struct Meta {
    pub date: String,
    pub commit: String,
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub mariadb: String,
    pub redis: String,
    pub rustc: String,
    pub seconds_per_variant: f64,
    pub rounds: u32,
    pub e2e_profile: String,
    /// `/proc/loadavg` before and after: other work on the machine.
    pub load_before: String,
    pub load_after: String,
}

pub fn markdown(meta: &Meta, rows: &[Row], ratios: &[Ratio], targets: &[Target]) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Generated by `make bench` (`cargo run --release -p bench`); do not edit by hand, run it again.\n"
    );
    let _ = writeln!(w, "| | |\n|---|---|");
    let _ = writeln!(w, "| date | {} |", meta.date);
    let _ = writeln!(w, "| commit | `{}` |", meta.commit);
    let _ = writeln!(
        w,
        "| machine | {} cores, {:.0} GiB, {} |",
        meta.cores, meta.memory_gib, meta.cpu
    );
    let _ = writeln!(w, "| kernel | {} |", meta.kernel);
    let _ = writeln!(
        w,
        "| MariaDB / Redis | {} / {} (both on loopback, same machine) |",
        meta.mariadb, meta.redis
    );
    let _ = writeln!(w, "| toolchain | {} |", meta.rustc);
    let _ = writeln!(
        w,
        "| load average (1, 5, 15 min) | before {} · after {} |",
        meta.load_before, meta.load_after
    );
    let _ = writeln!(
        w,
        "| method | {} s per variant in {} alternating rounds, after a warm-up; bench built with the release profile; end-to-end functions served with the **{}** profile |\n",
        meta.seconds_per_variant, meta.rounds, meta.e2e_profile
    );

    let _ = writeln!(
        w,
        "## Targets\n\n| target | measured | result |\n|---|---|---|"
    );
    for t in targets {
        let _ = writeln!(w, "| {} | {} | **{}** |", t.target, t.measured, t.verdict());
    }

    let _ = writeln!(w, "\n## How to read this\n");
    let _ = writeln!(
        w,
        "Everything runs on one small machine: the bench's simulated Lambda environments, MariaDB and \
         Redis share {} cores, so absolute figures are those of this machine, not of Aurora, and a \
         repeated run moves by ±30 %. Compare rows of one run with each other, not with another run. \
         An *environment* is a `shared::App` as a function builds it (a pool of one connection, its \
         own cache connection) serving one call at a time; *N env* means N of them calling back to back. \
         *service* calls `shared::Booking`; *raw* sends the same statements on the same connection \
         directly with sqlx, so service/raw is the cost of the service layer (retry wrapper, typed \
         errors, row conversion and, for confirm, the cache invalidation after commit, which the raw \
         sequence leaves out; *service_no_cache* is the same service on the same connection without \
         a cache, which isolates that invalidation). *seed_count* is the seed's original count-based hold, kept as a reference: \
         its COUNT of active holds under the slot's lock is what made holds slow down as they piled up. \
         Service and raw run in alternating rounds on twin slots, so drift hits both alike. Latencies are \
         per call as the caller sees it; p99 over all calls of all environments. Outcomes count the \
         answers (201/200/409, or cache hit/miss).",
        meta.cores
    );

    let _ = writeln!(w, "\n## Service against raw statements (in process)\n");
    table(
        w,
        rows.iter()
            .filter(|r| r.scenario.starts_with("hold.") || r.scenario.starts_with("confirm.")),
    );
    let _ = writeln!(
        w,
        "\n### Ratios\n\n| scenario | env | ops/s measured / reference | ratio |\n|---|---|---|---|"
    );
    for r in ratios {
        let _ = writeln!(
            w,
            "| {} | {} | {:.0} {} / {:.0} {} | {:.2} |",
            r.scenario,
            r.clients,
            r.service_ops_per_s,
            r.service,
            r.reference_ops_per_s,
            r.reference,
            r.ratio
        );
    }
    let _ = writeln!(w, "\n## Reads: projection, cache miss, cache hit\n");
    let _ = writeln!(
        w,
        "*service* here is `Booking::availability` (the projection query and its rows); *miss_path* is \
         `availability_json` right after an invalidation (cache GET, lock, projection, JSON, store), \
         timed without the invalidation; *availability_hit* is `availability_json` on a fresh cache \
         against a raw `GET` of the same key.\n"
    );
    table(
        w,
        rows.iter().filter(|r| {
            r.scenario.starts_with("projection.") || r.scenario.starts_with("availability_hit")
        }),
    );
    let _ = writeln!(w, "\n## Sold-out storm\n");
    let _ = writeln!(
        w,
        "1,000 holds with fresh keys released at once on a slot whose 10 seats are all held (and, as a \
         check, on one with its last seat free). In process, the 1,000 calls are served by N environments \
         (20, as `make dev` runs each function; 100 as a heavier fleet) and a call's latency is its \
         service time; *makespan* is until the last answer. Over HTTP, each request has its own \
         connection and its latency includes the wait for one of the 20 instances.\n"
    );
    let _ = writeln!(
        w,
        "| scenario | env / requests | outcomes | p50 409 ms | p99 409 ms | max 409 ms | makespan ms | active after | oversold |\n|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows.iter().filter(|r| r.scenario.contains("storm")) {
        let p = &r.params;
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.scenario,
            r.clients.unwrap_or(0),
            outcomes(r),
            p["p50_409_ms"],
            p["p99_409_ms"],
            p["max_409_ms"],
            p["makespan_ms"],
            p["active_after"],
            p["oversold"]
        );
    }
    let _ = writeln!(w, "\n## End to end over HTTP (`cargo lambda watch`)\n");
    let _ = writeln!(
        w,
        "The function binaries served by `cargo lambda watch` ({} profile, 20 instances per function), \
         each client its own keep-alive connection. The emulator's proxying is part of every figure.\n",
        meta.e2e_profile
    );
    table(
        w,
        rows.iter()
            .filter(|r| r.scenario.starts_with("e2e.") && !r.scenario.contains("storm")),
    );
    let _ = writeln!(w, "\n## Cold start and memory\n");
    let _ = writeln!(
        w,
        "`target/release/availability` started against a stand-in of the Lambda Runtime API served by \
         the bench on loopback; 10 runs each with the availability cache empty (the first request \
         connects to MariaDB and runs the projection) and filled (one Redis GET). RSS is read from \
         `/proc/<pid>/status` once the function polls for its second event.\n"
    );
    let _ = writeln!(
        w,
        "| scenario | exec → first poll ms (median / max) | exec → first response ms (median / max) | RSS MB (median / max) | peak RSS MB | served |\n|---|---|---|---|---|---|"
    );
    for r in rows.iter().filter(|r| r.scenario.starts_with("cold_start")) {
        let p = &r.params;
        let pair = |k: &str| format!("{} / {}", p[k]["median"], p[k]["max"]);
        let served = p["cache_served"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(|v| v.as_str())
            .unwrap_or("?");
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | x-cache {} |",
            r.scenario,
            pair("exec_to_first_poll_ms"),
            pair("exec_to_first_response_ms"),
            pair("rss_after_first_invocation_mb"),
            p["peak_rss_mb_max"],
            served
        );
    }
    let _ = writeln!(w, "\n## arm64 bootstrap.zip sizes\n");
    match find(rows, "bootstrap_zips.arm64", "size", None) {
        Some(r) if r.params["built"] == json!(true) => {
            let _ = writeln!(
                w,
                "From `make build` (oldest built {}):\n\n| function | bytes |\n|---|---|",
                r.params["oldest_built_at"]
            );
            for (name, bytes) in r.params["bytes"].as_object().into_iter().flatten() {
                let _ = writeln!(w, "| {name} | {bytes} |");
            }
        }
        _ => {
            let _ = writeln!(
                w,
                "Not built: `make build` makes them; the bench does not build arm64."
            );
        }
    }
    md
}

fn outcomes(row: &Row) -> String {
    row.stats
        .as_ref()
        .map(|s| {
            s.outcomes
                .iter()
                .map(|(k, v)| format!("{k}×{v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The figures of measured rows, with the parameters that tell them apart.
fn table<'r>(w: &mut String, rows: impl Iterator<Item = &'r Row>) {
    let _ = writeln!(
        w,
        "| scenario | variant | env | ops/s | p50 ms | p99 ms | max ms | outcomes | notes |\n|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let Some(s) = &r.stats else { continue };
        let mut notes: Vec<String> = r
            .params
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "active_at_start"
                        | "active_at_end"
                        | "value_bytes"
                        | "preloaded_expired_at_once"
                        | "capacity"
                )
            })
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if s.errors > 0 {
            notes.push(format!(
                "{} errors: {}",
                s.errors,
                s.first_error.clone().unwrap_or_default()
            ));
        }
        if s.exhausted {
            notes.push("pre-made holds ran out".into());
        }
        let _ = writeln!(
            w,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} |",
            r.scenario,
            r.variant,
            r.clients.unwrap_or(0),
            s.ops_per_s,
            s.p50_ms,
            s.p99_ms,
            s.max_ms,
            outcomes(r),
            notes.join(", ")
        );
    }
}
