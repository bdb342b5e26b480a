//! Reading back what a `cargo lambda watch` run printed: which lines came
//! from the function instances (everything but the emulator's own text
//! and cargo's status lines), the summary lines, the EMF documents.

use serde_json::Value;
use std::collections::BTreeMap;

/// A line the emulator or cargo printed, not a function: the emulator's
/// tracing text (`ERROR`/` WARN`/` INFO`/`DEBUG`/`TRACE` and a space) and
/// cargo's indented status lines (`    Finished …`, `     Running …`),
/// which cargo writes in two pieces (the verb, then `` `dev` profile…``):
/// another process's line can fall between them.
pub fn is_emulator_line(line: &str) -> bool {
    let level = ["ERROR ", " WARN ", " INFO ", "DEBUG ", "TRACE ", " `"]
        .iter()
        .any(|prefix| line.starts_with(prefix));
    // An indented capitalised word: `Finished`, `Running`, `Blocking`…
    let verb: String = line
        .trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    let cargo = line.starts_with("  ")
        && verb.len() > 1
        && verb.starts_with(|c: char| c.is_ascii_uppercase())
        && verb.chars().skip(1).all(|c| c.is_ascii_lowercase());
    level || cargo
}

/// Every line a function printed, parsed; `Err` names the first that is
/// not one JSON object. A function writes each line whole, in one write,
/// so a line of its own may follow a piece of cargo's on the same line
/// (`    Finished{"level":…}`): that one is read from its `{"`.
pub fn function_lines(log: &str) -> Result<Vec<Value>, String> {
    let mut lines = Vec::new();
    for line in log.lines().filter(|line| !line.trim().is_empty()) {
        let own = if is_emulator_line(line) {
            match line.find("{\"") {
                Some(at) => &line[at..],
                None => continue,
            }
        } else {
            line
        };
        match serde_json::from_str::<Value>(own) {
            Ok(value @ Value::Object(_)) => lines.push(value),
            _ if own.len() != line.len() => {}
            _ => return Err(format!("not a JSON object: {line}")),
        }
    }
    Ok(lines)
}

/// Whether a line of `make dev`'s output is at WARN or above: the
/// functions' JSON lines carry `"level"`; cargo-lambda's own and the
/// runtime's plain ones put the level first, after a time stamp if any.
pub fn at_warn_or_above(line: &str) -> bool {
    const LEVELS: [&str; 2] = ["WARN", "ERROR"];
    LEVELS.iter().any(|level| {
        line.contains(&format!("\"level\":\"{level}\""))
            || line
                .split_whitespace()
                .take(2)
                .any(|word| word == *level || word.trim_end_matches(':') == *level)
    })
}

pub fn is_emf(line: &Value) -> bool {
    line.get("_aws").is_some()
}

/// Whether `doc` is a valid EMF document (CloudWatch's specification):
/// a millisecond timestamp and directives whose namespace is ours, whose
/// dimensions name string members and whose metrics name numbers.
pub fn check_emf(doc: &Value) -> Result<(), String> {
    let aws = &doc["_aws"];
    if !aws["Timestamp"].is_u64() {
        return Err(format!("no Timestamp: {doc}"));
    }
    let directives = aws["CloudWatchMetrics"]
        .as_array()
        .filter(|d| !d.is_empty())
        .ok_or_else(|| format!("no CloudWatchMetrics: {doc}"))?;
    for directive in directives {
        if directive["Namespace"] != "SlotBooking" {
            return Err(format!("namespace: {doc}"));
        }
        let sets = directive["Dimensions"]
            .as_array()
            .ok_or_else(|| format!("no Dimensions: {doc}"))?;
        for set in sets {
            for name in set.as_array().ok_or_else(|| format!("a set: {doc}"))? {
                let name = name.as_str().ok_or_else(|| format!("a name: {doc}"))?;
                if !doc[name].is_string() {
                    return Err(format!("dimension {name} has no value: {doc}"));
                }
            }
        }
        let metrics = directive["Metrics"]
            .as_array()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| format!("no Metrics: {doc}"))?;
        for metric in metrics {
            let name = metric["Name"].as_str().ok_or(format!("a Name: {doc}"))?;
            if !doc[name].is_number() {
                return Err(format!("metric {name} is not a number: {doc}"));
            }
        }
    }
    Ok(())
}

/// Each metric summed over the documents (`HoldsRefused` under
/// `HoldsRefused:<reason>`).
pub fn emf_sums<'a>(docs: impl IntoIterator<Item = &'a Value>) -> BTreeMap<String, u64> {
    let mut sums = BTreeMap::new();
    for doc in docs {
        for directive in doc["_aws"]["CloudWatchMetrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for metric in directive["Metrics"].as_array().into_iter().flatten() {
                let name = metric["Name"].as_str().unwrap_or_default();
                let value = doc[name].as_u64().unwrap_or_default();
                let key = match doc["reason"].as_str() {
                    Some(reason) if name == "HoldsRefused" => format!("{name}:{reason}"),
                    _ => name.to_string(),
                };
                *sums.entry(key).or_default() += value;
            }
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulators_and_cargos_lines_are_told_from_the_functions() {
        assert!(is_emulator_line(
            " INFO spawning function instance function=\"hold\""
        ));
        assert!(is_emulator_line("ERROR response failed classification=…"));
        assert!(is_emulator_line(
            "    Finished `dev` profile [unoptimized] target(s)"
        ));
        assert!(is_emulator_line("     Running `target/debug/hold`"));
        assert!(!is_emulator_line("{\"level\":\"INFO\"}"));
        assert!(!is_emulator_line(
            "thread 'main' panicked at shared/src/x.rs:1:1:"
        ));
        assert!(!is_emulator_line("request failed"));
        assert!(is_emulator_line(
            " `dev` profile [unoptimized] target(s) in 0.71s"
        ));
        let log = "    Finished{\"level\":\"INFO\"}\n INFO x=Command { std: A=\"1\" }\n{\"a\":1}\n";
        assert_eq!(function_lines(log).unwrap().len(), 2);
        assert!(function_lines("thread 'main' panicked at x.rs:1:1:\n").is_err());
    }
}
