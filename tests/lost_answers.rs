//! A COMMIT whose answer is lost, and the retry `db::transact!` then runs
//! on a new connection: it must find the change done and answer as the
//! lost answer would have; never a second change, never a refusal
//! (docs/DESIGN.md, "Retried after an unseen COMMIT").
//!
//! Driven deterministically: the events are locked, so the change queues
//! at its last statement (the event's, which commits) holding the slot's
//! lock; the proxy then loses every answer of that connection (the app's
//! end closes, the server's stays open and finishes); the retry queues for
//! the slot's lock; the events are released, the COMMIT lands unseen, and
//! the retry decides.

use shared::App;
use shared::booking::{HoldOutcome, Transition};
use shared::clients::Caller;
use shared::config::HoldRules;
use shared::domain::{Hold, HoldId, IdempotencyKey, SlotId};
use shared::error::Error;
use slot_booking_tests::proxy::Proxy;
use slot_booking_tests::*;
use std::future::Future;
use std::time::Duration;

const CALLER: Caller = Caller::anonymous();

/// An environment whose connections go through `proxy`, with `rules`.
fn app_through(db: &TestDb, proxy: &Proxy, rules: HoldRules) -> App {
    let mut config = db.config(Duration::from_secs(300));
    config.database_url = proxy.url_for(&db.url);
    config.holds = rules;
    App::new(config).expect("app")
}

/// `change`, whose COMMIT lands and whose answer is lost, as above.
async fn with_the_answer_lost<T, Fut>(db: &TestDb, proxy: &Proxy, change: Fut) -> T
where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + std::fmt::Debug + 'static,
{
    let events = locks::EventsLock::take(db).await;
    let mut change = tokio::spawn(change);
    queued(db, &mut change, 1).await;
    proxy.lose_answers();
    // The retry, on a new connection, behind the first attempt's lock.
    db.wait_for_lock_waiters(2).await;
    events.release().await;
    change.await.unwrap()
}

/// Waits for `n` lock waiters, failing at once with the change's answer
/// if it came first.
async fn queued<T: std::fmt::Debug>(db: &TestDb, change: &mut tokio::task::JoinHandle<T>, n: i64) {
    while db.lock_waiters().await < n {
        if change.is_finished() {
            panic!("the change answered before it queued: {:?}", change.await);
        }
    }
}

async fn held(app: &App, slot: SlotId) -> Hold {
    app.booking
        .hold(&CALLER, slot, 1, &new_key())
        .await
        .expect("hold")
        .hold
}

async fn stored_hold(app: &App, id: HoldId) -> Hold {
    app.booking
        .get_hold(&CALLER, id)
        .await
        .expect("stored hold")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_whose_commit_answer_is_lost_answers_201_once() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    warm(&app).await;
    let key: IdempotencyKey = new_key();
    let outcome: Result<HoldOutcome, Error> = with_the_answer_lost(&db, &proxy, {
        let (app, key) = (app.clone(), key.clone());
        async move { app.booking.hold(&CALLER, slot, 1, &key).await }
    })
    .await;
    let outcome = outcome.expect("the hold was made");
    assert!(
        outcome.created,
        "the retry found this request's own hold: 201 (and HoldsCreated), not a replay"
    );
    let id = outcome.hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.created").await, 1);
    assert_eq!(db.active_seats(slot).await, 1);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_confirm_whose_commit_answer_is_lost_is_a_change_consumed_once() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    let hold = held(&app, slot).await;
    let done: Result<Transition, Error> = with_the_answer_lost(&db, &proxy, {
        let app = app.clone();
        async move { app.booking.confirm(&CALLER, hold.id).await }
    })
    .await;
    let done = done.expect("confirmed");
    assert!(
        done.changed,
        "this request's confirmation, not a replay of it"
    );
    assert_eq!(db.slot(slot).await.1, 1, "one seat consumed");
    let id = hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.confirmed").await, 1);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_whose_commit_answer_is_lost_is_a_change_made_once() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    let hold = held(&app, slot).await;
    let done: Result<Transition, Error> = with_the_answer_lost(&db, &proxy, {
        let app = app.clone();
        async move { app.booking.cancel(&CALLER, hold.id).await }
    })
    .await;
    let done = done.expect("cancelled");
    assert!(done.changed, "this request's cancellation, not a replay");
    let id = hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.cancelled").await, 1);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_whose_commit_answer_is_lost_is_applied_once_with_one_event() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    let hold = held(&app, slot).await;
    let extended: Result<Hold, Error> = with_the_answer_lost(&db, &proxy, {
        let app = app.clone();
        async move { app.booking.extend(&CALLER, hold.id).await }
    })
    .await;
    let extended = extended.expect("extended");
    let stored = stored_hold(&app, hold.id).await;
    assert_eq!(
        (extended.expires_at, extended.updated_at),
        (stored.expires_at, stored.updated_at),
        "the answer is the one extension made"
    );
    let id = hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.extended").await, 1, "one extension");
    db.assert_invariants().await;
    db.drop().await;
}

/// The first attempt takes the hold to its lifetime cap: a retry that
/// extended again would find nothing left and refuse the done change.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_to_the_lifetime_cap_whose_answer_is_lost_is_not_refused() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let proxy = Proxy::start().await;
    let rules = HoldRules {
        max_lifetime: Duration::from_millis(300_300),
        ..HoldRules::default()
    };
    let app = app_through(&db, &proxy, rules);
    let hold = held(&app, slot).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let extended: Result<Hold, Error> = with_the_answer_lost(&db, &proxy, {
        let app = app.clone();
        async move { app.booking.extend(&CALLER, hold.id).await }
    })
    .await;
    let extended = extended.expect("extended to the cap, not extension_limit_reached");
    let cap = hold.created_at + chrono::Duration::microseconds(300_300_000);
    assert_eq!(extended.expires_at, cap);
    let id = hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.extended").await, 1);
    db.drop().await;
}

/// Between the unseen COMMIT and the retry, another request confirms the
/// hold: the retry finds it changed again, and learns from its event that
/// its own extension came first (answered, not refused `hold_confirmed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_whose_answer_is_lost_and_then_confirmed_by_another_is_still_answered() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    let hold = held(&app, slot).await;
    let other = db.app();
    warm(&other).await;
    let events = locks::EventsLock::take(&db).await;
    let extend = tokio::spawn({
        let app = app.clone();
        async move { app.booking.extend(&CALLER, hold.id).await }
    });
    db.wait_for_lock_waiters(1).await;
    let confirm = tokio::spawn(async move { other.booking.confirm(&CALLER, hold.id).await });
    db.wait_for_lock_waiters(2).await;
    proxy.lose_answers();
    db.wait_for_lock_waiters(3).await;
    events.release().await;
    let extended = extend.await.unwrap().expect("this request's extension");
    assert!(confirm.await.unwrap().expect("confirmed after").changed);
    assert_eq!(extended.status, shared::domain::HoldStatus::Held);
    let id = hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.extended").await, 1);
    assert_eq!(db.events_of(&id, "hold.confirmed").await, 1);
    db.assert_invariants().await;
    db.drop().await;
}
