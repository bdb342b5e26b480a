//! The table of measured rows, which the whole document and each group's
//! own section print alike: below both, so neither imports the other.

use crate::report::Row;
use std::fmt::Write;

/// A row's answers, `201×3657 409×12`.
pub(crate) fn outcomes(row: &Row) -> String {
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
pub(crate) fn table<'r>(w: &mut String, rows: impl Iterator<Item = &'r Row>) {
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
                        | "statements_per_call"
                        | "bare_commit_p50_ms"
                        | "added_round_trip_ms"
                        | "phase_s"
                        | "cache_connects_per_env_so_far"
                        | "service_mean_us"
                        | "redis_get_mean_us"
                        | "service_per_get"
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
