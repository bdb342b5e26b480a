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
use slot_booking_tests::proxy::{Mode, Proxy};
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

/// The slot starts while a hold decided before the start is committing,
/// its answer lost: the retry's plain pre-check sees "started" and no
/// key, neither of them final together. The key is looked at again under
/// the slot's lock, and the retry answers the hold it made (201), never
/// 409 `slot_closed` for a hold that exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_whose_answer_is_lost_as_its_slot_starts_answers_201_not_slot_closed() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let starts = std::time::Instant::now() + Duration::from_millis(1500);
    sqlx::query(
        "UPDATE slots SET ends_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, \
         starts_at = UTC_TIMESTAMP(6) + INTERVAL 1500000 MICROSECOND WHERE id = ?",
    )
    .bind(slot.0)
    .execute(&db.admin)
    .await
    .unwrap();
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    warm(&app).await;
    let key = new_key();
    let events = locks::EventsLock::take(&db).await;
    let mut hold = tokio::spawn({
        let (app, key) = (app.clone(), key.clone());
        async move { app.booking.hold(&CALLER, slot, 1, &key).await }
    });
    queued(&db, &mut hold, 1).await;
    assert!(
        std::time::Instant::now() < starts,
        "decided before the start"
    );
    tokio::time::sleep_until((starts + Duration::from_millis(100)).into()).await;
    proxy.lose_answers();
    // The retry, after the start, queues for the slot's lock to look again.
    queued(&db, &mut hold, 2).await;
    events.release().await;
    let outcome = hold
        .await
        .unwrap()
        .expect("the hold was made before the start");
    assert!(outcome.created, "this request's own hold: 201");
    let id = outcome.hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.created").await, 1);
    db.assert_invariants().await;
    db.drop().await;
}

/// The answer is lost and the retry cannot reach the database (a
/// failover: the primary committed, then refused connections): the
/// service cannot tell, and says so, never "nothing was written".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_whose_answer_is_lost_with_no_retry_possible_is_outcome_unknown() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    let hold = held(&app, slot).await;
    let events = locks::EventsLock::take(&db).await;
    let mut extend = tokio::spawn({
        let app = app.clone();
        async move { app.booking.extend(&CALLER, hold.id).await }
    });
    queued(&db, &mut extend, 1).await;
    proxy.lose_answers();
    proxy.set(Mode::Refuse).await;
    events.release().await;
    let answer = extend.await.unwrap();
    assert!(
        matches!(answer, Err(Error::OutcomeUnknown(_))),
        "the COMMIT may have happened (it did): {answer:?}"
    );
    let err = answer.unwrap_err();
    assert_eq!((err.status(), err.reason()), (503, "service_unavailable"));
    let id = hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.extended").await, 1, "it did");
    db.drop().await;
}

/// A cancel's answer is lost; before its retry gets the slot's lock, an
/// admin deletes the slot (the cancelled hold no longer keeps it), and
/// the hold goes with it. The retry finds nothing, and learns from the
/// hold's event that the cancellation was its own: a change, not 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_whose_answer_is_lost_before_its_slot_is_deleted_is_still_a_change() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let proxy = Proxy::start().await;
    let app = app_through(&db, &proxy, HoldRules::default());
    let hold = held(&app, slot).await;
    let admin = db.app();
    warm(&admin).await;
    let events = locks::EventsLock::take(&db).await;
    let mut cancel = tokio::spawn({
        let app = app.clone();
        async move { app.booking.cancel(&CALLER, hold.id).await }
    });
    queued(&db, &mut cancel, 1).await;
    let mut delete = tokio::spawn(async move { admin.slots.delete(slot).await });
    queued(&db, &mut delete, 2).await;
    proxy.lose_answers();
    queued(&db, &mut cancel, 3).await;
    events.release().await;
    delete
        .await
        .unwrap()
        .expect("the slot, without bookings, deleted");
    let done = cancel.await.unwrap().expect("this request's cancellation");
    assert!(done.changed);
    assert_eq!(done.hold.status, shared::domain::HoldStatus::Cancelled);
    let id = hold.id.0.to_string();
    assert_eq!(db.events_of(&id, "hold.cancelled").await, 1);
    db.drop().await;
}
