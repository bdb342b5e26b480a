//! The search against the definition: on many small random histories the
//! checker's verdict must equal brute force's, which tries every order of
//! the calls (and every choice of which 503s took effect) and keeps those
//! that respect real time and that the model accepts. This proves the
//! memoisation and the candidate window prune nothing they should not.

use super::model::{Expected, Kind, Observed, Slot, Status};
use super::{Call, Request, Response, check};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const KEYS: usize = 3;

fn response(key: usize, answer: Expected) -> Response {
    match answer {
        Expected::Hold { code, status } => {
            Response::hold(code, key as u64 + 1, 1, &format!("k{key}"), status.as_str())
        }
        Expected::Error { code, reason } => Response::error(code, reason),
    }
}

/// Calls placed at instants 10, 20, … in a random order of the model, each
/// with an interval around its instant; some answers are then replaced.
fn random_history(rng: &mut StdRng, slot: Slot) -> Vec<Call> {
    let mut state = slot.initial(KEYS);
    let n = rng.random_range(2..=7);
    let mut calls = Vec::new();
    for i in 0..n {
        let kind = [Kind::Hold, Kind::Hold, Kind::Confirm, Kind::Cancel][rng.random_range(0..4)];
        let key = rng.random_range(0..KEYS);
        let (answer, next) = slot.apply(&state, kind, key);
        let unknown = rng.random_bool(0.1);
        if !unknown || rng.random_bool(0.5) {
            state = next;
        }
        let at = 10 * (i as u64 + 1);
        let id = key as u64 + 1;
        calls.push(Call {
            client: i,
            invoked: at - rng.random_range(0..=15).min(at),
            completed: at + rng.random_range(0..=15),
            request: match kind {
                Kind::Hold => Request::Hold {
                    slot: 1,
                    key: format!("k{key}"),
                },
                Kind::Confirm => Request::Confirm { hold: id },
                Kind::Cancel => Request::Cancel { hold: id },
            },
            response: if unknown {
                Response::error(503, "service_unavailable")
            } else {
                response(key, answer)
            },
        });
    }
    if rng.random_bool(0.4) {
        let wrong = [
            Expected::Hold {
                code: 201,
                status: Status::Held,
            },
            Expected::Hold {
                code: 200,
                status: Status::Held,
            },
            Expected::Hold {
                code: 200,
                status: Status::Confirmed,
            },
            Expected::Hold {
                code: 200,
                status: Status::Cancelled,
            },
            Expected::Error {
                code: 409,
                reason: "capacity_exhausted",
            },
            Expected::Error {
                code: 409,
                reason: "hold_cancelled",
            },
        ];
        let i = rng.random_range(0..calls.len());
        let key = match &calls[i].request {
            Request::Hold { key, .. } => key[1..].parse().expect("key index"),
            Request::Confirm { hold } | Request::Cancel { hold } => *hold as usize - 1,
        };
        calls[i].response = response(key, wrong[rng.random_range(0..wrong.len())]);
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
        },
        (None, reason) => Observed::Error {
            code: r.status,
            reason: reason.clone().unwrap_or_default(),
        },
    }
}

/// Every permutation; in each, every subset of the 503s left out.
fn brute_force(calls: &[Call], slot: Slot) -> bool {
    let ops: Vec<(Kind, usize, Observed)> = calls
        .iter()
        .map(|c| match &c.request {
            Request::Hold { key, .. } => (Kind::Hold, key[1..].parse().unwrap(), observed(c)),
            Request::Confirm { hold } => (Kind::Confirm, *hold as usize - 1, observed(c)),
            Request::Cancel { hold } => (Kind::Cancel, *hold as usize - 1, observed(c)),
        })
        .collect();
    let unknown: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].2 == Observed::Unknown)
        .collect();
    let completed = |i: usize| match ops[i].2 {
        Observed::Unknown => u64::MAX,
        _ => calls[i].completed,
    };
    let mut order: Vec<usize> = (0..ops.len()).collect();
    permutations(&mut order, 0, &mut |order| {
        let in_time = (0..order.len())
            .all(|a| (a + 1..order.len()).all(|b| completed(order[b]) >= calls[order[a]].invoked));
        in_time
            && (0..1u32 << unknown.len()).any(|left_out| {
                let mut state = slot.initial(KEYS);
                order.iter().all(|&i| {
                    let skipped = unknown
                        .iter()
                        .position(|&u| u == i)
                        .is_some_and(|bit| left_out & (1 << bit) != 0);
                    if skipped {
                        return true;
                    }
                    let (kind, key, seen) = &ops[i];
                    match slot.step(&state, *kind, *key, seen) {
                        Some(next) => {
                            state = next;
                            true
                        }
                        None => false,
                    }
                })
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
    for seed in 0..4000 {
        let mut rng = StdRng::seed_from_u64(seed);
        let slot = Slot {
            capacity: rng.random_range(1..=2),
        };
        let calls = random_history(&mut rng, slot);
        // A confirm or cancel names a hold some answer gave; skip the
        // histories where none did (the checker refuses them up front).
        let named = |id: u64| {
            calls
                .iter()
                .any(|c| c.response.hold.as_ref().is_some_and(|h| h.id == id))
        };
        if !calls.iter().all(|c| match c.request {
            Request::Confirm { hold } | Request::Cancel { hold } => named(hold),
            Request::Hold { .. } => true,
        }) {
            continue;
        }
        let report = check(&calls, &BTreeMap::from([(1, slot.capacity)]));
        let expected = brute_force(&calls, slot);
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
    assert!(accepted > 500 && rejected > 500, "{accepted} / {rejected}");
}
