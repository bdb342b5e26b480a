//! The per-client cap on seats in active holds (SPEC §16): one client's
//! holds on many slots, released together from separate environments,
//! never exceed it; expiry frees the allowance at `expires_at` by the
//! database's clock; an extension decided before expiry and committed after
//! is counted by a hold that waited for it; a replay answers 200 whatever
//! the cap says now (SPEC §19.2); the refusals come in SPEC §19.1's order.

use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::caps::*;
use slot_booking_tests::keys::authorized;
use slot_booking_tests::locks::{EventsLock, SlotLock};
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::time::Duration;

fn tally(answers: &[(u32, Answer)]) -> BTreeMap<u16, usize> {
    let mut counts = BTreeMap::new();
    for (_, (status, ..)) in answers {
        *counts.entry(*status).or_default() += 1;
    }
    counts
}

/// Forty holds over eight slots by one client capped at `CAP`, quantity
/// `quantity(i)` for caller `i`, all released together.
async fn forty_holds_over_eight_slots(
    db: &TestDb,
    quantity: fn(usize) -> u32,
) -> Vec<(u32, Answer)> {
    const CAP: u32 = 10;
    let client = capped_client(db, "hoarder", CAP).await;
    let mut slots = Vec::new();
    for _ in 0..8 {
        slots.push(db.insert_slot(100).await);
    }
    let apps = warm_apps_for(db, 40, &client).await;
    let answers = together(apps, move |i, app| {
        let (client, slot) = (client.clone(), slots[i % 8]);
        async move {
            let q = quantity(i);
            (
                q,
                capped_hold(&app, &client, slot, new_key().as_str(), q).await,
            )
        }
    })
    .await;
    for (_, (status, body, _)) in &answers {
        match status {
            201 => {}
            409 => {
                assert_eq!(body["reason"], "hold_limit_reached", "{body}");
                let message = body["message"].as_str().unwrap_or_default();
                assert!(message.contains("at most 10 seats"), "{message}");
            }
            _ => panic!("unexpected answer {status} {body}"),
        }
    }
    db.assert_invariants().await;
    db.assert_counters_exact("after the race").await;
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn forty_parallel_holds_over_eight_slots_by_a_client_capped_at_ten_hold_exactly_ten_seats() {
    let db = TestDb::new().await;
    let answers = forty_holds_over_eight_slots(&db, |_| 1).await;
    assert_eq!(tally(&answers), BTreeMap::from([(201, 10), (409, 30)]));
    let held: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM holds WHERE status = 'held'",
    )
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert_eq!(held, 10, "exactly the cap, over eight slots");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn forty_parallel_holds_of_one_to_five_seats_never_take_a_client_over_its_cap() {
    let db = TestDb::new().await;
    let answers = forty_holds_over_eight_slots(&db, |i| 1 + (i % 5) as u32).await;
    let won: u32 = answers
        .iter()
        .filter(|(_, (status, ..))| *status == 201)
        .map(|(q, _)| q)
        .sum();
    let held: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM holds WHERE status = 'held'",
    )
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert_eq!(i64::from(won), held, "every 201 is a hold, nothing else is");
    assert!(won <= 10, "{won} seats held under a cap of 10");
    // Exact, not merely safe: holds only grew, so a refusal that came when
    // fewer were held would still fit in what the winners left.
    for (q, (status, ..)) in &answers {
        if *status == 409 {
            assert!(won + q > 10, "{q} seats were refused with only {won} held");
        }
    }
    db.drop().await;
}

/// The allowance comes back when the hold expires, by the database's
/// clock and without a sweep: a hold aged to "expires now" no longer
/// counts, one aged to a second from now still does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expiry_frees_the_allowance_at_expires_at_without_a_sweep() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "expiring", 2).await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let app = warm_apps_for(&db, 1, &client).await.remove(0);
    let first = capped_hold(&app, &client, a, new_key().as_str(), 2).await;
    assert_eq!(first.0, 201, "{}", first.1);
    let refused = capped_hold(&app, &client, b, new_key().as_str(), 1).await;
    assert_eq!(refused.1["reason"], "hold_limit_reached", "{}", refused.1);
    assert!(
        refused.1["message"].as_str().unwrap().contains("has 2"),
        "{}",
        refused.1
    );
    let age = |sql: &'static str| {
        let id = id_of(&first.1);
        let admin = db.admin.clone();
        async move {
            sqlx::query(sql)
                .bind(id)
                .execute(&admin)
                .await
                .expect("age");
        }
    };
    age("UPDATE holds SET expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 SECOND WHERE id = ?").await;
    let still = capped_hold(&app, &client, b, new_key().as_str(), 1).await;
    assert_eq!(still.1["reason"], "hold_limit_reached", "{}", still.1);
    age("UPDATE holds SET expires_at = UTC_TIMESTAMP(6) WHERE id = ?").await;
    db.lower_floor_to(id_of(&first.1).parse().unwrap()).await;
    let freed = capped_hold(&app, &client, b, new_key().as_str(), 2).await;
    assert_eq!(freed.0, 201, "expired at its expires_at: {}", freed.1);
    assert_eq!(client_seats(&db, &client).await, 2);
    db.assert_counters_exact("after the expiry").await;
    db.drop().await;
}

/// An extension decides "active" before the hold expires and commits
/// after (its event waits behind a slow disk). A hold of the same client
/// that arrives after `expires_at` would count the hold as expired on a
/// plain read; it waits for the extension's client row instead, counts
/// the extended hold, and is refused: never 4 seats under a cap of 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_waits_for_an_extension_decided_before_expiry_and_counts_it() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "extender", 2).await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let mut apps = warm_apps_for(&db, 2, &client).await;
    let (extender, holder) = (apps.remove(0), apps.remove(0));
    let ttl = Duration::from_millis(1500);
    let short = db.app_with_hold_ttl(ttl);
    let first = capped_hold(&short, &client, a, new_key().as_str(), 2).await;
    assert_eq!(first.0, 201, "{}", first.1);
    let expires = tokio::time::Instant::now() + ttl;

    let events = EventsLock::take(&db).await;
    let extend = tokio::spawn({
        let (id, bearer) = (id_of(&first.1), client.bearer());
        async move {
            let request = authorized(extend_request(&id), Some(&bearer));
            read(http::extend_hold(&extender, request).await.unwrap())
        }
    });
    db.wait_for_lock_waiters(1).await;
    assert!(
        tokio::time::Instant::now() < expires,
        "the extension decided while the hold was active"
    );
    tokio::time::sleep_until(expires + Duration::from_millis(200)).await;
    let second = tokio::spawn({
        let client = client.clone();
        async move { capped_hold(&holder, &client, b, new_key().as_str(), 2).await }
    });
    db.wait_for_lock_waiters(2).await;
    events.release().await;

    let (extended, second) = (extend.await.unwrap(), second.await.unwrap());
    assert_eq!(extended.0, 200, "{}", extended.1);
    assert_eq!(second.0, 409, "{}", second.1);
    assert_eq!(second.1["reason"], "hold_limit_reached");
    assert_eq!(client_seats(&db, &client).await, 2, "never over the cap");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_is_200_whatever_the_cap_says_and_a_lowered_cap_keeps_existing_holds() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "replayer", 5).await;
    let slot = db.insert_slot(10).await;
    let app = warm_apps_for(&db, 1, &client).await.remove(0);
    let key = new_key().to_string();
    let first = capped_hold(&app, &client, slot, &key, 4).await;
    assert_eq!(first.0, 201, "{}", first.1);
    let over = capped_hold(&app, &client, slot, new_key().as_str(), 2).await;
    assert_eq!(over.1["reason"], "hold_limit_reached", "{}", over.1);
    let replay = capped_hold(&app, &client, slot, &key, 4).await;
    assert_eq!((replay.0, replay.2), (200, true), "{}", replay.1);

    // Lowered below what it holds: new holds refused, the old one intact
    // and still confirmable. A fresh environment reads the new cap.
    set_cap(&db, &client, 2).await;
    let app = warm_apps_for(&db, 1, &client).await.remove(0);
    let lowered = capped_hold(&app, &client, slot, new_key().as_str(), 1).await;
    assert_eq!(lowered.1["reason"], "hold_limit_reached", "{}", lowered.1);
    let message = lowered.1["message"].as_str().unwrap();
    assert!(
        message.contains("at most 2") && message.contains("has 4"),
        "{message}"
    );
    let replay = capped_hold(&app, &client, slot, &key, 4).await;
    assert_eq!((replay.0, replay.2), (200, true), "{}", replay.1);
    let request = authorized(confirm_request(&id_of(&first.1)), Some(&client.bearer()));
    let confirmed = read(http::confirm(&app, request).await.unwrap());
    assert_eq!(confirmed.0, 200, "{}", confirmed.1);
    let after = capped_hold(&app, &client, slot, new_key().as_str(), 2).await;
    assert_eq!(after.0, 201, "a confirm frees the allowance: {}", after.1);
    db.drop().await;
}

/// SPEC §19.1: the slot's own refusals come first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_or_started_slot_is_refused_for_itself_before_the_cap() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "ordered", 1).await;
    let (open, full, started) = (
        db.insert_slot(5).await,
        db.insert_slot(1).await,
        db.insert_slot(5).await,
    );
    let app = warm_apps_for(&db, 1, &client).await.remove(0);
    assert_eq!(
        capped_hold(&app, &client, open, new_key().as_str(), 1)
            .await
            .0,
        201
    );
    let full_answer = capped_hold(&app, &client, full, new_key().as_str(), 2).await;
    assert_eq!(
        full_answer.1["reason"], "capacity_exhausted",
        "{}",
        full_answer.1
    );
    sqlx::query("UPDATE slots SET starts_at = UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE WHERE id = ?")
        .bind(started.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let started_answer = capped_hold(&app, &client, started, new_key().as_str(), 1).await;
    assert_eq!(
        started_answer.1["reason"], "slot_closed",
        "{}",
        started_answer.1
    );
    let missing = capped_hold(
        &app,
        &client,
        SlotId(started.0 + 1000),
        new_key().as_str(),
        1,
    )
    .await;
    assert_eq!(missing.0, 404, "{}", missing.1);
    let capped = capped_hold(&app, &client, full, new_key().as_str(), 1).await;
    assert_eq!(capped.1["reason"], "hold_limit_reached", "{}", capped.1);
    db.drop().await;
}

/// Behind a slot's lock, a capped hold that passed its pre-check still
/// decides under the locks: the client's other hold, committed while it
/// waited, counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_capped_hold_counts_what_committed_while_it_waited_for_the_slot() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "waiter", 2).await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let mut apps = warm_apps_for(&db, 2, &client).await;
    let (first_app, second_app) = (apps.remove(0), apps.remove(0));
    let lock = SlotLock::take(&db, a).await;
    let queued = tokio::spawn({
        let client = client.clone();
        async move { capped_hold(&first_app, &client, a, new_key().as_str(), 2).await }
    });
    db.wait_for_lock_waiters(1).await;
    // The first holds the client's row while it waits for slot a: this one
    // passes its pre-check (nothing held yet) and queues behind it.
    let second = tokio::spawn({
        let client = client.clone();
        async move { capped_hold(&second_app, &client, b, new_key().as_str(), 1).await }
    });
    db.wait_for_lock_waiters(2).await;
    lock.release().await;
    let (queued, second) = (queued.await.unwrap(), second.await.unwrap());
    assert_eq!(queued.0, 201, "{}", queued.1);
    assert_eq!(second.1["reason"], "hold_limit_reached", "{}", second.1);
    assert_eq!(client_seats(&db, &client).await, 2);
    db.drop().await;
}

/// A client over its cap is refused under the locks once; its environment
/// then refuses it in the pre-check, without queueing on a lock another
/// transaction holds. Another environment, which has not refused it yet,
/// queues and refuses it under the locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_refused_at_its_cap_is_refused_again_without_a_lock() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "hoarder", 1).await;
    let slot = db.insert_slot(10).await;
    let mut apps = warm_apps_for(&db, 2, &client).await;
    let (here, elsewhere) = (apps.remove(0), apps.remove(0));
    let held = capped_hold(&here, &client, slot, new_key().as_str(), 1).await;
    assert_eq!(held.0, 201, "{}", held.1);
    let refused = capped_hold(&here, &client, slot, new_key().as_str(), 1).await;
    assert_eq!(refused.1["reason"], "hold_limit_reached", "{}", refused.1);

    let lock = SlotLock::take(&db, slot).await;
    let again = tokio::time::timeout(
        Duration::from_secs(3),
        capped_hold(&here, &client, slot, new_key().as_str(), 1),
    )
    .await
    .expect("refused without waiting for the slot's lock");
    assert_eq!(again.1["reason"], "hold_limit_reached", "{}", again.1);
    let queued = tokio::spawn({
        let client = client.clone();
        async move { capped_hold(&elsewhere, &client, slot, new_key().as_str(), 1).await }
    });
    db.wait_for_lock_waiters(1).await;
    lock.release().await;
    let queued = queued.await.unwrap();
    assert_eq!(queued.1["reason"], "hold_limit_reached", "{}", queued.1);
    assert_eq!(client_seats(&db, &client).await, 1);
    db.drop().await;
}
