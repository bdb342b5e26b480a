//! A claim locks its own slot alone. The statements that take seats by a
//! slot's id also test `waiting = 0` (SPEC §18's guard), a column the
//! sweeper's index leads with: read through that index, a claim would
//! lock every slot without a line, and holds on unrelated slots would
//! queue behind each other and deadlock. Each claim runs here while
//! another slot's row is locked: it must not wait for it (the session's
//! lock wait of 3 s would answer 503).

use serde_json::Value;
use shared::App;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::*;

async fn hold_on(app: &App, slot: SlotId) -> (u16, Value) {
    let request = hold_request(&slot.0.to_string(), Some(new_key().as_str()));
    read(http::hold(app, request).await.unwrap())
}

async fn move_to(app: &App, hold: &Value, to: SlotId) -> (u16, Value) {
    let body = format!(r#"{{"slot_id": {to}}}"#);
    let request = move_request(&id_of(hold), &body);
    read(http::move_hold(app, request).await.unwrap())
}

async fn join(app: &App, slot: SlotId, quantity: u32) {
    let body = format!(r#"{{"quantity": {quantity}}}"#);
    let request = join_request(&slot.0.to_string(), new_key().as_str(), &body);
    let (status, body) = read(http::join_waitlist(app, request).await.unwrap());
    assert_eq!(status, 201, "{body}");
}

/// Waits until the optimizer would read a claim on `slot` without an
/// index hint through `slots_waiting_starts_at_index`: once purge has
/// removed the old `waiting = 0` entries of the slots that since got a
/// line, that range holds one slot, a row as cheap as the primary key's,
/// and MariaDB takes the secondary index. A busy table is in that state
/// as often as not.
async fn read_through_the_lines_index(db: &TestDb, slot: SlotId) {
    use sqlx::Row;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let plan = sqlx::query(
            "EXPLAIN UPDATE slots SET held = held WHERE id = ? AND held <= remaining AND waiting = 0",
        )
        .bind(slot.0)
        .fetch_one(&db.admin)
        .await
        .unwrap();
        let key: Option<String> = plan.try_get("key").unwrap();
        if key.as_deref() == Some("slots_waiting_starts_at_index") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the optimizer kept {key:?}: this test shows nothing"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Slot B: full, without a line, and the only such slot, read through
/// the line's index once purge allows (see above).
async fn full_without_a_line(db: &TestDb, app: &App) -> SlotId {
    let b = db.insert_slot(1).await;
    hold_and_confirm(app, b).await;
    b
}

/// The join that must not wait: on B, which locks B's row (and writes no
/// hold). Answered while `scanner`, paused with its claim's locks, still
/// waits.
async fn joined_b_at_once<T>(app: &App, b: SlotId, scanner: &tokio::task::JoinHandle<T>) {
    join(app, b, 1).await;
    assert!(
        !scanner.is_finished(),
        "the join on B waited for the claim on another slot"
    );
}

/// Each claim — a hold's, a capped hold's (`hold_claim_floor`), a
/// booking's move (`MOVE_CONSUME`) — on a slot with a line is paused after
/// it, with its locks, while the optimizer would read it through the
/// line's index; a join on B, the only slot without a line, must not wait
/// for it. Read through that index, a claim locks every slot without a
/// line (B among them) until it ends: the join waits, and the paused
/// claim reaches its lock wait's 3 s: 503.
#[tokio::test]
async fn no_claim_locks_another_slot() {
    let db = TestDb::new().await;
    // The keyless caller unlimited, as an operator may set it: capped, its
    // holds and joins take turns on its allowance row (docs/DESIGN.md, "One
    // client's cap"), and the join on B would wait for the paused hold's
    // row, not for a slot. The capped claim is the `capped` client's below.
    sqlx::query("UPDATE api_clients SET max_held_seats = 0 WHERE id = ?")
        .bind(shared::clients::Caller::anonymous().id.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let app = db.app();
    // D, E, F: one seat free, two waiting (the seat fits nobody: anyone
    // may take it). A: full by a booking, one waiting.
    let mut lined = Vec::new();
    for _ in 0..3 {
        let slot = db.insert_slot(2).await;
        assert_eq!(hold_on(&app, slot).await.0, 201);
        join(&app, slot, 2).await;
        lined.push(slot);
    }
    let [d, e, f] = lined[..] else { unreachable!() };
    let a = db.insert_slot(1).await;
    let booking = hold_and_confirm(&app, a).await;
    join(&app, a, 1).await;
    let client = caps::capped_client(&db, "capped", 10).await;
    let capped = caps::warm_apps_for(&db, 1, &client).await.remove(0);
    let paused = db.app();
    warm(&paused).await;

    // A hold's claim on D, paused in its slow path by D's lock.
    let b = full_without_a_line(&db, &app).await;
    read_through_the_lines_index(&db, d).await;
    let lock = locks::SlotLock::take(&db, d).await;
    let scanner = tokio::spawn({
        let paused = paused.clone();
        async move { hold_on(&paused, d).await }
    });
    db.wait_for_lock_waiters(1).await;
    joined_b_at_once(&app, b, &scanner).await;
    lock.release().await;
    let (status, body) = scanner.await.unwrap();
    assert_eq!(status, 201, "{body}");

    // The capped claim (`hold_claim_floor`) on E, paused the same way.
    let b = full_without_a_line(&db, &app).await;
    read_through_the_lines_index(&db, e).await;
    let lock = locks::SlotLock::take(&db, e).await;
    let scanner = tokio::spawn({
        let (capped, client) = (capped.clone(), client.clone());
        async move { caps::capped_hold(&capped, &client, e, new_key().as_str(), 1).await }
    });
    db.wait_for_lock_waiters(1).await;
    joined_b_at_once(&app, b, &scanner).await;
    lock.release().await;
    let (status, body, _) = scanner.await.unwrap();
    assert_eq!(status, 201, "{body}");

    // A booking's move onto F, paused after its claim where the seat it
    // frees on A is offered to A's line: the offer's new hold waits for
    // the last gap of the holds table.
    let b = full_without_a_line(&db, &app).await;
    read_through_the_lines_index(&db, f).await;
    let mut holds = db.admin.begin().await.unwrap();
    // The gap after the last row only: the move's own hold row stays free.
    sqlx::query("SELECT id FROM holds WHERE id > (SELECT MAX(id) FROM holds) FOR UPDATE")
        .execute(&mut *holds)
        .await
        .unwrap();
    let scanner = tokio::spawn({
        let paused = paused.clone();
        async move { move_to(&paused, &booking, f).await }
    });
    db.wait_for_lock_waiters(1).await;
    joined_b_at_once(&app, b, &scanner).await;
    holds.rollback().await.unwrap();
    let (status, body) = scanner.await.unwrap();
    assert_eq!(status, 200, "{body}");

    db.assert_invariants().await;
    db.assert_held_counter().await;
    db.assert_lines().await;
    db.drop().await;
}
