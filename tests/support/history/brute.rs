//! The search against the definition: on many small random histories the
//! checker's verdict must equal brute force's, which tries every order of
//! the calls (and every choice of which 503s took effect) and, for each,
//! every instant of each call on a grid fine enough to meet every piece of
//! the model's answers (all times are whole milliseconds, so a half
//! millisecond's grid does), keeping those that respect real time and that
//! the model accepts. This proves the memoisation, the candidate window and
//! the turning points prune nothing they should not.

use super::model::{Expected, Kind, Observed, Status};
use super::slot::{Slot, State};
use super::{CLOCK_MARGIN, Call, Request, Response, Rules, check};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};

const KEYS: usize = 3;
const MS: u64 = 1_000_000;
/// Any call may act at any instant (no line here offers).
const ANY: (u64, u64) = (0, u64::MAX);

fn request(kind: Kind, key: usize) -> Request {
    let id = key as u64 + 1;
    match kind {
        Kind::Hold(_) => Request::Hold {
            slot: 1,
            key: format!("k{key}"),
        },
        Kind::Confirm => Request::Confirm { hold: id },
        Kind::Cancel => Request::Cancel { hold: id },
        Kind::Extend => Request::Extend { hold: id },
        Kind::Read => Request::Read { hold: id },
        _ => unreachable!("one slot of holds: nothing to move to, no line"),
    }
}

fn response(key: usize, created: u64, answer: Expected) -> Response {
    match answer {
        Expected::Hold {
            code,
            status,
            expires,
            at: _,
        } => Response::hold(code, key as u64 + 1, 1, &format!("k{key}"), status.as_str())
            .at(created, expires),
        Expected::Error { code, reason } => Response::error(code, reason),
        Expected::Entry { .. } | Expected::Impossible(_) => unreachable!("no line"),
    }
}

/// Calls placed at instants 4, 8, … ms in a random run of the model, each
/// with an interval around its instant; some answers are then replaced.
fn random_history(rng: &mut StdRng, capacity: u32, rules: Rules) -> Vec<Call> {
    let mut model = Slot::single(capacity, rules, vec![None; KEYS]);
    let mut state = model.initial();
    let n = rng.random_range(2..=6);
    let mut calls = Vec::new();
    for i in 0..n {
        let kind = [
            Kind::Hold(0),
            Kind::Hold(0),
            Kind::Confirm,
            Kind::Cancel,
            Kind::Extend,
        ][rng.random_range(0..5)];
        let key = rng.random_range(0..KEYS);
        let at = 4 * MS * (i as u64 + 1);
        let (answer, next) = model.apply(&state, kind, key, (at, ANY), true);
        let unknown = kind != Kind::Extend && rng.random_bool(0.1);
        if !unknown || rng.random_bool(0.5) {
            if state[key].status == Status::Unused && next[key].status != Status::Unused {
                model.created[key] = Some(at);
            }
            state = next;
        }
        calls.push(Call {
            client: i,
            invoked: at.saturating_sub(rng.random_range(0..=6) * MS),
            completed: at + rng.random_range(0..=6) * MS,
            request: request(kind, key),
            response: if unknown {
                Response::error(503, "service_unavailable")
            } else {
                response(key, model.created[key].unwrap_or(at), answer)
            },
        });
    }
    if rng.random_bool(0.4) {
        let i = rng.random_range(0..calls.len());
        let key = match &calls[i].request {
            Request::Hold { key, .. } => key[1..].parse().expect("key index"),
            Request::Confirm { hold }
            | Request::Cancel { hold }
            | Request::Extend { hold }
            | Request::Move { hold, .. } => *hold as usize - 1,
            _ => unreachable!("holds only"),
        };
        let created = model.created[key].unwrap_or(4 * MS * (i as u64 + 1));
        let expires = created + rules.ttl + rng.random_range(0..=2) * MS;
        let hold = |code, status| Expected::Hold {
            code,
            status,
            expires,
            at: 0,
        };
        let refused = |reason| Expected::Error { code: 409, reason };
        let wrong = [
            hold(201, Status::Held),
            hold(200, Status::Held),
            hold(200, Status::Confirmed),
            hold(200, Status::Cancelled),
            refused("capacity_exhausted"),
            refused("hold_cancelled"),
            refused("hold_expired"),
            refused("extension_limit_reached"),
        ];
        let answer = wrong[rng.random_range(0..wrong.len())];
        calls[i].response = response(key, created, answer);
    }
    calls
}

fn observed(c: &Call) -> Observed {
    let r = &c.response;
    match (&r.hold, &r.reason) {
        _ if r.status == 503 => Observed::Unknown,
        (Some(h), _) => Observed::Hold {
            code: r.status,
            status: Status::parse(&h.status).expect("status"),
            expires: h.expires_at,
            at: 0,
        },
        (None, reason) => Observed::Error {
            code: r.status,
            reason: reason.clone().unwrap_or_default(),
        },
    }
}

fn key_of(c: &Call) -> usize {
    match &c.request {
        Request::Hold { key, .. } => key[1..].parse().expect("key index"),
        Request::Confirm { hold }
        | Request::Cancel { hold }
        | Request::Extend { hold }
        | Request::Move { hold, .. } => *hold as usize - 1,
        _ => unreachable!("holds only"),
    }
}

fn kind_of(c: &Call) -> Kind {
    match c.request {
        Request::Hold { .. } => Kind::Hold(0),
        Request::Confirm { .. } => Kind::Confirm,
        Request::Cancel { .. } => Kind::Cancel,
        Request::Extend { .. } => Kind::Extend,
        Request::Read { .. } => Kind::Read,
        _ => unreachable!("one slot of holds: nothing to move to, no line"),
    }
}

/// Every permutation; in each, every subset of the 503s left out; in
/// each, every instant on the grid for every call (for each state reached,
/// the earliest instant it was reached at).
fn brute_force(calls: &[Call], model: &Slot) -> bool {
    let unknown: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i].response.status == 503)
        .collect();
    let completed = |i: usize| match calls[i].response.status {
        503 => u64::MAX,
        _ => calls[i].completed,
    };
    let end = calls.iter().map(|c| c.completed).max().unwrap_or(0) + 40 * MS;
    let grid: Vec<u64> = (0..=end / (MS / 2)).map(|k| k * (MS / 2)).collect();
    let mut order: Vec<usize> = (0..calls.len()).collect();
    permutations(&mut order, 0, &mut |order| {
        let in_time = (0..order.len())
            .all(|a| (a + 1..order.len()).all(|b| completed(order[b]) >= calls[order[a]].invoked));
        in_time
            && (0..1u32 << unknown.len()).any(|left_out| {
                let mut reached: HashMap<State, u64> = HashMap::from([(model.initial(), 0)]);
                for &i in order {
                    let skipped = unknown
                        .iter()
                        .position(|&u| u == i)
                        .is_some_and(|bit| left_out & (1 << bit) != 0);
                    if skipped {
                        continue;
                    }
                    let c = &calls[i];
                    let (from, to) = (
                        c.invoked.saturating_sub(CLOCK_MARGIN),
                        completed(i).saturating_add(CLOCK_MARGIN),
                    );
                    let seen = observed(c);
                    let mut after: HashMap<State, u64> = HashMap::new();
                    for (state, &since) in &reached {
                        for &t in grid.iter().filter(|&&t| t >= since.max(from) && t <= to) {
                            if let Some(next) =
                                model.step(state, kind_of(c), key_of(c), (t, ANY), &seen)
                            {
                                let best = after.entry(next).or_insert(t);
                                *best = (*best).min(t);
                            }
                        }
                    }
                    if after.is_empty() {
                        return false;
                    }
                    reached = after;
                }
                true
            })
    })
}

fn permutations(items: &mut [usize], from: usize, visit: &mut dyn FnMut(&[usize]) -> bool) -> bool {
    if from == items.len() {
        return visit(items);
    }
    for i in from..items.len() {
        items.swap(from, i);
        let found = permutations(items, from + 1, visit);
        items.swap(from, i);
        if found {
            return true;
        }
    }
    false
}

#[test]
fn the_search_agrees_with_brute_force_on_small_random_histories() {
    let (mut accepted, mut rejected) = (0, 0);
    for seed in 0..8000 {
        let mut rng = StdRng::seed_from_u64(seed);
        let capacity = rng.random_range(1..=2);
        let ttl = rng.random_range(3..=12) * MS;
        let rules = Rules {
            ttl,
            max_lifetime: ttl + rng.random_range(0..=5) * MS,
        };
        let calls = random_history(&mut rng, capacity, rules);
        // A confirm, cancel or extend names a hold some answer gave; skip
        // the histories where none did (the checker refuses them up
        // front), and those with a 503 hold of a key no answer dates (the
        // search tries it at its turning points only, see `check.rs`).
        let created: Vec<Option<u64>> = (0..KEYS)
            .map(|k| {
                calls
                    .iter()
                    .filter(|c| key_of(c) == k)
                    .find_map(|c| c.response.hold.as_ref().and_then(|h| h.created_at))
            })
            .collect();
        let named = |id: u64| created[id as usize - 1].is_some();
        if !calls.iter().all(|c| match c.request {
            Request::Confirm { hold }
            | Request::Cancel { hold }
            | Request::Extend { hold }
            | Request::Move { hold, .. } => named(hold),
            Request::Hold { .. } => c.response.status != 503 || created[key_of(c)].is_some(),
            _ => unreachable!("holds only"),
        }) {
            continue;
        }
        let model = Slot::single(capacity, rules, created);
        let report = check(&calls, &BTreeMap::from([(1, capacity)]), rules);
        let expected = brute_force(&calls, &model);
        assert_eq!(
            report.linearizable(),
            expected,
            "seed {seed}: {calls:#?}\n{report}"
        );
        if expected {
            accepted += 1;
        } else {
            rejected += 1;
        }
    }
    println!("agreed on {accepted} linearizable and {rejected} non-linearizable histories");
    assert!(accepted > 700 && rejected > 700, "{accepted} / {rejected}");
}
