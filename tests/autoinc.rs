//! The implicit locks of an INSERT into `holds` (docs/DESIGN.md, "The
//! implicit locks"): no statement holds the table's AUTO-INC lock while it
//! waits for a row lock. A cancel's offer whose INSERT waits for the
//! shared lock its foreign key takes on the waiting client's
//! `api_clients` row (locked by a PATCH or a revocation of that client, or
//! by its own capped hold counting) holds up no other hold, and the
//! row's holder inserting a hold of its own does not deadlock with it
//! (in MariaDB's consecutive mode an `INSERT … SELECT` kept the AUTO-INC
//! lock through that wait: every other INSERT queued behind it, and the
//! row's holder's deadlocked, answered as error 1467, a 500).

use shared::App;
use shared::clients::{Caller, Role};
use shared::domain::{HoldId, SlotId};
use slot_booking_tests::*;
use sqlx::{Acquire, MySql, Transaction};
use tokio::task::JoinHandle;

const ANONYMOUS: Caller = Caller::anonymous();

/// A full slot whose one seat is held, a client waiting in its line, that
/// client's `api_clients` row locked by another transaction (as a PATCH
/// locks it), and the seat's cancel spawned: its offer waits for the row.
struct Scene {
    db: TestDb,
    waiter: Caller,
    blocker: Transaction<'static, MySql>,
    cancel: JoinHandle<Result<shared::booking::Transition, shared::error::Error>>,
    full: SlotId,
}

impl Scene {
    async fn new() -> Self {
        let db = TestDb::new().await;
        let full = db.insert_slot(1).await;
        let client = db.client("waiter", Role::Booker, None).await;
        let waiter = Caller {
            id: client.id,
            role: Role::Booker,
            rate: None,
            held_cap: None,
        };
        let app = db.app();
        let seat = app
            .booking
            .hold(&ANONYMOUS, full, 1, &new_key())
            .await
            .expect("the seat")
            .hold;
        app.booking
            .join_waitlist(&waiter, full, 1, &new_key())
            .await
            .expect("the waiter joins the line");
        let mut blocker = db.admin.begin().await.expect("begin");
        sqlx::query("SELECT id FROM api_clients WHERE id = ? FOR UPDATE")
            .bind(waiter.id.0)
            .execute(blocker.acquire().await.expect("connection"))
            .await
            .expect("the waiter's row, locked");
        let canceller = warm_app(&db).await;
        let cancel = spawn_cancel(canceller, seat.id);
        db.wait_for_lock_waiters(1).await;
        Self {
            db,
            waiter,
            blocker,
            cancel,
            full,
        }
    }

    /// The blocker commits; the cancel's offer goes through.
    async fn end(self) {
        self.blocker.commit().await.expect("commit");
        let cancelled = self.cancel.await.unwrap().expect("the seat cancelled");
        assert!(cancelled.changed);
        let offered: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM holds WHERE slot_id = ? AND client_id = ? AND entry_id IS NOT NULL",
        )
        .bind(self.full.0)
        .bind(self.waiter.id.0)
        .fetch_one(&self.db.admin)
        .await
        .expect("offers");
        assert_eq!(offered, 1, "the seat went to the line");
        self.db.assert_invariants().await;
        self.db.assert_held_counter().await;
        self.db.drop().await;
    }
}

async fn warm_app(db: &TestDb) -> App {
    let app = db.app();
    warm(&app).await;
    app
}

fn spawn_cancel(
    app: App,
    hold: HoldId,
) -> JoinHandle<Result<shared::booking::Transition, shared::error::Error>> {
    tokio::spawn(async move { app.booking.cancel(&ANONYMOUS, hold).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_offer_waiting_for_its_clients_row_holds_up_no_other_hold() {
    let scene = Scene::new().await;
    let elsewhere = scene.db.insert_slot(1).await;
    let other = warm_app(&scene.db).await;
    let held = other
        .booking
        .hold(&ANONYMOUS, elsewhere, 1, &new_key())
        .await;
    assert!(held.is_ok(), "a hold elsewhere: {held:?}");
    assert!(
        !scene.cancel.is_finished(),
        "the hold was made while the offer still waits for the row, not after it gave up: {:?}",
        scene.cancel.await
    );
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_clients_row_holder_inserts_its_own_hold_without_a_deadlock() {
    let mut scene = Scene::new().await;
    let elsewhere = scene.db.insert_slot(1).await;
    // As the counting path of the waiter's capped hold does: its client
    // row locked, the slot's seat claimed, then its hold inserted.
    let conn = scene.blocker.acquire().await.expect("connection");
    sqlx::query("UPDATE slots SET held = held + 1 WHERE id = ?")
        .bind(elsewhere.0)
        .execute(&mut *conn)
        .await
        .expect("the claim");
    let inserted = sqlx::query(
        "INSERT INTO holds (slot_id, client_id, quantity, idempotency_key, status, expires_at, \
         created_at, updated_at) VALUES (?, ?, 1, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE, \
         UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    )
    .bind(elsewhere.0)
    .bind(scene.waiter.id.0)
    .bind(new_key().as_str())
    .execute(&mut *conn)
    .await;
    assert!(
        inserted.is_ok(),
        "the row's holder inserts its hold while the offer waits for the row: {inserted:?}"
    );
    scene.end().await;
}
