//! Bounded work per request (SPEC §16): a request that gives up leaves
//! nothing running on the database. Closing a connection does not stop its
//! statement; the server's own time limit (`shared/src/db/limit.rs`) does.

use shared::clients::{Caller, Role};
use shared::error::Error;
use slot_booking_tests::locks::SlotLock;
use slot_booking_tests::*;
use sqlx::Executor;
use std::time::Duration;
use tokio::time::Instant;

const CALLER: Caller = Caller::anonymous();

/// The statements of this test's database still running (any session but
/// the asking one; a session idle inside a transaction is not running:
/// `Sleep`, nor is one connecting or quitting, which shows no statement; a
/// prepared statement runs as `Execute`), nor this probe itself, which
/// another pooled connection may still show running just after it
/// answered.
async fn running(db: &TestDb) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT CONCAT(COMMAND, ': ', COALESCE(STATE, '')), LEFT(INFO, 80) \
         FROM information_schema.PROCESSLIST \
         WHERE DB = ? AND COMMAND <> 'Sleep' AND INFO IS NOT NULL AND ID <> CONNECTION_ID() \
         AND INFO NOT LIKE '%information\\_schema.PROCESSLIST%'",
    )
    .bind(&db.name)
    .fetch_all(&db.admin)
    .await
    .expect("process list")
}

/// A hold that waits for its slot's lock past its request's deadline: the
/// server stops the claim before the deadline, and the 503 comes back with
/// nothing of the request left on the database. Without the limit the
/// claim waited on for `innodb_lock_wait_timeout` (3 s) after the 503.
#[tokio::test]
async fn a_claim_stuck_behind_a_lock_is_stopped_by_the_server_before_the_503() {
    let db = TestDb::new().await;
    stuck_claim_is_stopped(&db, CALLER).await;
    db.drop().await;
}

/// The same for a capped hold, whose claim is one CALL (`hold_place`, or
/// `hold_claim_floor` on the locked path): the server's limit stops the
/// whole CALL, its allowance's write with it. A session inside a procedure may show no
/// database in the process list: it is looked for by its statement too.
#[tokio::test]
async fn a_capped_claim_stuck_behind_a_lock_is_stopped_by_the_server_before_the_503() {
    let db = TestDb::new().await;
    let client = db.client("capped", Role::Booker, None).await;
    let caller = Caller {
        id: client.id,
        role: Role::Booker,
        rate: None,
        held_cap: Some(10),
    };
    stuck_claim_is_stopped(&db, caller).await;
    db.drop().await;
}

/// One stuck claim at a time: the process list is the server's, and every
/// hold's common path is the same procedure (`hold_place`), so the other
/// test's CALL, in its own database, would be seen as this one's.
static ONE_CLAIM_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `caller`'s hold behind a slot's lock, its deadline 800 ms away.
async fn stuck_claim_is_stopped(db: &TestDb, caller: Caller) {
    let _alone = ONE_CLAIM_AT_A_TIME.lock().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    warm(&app).await;
    let lock = SlotLock::take(db, slot).await;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(800);
    let answer = app
        .booking
        .until(deadline.into_std())
        .hold(&caller, slot, 1, &new_key())
        .await;
    let mut still = running(db).await;
    if caller.held_cap.is_some() {
        // Only this test's: no other one makes a capped hold.
        still.extend(running_calls(db).await);
    }
    let took = started.elapsed();
    lock.release().await;
    assert!(matches!(answer, Err(Error::Unavailable(_))), "{answer:?}");
    assert!(still.is_empty(), "still running after the 503: {still:?}");
    assert!(took < Duration::from_millis(800), "answered after {took:?}");
    // The connection with the lowered limit was not pooled: the next
    // request's statements are not stopped early.
    let held = app.booking.hold(&caller, slot, 1, &new_key()).await;
    assert!(held.is_ok(), "{held:?}");
}

/// Sessions inside `hold_claim_floor` or `hold_place…`, whatever database
/// they show: the process list shows the statement running in it, its
/// parameters as `NAME_CONST` (the other claim test waits its turn).
async fn running_calls(db: &TestDb) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT COALESCE(STATE, ''), LEFT(COALESCE(INFO, ''), 80) \
         FROM information_schema.PROCESSLIST \
         WHERE COMMAND <> 'Sleep' AND ID <> CONNECTION_ID() \
         AND (INFO LIKE 'CALL hold\\_claim\\_floor%' OR INFO LIKE 'CALL hold\\_place%' \
         OR INFO LIKE '%NAME\\_CONST(''p\\_client''%' OR INFO LIKE '%NAME\\_CONST(''p\\_slot''%')",
    )
    .fetch_all(&db.admin)
    .await
    .expect("process list")
}

/// The same for a read: one that waits for a table lock past its
/// deadline is stopped by the server, not left behind.
#[tokio::test]
async fn a_read_stuck_behind_a_table_lock_is_stopped_by_the_server_before_the_503() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let hold = app
        .booking
        .hold(&CALLER, slot, 1, &new_key())
        .await
        .expect("hold")
        .hold;
    let mut blocker = db.admin.acquire().await.expect("connection");
    blocker
        .execute("LOCK TABLES holds WRITE")
        .await
        .expect("lock the table");
    let started = Instant::now();
    let answer = app
        .booking
        .until((started + Duration::from_millis(600)).into_std())
        .get_hold(&CALLER, hold.id)
        .await;
    let still = running(&db).await;
    let took = started.elapsed();
    blocker.execute("UNLOCK TABLES").await.expect("unlock");
    drop(blocker);
    assert!(matches!(answer, Err(Error::Unavailable(_))), "{answer:?}");
    assert!(still.is_empty(), "still running after the 503: {still:?}");
    assert!(took < Duration::from_millis(600), "answered after {took:?}");
    db.drop().await;
}
