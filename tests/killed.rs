//! A function process killed with SIGKILL in the middle of its transaction,
//! as Lambda kills one at its timeout: the real `hold`, `confirm` and
//! `cancel` binaries, run against a stand-in of the Lambda Runtime API
//! (`support/runtime_api.rs`) and the real database.
//!
//! The test makes each one block inside its transaction deterministically
//! (a test transaction holds a lock it needs), sees it waiting there with
//! the slot's row locked, kills it, releases its own lock, and checks that
//! nothing of the killed transaction remains (statements sent one by one)
//! or that the server finished it (one CALL, sent whole), that the slot's
//! lock is free again, and that the client's retry, in a new execution
//! environment, applies exactly once.

use serde_json::Value;
use shared::domain::SlotId;
use slot_booking_tests::answers::{hold, key};
use slot_booking_tests::private_server::ScratchDir;
use slot_booking_tests::runtime_api::{RuntimeApi, Seen, http_answer};
use slot_booking_tests::watch::{build_functions, workspace_root};
use slot_booking_tests::*;
use sqlx::{MySql, Transaction};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The function timeout of `template.yaml`, the invocation's deadline.
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Generous bound for "at once": what the test waits for before failing.
const SOON: Duration = Duration::from_secs(10);

/// One execution environment: a function process and its Runtime API.
struct Function {
    child: Child,
    api: RuntimeApi,
    /// Its stderr, for the failure message.
    log: std::path::PathBuf,
    _dir: ScratchDir,
}

impl Function {
    /// Starts `target/debug/<name>` on `db` (built once per test binary,
    /// as `cargo lambda watch` builds them), and waits for its first poll.
    async fn start(name: &str, db: &TestDb) -> Self {
        static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
        BUILT
            .get_or_init(|| build_functions(false))
            .as_ref()
            .expect("the functions build");
        let mut api = RuntimeApi::start().await.expect("runtime API stand-in");
        let dir = ScratchDir::new("sb-function");
        let log = dir.path().join("stderr.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let child = Command::new(workspace_root().join("target/debug").join(name))
            .env_clear()
            .envs(api.environment(name))
            .env("DATABASE_URL", &db.url)
            .env("REDIS_URL", "")
            // Part I's anonymous API: these events carry no key. Uncapped
            // (SPEC §16's 0), so that its holds take the paths this file
            // kills a process in: a capped client's claim its allowance
            // first (tests/client_cap.rs).
            .env("AUTH_MODE", "open")
            .env("CLIENT_MAX_HELD_SEATS", "0")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        match api.next(SOON).await {
            Some(Seen::Poll(_)) => {}
            other => panic!("{name}: no first poll but {other:?}"),
        }
        Self {
            child,
            api,
            log,
            _dir: dir,
        }
    }

    fn invoke(&self, event: Value) {
        self.api.invoke(event, FUNCTION_TIMEOUT);
    }

    /// Invokes `event` and returns what API Gateway would answer.
    async fn call(&mut self, event: Value) -> (u16, Value) {
        self.invoke(event);
        let deadline = Instant::now() + FUNCTION_TIMEOUT + SOON;
        let mut seen = self.api.next(FUNCTION_TIMEOUT + SOON).await;
        // The poll that followed the previous response.
        while let Some(Seen::Poll(_)) = seen {
            seen = self.api.next(deadline - Instant::now()).await;
        }
        match seen {
            Some(Seen::Response { body, .. }) => {
                let (status, text) = http_answer(&body).expect("a proxy response");
                assert_no_leak(&text);
                let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
                (status, body)
            }
            other => panic!(
                "no response but {other:?}; stderr: {}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            ),
        }
    }

    /// SIGKILL, as Lambda ends an invocation at its timeout.
    async fn sigkill(mut self) {
        self.child.start_kill().expect("SIGKILL");
        let status = self.child.wait().await.expect("wait");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "killed by SIGKILL, got {status}"
        );
    }
}

fn hold_event(slot: SlotId, key: &str) -> Value {
    let path = format!("/slots/{}/hold", slot.0);
    let id = slot.0.to_string();
    event_json(
        "apigw_v2_hold.json",
        &path,
        Some(&id),
        &[("idempotency-key", Some(key))],
    )
}

fn confirm_event(hold: &str) -> Value {
    let path = format!("/holds/{hold}/confirm");
    event_json("apigw_v2_confirm.json", &path, Some(hold), &[])
}

fn cancel_event(hold: &str) -> Value {
    event_json(
        "apigw_v2_cancel.json",
        &format!("/holds/{hold}"),
        Some(hold),
        &[],
    )
}

/// `(remaining, held, reclaimed_until)` of a slot, as stored.
async fn counters(db: &TestDb, slot: SlotId) -> (u32, u32, String) {
    sqlx::query_as("SELECT remaining, held, CAST(reclaimed_until AS CHAR) FROM slots WHERE id = ?")
        .bind(slot.0)
        .fetch_one(&db.admin)
        .await
        .expect("slot counters")
}

/// Every hold row, as `(id, slot, key, status)`.
async fn holds(db: &TestDb) -> Vec<(u64, u64, String, String)> {
    sqlx::query_as("SELECT id, slot_id, idempotency_key, status FROM holds ORDER BY id")
        .fetch_all(&db.admin)
        .await
        .expect("holds")
}

/// Whether the slot's row lock can be taken now, without waiting.
async fn slot_lock_free(db: &TestDb, slot: SlotId) -> bool {
    let mut tx = db.admin.begin().await.expect("begin");
    let taken = sqlx::query("SELECT id FROM slots WHERE id = ? FOR UPDATE NOWAIT")
        .bind(slot.0)
        .fetch_one(&mut *tx)
        .await;
    tx.rollback().await.expect("rollback");
    match taken {
        Ok(_) => true,
        // 1205: the lock is held by someone else (NOWAIT).
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("HY000") => false,
        Err(e) => panic!("NOWAIT lock: {e}"),
    }
}

async fn connection_id(tx: &mut Transaction<'static, MySql>) -> u64 {
    sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
        .fetch_one(&mut **tx)
        .await
        .expect("CONNECTION_ID()")
}

/// The connection, other than `blocker`, whose transaction waits for a
/// lock `blocker`'s transaction holds, in a statement containing `sql`:
/// the function, queued inside its transaction. Its statement's text alone
/// is not enough: a plain read of the same text runs before the slot's
/// lock is taken, and a probe that took it for the wait saw the function
/// before it held anything.
async fn waiting_in(db: &TestDb, blocker: u64, sql: &str) -> u64 {
    let deadline = Instant::now() + SOON;
    loop {
        if let Some(id) = db.blocked_by(blocker, sql).await {
            return id;
        }
        if Instant::now() > deadline {
            let all: Vec<(u64, String, Option<String>)> = sqlx::query_as(
                "SELECT CAST(trx_mysql_thread_id AS UNSIGNED), trx_state, trx_query \
                 FROM information_schema.INNODB_TRX",
            )
            .fetch_all(&db.admin)
            .await
            .expect("transactions");
            panic!("nothing waits behind the blocker ({blocker}) in {sql:?}: {all:?}");
        }
    }
}

/// Waits until the server has ended connection `id` (and with it, rolled
/// back its transaction).
async fn gone(db: &TestDb, id: u64) {
    let deadline = Instant::now() + SOON;
    loop {
        let left: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?")
                .bind(id)
                .fetch_one(&db.admin)
                .await
                .expect("processlist");
        if left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the killed function's connection {id} is still there"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills `function` while it waits inside its transaction in a statement
/// containing `waits_in`, blocked by `blocker`, with the slot's row locked;
/// then releases the blocker. Returns once the killed transaction is gone.
async fn kill_inside(
    db: &TestDb,
    slot: SlotId,
    function: Function,
    mut blocker: Transaction<'static, MySql>,
    waits_in: &str,
) {
    let blocker_id = connection_id(&mut blocker).await;
    let victim = waiting_in(db, blocker_id, waits_in).await;
    assert!(
        !slot_lock_free(db, slot).await,
        "the function holds the slot's row lock while it waits"
    );
    function.sigkill().await;
    // Its connection's transaction is still open in the server, blocked;
    // the blocker's release lets the statement end, and the server, finding
    // the client gone, rolls the transaction back.
    blocker.rollback().await.expect("release the blocker");
    gone(db, victim).await;
    assert!(
        slot_lock_free(db, slot).await,
        "the slot's lock is free once the killed transaction is gone"
    );
}

/// Where a killed process's change stood: sent statement by statement
/// (the locked sequence), its transaction is the server's to roll back once
/// the client is gone; sent as one CALL (the common path, docs/DESIGN.md
/// "One CALL under the lock"), the server runs the CALL to its end, COMMIT
/// included, as it would a COMMIT already sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    Locked,
    OneCall,
}

/// A hold killed while its INSERT waits on the key's index, after its claim
/// took the slot's row and `held + 1`. On the locked path (a slot with a
/// share per client) nothing of it remains and the client's retry holds
/// once (201); in one CALL the server finishes it once the index is free,
/// and the retry, a new request with the same key, finds that hold (200):
/// one hold, one seat, either way.
async fn killed_after_its_seat_claim(path: Path) {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let other = db.insert_slot(1).await;
    if path == Path::Locked {
        sqlx::query("UPDATE slots SET max_seats_per_client = 2 WHERE id = ?")
            .bind(slot.0)
            .execute(&db.admin)
            .await
            .expect("a share: the locked path");
    }
    hold(&app, slot, &key())
        .await
        .assert_status(201, "an earlier hold");
    let (before, rows_before) = (counters(&db, slot).await, holds(&db).await);
    let k = key();
    // The same key inserted for another slot, uncommitted: the function's
    // INSERT waits on the key's index entry, after its claim took the
    // slot's row and `held + 1`. (Another slot: the foreign key check
    // share-locks the blocker's slot row, which must not be ours.)
    let mut blocker = db.admin.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO holds (slot_id, idempotency_key, status, expires_at) \
         VALUES (?, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE)",
    )
    .bind(other.0)
    .bind(&k)
    .execute(&mut *blocker)
    .await
    .expect("blocking insert");
    let function = Function::start("hold", &db).await;
    function.invoke(hold_event(slot, &k));
    kill_inside(&db, slot, function, blocker, "INSERT INTO holds").await;

    let killed = counters(&db, slot).await;
    match path {
        Path::Locked => {
            assert_eq!(killed, before, "the claim was rolled back");
            assert_eq!(holds(&db).await, rows_before, "no hold row was written");
        }
        Path::OneCall => {
            assert_eq!(
                (killed.0, killed.1),
                (before.0, before.1 + 1),
                "the CALL ran to its end: one seat held"
            );
            assert_eq!(holds(&db).await.len(), rows_before.len() + 1, "its hold");
        }
    }
    db.assert_held_counter().await;
    db.assert_invariants().await;

    // API Gateway answered the client 5xx; the client retries, and a new
    // environment serves it.
    let mut fresh = Function::start("hold", &db).await;
    let (status, body) = fresh.call(hold_event(slot, &k)).await;
    let retried = if path == Path::Locked { 201 } else { 200 };
    assert_eq!(status, retried, "the retried hold: {body}");
    assert_eq!(body["idempotency_key"], k);
    let (status, again) = fresh.call(hold_event(slot, &k)).await;
    assert_eq!((status, &again["id"]), (200, &body["id"]), "a replay");
    let after = counters(&db, slot).await;
    assert_eq!(
        (after.0, after.1),
        (before.0, before.1 + 1),
        "one seat held"
    );
    assert_eq!(
        holds(&db).await.len(),
        rows_before.len() + 1,
        "one hold row"
    );
    db.assert_held_counter().await;
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_hold_process_killed_after_its_seat_claim_leaves_nothing_and_its_retry_holds_once() {
    killed_after_its_seat_claim(Path::Locked).await;
}

#[tokio::test]
async fn a_hold_process_killed_inside_its_call_holds_once_and_its_retry_finds_it() {
    killed_after_its_seat_claim(Path::OneCall).await;
}

/// Confirm and cancel lock the slot's row, then the hold's: with the hold's
/// row locked by the test, the function waits holding the slot's.
async fn killed_waiting_for_the_hold_row(
    function: &str,
    (path, confirmed_first): (Path, bool),
    event: fn(&str) -> Value,
    expect: (&str, i64, i64),
) {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let held = hold(&app, slot, &key()).await;
    held.assert_status(201, "hold");
    let id = held.hold_id();
    if confirmed_first {
        slot_booking_tests::answers::confirm(&app, &id)
            .await
            .assert_status(200, "confirm");
    }
    let (before, rows_before) = (counters(&db, slot).await, holds(&db).await);
    let mut blocker = db.admin.begin().await.expect("begin");
    sqlx::query("SELECT id FROM holds WHERE id = ? FOR UPDATE")
        .bind(id.parse::<u64>().expect("id"))
        .fetch_one(&mut *blocker)
        .await
        .expect("lock the hold row");
    let process = Function::start(function, &db).await;
    process.invoke(event(&id));
    // The locked path's LOCK_HOLD, or the procedure's, its parameter shown
    // by name.
    kill_inside(&db, slot, process, blocker, "FROM holds WHERE id = ").await;

    let (state, remaining, held_seats) = expect;
    let killed = counters(&db, slot).await;
    match path {
        Path::Locked => {
            assert_eq!(killed, before, "{function}: slot unchanged");
            assert_eq!(holds(&db).await, rows_before, "{function}: hold unchanged");
        }
        Path::OneCall => assert_eq!(
            (i64::from(killed.0), i64::from(killed.1)),
            (remaining, held_seats),
            "{function}: the CALL ran to its end"
        ),
    }
    db.assert_held_counter().await;
    db.assert_invariants().await;

    let mut fresh = Function::start(function, &db).await;
    for attempt in ["the retry", "a replay"] {
        let (status, body) = fresh.call(event(&id)).await;
        assert_eq!(status, 200, "{function}, {attempt}: {body}");
        assert_eq!(body["status"], state, "{function}, {attempt}");
        let after = counters(&db, slot).await;
        assert_eq!(
            (i64::from(after.0), i64::from(after.1)),
            (remaining, held_seats),
            "{function}, {attempt}: applied exactly once"
        );
    }
    db.assert_held_counter().await;
    db.assert_invariants().await;
    db.drop().await;
}

/// The confirm's common path is one CALL: killed while it waits for the
/// hold's row, the server finishes it; the retry finds it confirmed, once.
#[tokio::test]
async fn a_confirm_process_killed_inside_its_call_confirms_once_and_its_retry_finds_it() {
    // Capacity 2, one hold: confirmed, remaining 1 and held 0.
    let path = (Path::OneCall, false);
    killed_waiting_for_the_hold_row("confirm", path, confirm_event, ("confirmed", 1, 0)).await;
}

#[tokio::test]
async fn a_cancel_process_killed_holding_the_slot_lock_leaves_nothing_and_its_retry_cancels_once() {
    // The hold was confirmed: its cancel gives the seat back once.
    let path = (Path::Locked, true);
    killed_waiting_for_the_hold_row("cancel", path, cancel_event, ("cancelled", 2, 0)).await;
}
