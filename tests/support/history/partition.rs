//! The history split per slot (P-compositionality: every call acts on one
//! slot, and linearizability is local, so the history is linearizable iff
//! each slot's sub-history is), after the checks that span slots and the
//! facts of the whole history (`ids.rs`). A move (SPEC §17) acts on two
//! slots: the slots that moves join are one partition, with its keys'
//! holds going from one to another. A waiting-list entry (§18) and the
//! hold offered to it are one key, on the entry's slot.

use super::ids::Ids;
use super::model::{EntryStatus, Kind, Observed, Status, ms};
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

impl Op {
    /// The instants at which it may take effect.
    pub fn window(&self) -> (u64, u64) {
        (self.earliest, self.latest)
    }
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
    let ids = Ids::of(history)?;
    let mut keys: Vec<String> = Vec::with_capacity(history.len());
    for (i, c) in history.iter().enumerate() {
        let Some(key) = ids.key(&c.request) else {
            return Err(format!(
                "call #{i}: its id is not known from any answer: {}",
                show(c)
            ));
        };
        keys.push(key);
    }
    // A key's slot: the first its hold or join requests name (or, for a
    // key only named by id here, its answers show). Every other slot a
    // request of the key names is joined to it below.
    let mut key_slot: HashMap<&str, u64> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        let slot = match &c.request {
            Request::Hold { slot, .. } | Request::Join { slot, .. } => {
                key_slot.entry(&keys[i]).or_insert(*slot);
                *slot
            }
            Request::Move { to, .. } => *to,
            _ => continue,
        };
        if !capacities.contains_key(&slot) {
            return Err(format!("call #{i}: slot {slot} has no known capacity"));
        }
    }
    for (i, c) in history.iter().enumerate() {
        // (A resource answered on a slot that no move of its joined to its
        // own is outside its partition: `observe` reports it.)
        let shown = c.response.hold.as_ref().map(|h| h.slot);
        if let Some(slot) = shown.or(c.response.entry.as_ref().map(|e| e.slot)) {
            key_slot.entry(&keys[i]).or_insert(slot);
        }
    }
    // The slots a key's requests join: its own and every other a hold or
    // join request of it names (answered 422 unless a move took it there)
    // or a move of it targets.
    let mut group: BTreeMap<u64, u64> = capacities.keys().map(|&s| (s, s)).collect();
    let home = |i: usize| {
        let slot = key_slot.get(keys[i].as_str()).copied();
        slot.filter(|s| capacities.contains_key(s)).ok_or_else(|| {
            format!(
                "call #{i}: its slot has no known capacity: {}",
                show(&history[i])
            )
        })
    };
    for (i, c) in history.iter().enumerate() {
        let slot = match &c.request {
            Request::Hold { slot, .. } | Request::Join { slot, .. } => *slot,
            Request::Move { to, .. } => *to,
            _ => continue,
        };
        join(&mut group, home(i)?, slot);
    }
    let mut parts: BTreeMap<u64, Partition> = BTreeMap::new();
    let mut key_index: HashMap<&str, usize> = HashMap::new();
    for (i, c) in history.iter().enumerate() {
        let root = find(&group, home(i)?);
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
        let within = |slot: &u64| index(*slot).expect("a request's slot is in its partition");
        let kind = match &c.request {
            Request::Hold { slot, .. } => Kind::Hold(within(slot)),
            Request::Confirm { .. } => Kind::Confirm,
            Request::Cancel { .. } => Kind::Cancel,
            Request::Extend { .. } => Kind::Extend,
            Request::Move { to, .. } => Kind::Move(within(to)),
            Request::Read { .. } => Kind::Read,
            Request::Join { slot, .. } => Kind::Join(within(slot)),
            Request::Leave { .. } => Kind::Leave,
            Request::Entry { .. } => Kind::Entry,
        };
        let key = *key_index.entry(&keys[i]).or_insert_with(|| {
            p.keys.push(keys[i].clone());
            p.model.created.push(ids.created.get(&keys[i]).copied());
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

/// What `c`'s answer said, its resource's slot by `index` in the
/// partition.
fn observe(c: &Call, index: &impl Fn(u64) -> Option<u16>) -> Observed {
    let r = &c.response;
    if let (200 | 201, Some(e)) = (r.status, &r.entry) {
        return match (EntryStatus::parse(&e.status), index(e.slot)) {
            (Some(status), Some(at)) => Observed::Entry {
                code: r.status,
                status,
                position: e.position,
                at,
            },
            (None, _) => Observed::Malformed(format!("entry status {:?}", e.status)),
            (_, None) => {
                Observed::Malformed(format!("entry on slot {}, outside its moves", e.slot))
            }
        };
    }
    match (r.status, &r.hold, &r.reason) {
        (503, _, _) => Observed::Unknown,
        (200 | 201, Some(_), _) if c.request.on_entry() => {
            Observed::Malformed(format!("a hold for an entry: {r:?}"))
        }
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
        Request::Read { hold } => format!("read(#{hold})"),
        Request::Join { slot, key } => format!("join(slot {slot}, key {})", short(key)),
        Request::Leave { entry } => format!("leave(entry #{entry})"),
        Request::Entry { entry } => format!("read(entry #{entry})"),
    };
    let r = &c.response;
    let answer = match (&r.hold, &r.reason) {
        (None, _) if r.entry.is_some() => {
            let e = r.entry.as_ref().expect("checked");
            let position = e.position.map(|p| format!(" at {p}"));
            let offer = e.hold.map(|h| format!(" (hold #{h})"));
            format!(
                "{} entry {} #{}{}{}",
                r.status,
                e.status,
                e.id,
                position.unwrap_or_default(),
                offer.unwrap_or_default()
            )
        }
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
