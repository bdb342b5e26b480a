//! Slots administered (SPEC §10, §15.9, §15.10) through the handlers,
//! against the real MariaDB (and Redis for the cache): shapes, validation
//! by field, admins only, all-or-nothing batches, the capacity change and
//! the delete under the slot's lock, and the availability cache
//! invalidated after each change. The races are in `slots_races.rs`.

use lambda_http::http::Method;
use serde_json::{Value, json};
use shared::clients::Role;
use shared::config::AuthMode;
use shared::domain::SlotId;
use shared::{App, http};
use slot_booking_tests::keys::{TestClient, authorized};
use slot_booking_tests::slots::*;
use slot_booking_tests::*;
use std::time::Duration;

async fn admin_and_booker(db: &TestDb) -> (TestClient, TestClient) {
    (
        db.client("slot-admin", Role::Admin, None).await,
        db.client("slot-booker", Role::Booker, None).await,
    )
}

async fn slot_count(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM slots")
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

#[tokio::test]
async fn one_slot_or_a_batch_is_created_and_read_back_with_its_ledger() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let (admin, booker) = admin_and_booker(&db).await;
    let day = &tomorrow(0)[..10];
    let one = slot_body(
        &format!("{day}T10:00:00+02:00"),
        &format!("{day}t09:30:00.5z"),
        7,
    );
    let (status, slot) = create(&app, &admin, &one).await;
    assert_eq!(status, 201, "{slot}");
    assert!(slot.is_object(), "one object answers one slot: {slot}");
    assert_eq!(slot["starts_at"], format!("{day}T08:00:00.000000Z"));
    assert_eq!(slot["ends_at"], format!("{day}T09:30:00.500000Z"));
    assert_ledger(&slot, 7, 0, 0);
    for field in ["id", "created_at", "updated_at"] {
        assert!(!slot[field].is_null(), "{field}: {slot}");
    }
    // Any client reads it, from the database.
    let id = slot["id"].to_string();
    let (status, read_back) = get(&app, Some(&booker), &id).await;
    assert_eq!((status, &read_back), (200, &slot));

    let batch: Vec<Value> = (0..3)
        .map(|i| slot_body(&tomorrow(10 + i), &tomorrow(11 + i), 10 + i))
        .collect();
    let (status, slots) = create(&app, &admin, &Value::Array(batch.clone())).await;
    assert_eq!(status, 201, "{slots}");
    let slots = slots.as_array().expect("an array answers an array");
    assert_eq!(slots.len(), 3);
    let first = slots[0]["id"].as_u64().unwrap();
    for (i, (slot, asked)) in slots.iter().zip(&batch).enumerate() {
        assert_eq!(
            slot["id"].as_u64(),
            Some(first + i as u64),
            "in the given order"
        );
        assert_eq!(slot["capacity"], asked["capacity"]);
        assert_eq!(
            slot["starts_at"].as_str().unwrap().replace(".000000", ""),
            asked["starts_at"]
        );
        assert_ledger(slot, 10 + i as u64, 0, 0);
    }
    // Up to the year 9999 (§15.10), past TIMESTAMP's 2038.
    let far = slot_body("9999-12-31T22:00:00Z", "9999-12-31T23:59:59.999999Z", 1);
    let (status, slot) = create(&app, &admin, &far).await;
    assert_eq!((status, &slot["ends_at"]), (201, &far["ends_at"]), "{slot}");
    // A batch of one is still an array.
    let (status, slots) = create(&app, &admin, &json!([one])).await;
    assert_eq!((status, slots.as_array().map(Vec::len)), (201, Some(1)));
    db.drop().await;
}

#[tokio::test]
async fn five_hundred_slots_are_created_in_one_request() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let (admin, _) = admin_and_booker(&db).await;
    let batch: Vec<Value> = (0..500)
        .map(|i| slot_body(&tomorrow(i % 20), &tomorrow(i % 20 + 1), 1 + i))
        .collect();
    let (status, slots) = create(&app, &admin, &Value::Array(batch)).await;
    assert_eq!(status, 201);
    assert_eq!(slots.as_array().unwrap().len(), 500);
    assert_eq!(slot_count(&db).await, 500);
    assert_eq!(slots[499]["capacity"], 500);
    db.drop().await;
}

#[tokio::test]
async fn bad_bodies_are_refused_by_field_and_a_bad_element_writes_nothing() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let (admin, _) = admin_and_booker(&db).await;
    let good = slot_body(&tomorrow(9), &tomorrow(10), 5);
    let fields = |body: &Value| -> Vec<String> {
        assert_eq!(body["reason"], "validation_failed", "{body}");
        body["errors"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let mut batch = vec![good.clone(); 10];
    batch[6]["capacity"] = json!(0);
    batch[3]["ends_at"] = batch[3]["starts_at"].clone();
    let (status, body) = create(&app, &admin, &Value::Array(batch)).await;
    assert_eq!(status, 422);
    assert_eq!(fields(&body), ["3.ends_at", "6.capacity"]);
    assert_eq!(slot_count(&db).await, 0, "all or nothing");

    let cases = [
        (
            json!({"starts_at": tomorrow(9), "ends_at": tomorrow(10), "capacity": 1_000_001}),
            "capacity",
        ),
        (
            json!({"starts_at": tomorrow(9).replace('T', " "), "ends_at": tomorrow(10), "capacity": 1}),
            "starts_at",
        ),
        (
            json!({"starts_at": tomorrow(9), "ends_at": "2026-12-01T10:00:00", "capacity": 1}),
            "ends_at",
        ),
        (
            json!({"starts_at": tomorrow(10), "ends_at": tomorrow(9), "capacity": 1}),
            "ends_at",
        ),
        (
            json!({"starts_at": tomorrow(9), "ends_at": tomorrow(10), "capacity": 1, "remaining": 1}),
            "remaining",
        ),
        (json!([]), "body"),
        (Value::Array(vec![good.clone(); 501]), "body"),
        (json!(null), "body"),
        (json!("slots"), "body"),
    ];
    for (body, field) in cases {
        let (status, answer) = create(&app, &admin, &body).await;
        assert_eq!(
            (status, fields(&answer)),
            (422, vec![field.to_string()]),
            "{body}"
        );
    }
    let (status, answer) = create(&app, &admin, &json!({"capacity": 5, "colour": 1})).await;
    assert_eq!(status, 422);
    // An unknown field under its own name (SPEC §19.6), in a batch under
    // the element's index as every other field.
    assert_eq!(fields(&answer), ["colour", "ends_at", "starts_at"]);
    assert!(
        answer["errors"]["colour"][0]
            .as_str()
            .unwrap()
            .contains("\"colour\"")
    );
    let batch = json!([
        {"starts_at": tomorrow(9), "ends_at": tomorrow(10), "capacity": 1},
        {"starts_at": tomorrow(9), "ends_at": tomorrow(10), "capacity": 1, "colour": 1},
    ]);
    let (status, answer) = create(&app, &admin, &batch).await;
    assert_eq!(
        (status, fields(&answer)),
        (422, vec!["1.colour".to_string()])
    );
    let not_json = request(Method::POST, "/slots", None, Some("{capacity: 5"));
    let (status, answer) = call(&app, Some(&admin), not_json).await;
    assert_eq!((status, fields(&answer)), (422, vec!["body".to_string()]));
    assert_eq!(slot_count(&db).await, 0);
    db.drop().await;
}

#[tokio::test]
async fn only_admins_change_slots_anyone_with_a_key_reads_them_and_missing_ones_are_404() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let (admin, booker) = admin_and_booker(&db).await;
    let slot = db.insert_slot(3).await.0;
    let id = slot.to_string();
    let body = slot_body(&tomorrow(9), &tomorrow(10), 5).to_string();
    let path = format!("/slots/{id}");
    let changes = || {
        [
            request(Method::POST, "/slots", None, Some(&body)),
            request(Method::PATCH, &path, Some(&id), Some(r#"{"capacity": 4}"#)),
            request(Method::DELETE, &path, Some(&id), None),
        ]
    };
    for change in changes() {
        let (status, answer) = call(&app, Some(&booker), change).await;
        assert_eq!(
            (status, answer["reason"].as_str()),
            (403, Some("forbidden"))
        );
    }
    for change in changes()
        .into_iter()
        .chain([request(Method::GET, &path, Some(&id), None)])
    {
        let (status, answer) = call(&app, None, change).await;
        assert_eq!(
            (status, answer["reason"].as_str()),
            (401, Some("unauthenticated"))
        );
    }
    assert_eq!(slot_count(&db).await, 1);
    assert_eq!(db.slot(SlotId(slot)).await, (3, 3), "nothing changed");
    let (status, _) = get(&app, Some(&booker), &id).await;
    assert_eq!(status, 200);
    for missing in ["999999", "0", "abc", "-1", "18446744073709551616"] {
        let (status, answer) = get(&app, Some(&admin), missing).await;
        assert_eq!(
            (status, answer["reason"].as_str()),
            (404, Some("not_found")),
            "{missing}"
        );
    }
    let (status, _) = patch(&app, &admin, 999_999, &json!({"capacity": 2})).await;
    assert_eq!(status, 404);
    let (status, _) = delete(&app, &admin, 999_999).await;
    assert_eq!(status, 404);
    db.drop().await;
}

/// Everything a PATCH's refusal could have changed: the slot's row, the
/// holds, the entries and the feed.
async fn everything(db: &TestDb, slot: SlotId) -> Value {
    let row: (u32, u32, u32, String, u32, Option<u32>, String) = sqlx::query_as(
        "SELECT capacity, remaining, held, CAST(reclaimed_until AS CHAR), waiting, waiting_min, \
         CAST(updated_at AS CHAR) FROM slots WHERE id = ?",
    )
    .bind(slot.0)
    .fetch_one(&db.admin)
    .await
    .unwrap();
    let holds: Vec<(u64, String)> =
        sqlx::query_as("SELECT id, CAST(status AS CHAR) FROM holds ORDER BY id")
            .fetch_all(&db.admin)
            .await
            .unwrap();
    let entries: Vec<(u64, String)> =
        sqlx::query_as("SELECT id, CAST(status AS CHAR) FROM waitlist_entries ORDER BY id")
            .fetch_all(&db.admin)
            .await
            .unwrap();
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    json!({
        "slot": format!("{row:?}"),
        "holds": format!("{holds:?}"),
        "entries": format!("{entries:?}"),
        "events": events,
    })
}

/// SPEC §17's rule for every refusal: a capacity cut refused as below
/// what is committed changes nothing, although the slot has a waiting line
/// and an expired hold its counter still counts, which a reclaim would
/// give back and an offer would hand to the line.
#[tokio::test]
async fn a_refused_capacity_cut_gives_back_nothing_and_offers_nothing() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::Open, 0);
    let admin = db.client("slot-admin", Role::Admin, None).await;
    let slot = db.insert_slot(3).await;
    hold_and_confirm(&app, slot).await; // 1 confirmed
    let (status, _) = hold(&app, slot.0, 1).await; // 1 held, active
    assert_eq!(status, 201);
    let (status, lapsing) = hold(&app, slot.0, 1).await; // 1 held, to expire
    assert_eq!(status, 201);
    let join = join_request(
        &slot.0.to_string(),
        new_key().as_str(),
        r#"{"quantity": 1}"#,
    );
    let (status, entry) = read(http::join_waitlist(&app, join).await.unwrap());
    assert_eq!(status, 201, "{entry}");
    // Expired now, after the watermark (still counted): a reclaim would
    // give it back, and the line would get its seat.
    sqlx::query("UPDATE holds SET expires_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(lapsing["id"].as_u64().unwrap())
        .execute(&db.admin)
        .await
        .unwrap();
    db.lower_floor_to(lapsing["id"].as_u64().unwrap()).await;
    let before = everything(&db, slot).await;
    // 1 confirmed + 1 active: a capacity of 1 is below what is committed.
    let (status, refused) = patch(&app, &admin, slot.0, &json!({"capacity": 1})).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("capacity_below_committed")),
        "{refused}"
    );
    assert_eq!(
        everything(&db, slot).await,
        before,
        "the refusal committed nothing: no reclaim, no offer, no event"
    );
    db.assert_invariants().await;
    db.assert_held_counter().await;
    db.drop().await;
}

#[tokio::test]
async fn a_capacity_change_moves_remaining_and_never_goes_below_what_is_committed() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::Open, 0);
    let admin = db.client("slot-admin", Role::Admin, None).await;
    let slot = db.insert_slot(10).await;
    let id = slot.0;
    hold_and_confirm(&app, slot).await; // 1 confirmed
    let (status, _) = hold(&app, id, 3).await; // 3 held
    assert_eq!(status, 201);
    let (status, grown) = patch(&app, &admin, id, &json!({"capacity": 15})).await;
    assert_eq!(status, 200, "{grown}");
    assert_ledger(&grown, 15, 1, 3);
    assert_eq!(grown["remaining"], 11);
    assert_eq!(db.slot(slot).await, (15, 14), "remaining moved by +5");
    let (status, refused) = patch(&app, &admin, id, &json!({"capacity": 3})).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("capacity_below_committed"))
    );
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("1 seats are confirmed and 3 held"),
        "{message}"
    );
    let (status, exact) = patch(&app, &admin, id, &json!({"capacity": 4})).await;
    assert_eq!(status, 200, "{exact}");
    assert_ledger(&exact, 4, 1, 3);
    assert_eq!(exact["remaining"], 0);
    let (status, _) = hold(&app, id, 1).await;
    assert_eq!(status, 409, "nothing is left to hold");
    db.assert_invariants().await;
    db.assert_counters_exact("after the changes").await;

    // Times, against the stored other field.
    let (status, answer) = patch(&app, &admin, id, &json!({"starts_at": tomorrow(0)})).await;
    assert_eq!(status, 200, "{answer}");
    let far = "2999-01-01T00:00:00Z";
    let (status, answer) = patch(&app, &admin, id, &json!({ "starts_at": far })).await;
    assert_eq!(
        (status, answer["errors"]["starts_at"].is_array()),
        (422, true),
        "{answer}"
    );
    let (status, answer) = patch(
        &app,
        &admin,
        id,
        &json!({"ends_at": "2000-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(
        (status, answer["errors"]["ends_at"].is_array()),
        (422, true),
        "{answer}"
    );
    let (status, answer) = patch(
        &app,
        &admin,
        id,
        &json!({"starts_at": far, "ends_at": "2999-01-01T01:00:00+00:00"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["ends_at"], "2999-01-01T01:00:00.000000Z");
    assert_ledger(&answer, 4, 1, 3);
    let (status, answer) = patch(&app, &admin, id, &json!({})).await;
    assert_eq!((status, answer["errors"]["body"].is_array()), (422, true));
    db.drop().await;
}

/// Expired holds still sit in the counter until a reclaim: the cut must
/// reclaim under the lock first, or it refuses seats nobody holds.
#[tokio::test]
async fn a_capacity_cut_gives_back_the_seats_of_expired_holds_first() {
    let db = TestDb::new().await;
    let app = db.app_with_hold_ttl(Duration::from_millis(200));
    let admin = db.client("slot-admin", Role::Admin, None).await;
    let slot = db.insert_slot(4).await;
    let (status, _) = hold(&app, slot.0, 3).await;
    assert_eq!(status, 201);
    while db.active_seats(slot).await > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held: u32 = sqlx::query_scalar("SELECT held FROM slots WHERE id = ?")
        .bind(slot.0)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(held, 3, "expired but counted");
    let (status, cut) = patch(&app, &admin, slot.0, &json!({"capacity": 1})).await;
    assert_eq!(status, 200, "{cut}");
    assert_ledger(&cut, 1, 0, 0);
    let (remaining, held): (u32, u32) =
        sqlx::query_as("SELECT remaining, held FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert!(remaining >= held, "remaining {remaining} < held {held}");
    db.assert_counters_exact("after the cut").await;
    let (status, _) = hold(&app, slot.0, 1).await;
    assert_eq!(status, 201, "the one seat is bookable");
    db.drop().await;
}

#[tokio::test]
async fn a_slot_with_bookings_is_kept_and_one_without_goes_with_its_past_holds() {
    let db = TestDb::new().await;
    let app = db.app_with_hold_ttl(Duration::from_millis(200));
    let admin = db.client("slot-admin", Role::Admin, None).await;
    let slot = db.insert_slot(5).await;
    let booking = hold_and_confirm(&app, slot).await;
    let (status, refused) = delete(&app, &admin, slot.0).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("slot_has_bookings")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("1 seats are confirmed")
    );
    // A cancelled booking and an expired hold do not keep it.
    let (status, _) = read(
        http::cancel(&app, cancel_request(&id_of(&booking)))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200);
    let (status, _) = hold(&app, slot.0, 2).await;
    assert_eq!(status, 201);
    let (status, refused) = delete(&app, &admin, slot.0).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("slot_has_bookings"))
    );
    while db.active_seats(slot).await > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, gone) = delete(&app, &admin, slot.0).await;
    assert_eq!(status, 200, "{gone}");
    assert_eq!(gone["id"], slot.0);
    assert_ledger(&gone, 5, 0, 0);
    assert_eq!(slot_count(&db).await, 0);
    assert_eq!(
        db.count_holds(slot, "TRUE").await,
        0,
        "its holds went with it"
    );
    let (status, _) = get(&app, Some(&admin), &slot.0.to_string()).await;
    assert_eq!(status, 404);
    let (status, _) = delete(&app, &admin, slot.0).await;
    assert_eq!(status, 404);
    db.drop().await;
}

#[tokio::test]
async fn every_change_shows_in_the_cached_availability_at_once() {
    let db = TestDb::new().await;
    let app = db.keyed_app_with_cache(0);
    let (admin, _) = admin_and_booker(&db).await;
    let listed = |app: App, who: TestClient| async move {
        let request = authorized(availability_request(), Some(&who.bearer()));
        let (status, body) = read(http::availability(&app, request).await.unwrap());
        assert_eq!(status, 200);
        body.as_array().unwrap().clone()
    };
    assert!(
        listed(app.clone(), admin.clone()).await.is_empty(),
        "cached empty"
    );
    let (status, slot) = create(&app, &admin, &slot_body(&tomorrow(9), &tomorrow(10), 5)).await;
    assert_eq!(status, 201);
    let id = slot["id"].as_u64().unwrap();
    let list = listed(app.clone(), admin.clone()).await;
    assert_eq!(list.len(), 1, "the new slot at once");
    assert_eq!(list[0]["remaining"], 5);
    let (status, _) = patch(&app, &admin, id, &json!({"capacity": 8})).await;
    assert_eq!(status, 200);
    let list = listed(app.clone(), admin.clone()).await;
    assert_eq!(
        (list[0]["capacity"].as_u64(), list[0]["remaining"].as_u64()),
        (Some(8), Some(8))
    );
    let (status, _) = delete(&app, &admin, id).await;
    assert_eq!(status, 200);
    assert!(
        listed(app.clone(), admin.clone()).await.is_empty(),
        "gone at once"
    );
    db.drop().await;
}
