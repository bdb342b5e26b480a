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
use shared::clients::Caller;
use shared::config::HoldRules;
use shared::domain::{EntryStatus, Hold, HoldId, HoldStatus, SlotId};
use shared::error::Error;
use slot_booking_tests::proxy::{Mode, Proxy};
use slot_booking_tests::*;
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinHandle;

const CALLER: Caller = Caller::anonymous();

/// A test's database, a slot, and an environment whose connections go
/// through a proxy that can lose their answers.
struct Scene {
    db: TestDb,
    slot: SlotId,
    proxy: Proxy,
    app: App,
}

impl Scene {
    async fn new(capacity: u32, rules: HoldRules) -> Self {
        let db = TestDb::new().await;
        let slot = db.insert_slot(capacity).await;
        let proxy = Proxy::start().await;
        let mut config = db.config(Duration::from_secs(300));
        config.database_url = proxy.url_for(&db.url);
        config.holds = rules;
        let app = App::new(config).expect("app");
        warm(&app).await;
        Self {
            db,
            slot,
            proxy,
            app,
        }
    }

    /// A hold of one seat, made through the proxy while it loses nothing.
    async fn held(&self) -> Hold {
        self.app
            .booking
            .hold(&CALLER, self.slot, 1, &new_key())
            .await
            .expect("hold")
            .hold
    }

    /// `change` (given the environment), spawned.
    fn spawn<T, F, Fut>(&self, change: F) -> JoinHandle<T>
    where
        F: FnOnce(App) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        tokio::spawn(change(self.app.clone()))
    }

    /// `change`, whose COMMIT lands and whose answer is lost, as above.
    async fn with_the_answer_lost<T, F, Fut>(&self, change: F) -> T
    where
        F: FnOnce(App) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + Debug + 'static,
    {
        let events = locks::EventsLock::take(&self.db).await;
        let mut change = self.spawn(change);
        queued(&self.db, &mut change, 1).await;
        self.proxy.lose_answers();
        // The retry, on a new connection, behind the first attempt's lock.
        self.db.wait_for_lock_waiters(2).await;
        events.release().await;
        change.await.unwrap()
    }

    /// The events of `kind` (`hold.extended`…) about `hold`.
    async fn events_of(&self, hold: HoldId, kind: &str) -> i64 {
        self.db.events_of(&hold.0.to_string(), kind).await
    }

    async fn end(self) {
        self.db.assert_invariants().await;
        self.db.drop().await;
    }
}

/// Waits for `n` lock waiters, failing at once with the change's answer
/// if it came first.
async fn queued<T: Debug>(db: &TestDb, change: &mut JoinHandle<T>, n: i64) {
    while db.lock_waiters().await < n {
        if change.is_finished() {
            panic!("the change answered before it queued: {:?}", change.await);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_whose_commit_answer_is_lost_answers_201_once() {
    let scene = Scene::new(2, HoldRules::default()).await;
    let slot = scene.slot;
    let outcome = scene
        .with_the_answer_lost(
            |app| async move { app.booking.hold(&CALLER, slot, 1, &new_key()).await },
        )
        .await
        .expect("the hold was made");
    assert!(
        outcome.created,
        "the retry found this request's own hold: 201 (and HoldsCreated), not a replay"
    );
    assert_eq!(scene.events_of(outcome.hold.id, "hold.created").await, 1);
    assert_eq!(scene.db.active_seats(slot).await, 1);
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_confirm_whose_commit_answer_is_lost_is_a_change_consumed_once() {
    let scene = Scene::new(2, HoldRules::default()).await;
    let hold = scene.held().await.id;
    let done = scene
        .with_the_answer_lost(|app| async move { app.booking.confirm(&CALLER, hold).await })
        .await
        .expect("confirmed");
    assert!(
        done.changed,
        "this request's confirmation, not a replay of it"
    );
    assert_eq!(scene.db.slot(scene.slot).await.1, 1, "one seat consumed");
    assert_eq!(scene.events_of(hold, "hold.confirmed").await, 1);
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_whose_commit_answer_is_lost_is_a_change_made_once() {
    let scene = Scene::new(2, HoldRules::default()).await;
    let hold = scene.held().await.id;
    let done = scene
        .with_the_answer_lost(|app| async move { app.booking.cancel(&CALLER, hold).await })
        .await
        .expect("cancelled");
    assert!(done.changed, "this request's cancellation, not a replay");
    assert_eq!(scene.events_of(hold, "hold.cancelled").await, 1);
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_whose_commit_answer_is_lost_is_applied_once_with_one_event() {
    let scene = Scene::new(1, HoldRules::default()).await;
    let hold = scene.held().await.id;
    let extended = scene
        .with_the_answer_lost(|app| async move { app.booking.extend(&CALLER, hold).await })
        .await
        .expect("extended");
    let stored = scene
        .app
        .booking
        .get_hold(&CALLER, hold)
        .await
        .expect("stored hold");
    assert_eq!(
        (extended.expires_at, extended.updated_at),
        (stored.expires_at, stored.updated_at),
        "the answer is the one extension made"
    );
    assert_eq!(
        scene.events_of(hold, "hold.extended").await,
        1,
        "one extension"
    );
    scene.end().await;
}

/// A move whose COMMIT lands unseen: the retry, under both slots' locks,
/// finds the hold on the target as its attempt left it, and answers the
/// move (a change), not "already there".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_whose_commit_answer_is_lost_is_a_change_made_once() {
    let scene = Scene::new(1, HoldRules::default()).await;
    let to = scene.db.insert_slot(1).await;
    let hold = scene.held().await.id;
    let done = scene
        .with_the_answer_lost(|app| async move { app.booking.move_hold(&CALLER, hold, to).await })
        .await
        .expect("moved");
    assert!(done.changed, "this request's move, not a replay of it");
    assert_eq!(done.hold.slot_id, to);
    assert_eq!(scene.events_of(hold, "hold.moved").await, 1);
    assert_eq!(scene.db.active_seats(scene.slot).await, 0);
    assert_eq!(scene.db.active_seats(to).await, 1);
    scene.db.assert_held_counter().await;
    scene.end().await;
}

/// The first attempt takes the hold to its lifetime cap: a retry that
/// extended again would find nothing left and refuse the done change.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_to_the_lifetime_cap_whose_answer_is_lost_is_not_refused() {
    let rules = HoldRules {
        max_lifetime: Duration::from_millis(300_300),
        ..HoldRules::default()
    };
    let scene = Scene::new(1, rules).await;
    let hold = scene.held().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let id = hold.id;
    let extended = scene
        .with_the_answer_lost(|app| async move { app.booking.extend(&CALLER, id).await })
        .await
        .expect("extended to the cap, not extension_limit_reached");
    let cap = hold.created_at + chrono::Duration::microseconds(300_300_000);
    assert_eq!(extended.expires_at, cap);
    assert_eq!(scene.events_of(id, "hold.extended").await, 1);
    scene.end().await;
}

/// Between the unseen COMMIT and the retry, another request confirms the
/// hold: the retry finds it changed again, and learns from its event that
/// its own extension came first (answered, not refused `hold_confirmed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_whose_answer_is_lost_and_then_confirmed_by_another_is_still_answered() {
    let scene = Scene::new(1, HoldRules::default()).await;
    let hold = scene.held().await.id;
    let other = scene.db.app();
    warm(&other).await;
    let events = locks::EventsLock::take(&scene.db).await;
    let mut extend = scene.spawn(|app| async move { app.booking.extend(&CALLER, hold).await });
    queued(&scene.db, &mut extend, 1).await;
    let mut confirm = tokio::spawn(async move { other.booking.confirm(&CALLER, hold).await });
    queued(&scene.db, &mut confirm, 2).await;
    scene.proxy.lose_answers();
    queued(&scene.db, &mut extend, 3).await;
    events.release().await;
    let extended = extend.await.unwrap().expect("this request's extension");
    assert!(confirm.await.unwrap().expect("confirmed after").changed);
    assert_eq!(extended.status, HoldStatus::Held);
    assert_eq!(scene.events_of(hold, "hold.extended").await, 1);
    assert_eq!(scene.events_of(hold, "hold.confirmed").await, 1);
    scene.end().await;
}

/// Between the unseen COMMIT of a confirm (its one CALL) and the retry,
/// another request cancels the booking: the retry finds its own
/// confirmation by the request's number and answers it as it happened
/// (confirmed), never the hold as it is now (cancelled), which no order
/// of the two calls could answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_confirm_whose_answer_is_lost_and_then_cancelled_answers_the_confirmation() {
    let scene = Scene::new(1, HoldRules::default()).await;
    let hold = scene.held().await.id;
    let other = scene.db.app();
    warm(&other).await;
    let events = locks::EventsLock::take(&scene.db).await;
    let mut confirm = scene.spawn(|app| async move { app.booking.confirm(&CALLER, hold).await });
    queued(&scene.db, &mut confirm, 1).await;
    let mut cancel = tokio::spawn(async move { other.booking.cancel(&CALLER, hold).await });
    queued(&scene.db, &mut cancel, 2).await;
    scene.proxy.lose_answers();
    queued(&scene.db, &mut confirm, 3).await;
    events.release().await;
    let confirmed = confirm.await.unwrap().expect("this request's confirmation");
    assert!(cancel.await.unwrap().expect("cancelled after").changed);
    assert!(confirmed.changed, "this request's change");
    assert_eq!(
        confirmed.hold.status,
        HoldStatus::Confirmed,
        "answered as the confirmation left the hold, not as it is now"
    );
    assert_eq!(confirmed.hold.cancelled_at, None);
    assert_eq!(confirmed.hold.slot_id, scene.slot);
    assert_eq!(Some(confirmed.hold.updated_at), confirmed.hold.confirmed_at);
    assert_eq!(scene.events_of(hold, "hold.confirmed").await, 1);
    scene.end().await;
}

/// The slot starts while a hold decided before the start is committing,
/// its answer lost: the retry's plain pre-check sees "started" and no
/// key, neither of them final together. The key is looked at again under
/// the slot's lock, and the retry answers the hold it made (201), never
/// 409 `slot_closed` for a hold that exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_whose_answer_is_lost_as_its_slot_starts_answers_201_not_slot_closed() {
    let scene = Scene::new(2, HoldRules::default()).await;
    let slot = scene.slot;
    let starts = std::time::Instant::now() + Duration::from_millis(1500);
    sqlx::query(
        "UPDATE slots SET ends_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, \
         starts_at = UTC_TIMESTAMP(6) + INTERVAL 1500000 MICROSECOND WHERE id = ?",
    )
    .bind(slot.0)
    .execute(&scene.db.admin)
    .await
    .unwrap();
    let events = locks::EventsLock::take(&scene.db).await;
    let mut hold =
        scene.spawn(|app| async move { app.booking.hold(&CALLER, slot, 1, &new_key()).await });
    queued(&scene.db, &mut hold, 1).await;
    assert!(
        std::time::Instant::now() < starts,
        "decided before the start"
    );
    tokio::time::sleep_until((starts + Duration::from_millis(100)).into()).await;
    scene.proxy.lose_answers();
    // The retry, after the start, queues for the slot's lock to look again.
    queued(&scene.db, &mut hold, 2).await;
    events.release().await;
    let outcome = hold
        .await
        .unwrap()
        .expect("the hold was made before the start");
    assert!(outcome.created, "this request's own hold: 201");
    assert_eq!(scene.events_of(outcome.hold.id, "hold.created").await, 1);
    scene.end().await;
}

/// The answer is lost and the retry cannot reach the database (a
/// failover: the primary committed, then refused connections): the
/// service cannot tell, and says so, never "nothing was written".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_whose_answer_is_lost_with_no_retry_possible_is_outcome_unknown() {
    let scene = Scene::new(1, HoldRules::default()).await;
    let hold = scene.held().await.id;
    let events = locks::EventsLock::take(&scene.db).await;
    let mut extend = scene.spawn(|app| async move { app.booking.extend(&CALLER, hold).await });
    queued(&scene.db, &mut extend, 1).await;
    scene.proxy.lose_answers();
    scene.proxy.set(Mode::Refuse).await;
    events.release().await;
    let answer = extend.await.unwrap();
    assert!(
        matches!(answer, Err(Error::OutcomeUnknown(_))),
        "the COMMIT may have happened (it did): {answer:?}"
    );
    let err = answer.unwrap_err();
    assert_eq!((err.status(), err.reason()), (503, "service_unavailable"));
    assert_eq!(scene.events_of(hold, "hold.extended").await, 1, "it did");
    scene.end().await;
}

/// A cancel's answer is lost; before its retry gets the slot's lock, an
/// admin deletes the slot (the cancelled hold no longer keeps it), and
/// the hold goes with it. The retry finds nothing, and learns from the
/// hold's event that the cancellation was its own: a change, not 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_whose_answer_is_lost_before_its_slot_is_deleted_is_still_a_change() {
    let scene = Scene::new(1, HoldRules::default()).await;
    let (slot, hold) = (scene.slot, scene.held().await.id);
    let admin = scene.db.app();
    warm(&admin).await;
    let events = locks::EventsLock::take(&scene.db).await;
    let mut cancel = scene.spawn(|app| async move { app.booking.cancel(&CALLER, hold).await });
    queued(&scene.db, &mut cancel, 1).await;
    let mut delete = tokio::spawn(async move { admin.slots.delete(slot).await });
    queued(&scene.db, &mut delete, 2).await;
    scene.proxy.lose_answers();
    queued(&scene.db, &mut cancel, 3).await;
    events.release().await;
    delete
        .await
        .unwrap()
        .expect("the slot, without bookings, deleted");
    let done = cancel.await.unwrap().expect("this request's cancellation");
    assert!(done.changed);
    assert_eq!(done.hold.status, HoldStatus::Cancelled);
    assert_eq!(scene.events_of(hold, "hold.cancelled").await, 1);
    scene.end().await;
}

/// A join whose answer is lost answers the entry as its COMMIT made it:
/// waiting, first in line, though a cancel that ran between that COMMIT
/// and the retry has offered it the seat since (SPEC §18).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_join_whose_commit_answer_is_lost_answers_the_entry_it_made() {
    let scene = Scene::new(1, HoldRules::default()).await;
    let slot = scene.slot;
    let seat = scene.held().await.id;
    let direct = App::new(scene.db.config(Duration::from_secs(300))).expect("app");
    warm(&direct).await;
    let events = locks::EventsLock::take(&scene.db).await;
    let key = new_key();
    let mut join =
        scene.spawn(|app| async move { app.booking.join_waitlist(&CALLER, slot, 1, &key).await });
    queued(&scene.db, &mut join, 1).await;
    // The seat's hold cancelled elsewhere: it queues for the slot first.
    let cancel = tokio::spawn(async move { direct.booking.cancel(&CALLER, seat).await });
    scene.db.wait_for_lock_waiters(2).await;
    scene.proxy.lose_answers();
    // The retry, on a new connection, queues behind the cancel.
    scene.db.wait_for_lock_waiters(3).await;
    events.release().await;
    let joined = join.await.unwrap().expect("the entry was made");
    cancel.await.unwrap().expect("cancelled");
    assert!(joined.created, "this request's own entry: 201");
    assert_eq!(
        (
            joined.entry.status,
            joined.entry.position,
            joined.entry.hold_id
        ),
        (EntryStatus::Waiting, Some(1), None),
        "the entry as the lost answer showed it"
    );
    let now: String = sqlx::query_scalar("SELECT status FROM waitlist_entries WHERE id = ?")
        .bind(joined.entry.id.0)
        .fetch_one(&scene.db.admin)
        .await
        .unwrap();
    assert_eq!(now, "offered", "the cancel offered it the seat meanwhile");
    scene.end().await;
}
