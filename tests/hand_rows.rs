//! SPEC §8: operators and tests write rows with the contract's columns
//! alone, and the self-check (§9, the sweeper) reconciles every counter
//! they bypass: the client's allowance (`client_allowances.held`, §16) and
//! the slot's line (`slots.waiting`, `waiting_min`, §18). Issue 45, point 3.

use shared::booking::SweepLimits;
use shared::clients::Role;
use shared::config::AuthMode;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::caps::{capped_client, capped_hold, client_seats};
use slot_booking_tests::*;
use std::time::Duration;

fn limits() -> SweepLimits {
    SweepLimits {
        max_due: 10,
        sample: 10,
        budget: Duration::from_secs(8),
    }
}

/// An active hold of `client` on `slot`, written as an operator writes one:
/// the contract's columns (SPEC §3, §8, §9), nothing the service keeps.
async fn hand_written_hold(db: &TestDb, slot: SlotId, client: u64) {
    sqlx::query(
        "INSERT INTO holds (slot_id, client_id, idempotency_key, status, expires_at, \
         created_at, updated_at) VALUES (?, ?, UUID(), 'held', \
         UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    )
    .bind(slot.0)
    .bind(client)
    .execute(&db.admin)
    .await
    .expect("hand-written hold");
}

/// A waiting entry of `client` for one seat of `slot`, by hand (SPEC §18's
/// contract columns).
async fn hand_written_entry(db: &TestDb, slot: SlotId, client: u64) -> u64 {
    sqlx::query(
        "INSERT INTO waitlist_entries (slot_id, client_id, quantity, idempotency_key, status, \
         created_at, updated_at) VALUES (?, ?, 1, UUID(), 'waiting', UTC_TIMESTAMP(6), \
         UTC_TIMESTAMP(6))",
    )
    .bind(slot.0)
    .bind(client)
    .execute(&db.admin)
    .await
    .expect("hand-written entry")
    .last_insert_id()
}

#[tokio::test]
async fn a_hold_written_by_hand_counts_against_the_cap_after_the_self_check() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "by-hand", 3).await;
    let slot = db.insert_slot(10).await;
    hand_written_hold(&db, slot, client.id.0).await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let report = app.booking.sweep(limits()).await.unwrap();
    assert!(report.repaired >= 1, "the bound was raised: {report:?}");
    let mut answers = Vec::new();
    for _ in 0..3 {
        let (status, body, _) = capped_hold(&app, &client, slot, &new_key().to_string(), 1).await;
        answers.push(status);
        if status == 409 {
            assert_eq!(body["reason"], "hold_limit_reached", "{body}");
        }
    }
    assert_eq!(
        answers,
        [201, 201, 409],
        "a cap of 3 with one seat held by hand"
    );
    assert_eq!(client_seats(&db, &client).await, 3, "never a 4th seat");
    db.assert_counters_exact("after the holds").await;
    db.drop().await;
}

#[tokio::test]
async fn a_waiting_entry_written_by_hand_is_offered_before_a_new_hold_after_the_self_check() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let app = db.app();
    let waiter = db.client("waiter", Role::Booker, None).await;
    let (status, first) = read(
        http::hold(
            &app,
            hold_request(&slot.0.to_string(), Some(&new_key().to_string())),
        )
        .await
        .unwrap(),
    );
    assert_eq!(status, 201, "{first}");
    let entry = hand_written_entry(&db, slot, waiter.id.0).await;
    let report = app.booking.sweep(limits()).await.unwrap();
    assert!(report.repaired >= 2, "waiting and waiting_min: {report:?}");
    let line: (u32, Option<u32>) =
        sqlx::query_as("SELECT waiting, waiting_min FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert_eq!(line, (1, Some(1)));
    let (status, body) = read(
        http::cancel(&app, cancel_request(&id_of(&first)))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let offered: String = sqlx::query_scalar("SELECT status FROM waitlist_entries WHERE id = ?")
        .bind(entry)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(offered, "offered", "the cancel's seat went to the line");
    let (status, body) = read(
        http::hold(
            &app,
            hold_request(&slot.0.to_string(), Some(&new_key().to_string())),
        )
        .await
        .unwrap(),
    );
    assert_eq!(status, 409, "nobody jumps the line: {body}");
    db.assert_counters_exact("after the offer").await;
    db.assert_invariants().await;
    db.drop().await;
}
