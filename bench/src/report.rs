//! Results: one JSON line per scenario on stdout, the service/raw ratios
//! and the facts of the run (rendered by `markdown`; the targets are
//! judged in `targets`).

use crate::measure::Stats;
use serde::Serialize;
use serde_json::Value;

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
/// against the hit without auth and the raw GET, a hold of 5 seats
/// against a hold of 1).
pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut out = Vec::new();
    const PAIRS: &[(&str, &str)] = &[
        ("service", "raw"),
        ("raw", "raw_no_outbox"),
        ("raw_no_outbox_again", "raw_no_outbox"),
        ("service", "service_no_cache"),
        ("service", "service_no_auth"),
        ("service", "redis_get"),
        ("service", "seed_count"),
        ("service_quantity_5", "service_quantity_1"),
        ("service_capped", "service_uncapped"),
        ("service_uncapped", "service"),
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

pub fn find<'r>(
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

pub(crate) fn ops(row: &Row) -> f64 {
    row.stats.as_ref().map_or(0.0, |s| s.ops_per_s)
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
    /// A bare commit's p50 / p99 in ms, before and after.
    pub commit_before: String,
    pub commit_after: String,
}
