//! Recorded histories, checked for linearizability against the sequential
//! model of SPEC §4 (`support/history`, whose own unit tests try the
//! checker on hand-made histories): the checker rejecting the histories of
//! planted bugs, and the real service's history under a randomized
//! concurrent workload, which it must accept.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use shared::App;
use shared::http;
use slot_booking_tests::history::{Call, Recorder, Report, Request, check};
use slot_booking_tests::planted;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Barrier;

async fn real_hold(app: &App, slot: u64, key: &str) -> (u16, Value) {
    read(
        http::hold(app, hold_request(&slot.to_string(), Some(key)))
            .await
            .unwrap(),
    )
}

/// A hold the callers know of: its slot and key, and, once an answer gave
/// them, its id and the status that answer showed.
#[derive(Clone)]
struct Known {
    slot: u64,
    key: String,
    id: Option<u64>,
    status: String,
}

const CALLS_EACH: usize = 40;

/// One of the known holds with an id, preferably one that `wanted` likes.
fn pick(known: &[Known], rng: &mut StdRng, wanted: impl Fn(&Known) -> bool) -> Option<Known> {
    let with_id: Vec<&Known> = known.iter().filter(|k| k.id.is_some()).collect();
    let fitting: Vec<&Known> = with_id.iter().copied().filter(|k| wanted(k)).collect();
    let from = if fitting.is_empty() { with_id } else { fitting };
    (!from.is_empty()).then(|| from[rng.random_range(0..from.len())].clone())
}

/// One caller of the workload: holds with fresh keys, replays of known
/// keys, confirms of holds last seen held, cancels of holds last seen
/// held or confirmed; its own and the other callers' alike.
async fn caller(
    client: usize,
    app: App,
    slots: Arc<Vec<u64>>,
    known: Arc<Mutex<Vec<Known>>>,
    rec: Recorder,
) {
    let mut rng = StdRng::from_rng(&mut rand::rng());
    for _ in 0..CALLS_EACH {
        let roll = rng.random_range(0..100);
        let request = {
            let known = known.lock().unwrap();
            let id = |k: Known| k.id.expect("picked with an id");
            match roll {
                40..55 if !known.is_empty() => {
                    let k = known[rng.random_range(0..known.len())].clone();
                    Some(Request::Hold {
                        slot: k.slot,
                        key: k.key,
                    })
                }
                55..80 => pick(&known, &mut rng, |k| k.status == "held")
                    .map(|k| Request::Confirm { hold: id(k) }),
                80.. => pick(&known, &mut rng, |k| k.status != "cancelled")
                    .map(|k| Request::Cancel { hold: id(k) }),
                _ => None,
            }
        }
        .unwrap_or_else(|| Request::Hold {
            slot: slots[rng.random_range(0..slots.len())],
            key: new_key().to_string(),
        });
        let (_, body) = match &request {
            Request::Hold { slot, key } => {
                let answer = real_hold(&app, *slot, key);
                rec.record(client, request.clone(), answer).await
            }
            Request::Confirm { hold } => {
                let answer = http::confirm(&app, confirm_request(&hold.to_string()));
                rec.record(client, request.clone(), async {
                    read(answer.await.unwrap())
                })
                .await
            }
            Request::Cancel { hold } => {
                let answer = http::cancel(&app, cancel_request(&hold.to_string()));
                rec.record(client, request.clone(), async {
                    read(answer.await.unwrap())
                })
                .await
            }
        };
        let mut known = known.lock().unwrap();
        let key = match (&request, body["idempotency_key"].as_str()) {
            (_, Some(key)) => key.to_string(),
            (Request::Hold { key, .. }, None) => key.clone(),
            _ => continue,
        };
        let i = match known.iter().position(|k| k.key == key) {
            Some(i) => i,
            None => {
                let Request::Hold { slot, .. } = request else {
                    continue;
                };
                known.push(Known {
                    slot,
                    key,
                    id: None,
                    status: String::new(),
                });
                known.len() - 1
            }
        };
        if let (Some(id), Some(status)) = (body["id"].as_u64(), body["status"].as_str()) {
            (known[i].id, known[i].status) = (Some(id), status.to_string());
        }
    }
}

/// Twelve callers, each its own environment, released together, on four
/// slots of one to three seats (see [`caller`]). Every call goes through
/// the HTTP handlers and is recorded; the history must be linearizable.
/// Holds live 300 s, so none expires during the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn the_real_services_history_under_a_randomized_concurrent_workload_is_linearizable() {
    const CALLERS: usize = 12;
    let db = TestDb::new().await;
    let mut capacities = BTreeMap::new();
    for capacity in [1, 2, 3, 2] {
        capacities.insert(db.insert_slot(capacity).await.0, capacity);
    }
    let slots: Arc<Vec<u64>> = Arc::new(capacities.keys().copied().collect());
    let known: Arc<Mutex<Vec<Known>>> = Arc::default();
    let recorder = Recorder::new();
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let rec = recorder.clone();
    together(apps, move |client, app| {
        caller(client, app, slots.clone(), known.clone(), rec.clone())
    })
    .await;
    let history = recorder.history();
    let report = check(&history, &capacities);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for c in &history {
        let what = match c.request {
            Request::Hold { .. } => "hold",
            Request::Confirm { .. } => "confirm",
            Request::Cancel { .. } => "cancel",
        };
        let answer = c.response.reason.clone().unwrap_or_default();
        *outcomes
            .entry(format!("{what} {} {answer}", c.response.status))
            .or_default() += 1;
    }
    println!("history: {report}");
    println!("outcomes: {outcomes:?}");
    assert!(report.linearizable(), "{report}");
    assert_eq!(history.len(), CALLERS * CALLS_EACH);
    for needed in [
        "hold 201 ",
        "hold 200 ",
        "hold 409 capacity_exhausted",
        "confirm 200 ",
        "cancel 200 ",
    ] {
        assert!(
            outcomes.contains_key(needed),
            "the workload did no {needed:?}: {outcomes:?}"
        );
    }
    db.assert_invariants().await;
    db.drop().await;
}

/// Each of `keys.len()` callers, on its own connection and released
/// together with the others, asks `hold` for a hold of its key on `slot`;
/// every call is recorded.
async fn recorded_holds<F, Fut>(db: &TestDb, slot: u64, keys: Vec<String>, hold: F) -> Vec<Call>
where
    F: Fn(App, u64, String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (u16, Value)> + Send,
{
    let recorder = Recorder::new();
    let (rec, keys, hold) = (recorder.clone(), Arc::new(keys), Arc::new(hold));
    let apps = db.warm_apps(keys.len(), Duration::from_secs(300)).await;
    together(apps, move |i, app| {
        let (rec, keys, hold) = (rec.clone(), keys.clone(), hold.clone());
        async move {
            let key = keys[i].clone();
            let request = Request::Hold {
                slot,
                key: key.clone(),
            };
            rec.record(i, request, hold(app, slot, key)).await;
        }
    })
    .await;
    recorder.history()
}

fn statuses(history: &[Call]) -> BTreeMap<u16, usize> {
    let mut counts = BTreeMap::new();
    for c in history {
        *counts.entry(c.response.status).or_default() += 1;
    }
    counts
}

/// Checks `history` on a slot of `capacity` and prints the verdict.
fn judged(name: &str, history: &[Call], slot: u64, capacity: u32) -> Report {
    let report = check(history, &BTreeMap::from([(slot, capacity)]));
    println!("{name}: {report}");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_checker_rejects_the_history_of_holds_that_count_without_the_lock() {
    const CALLERS: usize = 4;
    let db = TestDb::new().await;
    let keys = || {
        (0..CALLERS)
            .map(|_| new_key().to_string())
            .collect::<Vec<_>>()
    };

    let slot = db.insert_slot(1).await.0;
    let after_count = Arc::new(Barrier::new(CALLERS));
    let history = recorded_holds(&db, slot, keys(), move |app, slot, key| {
        let after_count = after_count.clone();
        async move { planted::hold_without_lock(app.booking.pool(), slot, &key, &after_count).await }
    })
    .await;
    assert_eq!(
        statuses(&history),
        BTreeMap::from([(201, CALLERS)]),
        "the bug manifested"
    );
    let report = judged("lock removed", &history, slot, 1);
    let why = report.counterexample.expect("the oversell is rejected");
    assert!(
        why.contains("the model answers 409 capacity_exhausted"),
        "{why}"
    );

    // The same race against the real service: one seat, one 201.
    let slot = db.insert_slot(1).await.0;
    let history = recorded_holds(&db, slot, keys(), |app, slot, key| async move {
        real_hold(&app, slot, &key).await
    })
    .await;
    assert_eq!(
        statuses(&history),
        BTreeMap::from([(201, 1), (409, CALLERS - 1)])
    );
    assert!(judged("real service", &history, slot, 1).linearizable());
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_checker_rejects_the_history_of_the_seed_sequence_without_its_key_recheck() {
    let db = TestDb::new().await;
    let same_key = || vec![new_key().to_string(); 2];
    let seed = |recheck: bool| {
        let after_lookup = Arc::new(Barrier::new(2));
        move |app: App, slot, key: String| {
            let after_lookup = after_lookup.clone();
            async move {
                planted::seed_hold(app.booking.pool(), slot, &key, &after_lookup, recheck).await
            }
        }
    };

    let slot = db.insert_slot(1).await.0;
    let history = recorded_holds(&db, slot, same_key(), seed(false)).await;
    assert_eq!(
        statuses(&history),
        BTreeMap::from([(201, 1), (409, 1)]),
        "the bug manifested"
    );
    assert!(!judged("key re-check removed", &history, slot, 1).linearizable());

    // With the re-check the loser replays the winner's hold.
    let slot = db.insert_slot(1).await.0;
    let history = recorded_holds(&db, slot, same_key(), seed(true)).await;
    assert_eq!(statuses(&history), BTreeMap::from([(200, 1), (201, 1)]));
    assert!(judged("seed with its re-check", &history, slot, 1).linearizable());

    let slot = db.insert_slot(1).await.0;
    let history = recorded_holds(&db, slot, same_key(), |app, slot, key| async move {
        real_hold(&app, slot, &key).await
    })
    .await;
    assert_eq!(statuses(&history), BTreeMap::from([(200, 1), (201, 1)]));
    assert!(judged("real service", &history, slot, 1).linearizable());
    db.drop().await;
}
