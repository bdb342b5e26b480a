//! Every rule of SPEC §4, proven through the Lambda handlers with API
//! Gateway v2 events against the real database.

use serde_json::Value;
use shared::http;
use slot_booking_tests::*;
use std::time::Duration;

async fn hold(app: &shared::App, slot: &str, key: Option<&str>) -> (u16, Value) {
    read(http::hold(app, hold_request(slot, key)).await.unwrap())
}

async fn confirm(app: &shared::App, hold: &str) -> (u16, Value) {
    read(http::confirm(app, confirm_request(hold)).await.unwrap())
}

async fn cancel(app: &shared::App, hold: &str) -> (u16, Value) {
    read(http::cancel(app, cancel_request(hold)).await.unwrap())
}

async fn availability(app: &shared::App) -> Vec<Value> {
    let (status, body) = read(
        http::availability(app, availability_request())
            .await
            .unwrap(),
    );
    assert_eq!(status, 200);
    body.as_array().expect("a bare JSON array").clone()
}

fn remaining_of(list: &[Value], slot: u64) -> u64 {
    list.iter()
        .find(|s| s["slot_id"] == slot)
        .and_then(|s| s["remaining"].as_u64())
        .expect("slot listed")
}

fn assert_error(response: &(u16, Value), status: u16, reason: &str) {
    assert_eq!(response.0, status, "{}", response.1);
    assert_eq!(response.1["reason"], reason, "{}", response.1);
    assert!(
        response.1["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

// ---- availability -------------------------------------------------------

#[tokio::test]
async fn availability_lists_every_slot_in_id_order_with_its_window() {
    let db = TestDb::new().await;
    let app = db.app();
    let a = db.insert_slot(10).await;
    let b = db.insert_slot(5).await;
    let list = availability(&app).await;
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["slot_id"], a.0);
    assert_eq!(list[1]["slot_id"], b.0);
    assert_eq!(list[0]["capacity"], 10);
    assert_eq!(list[0]["remaining"], 10);
    assert_eq!(list[1]["remaining"], 5);
    let (starts_at, ends_at): (String, String) = sqlx::query_as(
        "SELECT DATE_FORMAT(starts_at, '%Y-%m-%dT%H:%i:%s.%fZ'), \
         DATE_FORMAT(ends_at, '%Y-%m-%dT%H:%i:%s.%fZ') FROM slots WHERE id = ?",
    )
    .bind(a.0)
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert_eq!(list[0]["starts_at"], starts_at.as_str());
    assert_eq!(list[0]["ends_at"], ends_at.as_str());
    assert_eq!(
        list[0].as_object().unwrap().len(),
        5,
        "exactly the five documented fields"
    );
    db.drop().await;
}

#[tokio::test]
async fn availability_subtracts_active_holds_but_not_expired_or_cancelled_ones() {
    let db = TestDb::new().await;
    let app = db.app();
    let short = db.app_with_hold_ttl(Duration::from_millis(300));
    let slot = db.insert_slot(5).await;
    let s = slot.0.to_string();
    let (_, active) = hold(&app, &s, Some(&new_key().to_string())).await;
    let (_, cancelled) = hold(&app, &s, Some(&new_key().to_string())).await;
    hold(&short, &s, Some(&new_key().to_string())).await;
    cancel(&app, &id_of(&cancelled)).await;
    assert_eq!(
        remaining_of(&availability(&app).await, slot.0),
        3,
        "1 active + 1 short-lived"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        remaining_of(&availability(&app).await, slot.0),
        4,
        "only the active hold counts"
    );
    confirm(&app, &id_of(&active)).await;
    assert_eq!(
        remaining_of(&availability(&app).await, slot.0),
        4,
        "confirming keeps bookable"
    );
    db.drop().await;
}

#[tokio::test]
async fn availability_clamps_at_zero_instead_of_failing_on_unsigned_arithmetic() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let other = db.insert_slot(3).await;
    hold(&app, &slot.0.to_string(), Some(&new_key().to_string())).await;
    hold(&app, &slot.0.to_string(), Some(&new_key().to_string())).await;
    // An operator's out-of-band change leaves fewer seats than active holds.
    sqlx::query("UPDATE slots SET remaining = 1 WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let list = availability(&app).await;
    assert_eq!(remaining_of(&list, slot.0), 0);
    assert_eq!(
        remaining_of(&list, other.0),
        3,
        "the rest of the list is still served"
    );
    db.drop().await;
}

// ---- hold ---------------------------------------------------------------

#[tokio::test]
async fn a_new_hold_answers_201_with_the_hold_resource_and_leaves_remaining_alone() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    let key = "6F1C2A3B-0D4E-4F5A-8B6C-7D8E9F0A1B2C";
    let (status, body) = hold(&app, &slot.0.to_string(), Some(key)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["slot_id"], slot.0);
    assert_eq!(body["status"], "held");
    assert_eq!(
        body["idempotency_key"],
        key.to_ascii_lowercase(),
        "stored lower-case"
    );
    assert!(body["confirmed_at"].is_null() && body["cancelled_at"].is_null());
    let created =
        chrono::DateTime::parse_from_rfc3339(body["created_at"].as_str().unwrap()).unwrap();
    let expires =
        chrono::DateTime::parse_from_rfc3339(body["expires_at"].as_str().unwrap()).unwrap();
    let ttl = (expires - created).num_milliseconds();
    assert!(
        (299_000..=301_000).contains(&ttl),
        "expires 300 s after creation, got {ttl} ms"
    );
    assert!(body["expires_at"].as_str().unwrap().ends_with('Z'), "UTC");
    assert_eq!(
        db.slot(slot).await,
        (3, 3),
        "a hold does not consume a seat"
    );
    db.drop().await;
}

#[tokio::test]
async fn replaying_a_key_returns_the_original_hold_with_200_and_no_new_row() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    let key = new_key().to_string();
    let (first, original) = hold(&app, &slot.0.to_string(), Some(&key)).await;
    let (again, replayed) = hold(&app, &slot.0.to_string(), Some(&key.to_ascii_uppercase())).await;
    assert_eq!((first, again), (201, 200));
    assert_eq!(original, replayed);
    assert_eq!(db.count_holds(slot, "TRUE").await, 1);
    db.drop().await;
}

#[tokio::test]
async fn a_replay_returns_the_original_hold_whatever_its_state_now() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let s = slot.0.to_string();
    let key = new_key().to_string();
    let (_, held) = hold(&app, &s, Some(&key)).await;
    confirm(&app, &id_of(&held)).await;
    let (status, replay) = hold(&app, &s, Some(&key)).await;
    assert_eq!(
        (status, replay["status"].as_str()),
        (200, Some("confirmed")),
        "even on a full slot"
    );
    cancel(&app, &id_of(&held)).await;
    let (status, replay) = hold(&app, &s, Some(&key)).await;
    assert_eq!(
        (status, replay["status"].as_str()),
        (200, Some("cancelled"))
    );
    assert_eq!(replay["id"], held["id"]);
    db.drop().await;
}

#[tokio::test]
async fn a_key_already_used_for_another_slot_is_refused_with_422() {
    let db = TestDb::new().await;
    let app = db.app();
    let a = db.insert_slot(3).await;
    let b = db.insert_slot(3).await;
    let key = new_key().to_string();
    hold(&app, &a.0.to_string(), Some(&key)).await;
    let refused = hold(&app, &b.0.to_string(), Some(&key)).await;
    assert_error(&refused, 422, "idempotency_key_reuse");
    // The key is looked up before the slot: a missing slot says the same.
    assert_error(
        &hold(&app, "999999", Some(&key)).await,
        422,
        "idempotency_key_reuse",
    );
    assert_eq!(db.count_holds(b, "TRUE").await, 0);
    db.drop().await;
}

#[tokio::test]
async fn holding_a_missing_slot_is_404_not_found() {
    let db = TestDb::new().await;
    let app = db.app();
    let missing = hold(&app, "18446744073709551615", Some(&new_key().to_string())).await;
    assert_error(&missing, 404, "not_found");
    db.drop().await;
}

#[tokio::test]
async fn holding_a_slot_without_bookable_seats_is_409_capacity_exhausted() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let s = slot.0.to_string();
    assert_eq!(hold(&app, &s, Some(&new_key().to_string())).await.0, 201);
    assert_eq!(hold(&app, &s, Some(&new_key().to_string())).await.0, 201);
    let full = hold(&app, &s, Some(&new_key().to_string())).await;
    assert_error(&full, 409, "capacity_exhausted");
    assert_eq!(
        full.1["message"],
        format!("Slot {s} has no remaining capacity.")
    );
    assert_eq!(db.count_holds(slot, "TRUE").await, 2);
    db.drop().await;
}

#[tokio::test]
async fn an_expired_hold_frees_its_seat_for_a_new_hold() {
    let db = TestDb::new().await;
    let short = db.app_with_hold_ttl(Duration::from_millis(200));
    let slot = db.insert_slot(1).await;
    let s = slot.0.to_string();
    assert_eq!(hold(&short, &s, Some(&new_key().to_string())).await.0, 201);
    assert_eq!(hold(&short, &s, Some(&new_key().to_string())).await.0, 409);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hold(&short, &s, Some(&new_key().to_string())).await.0, 201);
    db.drop().await;
}

#[tokio::test]
async fn a_cancelled_hold_frees_its_seat_for_a_new_hold() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let s = slot.0.to_string();
    let (_, first) = hold(&app, &s, Some(&new_key().to_string())).await;
    assert_eq!(hold(&app, &s, Some(&new_key().to_string())).await.0, 409);
    cancel(&app, &id_of(&first)).await;
    assert_eq!(hold(&app, &s, Some(&new_key().to_string())).await.0, 201);
    db.drop().await;
}

#[tokio::test]
async fn a_missing_or_malformed_idempotency_key_is_422_naming_the_field() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await.0.to_string();
    let long = "a".repeat(10 * 1024);
    let malformed = [
        "",
        "   ",
        long.as_str(),
        "' OR 1=1; DROP TABLE holds; --",
        "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c'; SELECT SLEEP(5); --",
        "not-a-uuid",
        "6f1c2a3b0d4e4f5a8b6c7d8e9f0a1b2c",
        "{6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c}",
        "urn:uuid:6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c",
    ];
    let missing = hold(&app, &slot, None).await;
    assert_error(&missing, 422, "validation_failed");
    assert_eq!(
        missing.1["errors"]["idempotency_key"][0],
        "The idempotency key field is required."
    );
    for key in malformed {
        let refused = hold(&app, &slot, Some(key)).await;
        assert_error(&refused, 422, "validation_failed");
        assert!(
            refused.1["errors"]["idempotency_key"].is_array(),
            "{}",
            refused.1
        );
        assert!(
            !refused.1.to_string().contains("DROP"),
            "the input is not echoed"
        );
    }
    // The header is validated before the slot is looked up.
    assert_error(
        &hold(&app, "999999", Some("nope")).await,
        422,
        "validation_failed",
    );
    assert_eq!(
        db.count_holds(shared::domain::SlotId(slot.parse().unwrap()), "TRUE")
            .await,
        0
    );
    db.drop().await;
}

#[tokio::test]
async fn path_ids_that_cannot_name_a_row_are_404_on_every_endpoint() {
    let db = TestDb::new().await;
    let app = db.app();
    db.insert_slot(3).await;
    let key = new_key().to_string();
    for id in [
        "0",
        "-1",
        "abc",
        "18446744073709551616",
        "1.5",
        "%20",
        "1e3",
    ] {
        assert_error(&hold(&app, id, Some(&key)).await, 404, "not_found");
        assert_error(&confirm(&app, id).await, 404, "not_found");
        assert_error(&cancel(&app, id).await, 404, "not_found");
    }
    assert_error(
        &confirm(&app, "18446744073709551615").await,
        404,
        "not_found",
    );
    assert_error(&cancel(&app, "424242").await, 404, "not_found");
    db.drop().await;
}

#[tokio::test]
async fn the_id_is_read_from_the_raw_path_when_the_event_has_no_path_parameters() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    let path = format!("/slots/{}/hold", slot.0);
    let key = new_key().to_string();
    let request = event(
        "apigw_v2_default_route_hold.json",
        &path,
        None,
        &[("Idempotency-Key", Some(&key))],
    );
    let (status, body) = read(http::hold(&app, request).await.unwrap());
    assert_eq!((status, body["slot_id"].as_u64()), (201, Some(slot.0)));
    let confirm_path = format!("/holds/{}/confirm", id_of(&body));
    let request = event("apigw_v2_confirm.json", &confirm_path, None, &[]);
    assert_eq!(read(http::confirm(&app, request).await.unwrap()).0, 200);
    db.drop().await;
}

#[tokio::test]
async fn a_garbage_body_is_ignored_by_endpoints_that_take_none() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    // The hold takes a body since SPEC §9: garbage there is a 422, and
    // nothing is held.
    let mut request = hold_request(&slot.0.to_string(), Some(&new_key().to_string()));
    *request.body_mut() = lambda_http::Body::Text("{\"broken\": [1, 2,,, \u{0}".into());
    let (status, body) = read(http::hold(&app, request).await.unwrap());
    assert_eq!(
        (status, body["reason"].as_str()),
        (422, Some("validation_failed"))
    );
    assert!(body["errors"]["body"].is_array(), "{body}");
    assert_eq!(db.count_holds(slot, "TRUE").await, 0);
    let request = hold_request(&slot.0.to_string(), Some(&new_key().to_string()));
    let (status, body) = read(http::hold(&app, request).await.unwrap());
    assert_eq!(status, 201);
    let mut request = confirm_request(&id_of(&body));
    *request.body_mut() = lambda_http::Body::Binary(vec![0xff, 0xfe, 0x00]);
    assert_eq!(read(http::confirm(&app, request).await.unwrap()).0, 200);
    db.drop().await;
}

// ---- confirm ------------------------------------------------------------

#[tokio::test]
async fn confirming_consumes_exactly_one_seat_however_often_it_is_repeated() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    let (_, held) = hold(&app, &slot.0.to_string(), Some(&new_key().to_string())).await;
    let (status, first) = confirm(&app, &id_of(&held)).await;
    assert_eq!((status, first["status"].as_str()), (200, Some("confirmed")));
    assert!(first["confirmed_at"].is_string());
    let (status, second) = confirm(&app, &id_of(&held)).await;
    assert_eq!(
        (status, &second),
        (200, &first),
        "a replay answers with the same hold"
    );
    assert_eq!(db.slot(slot).await, (3, 2));
    db.drop().await;
}

#[tokio::test]
async fn a_confirmed_hold_is_still_confirmed_with_200_after_its_expiry() {
    let db = TestDb::new().await;
    let short = db.app_with_hold_ttl(Duration::from_millis(200));
    let slot = db.insert_slot(1).await;
    let (_, held) = hold(&short, &slot.0.to_string(), Some(&new_key().to_string())).await;
    assert_eq!(confirm(&short, &id_of(&held)).await.0, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, again) = confirm(&short, &id_of(&held)).await;
    assert_eq!((status, again["status"].as_str()), (200, Some("confirmed")));
    assert_eq!(db.slot(slot).await, (1, 0));
    db.drop().await;
}

#[tokio::test]
async fn confirming_a_cancelled_hold_is_409_hold_cancelled_even_once_expired() {
    let db = TestDb::new().await;
    let short = db.app_with_hold_ttl(Duration::from_millis(200));
    let slot = db.insert_slot(2).await;
    let (_, held) = hold(&short, &slot.0.to_string(), Some(&new_key().to_string())).await;
    cancel(&short, &id_of(&held)).await;
    assert_error(&confirm(&short, &id_of(&held)).await, 409, "hold_cancelled");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_error(&confirm(&short, &id_of(&held)).await, 409, "hold_cancelled");
    assert_eq!(db.slot(slot).await, (2, 2));
    db.drop().await;
}

#[tokio::test]
async fn confirming_an_expired_hold_is_409_hold_expired_and_consumes_nothing() {
    let db = TestDb::new().await;
    let short = db.app_with_hold_ttl(Duration::from_millis(200));
    let slot = db.insert_slot(2).await;
    let (_, held) = hold(&short, &slot.0.to_string(), Some(&new_key().to_string())).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_error(&confirm(&short, &id_of(&held)).await, 409, "hold_expired");
    assert_eq!(db.slot(slot).await, (2, 2));
    assert_eq!(
        db.count_holds(slot, "status = 'held'").await,
        1,
        "expiry keeps the stored status"
    );
    db.drop().await;
}

#[tokio::test]
async fn confirming_without_a_remaining_seat_is_409_capacity_exhausted_and_keeps_the_hold() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let (_, held) = hold(&app, &slot.0.to_string(), Some(&new_key().to_string())).await;
    // The seat went elsewhere out of band (an operator's change).
    sqlx::query("UPDATE slots SET remaining = 0 WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    assert_error(
        &confirm(&app, &id_of(&held)).await,
        409,
        "capacity_exhausted",
    );
    assert_eq!(db.count_holds(slot, "status = 'held'").await, 1);
    assert_eq!(
        db.slot(slot).await,
        (1, 0),
        "remaining never goes below zero"
    );
    db.drop().await;
}

// ---- cancel -------------------------------------------------------------

#[tokio::test]
async fn cancelling_a_held_hold_frees_it_without_touching_remaining() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let (_, held) = hold(&app, &slot.0.to_string(), Some(&new_key().to_string())).await;
    let (status, cancelled) = cancel(&app, &id_of(&held)).await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("cancelled"))
    );
    assert!(cancelled["cancelled_at"].is_string() && cancelled["confirmed_at"].is_null());
    assert_eq!(db.slot(slot).await, (2, 2));
    assert_eq!(db.active_holds(slot).await, 0);
    db.drop().await;
}

#[tokio::test]
async fn cancelling_an_expired_hold_marks_it_cancelled() {
    let db = TestDb::new().await;
    let short = db.app_with_hold_ttl(Duration::from_millis(100));
    let slot = db.insert_slot(2).await;
    let (_, held) = hold(&short, &slot.0.to_string(), Some(&new_key().to_string())).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, cancelled) = cancel(&short, &id_of(&held)).await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("cancelled"))
    );
    assert_eq!(db.slot(slot).await, (2, 2));
    db.drop().await;
}

#[tokio::test]
async fn cancelling_a_confirmed_hold_returns_its_seat_exactly_once() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let (_, held) = hold(&app, &slot.0.to_string(), Some(&new_key().to_string())).await;
    confirm(&app, &id_of(&held)).await;
    assert_eq!(db.slot(slot).await, (2, 1));
    let (status, first) = cancel(&app, &id_of(&held)).await;
    assert_eq!((status, first["status"].as_str()), (200, Some("cancelled")));
    assert!(first["confirmed_at"].is_string(), "the history is kept");
    let (status, second) = cancel(&app, &id_of(&held)).await;
    assert_eq!(
        (status, &second),
        (200, &first),
        "a second cancel changes nothing"
    );
    assert_eq!(db.slot(slot).await, (2, 2));
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn cancelling_never_lifts_remaining_above_capacity() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let (_, held) = hold(&app, &slot.0.to_string(), Some(&new_key().to_string())).await;
    confirm(&app, &id_of(&held)).await;
    // An operator already gave the seat back by hand.
    sqlx::query("UPDATE slots SET remaining = capacity WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    assert_eq!(cancel(&app, &id_of(&held)).await.0, 200);
    assert_eq!(db.slot(slot).await, (1, 1));
    db.drop().await;
}

#[tokio::test]
async fn cancelling_a_missing_hold_is_404_not_found() {
    let db = TestDb::new().await;
    let app = db.app();
    let missing = cancel(&app, "987654321").await;
    assert_error(&missing, 404, "not_found");
    assert_eq!(missing.1["message"], "Hold 987654321 does not exist.");
    db.drop().await;
}

#[tokio::test]
async fn an_unknown_route_answers_404_in_the_api_error_format() {
    let request = event("apigw_v2_availability.json", "/no/such/route", None, &[]);
    let (status, body) = read(http::not_found(request).await.unwrap());
    assert_eq!((status, body["reason"].as_str()), (404, Some("not_found")));
    assert!(body["message"].is_string());
}
