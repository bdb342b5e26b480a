//! Recorded histories, checked for linearizability against the sequential
//! model of SPEC §4 (`support/history`, whose own unit tests try the
//! checker on hand-made histories): the checker rejecting the histories of
//! planted bugs, and the real service's history under a randomized
//! concurrent workload, which it must accept.

use futures::future::join_all;
use serde_json::Value;
use shared::App;
use shared::http;
use slot_booking_tests::history::{Call, Recorder, Report, Request, check};
use slot_booking_tests::planted;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::Barrier;

/// `n` environments with an open connection each, like warm Lambdas.
async fn warm_apps(db: &TestDb, n: usize) -> Vec<App> {
    let apps: Vec<App> = (0..n).map(|_| db.app()).collect();
    for app in &apps {
        sqlx::query("SELECT 1")
            .execute(app.booking.pool())
            .await
            .expect("warm up");
    }
    apps
}

/// Runs `call(i, app)` for every app on its own task, released together.
async fn together<F, Fut>(apps: Vec<App>, call: F)
where
    F: Fn(usize, App) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let barrier = Arc::new(Barrier::new(apps.len()));
    let call = Arc::new(call);
    let tasks = apps.into_iter().enumerate().map(|(i, app)| {
        let (barrier, call) = (barrier.clone(), call.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            call(i, app).await
        })
    });
    for done in join_all(tasks).await {
        done.expect("caller task");
    }
}

async fn real_hold(app: &App, slot: u64, key: &str) -> (u16, Value) {
    read(
        http::hold(app, hold_request(&slot.to_string(), Some(key)))
            .await
            .unwrap(),
    )
}

/// A hold known to the callers: its slot, its key, its id once an answer gave it.
type Known = (u64, String, Option<u64>);

/// Twelve callers, each its own environment, released together, on four
/// slots of one to three seats: holds with fresh keys, replays of known
/// keys, confirms and cancels of holds any caller has seen. Every call goes
/// through the HTTP handlers and is recorded; the history must be
/// linearizable. Holds live 300 s, so none expires during the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn the_real_services_history_under_a_randomized_concurrent_workload_is_linearizable() {
    use rand::{Rng, SeedableRng};
    const CALLERS: usize = 12;
    const CALLS_EACH: usize = 40;
    let db = TestDb::new().await;
    let mut capacities = BTreeMap::new();
    for capacity in [1, 2, 3, 2] {
        capacities.insert(db.insert_slot(capacity).await.0, capacity);
    }
    let slots: Arc<Vec<u64>> = Arc::new(capacities.keys().copied().collect());
    let known: Arc<Mutex<Vec<Known>>> = Arc::default();
    let recorder = Recorder::new();
    let apps = warm_apps(&db, CALLERS).await;
    let rec = recorder.clone();
    together(apps, move |client, app| {
        let (slots, known, rec) = (slots.clone(), known.clone(), rec.clone());
        async move {
            let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
            for _ in 0..CALLS_EACH {
                let roll = rng.random_range(0..100);
                // Own holds and others' alike: the pool is shared.
                let pick = {
                    let known = known.lock().unwrap();
                    // Confirms and cancels favour recent holds, which are
                    // more often still held.
                    let with_id: Vec<&Known> = known
                        .iter()
                        .rev()
                        .filter(|k| k.2.is_some())
                        .take(6)
                        .collect();
                    match roll {
                        40..55 if !known.is_empty() => {
                            Some(known[rng.random_range(0..known.len())].clone())
                        }
                        55.. if !with_id.is_empty() => {
                            Some(with_id[rng.random_range(0..with_id.len())].clone())
                        }
                        _ => None,
                    }
                };
                let (slot, key) = match (&pick, roll) {
                    (Some((_, _, Some(id))), 55..80) => {
                        let request = Request::Confirm { hold: *id };
                        let answer = http::confirm(&app, confirm_request(&id.to_string()));
                        rec.record(client, request, async { read(answer.await.unwrap()) })
                            .await;
                        continue;
                    }
                    (Some((_, _, Some(id))), 80..) => {
                        let request = Request::Cancel { hold: *id };
                        let answer = http::cancel(&app, cancel_request(&id.to_string()));
                        rec.record(client, request, async { read(answer.await.unwrap()) })
                            .await;
                        continue;
                    }
                    (Some((slot, key, _)), _) => (*slot, key.clone()),
                    (None, _) => (
                        slots[rng.random_range(0..slots.len())],
                        new_key().to_string(),
                    ),
                };
                let request = Request::Hold {
                    slot,
                    key: key.clone(),
                };
                let (_, body) = rec
                    .record(client, request, real_hold(&app, slot, &key))
                    .await;
                let mut known = known.lock().unwrap();
                match known.iter_mut().find(|k| k.1 == key) {
                    Some(k) => k.2 = k.2.or(body["id"].as_u64()),
                    None => known.push((slot, key, body["id"].as_u64())),
                }
            }
        }
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
    let apps = warm_apps(db, keys.len()).await;
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
