//! Recorded histories, checked for linearizability against the sequential
//! model of SPEC §4 and §9 (`support/history`, whose own unit tests try
//! the checker on hand-made histories): the checker rejecting the
//! histories of planted bugs, and the real service's history under a
//! randomized concurrent workload with holds that expire, extensions,
//! moves, waiting lines and their offers, and lost answers
//! (`support/history/workload.rs`), which it must accept.

use rand::Rng;
use serde_json::Value;
use shared::App;
use shared::http;
use slot_booking_tests::history::workload::{self, Shared};
use slot_booking_tests::history::{Call, Recorder, Report, Request, Rules, check, outcomes};
use slot_booking_tests::history::{epilogues, faults};
use slot_booking_tests::planted;
use slot_booking_tests::proxy::Proxy;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Barrier, watch};

async fn real_hold(app: &App, slot: u64, key: &str) -> (u16, Value) {
    read(
        http::hold(app, hold_request(&slot.to_string(), Some(key)))
            .await
            .unwrap(),
    )
}

/// The rules of the environments the planted-bug tests use.
fn long_lived() -> Rules {
    Rules::new(Duration::from_secs(300), Duration::from_secs(1800))
}

/// Twelve callers, each its own environment, released together, on four
/// slots of one to three seats (see `workload::caller`), holding, moving
/// and joining the slots' lines, whose offers the model makes; four of them
/// reach the database through a proxy that loses the answers in flight
/// twenty times. Holds live 300–800 ms (one figure per run) and at most a
/// quarter longer, so they expire, are extended to their cap and refused
/// beyond it during the run. Every call goes through the HTTP handlers and
/// is recorded; the history must be linearizable.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn the_real_services_history_under_a_randomized_concurrent_workload_is_linearizable() {
    const CALLERS: usize = 12;
    const THROUGH_PROXY: usize = 4;
    const CALLS_EACH: usize = 40;
    const CUTS: usize = 20;
    let db = TestDb::new().await;
    let ttl = Duration::from_millis(rand::rng().random_range(300..=800));
    let lifetime = ttl + ttl / 4;
    let mut capacities = BTreeMap::new();
    for capacity in [1, 2, 3, 2] {
        capacities.insert(db.insert_slot(capacity).await.0, capacity);
    }
    let recorder = Recorder::new();
    let shared = Shared::new(capacities.keys().copied().collect(), recorder.clone());
    // Slots of their own for the epilogues, outside the workload's.
    let epilogue = db.insert_slot(1).await.0;
    capacities.insert(epilogue, 1);
    let line = db.insert_slot(1).await.0;
    capacities.insert(line, 1);
    let proxy = Arc::new(Proxy::start().await);
    let apps: Vec<App> = (0..CALLERS)
        .map(|i| workload::app(&db, (i < THROUGH_PROXY).then_some(&*proxy), ttl, lifetime))
        .collect();
    for app in &apps {
        warm(app).await;
    }
    let (stop, stopped) = watch::channel(false);
    let callers = {
        let shared = shared.clone();
        async move {
            together(apps, move |client, app| {
                workload::caller(client, app, CALLS_EACH, shared.clone())
            })
            .await;
            stop.send(true).expect("the fault injectors listen");
        }
    };
    let ((), cuts, ended) = tokio::join!(
        callers,
        faults::lose_answers(proxy.clone(), CUTS, stopped.clone()),
        faults::end_abandoned(&db, stopped),
    );
    let direct = workload::app(&db, None, ttl, lifetime);
    workload::settle(&direct, CALLERS, &shared).await;
    epilogues::refusals_at_the_cap_and_after_expiry(&direct, &shared, epilogue, ttl, lifetime)
        .await;
    epilogues::a_line_served(&direct, &shared, (line, epilogue), ttl).await;
    let history = recorder.history();
    let report = check(&history, &capacities, Rules::new(ttl, lifetime));
    let outcomes = outcomes(&history);
    println!(
        "hold ttl {ttl:?}, lifetime {lifetime:?}; answers lost {cuts} times; {ended} abandoned sessions ended"
    );
    println!("history: {report}");
    println!("outcomes: {outcomes:?}");
    assert!(report.linearizable(), "{report}");
    assert!(history.len() >= CALLERS * CALLS_EACH);
    for needed in [
        "hold 201 ",
        "hold 200 ",
        "hold 409 capacity_exhausted",
        "confirm 200 ",
        "confirm 409 hold_expired",
        "extend 200 ",
        "extend 409 hold_expired",
        "extend 409 extension_limit_reached",
        "move 200 ",
        "cancel 200 ",
        "read 200 ",
        "join 201 ",
        "join 409 seats_available",
        "entry 200 ",
    ] {
        assert!(
            outcomes.contains_key(needed),
            "the workload did no {needed:?}: {outcomes:?}"
        );
    }
    let entries: Vec<&str> = history
        .iter()
        .filter_map(|c| c.response.entry.as_ref().map(|e| e.status.as_str()))
        .collect();
    for needed in ["waiting", "offered", "fulfilled", "expired"] {
        assert!(entries.contains(&needed), "no entry read {needed}");
    }
    db.assert_invariants().await;
    db.assert_lines().await;
    db.drop().await;
}

/// Planted: an extension without its expiry check, which revives an
/// expired hold (SPEC §9: never; its seat may be taken). Answers like
/// `POST /holds/{id}/extend`.
async fn extend_without_expiry_check(app: &App, id: u64, rules: Rules) -> (u16, Value) {
    sqlx::query(
        "UPDATE holds SET expires_at = LEAST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, \
         created_at + INTERVAL ? MICROSECOND), updated_at = UTC_TIMESTAMP(6) \
         WHERE id = ? AND status = 'held'",
    )
    .bind(rules.ttl / 1000)
    .bind(rules.max_lifetime / 1000)
    .bind(id)
    .execute(app.booking.pool())
    .await
    .expect("planted extension");
    read(
        http::get_hold(app, get_hold_request(&id.to_string()))
            .await
            .unwrap(),
    )
}

/// A hold, then, once it has expired, an extension: by `extend`.
async fn extended_after_expiry<F, Fut>(app: &App, slot: u64, extend: F) -> Vec<Call>
where
    F: FnOnce(u64) -> Fut,
    Fut: Future<Output = (u16, Value)>,
{
    let rec = Recorder::new();
    let hold = Request::Hold {
        slot,
        key: new_key().to_string(),
    };
    let (status, body) = workload::call(app, &rec, 0, &hold).await;
    assert_eq!(status, 201, "{body}");
    let expires: chrono::DateTime<chrono::Utc> =
        body["expires_at"].as_str().unwrap().parse().unwrap();
    let past = expires + chrono::Duration::milliseconds(50) - chrono::Utc::now();
    tokio::time::sleep(past.to_std().unwrap_or_default()).await;
    let id = body["id"].as_u64().unwrap();
    rec.record(0, Request::Extend { hold: id }, extend(id))
        .await;
    rec.history()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_checker_rejects_the_history_of_an_extension_that_revives_an_expired_hold() {
    let db = TestDb::new().await;
    let (ttl, lifetime) = (Duration::from_millis(300), Duration::from_millis(375));
    let rules = Rules::new(ttl, lifetime);
    let app = workload::app(&db, None, ttl, lifetime);
    let judge = |name: &str, history: &[Call], slot: u64| {
        let report = check(history, &BTreeMap::from([(slot, 1)]), rules);
        println!("{name}: {report}");
        report
    };

    let slot = db.insert_slot(1).await.0;
    let history = extended_after_expiry(&app, slot, |id| {
        extend_without_expiry_check(&app, id, rules)
    })
    .await;
    assert_eq!(history[1].response.status, 200, "the bug manifested");
    let why = judge("expiry check removed", &history, slot)
        .counterexample
        .expect("the revival is rejected");
    assert!(why.contains("the model answers 409 hold_expired"), "{why}");

    let slot = db.insert_slot(1).await.0;
    let app = &app;
    let history = extended_after_expiry(app, slot, |id| async move {
        read(
            http::extend_hold(app, extend_request(&id.to_string()))
                .await
                .unwrap(),
        )
    })
    .await;
    assert_eq!(history[1].response.reason.as_deref(), Some("hold_expired"));
    assert!(judge("real service", &history, slot).linearizable());
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
    let report = check(history, &BTreeMap::from([(slot, capacity)]), long_lived());
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
