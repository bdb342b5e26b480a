//! Concurrency claims, proven with truly parallel callers: each caller is
//! its own execution environment (its own App and connection), all warmed
//! up, then released together behind a barrier.

use serde_json::Value;
use shared::App;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CALLERS: usize = 20;

fn tally(responses: &[(u16, Value)]) -> BTreeMap<u16, usize> {
    let mut counts = BTreeMap::new();
    for (status, _) in responses {
        *counts.entry(*status).or_default() += 1;
    }
    counts
}

async fn hold_via_http(app: &App, slot: SlotId, key: &str) -> (u16, Value) {
    read(
        http::hold(app, hold_request(&slot.0.to_string(), Some(key)))
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_holds_on_a_one_seat_slot_give_one_201_and_nineteen_409() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, move |_, app| async move {
        hold_via_http(&app, slot, &new_key().to_string()).await
    })
    .await;
    assert_eq!(tally(&responses), BTreeMap::from([(201, 1), (409, 19)]));
    assert!(
        responses
            .iter()
            .filter(|r| r.0 == 409)
            .all(|r| r.1["reason"] == "capacity_exhausted")
    );
    assert_eq!(db.count_holds(slot, "TRUE").await, 1, "one row");
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_confirms_competing_for_one_seat_give_one_200_and_nineteen_409() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    // Twenty held holds on one seat can only exist out of band (the hold
    // path refuses them), which is what makes the decrement's own
    // condition the last line of defence here.
    for i in 0..CALLERS {
        sqlx::query(
            "INSERT INTO holds (slot_id, idempotency_key, status, expires_at) \
             VALUES (?, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE)",
        )
        .bind(slot.0)
        .bind(format!("00000000-0000-4000-8000-{i:012}"))
        .execute(&db.admin)
        .await
        .unwrap();
    }
    let ids: Vec<u64> = sqlx::query_scalar("SELECT id FROM holds WHERE slot_id = ? ORDER BY id")
        .bind(slot.0)
        .fetch_all(&db.admin)
        .await
        .unwrap();
    let ids = Arc::new(ids);
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, move |i, app| {
        let ids = ids.clone();
        async move {
            read(
                http::confirm(&app, confirm_request(&ids[i].to_string()))
                    .await
                    .unwrap(),
            )
        }
    })
    .await;
    assert_eq!(tally(&responses), BTreeMap::from([(200, 1), (409, 19)]));
    assert!(
        responses
            .iter()
            .filter(|r| r.0 == 409)
            .all(|r| r.1["reason"] == "capacity_exhausted")
    );
    assert_eq!(db.slot(slot).await, (1, 0), "remaining = 0, never below");
    assert_eq!(db.count_holds(slot, "status = 'confirmed'").await, 1);
    db.drop().await;
}

async fn twenty_parallel_holds_with_one_key(capacity: u32) {
    let db = TestDb::new().await;
    let slot = db.insert_slot(capacity).await;
    let key = new_key().to_string();
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, move |_, app| {
        let key = key.clone();
        async move { hold_via_http(&app, slot, &key).await }
    })
    .await;
    assert_eq!(
        tally(&responses),
        BTreeMap::from([(200, 19), (201, 1)]),
        "capacity {capacity}"
    );
    let id = responses[0].1["id"].clone();
    assert!(
        responses.iter().all(|r| r.1["id"] == id),
        "every caller gets the one hold"
    );
    assert_eq!(db.count_holds(slot, "TRUE").await, 1, "one row");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_holds_with_one_key_give_one_201_and_nineteen_200() {
    twenty_parallel_holds_with_one_key(5).await;
}

/// The race SPEC §4 closes beyond the seed: without the key re-check after
/// the lock, the callers queued behind the winner would count its hold and
/// answer 409 on the now-full slot instead of replaying it.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_holds_with_one_key_on_a_one_seat_slot_all_replay_the_winner() {
    twenty_parallel_holds_with_one_key(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn parallel_holds_with_one_key_on_different_slots_create_one_hold_and_refuse_the_rest() {
    let db = TestDb::new().await;
    let mut slots = Vec::new();
    for _ in 0..CALLERS {
        slots.push(db.insert_slot(1).await);
    }
    let slots = Arc::new(slots);
    let key = new_key().to_string();
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, move |i, app| {
        let (slots, key) = (slots.clone(), key.clone());
        async move { hold_via_http(&app, slots[i], &key).await }
    })
    .await;
    assert_eq!(tally(&responses), BTreeMap::from([(201, 1), (422, 19)]));
    assert!(
        responses
            .iter()
            .filter(|r| r.0 == 422)
            .all(|r| r.1["reason"] == "idempotency_key_reuse")
    );
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM holds")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(rows, 1);
    db.drop().await;
}

/// The expiry boundary (SPEC §4): a hold H2 created just after H1 expired
/// does not count H1; a confirm of H1 that passed its first expiry check
/// before that moment must not succeed afterwards, or bookable becomes −1.
///
/// Driven deterministically: the test holds the slot's row lock; the
/// confirm of H1 passes its first check while H1 is active and queues on
/// the lock; H1 expires; H2's hold, which now sees a free seat, queues
/// too; then the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_confirm_that_reaches_the_slot_lock_after_expiry_is_refused_so_bookable_stays_non_negative()
 {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let ttl = Duration::from_millis(2000);
    let apps = db.warm_apps(2, ttl).await;
    let (holder, confirmer) = (apps[0].clone(), apps[1].clone());
    let (status, h1) = hold_via_http(&holder, slot, &new_key().to_string()).await;
    assert_eq!(status, 201);
    let h1_id = id_of(&h1);
    let h1_expires = Instant::now() + ttl;

    let mut blocker = db.admin.begin().await.unwrap();
    sqlx::query("SELECT id FROM slots WHERE id = ? FOR UPDATE")
        .bind(slot.0)
        .execute(&mut *blocker)
        .await
        .unwrap();
    let confirm = tokio::spawn(async move {
        read(
            http::confirm(&confirmer, confirm_request(&h1_id))
                .await
                .unwrap(),
        )
    });
    db.wait_for_lock_waiters(1).await;
    assert!(
        Instant::now() < h1_expires,
        "the confirm queued while H1 was active"
    );
    tokio::time::sleep(
        h1_expires.saturating_duration_since(Instant::now()) + Duration::from_millis(100),
    )
    .await;
    let h2 =
        tokio::spawn(async move { hold_via_http(&holder, slot, &new_key().to_string()).await });
    db.wait_for_lock_waiters(2).await;
    blocker.rollback().await.unwrap();

    let (h2, confirm) = (h2.await.unwrap(), confirm.await.unwrap());
    assert_eq!(h2.0, 201, "H1 had expired when H2 counted: {}", h2.1);
    assert_eq!(confirm.0, 409, "{}", confirm.1);
    assert_eq!(confirm.1["reason"], "hold_expired");
    let (_, remaining) = db.slot(slot).await;
    let bookable = i64::from(remaining) - db.active_seats(slot).await;
    assert_eq!(bookable, 0, "never −1");
    db.assert_invariants().await;
    db.drop().await;
}

/// The same boundary for an extension (SPEC §9): "expired?" is decided
/// under the slot's lock, so an extension sent while H1 was active but
/// granted the lock after H1 expired is refused, and H1 is never revived
/// under H2, which the hold path counted H1 as gone for.
///
/// Driven as above: the test holds the slot's row lock; the extension
/// passes its plain read while H1 is active and queues; H1 expires; H2's
/// hold queues too; the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_that_reaches_the_slot_lock_after_expiry_is_refused_and_revives_nothing() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let ttl = Duration::from_millis(2000);
    let apps = db.warm_apps(2, ttl).await;
    let (holder, extender) = (apps[0].clone(), apps[1].clone());
    let (status, h1) = hold_via_http(&holder, slot, &new_key().to_string()).await;
    assert_eq!(status, 201);
    let h1_id = id_of(&h1);
    let h1_expires = Instant::now() + ttl;
    let stored = || async {
        let row: (
            String,
            chrono::DateTime<chrono::Utc>,
            chrono::DateTime<chrono::Utc>,
        ) = sqlx::query_as(
            "SELECT CAST(status AS CHAR), expires_at, updated_at FROM holds WHERE id = ?",
        )
        .bind(&h1_id)
        .fetch_one(&db.admin)
        .await
        .unwrap();
        row
    };
    let before = stored().await;

    let lock = locks::SlotLock::take(&db, slot).await;
    let extend = tokio::spawn({
        let h1_id = h1_id.clone();
        async move {
            read(
                http::extend_hold(&extender, extend_request(&h1_id))
                    .await
                    .unwrap(),
            )
        }
    });
    db.wait_for_lock_waiters(1).await;
    assert!(
        Instant::now() < h1_expires,
        "the extension queued while H1 was active"
    );
    tokio::time::sleep(
        h1_expires.saturating_duration_since(Instant::now()) + Duration::from_millis(100),
    )
    .await;
    let h2 =
        tokio::spawn(async move { hold_via_http(&holder, slot, &new_key().to_string()).await });
    db.wait_for_lock_waiters(2).await;
    lock.release().await;

    let (extended, h2) = (extend.await.unwrap(), h2.await.unwrap());
    assert_eq!(
        extended.0, 409,
        "sent before expiry, decided after: {}",
        extended.1
    );
    assert_eq!(extended.1["reason"], "hold_expired");
    assert_eq!(stored().await, before, "H1 is untouched");
    assert_eq!(h2.0, 201, "H1's seat is free for H2: {}", h2.1);
    let (_, remaining) = db.slot(slot).await;
    assert_eq!(
        i64::from(remaining) - db.active_seats(slot).await,
        0,
        "one seat, one active hold"
    );
    db.assert_counters_exact("after the boundary").await;
    db.assert_invariants().await;
    db.drop().await;
}

/// "Has the slot started?" is decided under the slot's lock too: a hold
/// that passed its pre-check before the start but got the lock after it
/// is refused, and its claim is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_that_reaches_the_slot_lock_after_the_slot_started_is_409_slot_closed() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    let app = db.warm_apps(1, Duration::from_secs(300)).await.remove(0);
    let lead = Duration::from_millis(1500);
    sqlx::query(
        "UPDATE slots SET starts_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id = ?",
    )
    .bind(i64::try_from(lead.as_micros()).unwrap())
    .bind(slot.0)
    .execute(&db.admin)
    .await
    .unwrap();
    let starts = Instant::now() + lead;
    let lock = locks::SlotLock::take(&db, slot).await;
    let hold = tokio::spawn(async move { hold_via_http(&app, slot, &new_key().to_string()).await });
    db.wait_for_lock_waiters(1).await;
    assert!(Instant::now() < starts, "the hold queued before the start");
    tokio::time::sleep(
        starts.saturating_duration_since(Instant::now()) + Duration::from_millis(100),
    )
    .await;
    lock.release().await;
    let (status, body) = hold.await.unwrap();
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["reason"], "slot_closed");
    assert_eq!(db.count_holds(slot, "TRUE").await, 0);
    let held: u32 = sqlx::query_scalar("SELECT held FROM slots WHERE id = ?")
        .bind(slot.0)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(held, 0, "the claim was rolled back");
    db.drop().await;
}

/// SPEC §9: the fingerprint holds on every path, the concurrent duplicate
/// that loses the unique index included. Twenty callers send one key,
/// half of them for one seat and half for two: one hold is made; the
/// callers that asked what the winner asked get it with 200, the others 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_holds_with_one_key_and_two_quantities_make_one_hold_and_refuse_the_other_quantity()
 {
    let db = TestDb::new().await;
    let slot = db.insert_slot(10).await;
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let key = new_key().to_string();
    let responses = together(apps, move |i, app| {
        let key = key.clone();
        async move {
            let quantity = 1 + i % 2;
            let request = with_body(
                hold_request(&slot.0.to_string(), Some(&key)),
                &format!(r#"{{"quantity": {quantity}}}"#),
            );
            let response = http::hold(&app, request).await.unwrap();
            let replayed = response.headers().contains_key("idempotent-replayed");
            let (status, body) = read(response);
            (quantity, status, replayed, body)
        }
    })
    .await;
    let winner = responses
        .iter()
        .find(|r| r.1 == 201)
        .expect("one hold made");
    let won = winner.0;
    for (quantity, status, replayed, body) in &responses {
        match (*quantity == won, *status) {
            (true, 201) => assert!(!replayed),
            (true, 200) => {
                assert!(replayed, "{body}");
                assert_eq!(body["id"], winner.3["id"]);
            }
            (false, 422) => {
                assert_eq!(body["reason"], "idempotency_key_reuse");
                assert_eq!(
                    body["message"],
                    format!(
                        "This idempotency key was already used for a quantity of {won}, not {quantity}."
                    )
                );
            }
            other => panic!("quantity {quantity} answered {other:?}: {body}"),
        }
    }
    let created = responses.iter().filter(|r| r.1 == 201).count();
    assert_eq!(created, 1);
    assert_eq!(db.count_holds(slot, "TRUE").await, 1);
    assert_eq!(db.seats(slot, "TRUE").await, i64::try_from(won).unwrap());
    db.assert_counters_exact("after the duplicates").await;
    db.drop().await;
}

/// A plain read may answer only final states: "held and expired" is not
/// final while a confirm that decided "active" under the slot's lock has
/// yet to commit. Driven deterministically: confirm A decides while the
/// hold is active and queues at its last statement (the events are
/// locked), still holding the slot's lock; the hold's `expires_at`
/// passes; confirm B, the client's retry from another environment, must
/// not answer `hold_expired` from its plain read: A commits, B replays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_confirm_retried_while_the_first_one_commits_after_expiry_replays_it_and_never_says_expired()
 {
    let confirm = |app: App, id: String| async move {
        read(http::confirm(&app, confirm_request(&id)).await.unwrap())
    };
    let (db, h1_id, first, retry) = decided_then_retried_after_expiry(confirm, confirm).await;
    assert_eq!(first.0, 200, "decided while active: {}", first.1);
    assert_eq!(
        retry.0, 200,
        "the first confirmation committed: the retry replays it, never hold_expired: {}",
        retry.1
    );
    assert_eq!(retry.1["status"], "confirmed");
    assert_eq!(db.events_of(&h1_id, "hold.confirmed").await, 1);
    db.assert_invariants().await;
    db.drop().await;
}

/// The same for an extension: the retry waits for the first one's fate
/// under the slot's lock, finds the hold active again and extends it. The
/// hold is never answered expired and then seen active (SPEC §9: an
/// expired hold is never revived).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_extension_retried_while_the_first_one_commits_after_expiry_never_says_expired() {
    let extend = |app: App, id: String| async move {
        read(http::extend_hold(&app, extend_request(&id)).await.unwrap())
    };
    let (db, h1_id, first, retry) = decided_then_retried_after_expiry(extend, extend).await;
    assert_eq!(first.0, 200, "decided while active: {}", first.1);
    assert_eq!(
        retry.0, 200,
        "the first extension committed: the hold is active, never hold_expired: {}",
        retry.1
    );
    assert_eq!(retry.1["active"], true);
    assert_eq!(db.events_of(&h1_id, "hold.extended").await, 2);
    db.assert_invariants().await;
    db.drop().await;
}

type Answered = (u16, Value);

/// A hold of 1.5 s on a one-seat slot; 1 s later, with the events locked,
/// `first` (confirm or extend) decides "active" under the slot's lock and queues
/// at its event; the hold's expiry passes; `retry` is sent from another
/// environment and either answers at once (from a plain read) or queues
/// for the slot's lock; then the events are released. Returns the
/// database, the hold's id and both answers.
async fn decided_then_retried_after_expiry<F, R, Fut>(
    first: F,
    retry: R,
) -> (TestDb, String, Answered, Answered)
where
    F: FnOnce(App, String) -> Fut,
    R: FnOnce(App, String) -> Fut,
    Fut: std::future::Future<Output = Answered> + Send + 'static,
{
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let ttl = Duration::from_millis(1500);
    let apps = db.warm_apps(2, ttl).await;
    let (status, h1) = hold_via_http(&apps[0], slot, &new_key().to_string()).await;
    assert_eq!(status, 201);
    let expires = Instant::now() + ttl;
    let h1_id = id_of(&h1);
    // Late in the hold's life, so that an extension decided now outlasts
    // the retry's decision after the old expiry.
    tokio::time::sleep(ttl * 2 / 3).await;

    let events = locks::EventsLock::take(&db).await;
    let first = tokio::spawn(first(apps[0].clone(), h1_id.clone()));
    db.wait_for_lock_waiters(1).await;
    assert!(
        Instant::now() < expires,
        "the first call decided while the hold was active"
    );
    tokio::time::sleep(
        expires.saturating_duration_since(Instant::now()) + Duration::from_millis(100),
    )
    .await;
    let retry = tokio::spawn(retry(apps[1].clone(), h1_id.clone()));
    // Until the retry has answered or queues behind the first call (the
    // first call's lock wait ends at 3 s).
    for _ in 0..20 {
        if retry.is_finished() || db.lock_waiters().await >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    events.release().await;
    let (first, retry) = (first.await.unwrap(), retry.await.unwrap());
    (db, h1_id, first, retry)
}
