//! The history split per slot (P-compositionality: every call acts on one
//! slot, and linearizability is local, so the history is linearizable iff
//! each slot's sub-history is), after the checks that span slots and the
//! facts of the whole history: one hold per key and one key per hold,
//! every answer's hold the one asked for, one `created_at` per hold. A
//! move (SPEC §17) acts on two slots: the slots that moves join are one
//! partition, with its keys' holds going from one to another.

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
    /// Its slots' ids, by their index in the model.
    pub slots: Vec<u64>,
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
    // A key's slot: the first its hold requests name (or, for a key only
    // confirmed or cancelled here, its answers show). Every other slot a
    // request of the key names is joined to it below.
    let mut key_slot: HashMap<&str, u64> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        let slot = match &c.request {
            Request::Hold { slot, key } => {
                key_slot.entry(key).or_insert(*slot);
                *slot
            }
            Request::Move { to, .. } => *to,
            _ => continue,
        };
        if !capacities.contains_key(&slot) {
            return Err(format!("call #{i}: slot {slot} has no known capacity"));
        }
    }
    let mut id_key: HashMap<u64, (&str, usize)> = HashMap::new();
    let mut key_id: HashMap<&str, (u64, usize)> = HashMap::new();
    let mut created: HashMap<&str, (u64, usize)> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        let Some(h) = &c.response.hold else { continue };
        let asked = match &c.request {
            Request::Hold { slot, key } => h.slot == *slot && h.key == *key,
            Request::Confirm { hold }
            | Request::Cancel { hold }
            | Request::Extend { hold }
            | Request::Move { hold, .. } => h.id == *hold,
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
        // A key only confirmed or cancelled here has the slot its hold
        // says. (A hold answered on a slot that no move of its joined to
        // its own is outside its partition: `observe` reports it.)
        key_slot.entry(&h.key).or_insert(h.slot);
    }
    // The slots a key's requests join: its own and every other a hold
    // request of it names (answered 422 unless a move took it there) or a
    // move of it targets.
    let mut group: BTreeMap<u64, u64> = capacities.keys().map(|&s| (s, s)).collect();
    for (i, c) in history.iter().enumerate() {
        let (key, slot) = match &c.request {
            Request::Hold { slot, key } => (key.as_str(), *slot),
            Request::Move { hold, to } => match id_key.get(hold) {
                Some((key, _)) => (*key, *to),
                None => {
                    return Err(format!(
                        "call #{i}: hold {hold} is not known from any answer"
                    ));
                }
            },
            _ => continue,
        };
        let own = key_slot[key];
        if !capacities.contains_key(&own) {
            return Err(format!("call #{i}: slot {own} has no known capacity"));
        }
        join(&mut group, own, slot);
    }
    let mut parts: BTreeMap<u64, Partition> = BTreeMap::new();
    let mut key_index: HashMap<&str, usize> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        let (kind, key) = match &c.request {
            // The slot's index, set below.
            Request::Hold { key, .. } => (Kind::Hold(0), key.as_str()),
            Request::Confirm { hold }
            | Request::Cancel { hold }
            | Request::Extend { hold }
            | Request::Move { hold, .. } => {
                let Some((key, _)) = id_key.get(hold) else {
                    return Err(format!(
                        "call #{i}: hold {hold} is not known from any answer"
                    ));
                };
                let kind = match c.request {
                    Request::Confirm { .. } => Kind::Confirm,
                    Request::Cancel { .. } => Kind::Cancel,
                    // The target's index, set below.
                    Request::Move { .. } => Kind::Move(0),
                    _ => Kind::Extend,
                };
                (kind, *key)
            }
        };
        let home = key_slot[key];
        if !capacities.contains_key(&home) {
            return Err(format!("call #{i}: slot {home} has no known capacity"));
        }
        let root = find(&group, home);
        let p = parts.entry(root).or_insert_with(|| {
            let slots: Vec<u64> = group
                .keys()
                .copied()
                .filter(|&s| find(&group, s) == root)
                .collect();
            Partition {
                model: Slot {
                    capacities: slots.iter().map(|s| capacities[s]).collect(),
                    rules,
                    created: Vec::new(),
                },
                slots,
                keys: Vec::new(),
                shown: Vec::new(),
                ops: Vec::new(),
            }
        });
        let index = |slot: u64| {
            p.slots
                .iter()
                .position(|&s| s == slot)
                .and_then(|at| u16::try_from(at).ok())
        };
        let kind = match (kind, &c.request) {
            (Kind::Move(_), Request::Move { to, .. }) => {
                Kind::Move(index(*to).expect("a move's target is in its partition"))
            }
            (Kind::Hold(_), Request::Hold { slot, .. }) => {
                Kind::Hold(index(*slot).expect("a hold's slot is in its partition"))
            }
            (kind, _) => kind,
        };
        let key = *key_index.entry(key).or_insert_with(|| {
            p.keys.push(key.to_string());
            p.model.created.push(created.get(key).map(|(at, _)| *at));
            p.shown.push(Vec::new());
            p.keys.len() - 1
        });
        if let Some(expires) = c.response.hold.as_ref().and_then(|h| h.expires_at) {
            p.shown[key].push(expires);
        }
        let observed = observe(c, &index);
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

/// The slots that moves join share one representative: the smallest.
fn find(group: &BTreeMap<u64, u64>, mut slot: u64) -> u64 {
    while group[&slot] != slot {
        slot = group[&slot];
    }
    slot
}

fn join(group: &mut BTreeMap<u64, u64>, a: u64, b: u64) {
    let (a, b) = (find(group, a), find(group, b));
    group.insert(a.max(b), a.min(b));
}

/// What `c`'s answer said, its hold's slot by `index` in the partition.
fn observe(c: &Call, index: &impl Fn(u64) -> Option<u16>) -> Observed {
    let r = &c.response;
    match (r.status, &r.hold, &r.reason) {
        (503, _, _) => Observed::Unknown,
        (200 | 201, Some(h), _) => match (Status::parse(&h.status), index(h.slot)) {
            (Some(status), Some(at)) => Observed::Hold {
                code: r.status,
                status,
                expires: h.expires_at,
                at,
            },
            (None, _) => Observed::Malformed(format!("hold status {:?}", h.status)),
            (_, None) => Observed::Malformed(format!("hold on slot {}, outside its moves", h.slot)),
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
        Request::Move { hold, to } => format!("move(#{hold} to slot {to})"),
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
