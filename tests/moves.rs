//! Moving a hold or a booking (SPEC §17), through the handler: what moves
//! and what stays, every refusal changing nothing, the body's rules, and
//! the races — moves in opposite directions, a move against holds for the
//! target's last seat, a move against the hold's expiry, and a confirm
//! or cancel that queued for the slot the hold has just left.

use serde_json::{Value, json};
use shared::App;
use shared::clients::Caller;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::seats::hold_seats;
use slot_booking_tests::*;
use std::time::{Duration, Instant};

async fn hold_on(app: &App, slot: SlotId, quantity: u32) -> Value {
    let (status, hold, _) =
        hold_seats(app, &slot.0.to_string(), new_key().as_str(), quantity).await;
    assert_eq!(status, 201, "{hold}");
    hold
}

async fn move_to(app: &App, hold: &Value, to: impl std::fmt::Display) -> (u16, Value) {
    let body = format!(r#"{{"slot_id": {to}}}"#);
    read(
        http::move_hold(app, move_request(&id_of(hold), &body))
            .await
            .unwrap(),
    )
}

/// Everything a refusal must leave as it was: every slot's and hold's row
/// and the events.
async fn state(db: &TestDb) -> Vec<String> {
    let mut rows: Vec<String> = sqlx::query_scalar(
        "SELECT CONCAT_WS(' ', id, capacity, remaining, held, reclaimed_until, updated_at) FROM slots ORDER BY id",
    )
    .fetch_all(&db.admin)
    .await
    .unwrap();
    let holds: Vec<String> = sqlx::query_scalar(
        "SELECT CONCAT_WS(' ', id, slot_id, status, expires_at, updated_at) FROM holds ORDER BY id",
    )
    .fetch_all(&db.admin)
    .await
    .unwrap();
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    rows.extend(holds);
    rows.push(format!("{events} events"));
    rows
}

/// `(remaining, bookable)` of a slot, bookable by the hold path's query.
async fn figures(db: &TestDb, app: &App, slot: SlotId) -> (u32, i64) {
    let bookable = app.booking.bookable(slot).await.unwrap().expect("slot");
    (db.slot(slot).await.1, bookable)
}

/// The deadlocks InnoDB has broken since the server started.
async fn deadlocks(db: &TestDb) -> u64 {
    let (_, count): (String, String) = sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    count.parse().unwrap()
}

async fn check(db: &TestDb) {
    db.assert_invariants().await;
    db.assert_held_counter().await;
}

#[tokio::test]
async fn a_hold_moves_with_its_seats_and_keeps_its_id_key_and_expiry() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(3).await, db.insert_slot(3).await);
    let app = db.app();
    let hold = hold_on(&app, a, 2).await;
    let (status, moved) = move_to(&app, &hold, b).await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(moved["slot_id"], b.0);
    for same in [
        "id",
        "idempotency_key",
        "status",
        "quantity",
        "expires_at",
        "created_at",
    ] {
        assert_eq!(moved[same], hold[same], "{same} is kept");
    }
    assert_eq!(moved["active"], true);
    assert_eq!(
        figures(&db, &app, a).await,
        (3, 3),
        "A's seats are free again"
    );
    assert_eq!(figures(&db, &app, b).await, (3, 1), "B's are held");
    // One `hold.moved`, its data the hold as every hold event has it,
    // `from_slot_id` beside it.
    let page = app
        .feed
        .page(&Caller::anonymous(), None, 100)
        .await
        .expect("feed");
    let events: Vec<Value> = page
        .events
        .iter()
        .map(|event| serde_json::to_value(event).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["hold.created", "hold.moved"]);
    assert_eq!(events[1]["from_slot_id"], json!(a.0));
    assert_eq!(events[1]["data"], moved, "the data is the hold answered");
    assert!(events[0].get("from_slot_id").is_none());
    check(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn a_booking_moves_by_consuming_the_targets_seats_and_giving_back_its_own() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(2).await, db.insert_slot(2).await);
    let app = db.app();
    let booking = hold_and_confirm(&app, a).await;
    assert_eq!(figures(&db, &app, a).await, (1, 1));
    let (status, moved) = move_to(&app, &booking, b).await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(moved["status"], "confirmed");
    assert_eq!(moved["confirmed_at"], booking["confirmed_at"]);
    assert_eq!(figures(&db, &app, a).await, (2, 2), "given back");
    assert_eq!(figures(&db, &app, b).await, (1, 1), "consumed");
    // And back: A's remaining is capped at its capacity on the way.
    let (status, _) = move_to(&app, &booking, a).await;
    assert_eq!(status, 200);
    assert_eq!(figures(&db, &app, a).await, (1, 1));
    assert_eq!(figures(&db, &app, b).await, (2, 2));
    assert_eq!(db.events_of(&id_of(&booking), "hold.moved").await, 2);
    check(&db).await;
    db.drop().await;
}

/// `remaining >= quantity` alone would let a booking land on a seat
/// another client holds (SPEC §17).
#[tokio::test]
async fn a_booking_never_lands_on_seats_others_hold() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(1).await, db.insert_slot(1).await);
    let app = db.app();
    let booking = hold_and_confirm(&app, a).await;
    let _held = hold_on(&app, b, 1).await;
    let before = state(&db).await;
    let (status, body) = move_to(&app, &booking, b).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("capacity_exhausted")),
        "{body}"
    );
    assert_eq!(state(&db).await, before, "nothing changed");
    check(&db).await;
    db.drop().await;
}

/// A full counter is not the last word: the seats of a hold that expired
/// since the watermark are given back, then claimed.
#[tokio::test]
async fn a_move_onto_seats_freed_by_an_expiry_reclaims_them() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(2).await, db.insert_slot(1).await);
    let short = db.app_with_hold_ttl(Duration::from_millis(300));
    let app = db.app();
    hold_on(&short, b, 1).await;
    let hold = hold_on(&app, a, 1).await;
    let booking = hold_and_confirm(&app, a).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        move_to(&app, &hold, b).await.0,
        200,
        "a hold, onto the expired one's seat"
    );
    assert_eq!(db.events_of(&id_of(&hold), "hold.moved").await, 1);
    let (status, body) = move_to(&app, &booking, b).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("capacity_exhausted"))
    );
    // The same for a booking, once the hold has gone.
    http::cancel(&app, cancel_request(&id_of(&hold)))
        .await
        .unwrap();
    let (status, body) = move_to(&app, &booking, b).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(figures(&db, &app, b).await, (0, 0));
    check(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn every_refusal_comes_in_the_specs_order_and_changes_nothing() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(2).await, db.insert_slot(1).await);
    let app = db.app();
    let short = db.app_with_hold_ttl(Duration::from_millis(200));
    let refused = |status: u16, reason: &'static str| (status, reason.to_string());
    let answer = |(status, body): (u16, Value)| {
        (
            status,
            body["reason"].as_str().unwrap_or_default().to_string(),
        )
    };

    let cancelled = hold_on(&app, a, 1).await;
    http::cancel(&app, cancel_request(&id_of(&cancelled)))
        .await
        .unwrap();
    let expired = hold_on(&short, a, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let hold = hold_on(&app, a, 1).await;
    let started = db.insert_slot(5).await;
    sqlx::query("UPDATE slots SET starts_at = UTC_TIMESTAMP() - INTERVAL 1 MINUTE WHERE id = ?")
        .bind(started.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let before = state(&db).await;

    assert_eq!(
        answer(move_to(&app, &cancelled, 99_999).await),
        refused(409, "hold_cancelled")
    );
    assert_eq!(
        answer(move_to(&app, &expired, 99_999).await),
        refused(409, "hold_expired")
    );
    assert_eq!(
        answer(move_to(&app, &hold, 99_999).await),
        refused(404, "not_found")
    );
    assert_eq!(
        answer(move_to(&app, &hold, started.0).await),
        refused(409, "slot_closed")
    );
    assert_eq!(state(&db).await, before, "no refusal changed anything");
    let big = hold_on(&app, b, 1).await;
    let before_big = state(&db).await;
    assert_eq!(
        answer(move_to(&app, &hold, b).await),
        refused(409, "capacity_exhausted")
    );
    assert_eq!(state(&db).await, before_big);
    http::cancel(&app, cancel_request(&id_of(&big)))
        .await
        .unwrap();
    // The owner's share of the target: its confirmed and held seats there.
    let booked = hold_and_confirm(&app, b).await;
    sqlx::query("UPDATE slots SET capacity = 3, remaining = remaining + 2, max_seats_per_client = 1 WHERE id = ?")
        .bind(b.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let before_share = state(&db).await;
    assert_eq!(
        answer(move_to(&app, &hold, b).await),
        refused(409, "slot_client_limit_reached")
    );
    assert_eq!(state(&db).await, before_share);
    // Someone else's hold does not exist for this caller.
    let other = db
        .client("other", shared::clients::Role::Booker, None)
        .await;
    let keyed = db.app_in(shared::config::AuthMode::ApiKey, 0);
    let foreign = other.by(move_request(
        &id_of(&hold),
        &format!(r#"{{"slot_id": {b}}}"#),
    ));
    let (status, body) = read(http::move_hold(&keyed, foreign).await.unwrap());
    assert_eq!((status, body["reason"].as_str()), (404, Some("not_found")));
    // The slot the hold is on has started: closed too.
    sqlx::query("UPDATE slots SET starts_at = UTC_TIMESTAMP() - INTERVAL 1 MINUTE WHERE id = ?")
        .bind(a.0)
        .execute(&db.admin)
        .await
        .unwrap();
    sqlx::query("UPDATE slots SET max_seats_per_client = NULL WHERE id = ?")
        .bind(b.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let before_start = state(&db).await;
    assert_eq!(
        answer(move_to(&app, &hold, b).await),
        refused(409, "slot_closed")
    );
    assert_eq!(state(&db).await, before_start);
    assert_eq!(booked["status"], "confirmed");
    check(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn moving_to_the_slot_it_is_on_answers_it_unchanged_without_an_event() {
    let db = TestDb::new().await;
    let a = db.insert_slot(1).await;
    let app = db.app();
    let hold = hold_on(&app, a, 1).await;
    let before = state(&db).await;
    let (status, same) = move_to(&app, &hold, a).await;
    assert_eq!(status, 200, "{same}");
    assert_eq!(same["updated_at"], hold["updated_at"]);
    assert_eq!(state(&db).await, before);
    assert_eq!(db.events_of(&id_of(&hold), "hold.moved").await, 0);
    db.drop().await;
}

/// A move releases exactly what it claims: a client at its cap may move,
/// and its allowance is what it was.
#[tokio::test]
async fn a_client_at_its_cap_may_move() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(2).await, db.insert_slot(2).await);
    let client = caps::capped_client(&db, "capped", 2).await;
    let app = db.app_in(shared::config::AuthMode::ApiKey, 0);
    let (status, hold, _) = caps::capped_hold(&app, &client, a, new_key().as_str(), 2).await;
    assert_eq!(status, 201, "{hold}");
    let request = client.by(move_request(
        &id_of(&hold),
        &format!(r#"{{"slot_id": {b}}}"#),
    ));
    let (status, moved) = read(http::move_hold(&app, request).await.unwrap());
    assert_eq!(status, 200, "{moved}");
    let (status, refused, _) = caps::capped_hold(&app, &client, a, new_key().as_str(), 1).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("hold_limit_reached"))
    );
    check(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn a_bad_body_is_422_under_its_field_and_a_large_one_413() {
    let db = TestDb::new().await;
    let a = db.insert_slot(1).await;
    let app = db.app();
    let hold = hold_on(&app, a, 1).await;
    let id = id_of(&hold);
    for (body, field) in [
        ("", "body"),
        ("[]", "body"),
        ("{}", "slot_id"),
        (r#"{"slot_id": 0}"#, "slot_id"),
        (r#"{"slot_id": "2"}"#, "slot_id"),
        (r#"{"slot_id": 2, "seats": 1}"#, "seats"),
    ] {
        let (status, answer) = read(
            http::move_hold(&app, move_request(&id, body))
                .await
                .unwrap(),
        );
        assert_eq!(status, 422, "{body}: {answer}");
        assert!(answer["errors"].get(field).is_some(), "{body}: {answer}");
    }
    let large = format!(r#"{{"slot_id": {a}, "x": "{}"}}"#, "y".repeat(1024));
    let (status, answer) = read(
        http::move_hold(&app, move_request(&id, &large))
            .await
            .unwrap(),
    );
    assert_eq!(
        (status, answer["reason"].as_str()),
        (413, Some("payload_too_large"))
    );
    let (status, _) = read(
        http::move_hold(&app, move_request("x", "{}"))
            .await
            .unwrap(),
    );
    assert_eq!(
        status, 422,
        "the body is read before the hold is looked for"
    );
    db.drop().await;
}

/// Holds moved from A to B and from B to A at once, each environment its
/// own connection: both slot rows are locked in ascending id order, so
/// InnoDB never has a deadlock to break (a retry would hide one from the
/// client; the server's own count does not), and every move is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn moves_in_opposite_directions_all_succeed_without_a_deadlock() {
    const EACH_WAY: usize = 6;
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(20).await, db.insert_slot(20).await);
    let setup = db.app();
    let mut holds = Vec::new();
    for i in 0..2 * EACH_WAY {
        let (from, to) = if i % 2 == 0 { (a, b) } else { (b, a) };
        holds.push((hold_on(&setup, from, 1).await, to));
    }
    let apps = db.warm_apps(2 * EACH_WAY, Duration::from_secs(300)).await;
    let deadlocks_before = deadlocks(&db).await;
    let holds = std::sync::Arc::new(holds);
    let answers = together(apps, move |i, app| {
        let holds = holds.clone();
        async move {
            let (hold, to) = &holds[i];
            let mut answers = Vec::new();
            // There and back, three times: the two directions keep crossing.
            for round in 0..6 {
                let target = if round % 2 == 0 {
                    to.0
                } else {
                    hold["slot_id"].as_u64().unwrap()
                };
                answers.push(move_to(&app, hold, target).await.0);
            }
            answers
        }
    })
    .await;
    for answers in &answers {
        assert!(answers.iter().all(|status| *status == 200), "{answers:?}");
    }
    assert_eq!(db.seats(a, "status = 'held'").await, EACH_WAY as i64);
    // Not one, retried unseen: the locks were never taken in two orders.
    // (The server's count; no other test of this file makes a deadlock.)
    assert_eq!(
        deadlocks(&db).await,
        deadlocks_before,
        "InnoDB saw deadlocks"
    );
    check(&db).await;
    db.drop().await;
}

/// One seat left on B; a move of a hold from A and seven holds on B race
/// for it, released together: exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_move_racing_holds_for_the_targets_last_seat_exactly_one_wins() {
    const HOLDERS: usize = 7;
    for _ in 0..3 {
        let db = TestDb::new().await;
        let (a, b) = (db.insert_slot(1).await, db.insert_slot(1).await);
        let setup = db.app();
        let hold = hold_on(&setup, a, 1).await;
        let apps = db.warm_apps(HOLDERS + 1, Duration::from_secs(300)).await;
        let wins = together(apps, move |i, app| {
            let hold = hold.clone();
            async move {
                if i == 0 {
                    move_to(&app, &hold, b).await.0 == 200
                } else {
                    hold_seats(&app, &b.0.to_string(), new_key().as_str(), 1)
                        .await
                        .0
                        == 201
                }
            }
        })
        .await;
        assert_eq!(wins.iter().filter(|won| **won).count(), 1, "{wins:?}");
        assert_eq!(db.active_seats(b).await, 1);
        assert_eq!(db.active_seats(a).await, if wins[0] { 0 } else { 1 });
        check(&db).await;
        db.drop().await;
    }
}

/// The expiry boundary of a move, as confirm's: the move passes its plain
/// read while H1 is active and queues on the slots' locks; H1 expires;
/// H2, which now counts H1's seat free, queues too; the locks are
/// released. The move decides "expired" under them: refused, and H1's seat
/// is H2's alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_that_reaches_the_locks_after_expiry_is_refused() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(1).await, db.insert_slot(1).await);
    let ttl = Duration::from_millis(2000);
    let apps = db.warm_apps(2, ttl).await;
    let (holder, mover) = (apps[0].clone(), apps[1].clone());
    let h1 = hold_on(&holder, a, 1).await;
    let h1_expires = Instant::now() + ttl;
    let lock = locks::SlotLock::take(&db, a).await;
    let moving = tokio::spawn({
        let h1 = h1.clone();
        async move { move_to(&mover, &h1, b).await }
    });
    db.wait_for_lock_waiters(1).await;
    assert!(
        Instant::now() < h1_expires,
        "the move queued while H1 was active"
    );
    tokio::time::sleep(
        h1_expires.saturating_duration_since(Instant::now()) + Duration::from_millis(100),
    )
    .await;
    let h2 =
        tokio::spawn(
            async move { hold_seats(&holder, &a.0.to_string(), new_key().as_str(), 1).await },
        );
    db.wait_for_lock_waiters(2).await;
    lock.release().await;
    let (moved, h2) = (moving.await.unwrap(), h2.await.unwrap());
    assert_eq!(
        (moved.0, moved.1["reason"].as_str()),
        (409, Some("hold_expired")),
        "{}",
        moved.1
    );
    assert_eq!(h2.0, 201, "H1's seat was free for H2: {}", h2.1);
    assert_eq!(db.active_seats(b).await, 0, "nothing landed on B");
    assert_eq!(db.count_holds(a, "TRUE").await, 2, "H1 stayed on A");
    check(&db).await;
    db.drop().await;
}

/// A confirm or cancel reads the hold on A and queues for A's lock; a move
/// carries the hold to B first. Under A's lock the hold is no longer A's:
/// the operation starts over on B (without that, a confirm would consume
/// A's seats for a hold counted on B).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_confirm_or_cancel_queued_on_the_slot_a_hold_left_follows_it() {
    for confirming in [true, false] {
        let db = TestDb::new().await;
        let (a, b) = (db.insert_slot(2).await, db.insert_slot(2).await);
        let apps = db.warm_apps(2, Duration::from_secs(300)).await;
        let (mover, other) = (apps[0].clone(), apps[1].clone());
        let hold = hold_on(&mover, a, 1).await;
        let lock = locks::SlotLock::take(&db, a).await;
        let moving = tokio::spawn({
            let hold = hold.clone();
            async move { move_to(&mover, &hold, b).await }
        });
        db.wait_for_lock_waiters(1).await;
        let id = id_of(&hold);
        let changing = tokio::spawn(async move {
            let request = if confirming {
                confirm_request(&id)
            } else {
                cancel_request(&id)
            };
            let response = if confirming {
                http::confirm(&other, request).await
            } else {
                http::cancel(&other, request).await
            };
            read(response.unwrap())
        });
        db.wait_for_lock_waiters(2).await;
        lock.release().await;
        let (moved, changed) = (moving.await.unwrap(), changing.await.unwrap());
        assert_eq!(moved.0, 200, "{}", moved.1);
        assert_eq!(changed.0, 200, "{}", changed.1);
        assert_eq!(
            changed.1["slot_id"], b.0,
            "decided on the slot the hold is on"
        );
        let expected_b = if confirming { 1 } else { 2 };
        assert_eq!(db.slot(a).await.1, 2, "A is untouched");
        assert_eq!(db.slot(b).await.1, expected_b);
        check(&db).await;
        db.drop().await;
    }
}
