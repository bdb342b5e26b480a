//! The projection's floor (docs/DESIGN.md, "The projection's floor"):
//! `slots.held_expires_min` bounds every counted hold's expiry from below
//! after each path that makes, moves or offers a hold, or reconciles rows
//! written by hand; with it the availability list stays exact while a
//! counted hold has lapsed unreclaimed, and reads no hold of a slot whose
//! counted holds are all still active (counted by the server, not timed).

use chrono::{DateTime, Utc};
use serde_json::Value;
use shared::App;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::seats::{hold_seats, read_replayed};
use slot_booking_tests::*;
use sqlx::Connection;
use std::time::Duration;

/// Long enough for every check of a step to see the same holds active,
/// with room for a loaded CI machine (a step is a few statements; the
/// tests of this file run side by side).
const BRIEF: Duration = Duration::from_secs(3);

async fn hold_on(app: &App, slot: SlotId) -> Value {
    let (status, hold, _) = hold_seats(app, &slot.0.to_string(), new_key().as_str(), 1).await;
    assert_eq!(status, 201, "{hold}");
    hold
}

/// What the availability list shows for `slot`.
async fn listed(app: &App, slot: SlotId) -> u32 {
    app.booking
        .availability()
        .await
        .expect("availability")
        .iter()
        .find(|s| s.slot_id == slot)
        .expect("listed")
        .remaining
}

/// `remaining` less the seats of active holds, by the one definition.
async fn oracle(db: &TestDb, slot: SlotId) -> i64 {
    let (remaining,): (i64,) =
        sqlx::query_as("SELECT CAST(remaining AS SIGNED) FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&db.admin)
            .await
            .expect("slot");
    remaining - db.active_seats(slot).await
}

/// Waits out the brief holds made so far.
async fn lapse() {
    tokio::time::sleep(BRIEF + Duration::from_millis(300)).await;
}

/// The list against the oracle, and the counter and its floor against
/// their definitions.
async fn assert_exact(db: &TestDb, app: &App, slot: SlotId, expected: u32, what: &str) {
    assert_eq!(
        oracle(db, slot).await,
        i64::from(expected),
        "{what}: the oracle"
    );
    assert_eq!(listed(app, slot).await, expected, "{what}: the list");
    db.assert_held_counter().await;
}

/// A brief hold after a lasting one on the same slot: the claim lowers
/// the floor the lasting one set, so the brief one's lapse shows at once.
#[tokio::test]
async fn a_claim_lowers_the_floor_to_its_holds_expiry() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    let (app, brief) = (db.app(), db.app_with_hold_ttl(BRIEF));
    hold_on(&app, slot).await;
    hold_on(&brief, slot).await;
    assert_exact(&db, &app, slot, 3, "both active").await;
    lapse().await;
    assert_exact(&db, &app, slot, 4, "the brief hold lapsed, unreclaimed").await;
    db.drop().await;
}

/// A brief hold moved onto a slot whose floor a lasting hold set: the
/// hold keeps its expiry there, and the target's floor follows it.
#[tokio::test]
async fn a_moved_hold_brings_its_expiry_to_the_targets_floor() {
    let db = TestDb::new().await;
    let (from, to) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let (app, brief) = (db.app(), db.app_with_hold_ttl(BRIEF));
    hold_on(&app, to).await;
    let moving = hold_on(&brief, from).await;
    let body = format!(r#"{{"slot_id": {}}}"#, to.0);
    let (status, moved) = read(
        http::move_hold(&app, move_request(&id_of(&moving), &body))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{moved}");
    assert_exact(&db, &app, to, 3, "moved, active").await;
    lapse().await;
    assert_exact(&db, &app, to, 4, "the moved hold lapsed, unreclaimed").await;
    db.drop().await;
}

/// A cancel whose seat goes to the line: the offer's hold, made with the
/// canceller's TTL on a counter the cancel emptied, sets the floor.
#[tokio::test]
async fn an_offered_hold_sets_the_floor() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1).await;
    let (app, brief) = (db.app(), db.app_with_hold_ttl(BRIEF));
    let held = hold_on(&app, slot).await;
    let request = join_request(&slot.0.to_string(), new_key().as_str(), "{}");
    let (status, entry, _) = read_replayed(http::join_waitlist(&app, request).await.unwrap());
    assert_eq!(status, 201, "{entry}");
    let (status, body) = read(
        http::cancel(&brief, cancel_request(&id_of(&held)))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let offered: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM holds WHERE slot_id = ? AND entry_id IS NOT NULL AND status = 'held'",
    )
    .bind(slot.0)
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert_eq!(offered, 1, "the line's entry was offered the seat");
    assert_exact(&db, &app, slot, 0, "offered, active").await;
    lapse().await;
    assert_exact(&db, &app, slot, 1, "the offer lapsed, unreclaimed").await;
    db.drop().await;
}

/// A hold written by hand, its seat added to the counter by hand, expiring
/// before the floor a service hold set: the sweeper's check of the slot
/// sets the floor exact again.
#[tokio::test]
async fn the_sweepers_check_sets_the_floor_of_rows_written_by_hand() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    let app = db.app();
    hold_on(&app, slot).await;
    sqlx::query(
        "INSERT INTO holds (slot_id, idempotency_key, status, expires_at) \
         VALUES (?, UUID(), 'held', UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)",
    )
    .bind(slot.0)
    .bind(BRIEF.as_micros() as i64)
    .execute(&db.admin)
    .await
    .unwrap();
    sqlx::query("UPDATE slots SET held = held + 1, remaining = remaining WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    assert!(app.booking.check_one(slot).await.unwrap());
    assert_exact(&db, &app, slot, 3, "checked, both active").await;
    lapse().await;
    assert_exact(
        &db,
        &app,
        slot,
        4,
        "the hand-written hold lapsed, unreclaimed",
    )
    .await;
    db.drop().await;
}

/// Index entries `conn`'s session has examined: those read past the first
/// of each range (`Handler_read_next`) and those the engine checked
/// against a pushed index condition and skipped (`Handler_icp_attempts`,
/// MariaDB's; every entry of the walk is one: its filter is pushed).
async fn read_next(conn: &mut sqlx::MySqlConnection) -> u64 {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_icp_attempts')",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    rows.iter()
        .map(|(_, value)| value.parse::<u64>().unwrap())
        .sum()
}

/// The index entries the availability list's statement reads past the
/// first of each range, on one connection, as the server counts them.
async fn entries_read(db: &TestDb) -> u64 {
    type Row = (u64, u32, u64, DateTime<Utc>, DateTime<Utc>, DateTime<Utc>);
    let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let before = read_next(&mut conn).await;
    let rows: Vec<Row> = sqlx::query_as(shared::Booking::PROJECTION)
        .bind(0u64)
        .bind(10_000u64)
        .bind(1_001u32)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert!(!rows.is_empty());
    let after = read_next(&mut conn).await;
    conn.close().await.ok();
    after - before
}

/// 200 active holds on a slot: the list reads none of them. One more,
/// brief, fills the slot and lapses: the list walks that slot's holds
/// (and is exact). A hold then finds the counter full, and its reclaim
/// raises the floor past now: the list reads none again.
#[tokio::test]
async fn the_list_reads_a_slots_holds_only_while_one_has_lapsed_unreclaimed() {
    const HOLDS: u64 = 200;
    let db = TestDb::new().await;
    let slot = db.insert_slot(HOLDS as u32 + 1).await;
    let (app, brief) = (db.app(), db.app_with_hold_ttl(BRIEF));
    for _ in 0..HOLDS {
        hold_on(&app, slot).await;
    }
    let read = entries_read(&db).await;
    println!("all active: {read} index entries read");
    assert!(
        read < HOLDS,
        "{read} index entries read, all {HOLDS} holds active"
    );
    hold_on(&brief, slot).await;
    lapse().await;
    let read = entries_read(&db).await;
    println!("one lapsed: {read} index entries read");
    assert!(
        read >= HOLDS,
        "{read} index entries read with a lapsed hold counted"
    );
    assert_exact(&db, &app, slot, 1, "one lapsed, unreclaimed").await;
    hold_on(&app, slot).await;
    let read = entries_read(&db).await;
    println!("reclaimed by a hold: {read} index entries read");
    assert!(read < HOLDS, "{read} index entries read after the reclaim");
    assert_exact(&db, &app, slot, 0, "reclaimed, the seat held again").await;
    db.drop().await;
}
