//! The offers a cancel makes (SPEC §18) beyond its own seats: with the
//! exact figures when holds expired unreclaimed, and its events before
//! those of the line it ends on a slot that started.

use serde_json::Value;
use shared::App;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::seats::{hold_seats, read_replayed};
use slot_booking_tests::*;
use std::time::Duration;

async fn join(app: &App, slot: SlotId, quantity: u32) -> Value {
    let body = format!(r#"{{"quantity": {quantity}}}"#);
    let request = join_request(&slot.0.to_string(), new_key().as_str(), &body);
    let (status, body, _) = read_replayed(http::join_waitlist(app, request).await.unwrap());
    assert_eq!(status, 201, "{body}");
    body
}

async fn hold_on(app: &App, slot: SlotId, quantity: u32) -> Value {
    let (status, hold, _) =
        hold_seats(app, &slot.0.to_string(), new_key().as_str(), quantity).await;
    assert_eq!(status, 201, "{hold}");
    hold
}

async fn cancel(app: &App, hold: &Value) {
    let (status, body) = read(
        http::cancel(app, cancel_request(&id_of(hold)))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
}

async fn status_of(app: &App, entry: &Value) -> Value {
    let request = entry_request("GET", &entry["id"].to_string());
    let (status, body) = read(http::get_entry(app, request).await.unwrap());
    assert_eq!(status, 200, "{body}");
    body["status"].clone()
}

/// 4 seats: a booking of 2, an active hold H and a hold X that expires
/// before anything reclaims it; the line: w for 2, then e for 1. H's
/// cancel frees 1 seat by the counter, 2 in truth (X's too): the first
/// fit is w. By the counter alone e would get the seat, and w would be
/// passed over for a seat the next hold takes.
#[tokio::test]
async fn a_cancel_offers_the_exact_seats_when_a_hold_expired_unreclaimed() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(4).await;
    let app = db.app();
    let booking = hold_on(&app, slot, 2).await;
    let (status, body) = read(
        http::confirm(&app, confirm_request(&id_of(&booking)))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let held = hold_on(&app, slot, 1).await;
    let short = db.app_with_hold_ttl(Duration::from_millis(1500));
    hold_on(&short, slot, 1).await;
    let (w, e) = (join(&app, slot, 2).await, join(&app, slot, 1).await);
    // X expires; nothing reclaims it (no hold, join or sweep meanwhile).
    tokio::time::sleep(Duration::from_millis(1700)).await;
    cancel(&app, &held).await;
    assert_eq!(
        status_of(&app, &w).await,
        "offered",
        "the earlier entry fits"
    );
    assert_eq!(status_of(&app, &e).await, "waiting");
    db.assert_invariants().await;
    db.assert_held_counter().await;
    db.drop().await;
}

/// A booking cancelled on a slot that started (before a sweep ended its
/// line): the cancel's event, then the line's `waitlist.expired`, in
/// that order and with times that do not go back.
#[tokio::test]
async fn a_cancel_on_a_started_slot_writes_its_event_before_the_lines_end() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let app = db.app();
    let booking = hold_and_confirm(&app, slot).await;
    let entry = join(&app, slot, 1).await;
    sqlx::query("UPDATE slots SET starts_at = UTC_TIMESTAMP() - INTERVAL 1 MINUTE WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    cancel(&app, &booking).await;
    assert_eq!(status_of(&app, &entry).await, "expired");
    let feed: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT type, occurred_at FROM events WHERE slot_id = ? ORDER BY id")
            .bind(slot.0)
            .fetch_all(&db.admin)
            .await
            .unwrap();
    let kinds: Vec<&str> = feed.iter().map(|(kind, _)| kind.as_str()).collect();
    let cancelled = kinds.iter().position(|k| *k == "hold.cancelled");
    let ended = kinds.iter().position(|k| *k == "waitlist.expired");
    assert!(cancelled.is_some() && cancelled < ended, "{kinds:?}");
    assert!(
        feed.windows(2).all(|pair| pair[0].1 <= pair[1].1),
        "times go back: {feed:?}"
    );
    db.drop().await;
}

/// A hold refused after its reclaim offered the expired seat to the line
/// commits that reclaim, and the refusal is its answer. That COMMIT's
/// answer lost, the refusal still stands: nothing is decided again. (A
/// retry would be a second change for one request: here the offer, made
/// by an environment whose holds live 1 µs, has lapsed by then, and a
/// retry would take its seat, 201.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_hold_whose_reclaims_commit_answer_is_lost_stays_refused() {
    use shared::clients::Caller;
    use slot_booking_tests::proxy::Proxy;
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let app = db.app();
    let caller = Caller::anonymous();
    let seat = app
        .booking
        .hold(&caller, slot, 1, &new_key())
        .await
        .unwrap();
    let entry = app
        .booking
        .join_waitlist(&caller, slot, 1, &new_key())
        .await
        .unwrap()
        .entry;
    // The seat's hold expires, after the join's reclaim: unreclaimed.
    sqlx::query("UPDATE holds SET expires_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(seat.hold.id.0)
        .execute(&db.admin)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let proxy = Proxy::start().await;
    let mut config = db.config(Duration::from_micros(1));
    config.database_url = proxy.url_for(&db.url);
    let fleeting = App::new(config).expect("app");
    warm(&fleeting).await;
    proxy.lose_the_answer_to_commit();
    let refused = fleeting.booking.hold(&caller, slot, 1, &new_key()).await;
    assert!(
        matches!(refused, Err(shared::Error::CapacityExhausted(_))),
        "the line had the seat: {refused:?}"
    );
    let offered: (String, Option<u64>) =
        sqlx::query_as("SELECT status, hold_id FROM waitlist_entries WHERE id = ?")
            .bind(entry.id.0)
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert_eq!(
        offered.0, "offered",
        "the refusal's reclaim landed: {offered:?}"
    );
    db.assert_invariants().await;
    db.drop().await;
}
