//! The per-slot share (SPEC §16): `max_seats_per_client` on the slot
//! resource, set by `POST /slots` and `PATCH /slots/{id}`; one client's
//! seats on a slot (held and confirmed) never exceed it, under true
//! concurrency, a share set while a hold waits for the slot's lock
//! included; refusals in SPEC §19.1's order.

use serde_json::{Value, json};
use shared::clients::Role;
use shared::config::AuthMode;
use slot_booking_tests::caps::{capped_client, capped_hold};
use slot_booking_tests::slots::{create, get, hold, patch, slot_body, tomorrow};
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::time::Duration;

async fn set_share(db: &TestDb, slot: shared::domain::SlotId, share: Option<u32>) {
    sqlx::query("UPDATE slots SET max_seats_per_client = ? WHERE id = ?")
        .bind(share)
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .expect("share");
}

#[tokio::test]
async fn the_share_is_set_shown_changed_and_checked_against_the_capacity() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let mut body = slot_body(&tomorrow(8), &tomorrow(9), 5);
    body["max_seats_per_client"] = json!(2);
    let (status, created) = create(&app, &admin, &body).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["max_seats_per_client"], 2);
    let id = created["id"].as_u64().unwrap();
    let (_, read_back) = get(&app, Some(&admin), &id.to_string()).await;
    assert_eq!(read_back["max_seats_per_client"], 2);
    let (_, plain) = create(&app, &admin, &slot_body(&tomorrow(9), &tomorrow(10), 5)).await;
    assert_eq!(
        plain["max_seats_per_client"],
        Value::Null,
        "none by default"
    );

    for (bad, field) in [
        (json!(6), "max_seats_per_client"),
        (json!(0), "max_seats_per_client"),
        (json!("2"), "max_seats_per_client"),
    ] {
        let mut body = slot_body(&tomorrow(10), &tomorrow(11), 5);
        body["max_seats_per_client"] = bad.clone();
        let (status, answer) = create(&app, &admin, &body).await;
        assert_eq!(status, 422, "{bad} → {answer}");
        assert!(answer["errors"][field].is_array(), "{bad} → {answer}");
    }
    let (status, changed) = patch(&app, &admin, id, &json!({"max_seats_per_client": 4})).await;
    assert_eq!(
        (status, changed["max_seats_per_client"].clone()),
        (200, json!(4)),
        "{changed}"
    );
    // Below the share, the capacity alone is refused: change both.
    let (status, answer) = patch(&app, &admin, id, &json!({"capacity": 3})).await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["errors"]["max_seats_per_client"].is_array(),
        "{answer}"
    );
    let both = json!({"capacity": 3, "max_seats_per_client": 3});
    let (status, changed) = patch(&app, &admin, id, &both).await;
    assert_eq!(
        (status, changed["capacity"].clone()),
        (200, json!(3)),
        "{changed}"
    );
    let (status, changed) = patch(&app, &admin, id, &json!({"max_seats_per_client": null})).await;
    assert_eq!(
        (status, changed["max_seats_per_client"].clone()),
        (200, Value::Null),
        "{changed}"
    );
    db.drop().await;
}

/// Twelve holds of one seat by one client on a slot of 20 with a share of
/// 3, released together: exactly 3 are held; another client still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twelve_parallel_holds_by_one_client_take_exactly_its_share() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(20).await;
    set_share(&db, slot, Some(3)).await;
    let apps = db.warm_apps(12, Duration::from_secs(300)).await;
    let answers = together(
        apps,
        move |_, app| async move { hold(&app, slot.0, 1).await },
    )
    .await;
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for (status, body) in &answers {
        *tally
            .entry(format!(
                "{status} {}",
                body["reason"].as_str().unwrap_or("")
            ))
            .or_default() += 1;
    }
    assert_eq!(
        tally,
        BTreeMap::from([
            ("201 ".to_string(), 3),
            ("409 slot_client_limit_reached".to_string(), 9)
        ])
    );
    assert_eq!(db.active_seats(slot).await, 3);
    db.assert_invariants().await;
    db.assert_counters_exact("after the race").await;

    // Confirmed seats count too; other clients have their own share.
    let app = db.app();
    let first = answers.iter().find(|(status, _)| *status == 201).unwrap();
    let confirmed = read(
        shared::http::confirm(&app, confirm_request(&id_of(&first.1)))
            .await
            .unwrap(),
    );
    assert_eq!(confirmed.0, 200, "{}", confirmed.1);
    let (status, body) = hold(&app, slot.0, 1).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("slot_client_limit_reached")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("has 3"),
        "{body}"
    );
    let other = capped_client(&db, "other", 0).await;
    let apps = slot_booking_tests::caps::warm_apps_for(&db, 1, &other).await;
    let theirs = capped_hold(&apps[0], &other, slot, new_key().as_str(), 3).await;
    assert_eq!(theirs.0, 201, "{}", theirs.1);
    db.drop().await;
}

/// SPEC §19.1: capacity first, then the share, then the client's cap.
#[tokio::test]
async fn capacity_comes_before_the_share_and_the_share_before_the_cap() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "ordered", 2).await;
    let (small, shared_slot) = (db.insert_slot(2).await, db.insert_slot(10).await);
    set_share(&db, small, Some(1)).await;
    set_share(&db, shared_slot, Some(1)).await;
    let app = slot_booking_tests::caps::warm_apps_for(&db, 1, &client)
        .await
        .remove(0);
    let full = capped_hold(&app, &client, small, new_key().as_str(), 3).await;
    assert_eq!(full.1["reason"], "capacity_exhausted", "{}", full.1);
    let over_share = capped_hold(&app, &client, shared_slot, new_key().as_str(), 2).await;
    assert_eq!(
        over_share.1["reason"], "slot_client_limit_reached",
        "{}",
        over_share.1
    );
    assert_eq!(
        capped_hold(&app, &client, shared_slot, new_key().as_str(), 1)
            .await
            .0,
        201
    );
    assert_eq!(
        capped_hold(&app, &client, small, new_key().as_str(), 1)
            .await
            .0,
        201
    );
    // At its cap (2) and at the share (1) of both slots: the share speaks.
    let both = capped_hold(&app, &client, shared_slot, new_key().as_str(), 1).await;
    assert_eq!(both.1["reason"], "slot_client_limit_reached", "{}", both.1);
    db.drop().await;
}

/// A hold that saw no share in its pre-check, then waited for the slot's
/// lock while an admin set one, is still checked against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_share_set_while_a_hold_waits_for_the_slot_is_applied_to_it() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(10).await;
    let app = db.warm_apps(1, Duration::from_secs(300)).await.remove(0);
    assert_eq!(hold(&app, slot.0, 1).await.0, 201);
    assert_eq!(hold(&app, slot.0, 1).await.0, 201);
    // The share lands from inside a transaction that holds the slot's
    // lock, while the third hold (its pre-check saw no share) waits.
    let mut tx = db.admin.begin().await.unwrap();
    sqlx::query("SELECT id FROM slots WHERE id = ? FOR UPDATE")
        .bind(slot.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    let waiting = tokio::spawn(async move { hold(&app, slot.0, 1).await });
    db.wait_for_lock_waiters(1).await;
    sqlx::query("UPDATE slots SET max_seats_per_client = 2 WHERE id = ?")
        .bind(slot.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (status, body) = waiting.await.unwrap();
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("slot_client_limit_reached")),
        "{body}"
    );
    assert_eq!(db.active_seats(slot).await, 2, "the share, not one more");
    db.assert_counters_exact("after the late share").await;
    db.drop().await;
}

/// SPEC §19.1 under the lock too: a hold that passed its pre-check before
/// the slot started, then got the slot's lock after the start and after
/// the client's other hold filled its share, is `slot_closed`, not
/// `slot_client_limit_reached`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn started_comes_before_the_share_under_the_lock() {
    use slot_booking_tests::locks::EventsLock;
    let db = TestDb::new().await;
    let slot = db.insert_slot(10).await;
    set_share(&db, slot, Some(1)).await;
    let lead = Duration::from_millis(1500);
    sqlx::query(
        "UPDATE slots SET starts_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id = ?",
    )
    .bind(i64::try_from(lead.as_micros()).unwrap())
    .bind(slot.0)
    .execute(&db.admin)
    .await
    .unwrap();
    let starts = tokio::time::Instant::now() + lead;
    let apps = db.warm_apps(2, Duration::from_secs(300)).await;
    let (first_app, second_app) = (apps[0].clone(), apps[1].clone());
    // The first hold decides before the start and waits to commit.
    let events = EventsLock::take(&db).await;
    let first = tokio::spawn(async move { hold(&first_app, slot.0, 1).await });
    db.wait_for_lock_waiters(1).await;
    // The second passed its pre-check (no seat of the client's committed
    // yet) and waits for the slot's lock.
    let second = tokio::spawn(async move { hold(&second_app, slot.0, 1).await });
    db.wait_for_lock_waiters(2).await;
    assert!(
        tokio::time::Instant::now() < starts,
        "both queued before the start"
    );
    tokio::time::sleep_until(starts + Duration::from_millis(200)).await;
    events.release().await;
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(first.0, 201, "{}", first.1);
    assert_eq!(
        (second.0, second.1["reason"].as_str()),
        (409, Some("slot_closed")),
        "{}",
        second.1
    );
    db.drop().await;
}
