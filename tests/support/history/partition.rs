//! The history split per slot (P-compositionality: every call acts on one
//! slot, and linearizability is local, so the history is linearizable iff
//! each slot's sub-history is), after the checks that span slots and the
//! facts of the whole history: one hold per key and one key per hold,
//! every answer's hold the one asked for, one `created_at` per hold.

use super::model::{Kind, Observed, Status, ms};
use super::slot::Slot;
use super::{CLOCK_MARGIN, Call, Request, Rules};
use std::collections::{BTreeMap, HashMap};

/// One call of a slot's sub-history.
pub struct Op {
    pub call: usize,
    pub invoked: u64,
    /// `u64::MAX` when the outcome is unknown.
    pub completed: u64,
    /// The instants at which the call may take effect, by the database's
    /// reading of the clock: its interval widened by [`CLOCK_MARGIN`].
    pub earliest: u64,
    pub latest: u64,
    pub kind: Kind,
    pub key: usize,
    pub observed: Observed,
}

pub struct Partition {
    pub slot: u64,
    pub model: Slot,
    pub keys: Vec<String>,
    /// Every `expires_at` some answer showed, by key.
    pub shown: Vec<Vec<u64>>,
    pub ops: Vec<Op>,
}

pub fn partition(
    history: &[Call],
    capacities: &BTreeMap<u64, u32>,
    rules: Rules,
) -> Result<Vec<Partition>, String> {
    let mut key_slot: HashMap<&str, u64> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        if let Request::Hold { slot, key } = &c.request
            && *key_slot.entry(key).or_insert(*slot) != *slot
        {
            return Err(format!(
                "call #{i}: key {key} used on two slots (outside the model)"
            ));
        }
    }
    let mut id_key: HashMap<u64, (&str, usize)> = HashMap::new();
    let mut key_id: HashMap<&str, (u64, usize)> = HashMap::new();
    let mut created: HashMap<&str, (u64, usize)> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        let Some(h) = &c.response.hold else { continue };
        let asked = match &c.request {
            Request::Hold { slot, key } => h.slot == *slot && h.key == *key,
            Request::Confirm { hold } | Request::Cancel { hold } | Request::Extend { hold } => {
                h.id == *hold
            }
        };
        if !asked {
            return Err(format!(
                "call #{i}: answered with another hold: {}",
                show(c)
            ));
        }
        let (key, by_id) = *id_key.entry(h.id).or_insert((&h.key, i));
        let (id, by_key) = *key_id.entry(&h.key).or_insert((h.id, i));
        if key != h.key || id != h.id {
            let first = if key != h.key { by_id } else { by_key };
            return Err(format!(
                "one hold per key, one key per hold, broken by call #{first} {}\n  and call #{i} {}",
                show(&history[first]),
                show(c)
            ));
        }
        if let Some(at) = h.created_at {
            let (first_at, first) = *created.entry(&h.key).or_insert((at, i));
            if first_at != at {
                return Err(format!(
                    "one hold, two created_at: call #{first} {}\n  and call #{i} {}",
                    show(&history[first]),
                    show(c)
                ));
            }
        }
        // A key only confirmed or cancelled here has the slot its hold says.
        if *key_slot.entry(&h.key).or_insert(h.slot) != h.slot {
            return Err(format!("call #{i}: hold on a slot its key never asked for"));
        }
    }
    let mut parts: BTreeMap<u64, Partition> = BTreeMap::new();
    let mut key_index: HashMap<&str, usize> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        let (kind, key) = match &c.request {
            Request::Hold { key, .. } => (Kind::Hold, key.as_str()),
            Request::Confirm { hold } | Request::Cancel { hold } | Request::Extend { hold } => {
                let Some((key, _)) = id_key.get(hold) else {
                    return Err(format!(
                        "call #{i}: hold {hold} is not known from any answer"
                    ));
                };
                let kind = match c.request {
                    Request::Confirm { .. } => Kind::Confirm,
                    Request::Cancel { .. } => Kind::Cancel,
                    _ => Kind::Extend,
                };
                (kind, *key)
            }
        };
        let slot = key_slot[key];
        let Some(capacity) = capacities.get(&slot) else {
            return Err(format!("call #{i}: slot {slot} has no known capacity"));
        };
        let p = parts.entry(slot).or_insert_with(|| Partition {
            slot,
            model: Slot {
                capacity: *capacity,
                rules,
                created: Vec::new(),
            },
            keys: Vec::new(),
            shown: Vec::new(),
            ops: Vec::new(),
        });
        let key = *key_index.entry(key).or_insert_with(|| {
            p.keys.push(key.to_string());
            p.model.created.push(created.get(key).map(|(at, _)| *at));
            p.shown.push(Vec::new());
            p.keys.len() - 1
        });
        if let Some(expires) = c.response.hold.as_ref().and_then(|h| h.expires_at) {
            p.shown[key].push(expires);
        }
        let observed = observe(c);
        let completed = match observed {
            Observed::Unknown => u64::MAX,
            _ => c.completed,
        };
        p.ops.push(Op {
            call: i,
            invoked: c.invoked,
            completed,
            earliest: c.invoked.saturating_sub(CLOCK_MARGIN),
            latest: completed.saturating_add(CLOCK_MARGIN),
            kind,
            key,
            observed,
        });
    }
    let mut parts: Vec<Partition> = parts.into_values().collect();
    for p in &mut parts {
        p.ops.sort_by_key(|o| (o.invoked, o.completed));
    }
    Ok(parts)
}

fn observe(c: &Call) -> Observed {
    let r = &c.response;
    match (r.status, &r.hold, &r.reason) {
        (503, _, _) => Observed::Unknown,
        (200 | 201, Some(h), _) => match Status::parse(&h.status) {
            Some(status) => Observed::Hold {
                code: r.status,
                status,
                expires: h.expires_at,
            },
            None => Observed::Malformed(format!("hold status {:?}", h.status)),
        },
        (code, None, Some(reason)) if code >= 400 => Observed::Error {
            code,
            reason: reason.clone(),
        },
        _ => Observed::Malformed(format!("{r:?}")),
    }
}

/// `[client 3, 1.204–1.391 ms] hold(slot 2, key 6f1c2a3b) → 201 held #17`
pub fn show(c: &Call) -> String {
    let request = match &c.request {
        Request::Hold { slot, key } => format!("hold(slot {slot}, key {})", short(key)),
        Request::Confirm { hold } => format!("confirm(#{hold})"),
        Request::Cancel { hold } => format!("cancel(#{hold})"),
        Request::Extend { hold } => format!("extend(#{hold})"),
    };
    let r = &c.response;
    let answer = match (&r.hold, &r.reason) {
        (Some(h), _) => {
            let until = h.expires_at.map(|e| format!(" until {}", ms(e)));
            format!(
                "{} {} #{}{}",
                r.status,
                h.status,
                h.id,
                until.unwrap_or_default()
            )
        }
        (None, Some(reason)) => format!("{} {reason}", r.status),
        (None, None) => r.status.to_string(),
    };
    let at = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    format!(
        "[client {}, {}–{} ms] {request} → {answer}",
        c.client,
        at(c.invoked),
        at(c.completed)
    )
}

pub fn short(key: &str) -> &str {
    key.get(..8).unwrap_or(key)
}
