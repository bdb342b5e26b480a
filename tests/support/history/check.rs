//! The checker: per slot (see `partition.rs`), Wing & Gong's search,
//! memoised as in Lowe's and Porcupine's.
//!
//! Holds expire, so a linearization places each call at an instant `t`
//! inside its interval (widened by [`super::CLOCK_MARGIN`]), never earlier
//! than the call placed before it, and the model answers at `t`. Between
//! two of the model's turning points (`Slot::turning_points`: where some
//! hold expires, where an extension's limit or cap changes) the answer
//! and the state after are the same, so a call is tried at the earliest
//! instant it may have and at each turning point after that inside its
//! interval; of the instants that give the observed answer and the same
//! state after, only the earliest (any later one only narrows what may
//! follow). The same answer may leave different states at different
//! instants (a refused hold that first offered an expired seat to the
//! line, or not yet): each is tried. A node where an entry whose offered
//! hold an answer showed is not offered yet, and no call left may have
//! made that hold (its `created_at` outside every remaining call's
//! interval), has no children: the branch that put the offer off is cut
//! where it goes wrong, not where a later read shows it. The memo keeps, for each (set of linearized calls, model
//! state), the earliest instant it was reached at: reached again no
//! earlier, it has nothing new to offer.
//!
//! 503 `service_unavailable` is *not* taken as "no effect": the service
//! answers it when its operation deadline fires, which can be after COMMIT
//! was sent, so the write may have landed. Such a call is treated as
//! Knossos treats an indeterminate one: it may take effect at any instant
//! after its invocation (its completion is at infinity) or never.

use super::ids::is_entry;
use super::model::{EntryStatus, ms};
use super::partition::{Op, Partition, partition, short, show};
use super::slot::{Slot, State};
use super::{Call, Rules};
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

/// Decides whether `history` is linearizable; `capacities` gives each
/// slot's capacity (every call must name a slot listed there), `rules` the
/// service's hold TTL and lifetime.
pub fn check(history: &[Call], capacities: &BTreeMap<u64, u32>, rules: Rules) -> Report {
    let started = Instant::now();
    let mut report = Report {
        calls: history.len(),
        slots: 0,
        explored: 0,
        elapsed: Duration::ZERO,
        counterexample: None,
    };
    match partition(history, capacities, rules) {
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

/// A node of the search: which calls are linearized, the model's state,
/// and the instant of the last call placed.
struct Node {
    done: Vec<u64>,
    state: State,
    now: u64,
}

fn is_done(done: &[u64], i: usize) -> bool {
    done[i / 64] & (1 << (i % 64)) != 0
}

/// The calls that may come next after `node`, each at the instants worth
/// trying (see the module's comment), with the state after: in order of
/// invocation, then of instant, reversed (the search pops the first).
fn children(
    p: &Partition,
    node: &Node,
    makers: &[(usize, Vec<usize>)],
) -> Vec<(usize, u64, State)> {
    // An entry whose offered hold some answer showed, not offered yet
    // here, needs a call left that may have made it (`line.rs`).
    let unmade = makers.iter().any(|(key, calls)| {
        let k = node.state[*key];
        matches!(
            k.entry,
            EntryStatus::None | EntryStatus::Waiting | EntryStatus::Left
        ) && calls.iter().all(|&i| is_done(&node.done, i))
    });
    if unmade {
        return Vec::new();
    }
    let n = p.ops.len();
    // A call invoked after some unlinearized call completed must come
    // after it: only calls invoked by that bound are candidates (equal
    // instants count as overlapping, as in Porcupine).
    let bound = (0..n)
        .filter(|&i| !is_done(&node.done, i))
        .map(|i| p.ops[i].completed)
        .min()
        .unwrap_or(u64::MAX);
    let mut out = Vec::new();
    for (i, op) in p.ops.iter().enumerate() {
        if op.invoked > bound {
            break;
        }
        let earliest = node.now.max(op.earliest);
        if is_done(&node.done, i) || earliest > op.latest {
            continue;
        }
        let mut at = p
            .model
            .turning_points(&node.state, op.kind, op.key, &p.shown[op.key]);
        at.retain(|&t| earliest < t && t <= op.latest);
        at.push(earliest);
        at.sort_unstable();
        at.dedup();
        let mut after: Vec<(u64, State)> = Vec::new();
        for t in at {
            let Some(next) =
                p.model
                    .step(&node.state, op.kind, op.key, (t, op.window()), &op.observed)
            else {
                continue;
            };
            // The same answer may leave another state at a later instant:
            // a hold refused before an expiry, or after it with the seat
            // offered to the line (SPEC §18).
            if !after.iter().any(|(_, s)| *s == next) {
                after.push((t, next));
            }
        }
        // Of those, first the one that makes the offers whose holds were
        // made during this call: the other ones are cut only once every
        // call that may have made them is placed.
        after.sort_by_key(|(_, next)| std::cmp::Reverse(made_here(p, op, &node.state, next)));
        out.extend(after.into_iter().map(|(t, next)| (i, t, next)));
    }
    out.reverse();
    out
}

/// The entries `op` offers between `before` and `after` whose offered
/// hold an answer showed made during `op`.
fn made_here(p: &Partition, op: &Op, before: &State, after: &State) -> usize {
    let (from, to) = op.window();
    (0..after.len())
        .filter(|&key| {
            before[key].entry != EntryStatus::Offered
                && after[key].entry == EntryStatus::Offered
                && p.model.created[key].is_some_and(|c| from <= c && c <= to)
        })
        .count()
}

/// Wing & Gong's search on one slot's calls (sorted by invocation):
/// repeatedly linearize a call that no unlinearized completed call
/// precedes in real time, at an instant its interval allows, backtracking
/// when none fits.
fn search(p: &Partition, history: &[Call]) -> (usize, Result<(), String>) {
    let required = p.ops.iter().filter(|o| o.completed != u64::MAX).count();
    let mut node = Node {
        done: vec![0u64; p.ops.len().div_ceil(64)],
        state: p.model.initial(),
        now: 0,
    };
    let mut memo: HashMap<(Vec<u64>, State), u64> = HashMap::new();
    let makers: Vec<(usize, Vec<usize>)> = (0..p.keys.len())
        .filter_map(|key| {
            let made = p.model.created[key]?;
            let calls = (0..p.ops.len())
                .filter(|&i| p.ops[i].earliest <= made && made <= p.ops[i].latest)
                .collect();
            Some((key, calls))
        })
        .filter(|(key, _)| is_entry(&p.keys[*key]))
        .collect();
    let mut frames = vec![children(p, &node, &makers)];
    // The calls placed, with what to restore when one is taken back.
    let mut path: Vec<(usize, State, u64)> = Vec::new();
    let mut linearized = 0;
    let mut deepest: (Vec<usize>, State, u64) = (Vec::new(), node.state.clone(), 0);
    loop {
        if linearized == required {
            return (memo.len(), Ok(()));
        }
        let frame = frames
            .last_mut()
            .expect("a frame per placed call, and the root's");
        match frame.pop() {
            Some((i, t, after)) => {
                let mut done = node.done.clone();
                done[i / 64] |= 1 << (i % 64);
                match memo.get_mut(&(done.clone(), after.clone())) {
                    Some(reached) if *reached <= t => continue,
                    Some(reached) => *reached = t,
                    None => {
                        memo.insert((done.clone(), after.clone()), t);
                    }
                }
                let before = std::mem::replace(&mut node.state, after);
                path.push((i, before, node.now));
                (node.done, node.now) = (done, t);
                linearized += usize::from(p.ops[i].completed != u64::MAX);
                if path.len() > deepest.0.len() {
                    let order = path.iter().map(|(i, ..)| *i).collect();
                    deepest = (order, node.state.clone(), node.now);
                }
                frames.push(children(p, &node, &makers));
            }
            None => {
                frames.pop();
                let Some((i, before, now)) = path.pop() else {
                    let (order, state, now) = &deepest;
                    return (memo.len(), Err(explain(p, history, order, state, *now)));
                };
                node.done[i / 64] &= !(1 << (i % 64));
                (node.state, node.now) = (before, now);
                linearized -= usize::from(p.ops[i].completed != u64::MAX);
            }
        }
    }
}

/// The longest linearization found, and why no remaining call extends it.
fn explain(p: &Partition, history: &[Call], order: &[usize], state: &State, now: u64) -> String {
    let slots: Vec<String> = p
        .slots
        .iter()
        .zip(&p.model.capacities)
        .map(|(slot, capacity)| format!("slot {slot} (capacity {capacity})"))
        .collect();
    let mut out = format!(
        "{}: no order of its {} calls fits the model; the longest linearization found has {}:\n",
        slots.join(", "),
        p.ops.len(),
        order.len()
    );
    for &i in order {
        out += &format!("  {}\n", show(&history[p.ops[i].call]));
    }
    let bookable: Vec<String> = (0..p.slots.len())
        .filter_map(|at| u16::try_from(at).ok())
        .map(|at| format!("@{at}: {}", p.model.bookable(state, at, now)))
        .collect();
    out += &format!(
        "then, at {} in state [{}] (bookable {}), no remaining call fits:\n",
        ms(now),
        Slot::describe(state),
        bookable.join(", ")
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
        let t = now.max(op.earliest);
        let (expected, _) = p
            .model
            .apply(state, op.kind, op.key, (t, op.window()), true);
        out += &format!(
            "  {}   (k{}; at {} the model answers {expected})\n",
            show(&history[op.call]),
            op.key,
            ms(t)
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
