//! The parts every section of `docs/BENCHMARKS.md` shares
//! (`sections.rs`): how its figures were made, and its rows and targets
//! after its prose.

use crate::report::{Meta, Row};
use crate::table::table;
use crate::targets::Target;
use std::fmt::Write;

/// A section's body after its prose: the facts rows (no figures) of the
/// scenarios under `prefixes` as a list, their measured rows as a table,
/// then `targets`.
pub(crate) fn facts_rows_and_targets<'t>(
    w: &mut String,
    rows: &[Row],
    prefixes: &[&str],
    targets: impl Iterator<Item = &'t Target>,
) {
    let ours = |r: &&Row| prefixes.iter().any(|p| r.scenario.starts_with(p));
    for row in rows.iter().filter(ours).filter(|r| r.stats.is_none()) {
        let _ = writeln!(
            w,
            "- *{}* ({}): `{}`",
            row.scenario, row.variant, row.params
        );
    }
    let _ = writeln!(w);
    table(w, rows.iter().filter(ours).filter(|r| r.stats.is_some()));
    let _ = writeln!(w, "\n| target | measured | result |\n|---|---|---|");
    for t in targets {
        let _ = writeln!(w, "| {} | {} | **{}** |", t.target, t.measured, t.verdict());
    }
}

/// "Measured at commit … on …, by …": how a section's figures were made.
pub(crate) fn measured_at(group: &str, meta: &Meta, full: bool) -> String {
    let how = if full {
        "with the rest of this file".to_string()
    } else {
        format!(
            "by `cargo run --release -p bench -- --only {group}`, apart from the rest of this \
             file (load average before {} · after {})",
            meta.load_before, meta.load_after
        )
    };
    format!(
        "Measured at commit `{}` on {}, {how}.\n",
        meta.commit, meta.date
    )
}
