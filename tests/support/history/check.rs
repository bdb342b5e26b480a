//! The checker: the history split per slot (P-compositionality: every call
//! acts on one slot, and linearizability is local, so the history is
//! linearizable iff each slot's sub-history is), then Wing & Gong's search
//! on each, memoised as in Lowe's and Porcupine's: a set of linearized calls
//! (a bitset) reached with the same model state is never explored twice.
//!
//! 503 `service_unavailable` is *not* taken as "no effect": the service
//! answers it when its operation deadline fires, which can be after COMMIT
//! was sent, so the write may have landed. Such a call is treated as
//! Knossos treats an indeterminate one: it may take effect at any instant
//! after its invocation (its completion is at infinity) or never.

use super::model::{Kind, Observed, Slot, State, Status};
use super::{Call, Request};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

/// The verdict, with the figures of the search.
#[derive(Debug)]
pub struct Report {
    pub calls: usize,
    pub slots: usize,
    /// Distinct (linearized set, state) pairs the search visited.
    pub explored: usize,
    pub elapsed: Duration,
    /// `None`: linearizable. Otherwise why not, readably.
    pub counterexample: Option<String>,
}

impl Report {
    pub fn linearizable(&self) -> bool {
        self.counterexample.is_none()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls on {} slots, {} states explored in {:?}: ",
            self.calls, self.slots, self.explored, self.elapsed
        )?;
        match &self.counterexample {
            None => f.write_str("linearizable"),
            Some(why) => write!(f, "NOT linearizable\n{why}"),
        }
    }
}

/// One call of a slot's sub-history.
struct Op {
    call: usize,
    invoked: u64,
    /// `u64::MAX` when the outcome is unknown.
    completed: u64,
    kind: Kind,
    key: usize,
    observed: Observed,
}

struct Partition {
    slot: u64,
    model: Slot,
    keys: Vec<String>,
    ops: Vec<Op>,
}

/// Decides whether `history` is linearizable; `capacities` gives each
/// slot's capacity (every call must name a slot listed there).
pub fn check(history: &[Call], capacities: &BTreeMap<u64, u32>) -> Report {
    let started = Instant::now();
    let mut report = Report {
        calls: history.len(),
        slots: 0,
        explored: 0,
        elapsed: Duration::ZERO,
        counterexample: None,
    };
    match partition(history, capacities) {
        Err(why) => report.counterexample = Some(why),
        Ok(partitions) => {
            report.slots = partitions.len();
            for p in &partitions {
                let (explored, verdict) = search(p, history);
                report.explored += explored;
                if let Err(why) = verdict {
                    report.counterexample = Some(why);
                    break;
                }
            }
        }
    }
    report.elapsed = started.elapsed();
    report
}

/// Splits the history per slot, after the checks that span slots: one
/// hold per key and one key per hold, every answer's hold the one asked for.
fn partition(history: &[Call], capacities: &BTreeMap<u64, u32>) -> Result<Vec<Partition>, String> {
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
    for (i, c) in history.iter().enumerate() {
        let Some(h) = &c.response.hold else { continue };
        let asked = match &c.request {
            Request::Hold { slot, key } => h.slot == *slot && h.key == *key,
            Request::Confirm { hold } | Request::Cancel { hold } => h.id == *hold,
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
            Request::Confirm { hold } | Request::Cancel { hold } => {
                let Some((key, _)) = id_key.get(hold) else {
                    return Err(format!(
                        "call #{i}: hold {hold} is not known from any answer"
                    ));
                };
                let kind = if matches!(c.request, Request::Confirm { .. }) {
                    Kind::Confirm
                } else {
                    Kind::Cancel
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
            },
            keys: Vec::new(),
            ops: Vec::new(),
        });
        let key = *key_index.entry(key).or_insert_with(|| {
            p.keys.push(key.to_string());
            p.keys.len() - 1
        });
        let observed = observe(c);
        let completed = match observed {
            Observed::Unknown => u64::MAX,
            _ => c.completed,
        };
        p.ops.push(Op {
            call: i,
            invoked: c.invoked,
            completed,
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

/// Wing & Gong's search on one slot's calls (sorted by invocation):
/// repeatedly linearize a call that no unlinearized completed call
/// precedes in real time, backtracking when none fits.
fn search(p: &Partition, history: &[Call]) -> (usize, Result<(), String>) {
    let n = p.ops.len();
    let required = p.ops.iter().filter(|o| o.completed != u64::MAX).count();
    let mut done = vec![0u64; n.div_ceil(64)];
    let mut state = p.model.initial(p.keys.len());
    let mut stack: Vec<(usize, State)> = Vec::new();
    let mut cache: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut linearized = 0;
    let mut resume = 0;
    let mut deepest: (usize, Vec<usize>, State) = (0, Vec::new(), state.clone());
    let is_done = |done: &[u64], i: usize| done[i / 64] & (1 << (i % 64)) != 0;
    loop {
        if linearized == required {
            return (cache.len(), Ok(()));
        }
        // A call invoked after some unlinearized call completed must come
        // after it: only calls invoked by that bound are candidates (equal
        // instants count as overlapping, as in Porcupine).
        let bound = (0..n)
            .filter(|&i| !is_done(&done, i))
            .map(|i| p.ops[i].completed)
            .min()
            .unwrap_or(u64::MAX);
        let mut next = None;
        let mut i = resume;
        while i < n && p.ops[i].invoked <= bound {
            let op = &p.ops[i];
            if !is_done(&done, i)
                && let Some(after) = p.model.step(&state, op.kind, op.key, &op.observed)
            {
                let mut set = done.clone();
                set[i / 64] |= 1 << (i % 64);
                if cache.insert((set.clone(), after.clone())) {
                    next = Some((i, after, set));
                    break;
                }
            }
            i += 1;
        }
        match next {
            Some((i, after, set)) => {
                stack.push((i, std::mem::replace(&mut state, after)));
                done = set;
                linearized += usize::from(p.ops[i].completed != u64::MAX);
                resume = 0;
                if stack.len() > deepest.0 {
                    let order = stack.iter().map(|(i, _)| *i).collect();
                    deepest = (stack.len(), order, state.clone());
                }
            }
            None => {
                let Some((i, before)) = stack.pop() else {
                    return (
                        cache.len(),
                        Err(explain(p, history, &deepest.1, &deepest.2)),
                    );
                };
                done[i / 64] &= !(1 << (i % 64));
                state = before;
                linearized -= usize::from(p.ops[i].completed != u64::MAX);
                resume = i + 1;
            }
        }
    }
}

/// The longest linearization found, and why no remaining call extends it.
fn explain(p: &Partition, history: &[Call], order: &[usize], state: &State) -> String {
    let mut out = format!(
        "slot {} (capacity {}): no order of its {} calls fits the model; the longest \
         linearization found has {}:\n",
        p.slot,
        p.model.capacity,
        p.ops.len(),
        order.len()
    );
    for &i in order {
        out += &format!("  {}\n", show(&history[p.ops[i].call]));
    }
    out += &format!(
        "then, in state [{}] (bookable {}), no remaining call fits:\n",
        Slot::describe(state),
        p.model.bookable(state)
    );
    let done: HashSet<usize> = order.iter().copied().collect();
    let bound = (0..p.ops.len())
        .filter(|i| !done.contains(i))
        .map(|i| p.ops[i].completed)
        .min()
        .unwrap_or(u64::MAX);
    for (i, op) in p.ops.iter().enumerate() {
        if done.contains(&i) || op.invoked > bound {
            continue;
        }
        let (expected, _) = p.model.apply(state, op.kind, op.key);
        out += &format!(
            "  {}   (k{}; the model answers {expected})\n",
            show(&history[op.call]),
            op.key
        );
    }
    out += "keys: ";
    out += &p
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("k{i}={}", short(k)))
        .collect::<Vec<_>>()
        .join(" ");
    out
}

/// `[client 3, 1.204–1.391 ms] hold(slot 2, key 6f1c2a3b) → 201 held #17`
fn show(c: &Call) -> String {
    let request = match &c.request {
        Request::Hold { slot, key } => format!("hold(slot {slot}, key {})", short(key)),
        Request::Confirm { hold } => format!("confirm(#{hold})"),
        Request::Cancel { hold } => format!("cancel(#{hold})"),
    };
    let r = &c.response;
    let answer = match (&r.hold, &r.reason) {
        (Some(h), _) => format!("{} {} #{}", r.status, h.status, h.id),
        (None, Some(reason)) => format!("{} {reason}", r.status),
        (None, None) => r.status.to_string(),
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    format!(
        "[client {}, {:.3}–{:.3} ms] {request} → {answer}",
        c.client,
        ms(c.invoked),
        ms(c.completed)
    )
}

fn short(key: &str) -> &str {
    key.get(..8).unwrap_or(key)
}
