//! The waiting list (SPEC §18), through the handlers: joining and its
//! refusals, positions under parallel joins, offers made in the freeing
//! request (cancel, move, capacity raised) and by the sweep after an
//! expiry, first fit in arrival order, nobody jumping the line, an offer
//! fulfilled or lapsing, and the line's end with its slot.

use serde_json::{Value, json};
use shared::App;
use shared::clients::Role;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::seats::{hold_seats, hold_seats_request, read_replayed};
use slot_booking_tests::slots;
use slot_booking_tests::*;
use std::time::Duration;

async fn join(app: &App, slot: SlotId, quantity: u32) -> (u16, Value) {
    join_with(app, slot, &new_key().to_string(), quantity).await
}

async fn join_with(app: &App, slot: SlotId, key: &str, quantity: u32) -> (u16, Value) {
    let body = format!(r#"{{"quantity": {quantity}}}"#);
    let request = join_request(&slot.0.to_string(), key, &body);
    let (status, body, _) = read_replayed(http::join_waitlist(app, request).await.unwrap());
    (status, body)
}

async fn entry(app: &App, id: &Value) -> Value {
    let request = entry_request("GET", &id.to_string());
    let (status, body) = read(http::get_entry(app, request).await.unwrap());
    assert_eq!(status, 200, "{body}");
    body
}

async fn hold_on(app: &App, slot: SlotId, quantity: u32) -> Value {
    let (status, hold, _) =
        hold_seats(app, &slot.0.to_string(), new_key().as_str(), quantity).await;
    assert_eq!(status, 201, "{hold}");
    hold
}

async fn cancel(app: &App, hold: &Value) -> Value {
    let (status, body) = read(
        http::cancel(app, cancel_request(&id_of(hold)))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    body
}

/// SPEC §18's invariants on every slot (`support/line.rs`), then §2's.
async fn check_line(db: &TestDb) {
    db.assert_lines().await;
    db.assert_invariants().await;
    db.assert_held_counter().await;
}

#[tokio::test]
async fn joining_a_full_slot_waits_and_its_refusals_come_in_order() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let app = db.app();
    let (status, body) = join(&app, SlotId(999_999), 1).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    // Seats bookable: hold instead.
    let (status, body) = join(&app, slot, 1).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("seats_available")),
        "{body}"
    );
    let _held = hold_on(&app, slot, 2).await;
    // Beyond the capacity: 422 under `quantity`.
    let (status, body) = join(&app, slot, 3).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["errors"]["quantity"].is_array(), "{body}");
    let key = new_key().to_string();
    let (status, joined) = join_with(&app, slot, &key, 2).await;
    assert_eq!(status, 201, "{joined}");
    assert_eq!(joined["status"], "waiting");
    assert_eq!(joined["position"], 1);
    assert_eq!(joined["quantity"], 2);
    assert!(joined["hold_id"].is_null());
    // A replay is its entry; the key for another quantity is refused.
    let (status, again) = join_with(&app, slot, &key, 2).await;
    assert_eq!((status, &again["id"]), (200, &joined["id"]));
    let (status, body) = join_with(&app, slot, &key, 1).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (422, Some("idempotency_key_reuse"))
    );
    // The slot resource shows the line.
    let (_, resource) = slots::get(&app, None, &slot.0.to_string()).await;
    assert_eq!(resource["waiting"], 2, "{resource}");
    // Started: closed.
    sqlx::query("UPDATE slots SET starts_at = UTC_TIMESTAMP() - INTERVAL 1 MINUTE WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let (status, body) = join(&app, slot, 1).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("slot_closed"))
    );
    check_line(&db).await;
    db.drop().await;
}

/// Twenty parallel joins, each its own environment and connection,
/// released together: positions 1 to 20, in the order of their ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_joins_get_positions_one_to_twenty_in_id_order() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let setup = db.app();
    hold_on(&setup, slot, 1).await;
    let apps = db.warm_apps(20, Duration::from_secs(300)).await;
    let joined = together(apps, move |_, app| async move { join(&app, slot, 1).await }).await;
    let mut ids: Vec<u64> = joined
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, 201, "{body}");
            body["id"].as_u64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    for (i, id) in ids.iter().enumerate() {
        let read = entry(&setup, &Value::from(*id)).await;
        assert_eq!(read["position"], i as u64 + 1, "{read}");
    }
    check_line(&db).await;
    db.drop().await;
}

/// A cancel offers the seats in its own request: first fit in arrival
/// order (entries for 3, 1, 1; one seat freed → the first 1).
#[tokio::test]
async fn a_cancel_offers_its_seat_to_the_first_entry_it_fits() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    let app = db.app();
    let holds = [hold_on(&app, slot, 1).await, hold_on(&app, slot, 2).await];
    let (_, three) = join(&app, slot, 3).await;
    let (_, first_one) = join(&app, slot, 1).await;
    let (_, second_one) = join(&app, slot, 1).await;
    cancel(&app, &holds[0]).await;
    let (three, first, second) = (
        entry(&app, &three["id"]).await,
        entry(&app, &first_one["id"]).await,
        entry(&app, &second_one["id"]).await,
    );
    assert_eq!(three["status"], "waiting", "3 seats do not fit 1");
    assert_eq!(first["status"], "offered", "{first}");
    assert_eq!(second["status"], "waiting");
    assert_eq!(second["position"], 2, "behind the party of 3");
    let offered = first["hold_id"].as_u64().expect("the offered hold");
    let (status, hold) = read(
        http::get_hold(&app, get_hold_request(&offered.to_string()))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{hold}");
    assert_eq!(
        (hold["status"].as_str(), hold["quantity"].as_u64()),
        (Some("held"), Some(1))
    );
    assert_eq!(db.events_of(&offered.to_string(), "hold.created").await, 1);
    check_line(&db).await;
    db.drop().await;
}

/// A new hold may take only seats no waiting entry can use: with an
/// entry waiting for the seat an expiry freed, the hold is refused and
/// the entry offered (in that very request, under the slot's lock).
#[tokio::test]
async fn a_new_hold_never_takes_seats_a_waiting_entry_fits() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let short = db.app_with_hold_ttl(Duration::from_millis(300));
    let app = db.app();
    hold_on(&short, slot, 1).await;
    let (status, waiting) = join(&app, slot, 1).await;
    assert_eq!(status, 201, "{waiting}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The availability list hides the seat until its offer is made.
    let (status, hold, _) = hold_seats(&app, &slot.0.to_string(), new_key().as_str(), 1).await;
    assert_eq!(
        (status, hold["reason"].as_str()),
        (409, Some("capacity_exhausted")),
        "{hold}"
    );
    let read = entry(&app, &waiting["id"]).await;
    assert_eq!(read["status"], "offered", "{read}");
    check_line(&db).await;
    db.drop().await;
}

/// After an expiry with nobody holding, the next sweep offers.
#[tokio::test]
async fn an_expiry_is_offered_by_the_next_sweep() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let short = db.app_with_hold_ttl(Duration::from_millis(300));
    let app = db.app();
    hold_on(&short, slot, 1).await;
    let (_, waiting) = join(&app, slot, 1).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(entry(&app, &waiting["id"]).await["status"], "waiting");
    app.booking.reclaim_expired(100).await.expect("sweep");
    let read = entry(&app, &waiting["id"]).await;
    assert_eq!(read["status"], "offered", "{read}");
    check_line(&db).await;
    db.drop().await;
}

/// An offer confirmed fulfils its entry; an offer that lapses ends its
/// entry and the seat goes on down the line.
#[tokio::test]
async fn an_offer_is_fulfilled_on_confirm_or_expires_and_the_seat_moves_on() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let app = db.app();
    let short = db.app_with_hold_ttl(Duration::from_millis(300));
    let hold = hold_on(&app, slot, 1).await;
    let (_, first) = join(&short, slot, 1).await;
    let (_, second) = join(&app, slot, 1).await;
    cancel(&app, &hold).await;
    let first = entry(&app, &first["id"]).await;
    assert_eq!(first["status"], "offered");
    // The offer was made by `app`'s cancel: its hold lives `app`'s TTL.
    // Cancelled by its client instead, it ends and the seat moves on.
    let offered = first["hold_id"].as_u64().unwrap().to_string();
    let (status, _) = read(http::cancel(&app, cancel_request(&offered)).await.unwrap());
    assert_eq!(status, 200);
    assert_eq!(entry(&app, &first["id"]).await["status"], "expired");
    let second = entry(&app, &second["id"]).await;
    assert_eq!(second["status"], "offered", "{second}");
    let offered = second["hold_id"].as_u64().unwrap().to_string();
    let (status, _) = read(
        http::confirm(&app, confirm_request(&offered))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200);
    assert_eq!(entry(&app, &second["id"]).await["status"], "fulfilled");
    assert_eq!(db.events_of(&offered, "hold.confirmed").await, 1);
    check_line(&db).await;
    db.drop().await;
}

/// Raising the capacity offers the new seats in the PATCH's transaction;
/// lowering it below an entry's quantity ends that entry.
#[tokio::test]
async fn a_capacity_raised_offers_and_one_lowered_below_an_entry_ends_it() {
    let db = TestDb::new().await;
    let admin = db.client("admin", Role::Admin, None).await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    hold_on(&app, slot, 2).await;
    let (_, big) = join(&app, slot, 2).await;
    let (_, small) = join(&app, slot, 1).await;
    let (status, body) = slots::patch(&app, &admin, slot.0, &json!({"capacity": 3})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        entry(&app, &big["id"]).await["status"],
        "waiting",
        "2 do not fit 1"
    );
    assert_eq!(entry(&app, &small["id"]).await["status"], "offered");
    check_line(&db).await;
    // Another slot: 1 of 2 seats held, a party of 2 waits; a capacity of
    // 1 cannot ever seat it.
    let other = db.insert_slot(2).await;
    hold_on(&app, other, 1).await;
    let (status, party) = join(&app, other, 2).await;
    assert_eq!(status, 201, "{party}");
    let (status, body) = slots::patch(&app, &admin, other.0, &json!({"capacity": 1})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["waiting"], 0, "{body}");
    assert_eq!(entry(&app, &party["id"]).await["status"], "expired");
    check_line(&db).await;
    db.drop().await;
}

/// Leaving the line: a waiting entry becomes `left` and its seats leave
/// the slot's line; leaving again answers it unchanged; another client's
/// entry does not exist for the caller.
#[tokio::test]
async fn leaving_the_line() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    hold_on(&app, slot, 1).await;
    let (_, waiting) = join(&app, slot, 1).await;
    let id = waiting["id"].to_string();
    let leave = || async {
        read(
            http::leave_waitlist(&app, entry_request("DELETE", &id))
                .await
                .unwrap(),
        )
    };
    let (status, left) = leave().await;
    assert_eq!(
        (status, left["status"].as_str()),
        (200, Some("left")),
        "{left}"
    );
    assert!(left["position"].is_null());
    let (status, again) = leave().await;
    assert_eq!(
        (status, &again["updated_at"]),
        (200, &left["updated_at"]),
        "unchanged"
    );
    assert_eq!(db.events_of_entry(&id, "waitlist.left").await, 1);
    let other = db.client("other", Role::Booker, None).await;
    let keyed = db.app_in(shared::config::AuthMode::ApiKey, 0);
    let request = other.by(entry_request("GET", &id));
    let (status, _) = read(http::get_entry(&keyed, request).await.unwrap());
    assert_eq!(status, 404);
    check_line(&db).await;
    db.drop().await;
}

/// A waiting entry's seats count against its client's cap and the slot's
/// share as held ones do (SPEC §16, §18), and an offer does not count
/// them twice.
#[tokio::test]
async fn waiting_seats_count_against_the_cap_and_the_share() {
    let db = TestDb::new().await;
    let app = db.app_in(shared::config::AuthMode::ApiKey, 0);
    let client = caps::capped_client(&db, "capped", 2).await;
    let other = db.client("other", Role::Booker, None).await;
    let (full, shared_slot, third) = (
        db.insert_slot(1).await,
        db.insert_slot(2).await,
        db.insert_slot(5).await,
    );
    let as_other = |request| other.by(request);
    let joined = |client: &keys::TestClient, slot: SlotId| {
        let request = join_request(
            &slot.0.to_string(),
            new_key().as_str(),
            r#"{"quantity": 1}"#,
        );
        client.by(request)
    };
    // `other` fills `full`; the capped client joins its line (1 waiting).
    let request = as_other(hold_seats_request(
        &full.0.to_string(),
        new_key().as_str(),
        1,
    ));
    let (status, blocker, _) = read_replayed(http::hold(&app, request).await.unwrap());
    assert_eq!(status, 201, "{blocker}");
    let (status, entry, _) = read_replayed(
        http::join_waitlist(&app, joined(&client, full))
            .await
            .unwrap(),
    );
    assert_eq!(status, 201, "{entry}");
    // 1 waiting + 1 held = its cap of 2: a third seat is refused.
    let (status, held, _) = caps::capped_hold(&app, &client, third, new_key().as_str(), 1).await;
    assert_eq!(status, 201, "{held}");
    let (status, refused, _) = caps::capped_hold(&app, &client, third, new_key().as_str(), 1).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("hold_limit_reached")),
        "{refused}"
    );
    // The offer replaces the entry: still 2, not 3.
    let (status, _) = read(
        http::cancel(&app, as_other(cancel_request(&id_of(&blocker))))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200);
    let (status, refused, _) = caps::capped_hold(&app, &client, third, new_key().as_str(), 1).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("hold_limit_reached"))
    );
    assert!(
        refused["message"].as_str().unwrap().contains("has 2"),
        "{refused}"
    );
    // The share: `other` holds 1 of `shared_slot`'s 2 seats and waits for
    // the other's; a share of 1 refuses the wait.
    sqlx::query("UPDATE slots SET max_seats_per_client = 1 WHERE id = ?")
        .bind(shared_slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let request = as_other(hold_seats_request(
        &shared_slot.0.to_string(),
        new_key().as_str(),
        1,
    ));
    assert_eq!(
        read_replayed(http::hold(&app, request).await.unwrap()).0,
        201
    );
    let (status, _, _) = caps::capped_hold(&app, &client, shared_slot, new_key().as_str(), 1).await;
    assert_eq!(status, 409, "the capped client is at its cap");
    let third_client = db.client("third", Role::Booker, None).await;
    let request = third_client.by(hold_seats_request(
        &shared_slot.0.to_string(),
        new_key().as_str(),
        1,
    ));
    assert_eq!(
        read_replayed(http::hold(&app, request).await.unwrap()).0,
        201,
        "the slot is full"
    );
    let (status, refused, _) = read_replayed(
        http::join_waitlist(&app, joined(&other, shared_slot))
            .await
            .unwrap(),
    );
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("slot_client_limit_reached")),
        "{refused}"
    );
    check_line(&db).await;
    db.drop().await;
}

/// A move takes what no waiting entry fits: on a slot whose line waits
/// for more than is free, a move of fewer seats lands (after the line is
/// offered, which here takes nothing).
#[tokio::test]
async fn a_move_takes_seats_no_waiting_entry_fits() {
    let db = TestDb::new().await;
    let app = db.app();
    let (a, b) = (db.insert_slot(1).await, db.insert_slot(10).await);
    hold_on(&app, b, 5).await;
    let (status, party) = join(&app, b, 6).await;
    assert_eq!(status, 201, "{party}");
    let hold = hold_on(&app, a, 1).await;
    let body = format!(r#"{{"slot_id": {b}}}"#);
    let (status, moved) = read(
        http::move_hold(&app, move_request(&id_of(&hold), &body))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{moved}");
    assert_eq!(entry(&app, &party["id"]).await["status"], "waiting");
    check_line(&db).await;
    db.drop().await;
}

/// A slot that has started offers nothing: a booking cancelled after the
/// start ends the line instead.
#[tokio::test]
async fn a_started_slot_offers_nothing_and_ends_its_line() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let booking = hold_and_confirm(&app, slot).await;
    let (_, waiting) = join(&app, slot, 1).await;
    sqlx::query("UPDATE slots SET starts_at = UTC_TIMESTAMP() - INTERVAL 1 MINUTE WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    cancel(&app, &booking).await;
    let read = entry(&app, &waiting["id"]).await;
    assert_eq!(read["status"], "expired", "{read}");
    assert!(read["hold_id"].is_null());
    check_line(&db).await;
    db.drop().await;
}
