//! The hold's and the confirm's common paths, each one CALL that commits
//! inside the server (`hold_place`, `hold_confirm`; docs/DESIGN.md, "One
//! CALL under the lock"): what they write is what the locked sequence
//! writes, their events are the service's JSON byte for byte, and every
//! statement inside them reads its `now` after the slot's lock.
//!
//! The statements a request sends are counted by the server's own
//! `Com_stmt_execute`, which counts every session's: the tests here run
//! one after another (one test function), and nothing else of this binary
//! talks to the server meanwhile.

use shared::App;
use shared::clients::Caller;
use shared::domain::{Hold, HoldId};
use slot_booking_tests::*;
use std::time::Duration;

const CALLER: Caller = Caller::anonymous();

/// The server's count of prepared statements executed, read by a text
/// query (which that count does not include).
async fn executed(db: &TestDb) -> i64 {
    use sqlx::Row;
    let row = sqlx::raw_sql("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")
        .fetch_one(&db.admin)
        .await
        .expect("status");
    let value: String = row.get(1);
    value.parse().expect("a count")
}

/// The event of `kind` about `hold`, as stored.
async fn event_data(db: &TestDb, hold: HoldId, kind: &str) -> String {
    sqlx::query_scalar("SELECT data FROM events WHERE hold_id = ? AND type = ?")
        .bind(hold.0)
        .bind(kind)
        .fetch_one(&db.admin)
        .await
        .expect("its event")
}

/// The hold as the service reads it now, by its own statement.
async fn read(app: &App, id: HoldId) -> Hold {
    app.booking.get_hold(&CALLER, id).await.expect("read")
}

/// A hold and its confirm on a plain slot send their first read and one
/// CALL each (two prepared statements, and no BEGIN), and what
/// they answer is the row as the service reads it afterwards, with events
/// whose data is serde's JSON of it, byte for byte.
async fn plain_slot_one_call_each(db: &TestDb, app: &App) {
    let slot = db.insert_slot(3).await;
    let before = executed(db).await;
    let held = app
        .booking
        .hold(&CALLER, slot, 2, &new_key())
        .await
        .expect("hold");
    assert_eq!(executed(db).await - before, 2, "the pre-check and one CALL");
    assert!(held.created);
    let hold = held.hold;
    assert_eq!(read(app, hold.id).await, hold, "the answer is the row");
    assert_eq!(
        event_data(db, hold.id, "hold.created").await,
        serde_json::to_string(&hold).unwrap(),
        "hold.created, byte for byte"
    );

    let before = executed(db).await;
    let confirmed = app
        .booking
        .confirm(&CALLER, hold.id)
        .await
        .expect("confirm");
    assert_eq!(
        executed(db).await - before,
        2,
        "the plain read and one CALL"
    );
    assert!(confirmed.changed);
    let hold = confirmed.hold;
    assert_eq!(read(app, hold.id).await, hold, "the answer is the row");
    assert_eq!(
        event_data(db, hold.id, "hold.confirmed").await,
        serde_json::to_string(&hold).unwrap(),
        "hold.confirmed, byte for byte"
    );
    db.assert_held_counter().await;
    db.assert_invariants().await;
}

/// The procedure declines what it cannot plainly do, and the locked path
/// answers: an expired hold's confirm is refused `hold_expired`, a hold
/// on a slot with a share goes by the locked path and is the same row.
async fn declined_paths_answer_as_the_locked_path(db: &TestDb, app: &App) {
    let slot = db.insert_slot(2).await;
    let hold = app
        .booking
        .hold(&CALLER, slot, 1, &new_key())
        .await
        .unwrap()
        .hold;
    sqlx::query("UPDATE holds SET expires_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(hold.id.0)
        .execute(&db.admin)
        .await
        .unwrap();
    db.lower_floor_to(hold.id.0).await;
    let refused = app.booking.confirm(&CALLER, hold.id).await;
    assert!(
        matches!(refused, Err(shared::Error::HoldExpired(_))),
        "{refused:?}"
    );
    let shared_slot = db.insert_slot(4).await;
    sqlx::query("UPDATE slots SET max_seats_per_client = 3 WHERE id = ?")
        .bind(shared_slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let held = app
        .booking
        .hold(&CALLER, shared_slot, 2, &new_key())
        .await
        .unwrap();
    assert_eq!(read(app, held.hold.id).await, held.hold);
    assert_eq!(
        event_data(db, held.hold.id, "hold.created").await,
        serde_json::to_string(&held.hold).unwrap(),
        "the locked path's event, the same JSON"
    );
    db.assert_held_counter().await;
    db.assert_invariants().await;
}

/// A hold that waits for the slot's lock inside its CALL stamps its
/// `created_at` (and decides "started", and its expiry) with a `now` read
/// after the lock was granted, not when the CALL started: the test holds
/// the lock, reads the server's clock just before releasing it, and the
/// hold is later than that.
async fn every_now_inside_the_call_follows_the_lock(db: &TestDb, app: &App) {
    let slot = db.insert_slot(2).await;
    let mut blocker = db.admin.begin().await.unwrap();
    sqlx::query("SELECT id FROM slots WHERE id = ? FOR UPDATE")
        .bind(slot.0)
        .execute(&mut *blocker)
        .await
        .unwrap();
    let app2 = app.clone();
    let hold = tokio::spawn(async move { app2.booking.hold(&CALLER, slot, 1, &new_key()).await });
    db.wait_for_lock_waiters(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released: chrono::NaiveDateTime = sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
        .fetch_one(&mut *blocker)
        .await
        .unwrap();
    blocker.rollback().await.unwrap();
    let hold = hold.await.unwrap().expect("hold").hold;
    assert!(
        hold.created_at.naive_utc() >= released,
        "created {} before the lock was released at {released}",
        hold.created_at
    );
    db.assert_held_counter().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_call_paths() {
    let db = TestDb::new().await;
    let app = db.app();
    warm(&app).await;
    plain_slot_one_call_each(&db, &app).await;
    declined_paths_answer_as_the_locked_path(&db, &app).await;
    every_now_inside_the_call_follows_the_lock(&db, &app).await;
    db.drop().await;
}
