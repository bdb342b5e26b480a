//! Database faults, proven through the Lambda handlers against the real
//! database: a connection that dies between requests is replaced; one that
//! dies inside a transaction leaves nothing half written and the request
//! gets a clean answer (success after the service's retry, or 503); a
//! database that cannot be reached answers 503 promptly on every endpoint,
//! and the same execution environment serves again once it is back.
//!
//! The database server is shared and never stopped: connections are killed
//! with `KILL`, and the network is cut by a proxy (`support/proxy.rs`).

use shared::App;
use shared::domain::SlotId;
use slot_booking_tests::answers::*;
use slot_booking_tests::proxy::{Mode, Proxy};
use slot_booking_tests::*;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Executor, MySql, Transaction};
use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Stored status of a hold.
async fn status_of(db: &TestDb, hold: &str) -> String {
    sqlx::query_scalar("SELECT status FROM holds WHERE id = ?")
        .bind(hold.parse::<u64>().expect("hold id"))
        .fetch_one(&db.admin)
        .await
        .expect("hold row")
}

async fn holds_with_key(db: &TestDb, key: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM holds WHERE idempotency_key = ?")
        .bind(key.to_ascii_lowercase())
        .fetch_one(&db.admin)
        .await
        .expect("count")
}

// ---- killing connections ------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Kill {
    /// `KILL CONNECTION`: the session is gone, its transaction rolled back.
    Connection,
    /// `KILL QUERY`: the running statement is interrupted (error 1317), the
    /// session stays.
    Query,
}

async fn kill(db: &TestDb, how: Kill, id: u64) {
    let what = match how {
        Kill::Connection => "CONNECTION",
        Kill::Query => "QUERY",
    };
    (&db.admin)
        .execute(AssertSqlSafe(format!("KILL {what} {id}")))
        .await
        .unwrap_or_else(|e| panic!("KILL {what} {id}: {e}"));
}

/// The id of the app's one connection (its pool holds a single one).
async fn app_connection(app: &App) -> u64 {
    sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
        .fetch_one(app.booking.pool())
        .await
        .expect("CONNECTION_ID()")
}

/// Polls `condition` every 2 ms; fails the test after 5 s.
async fn eventually<F, Fut, T>(what: &str, mut condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(found) = condition().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn wait_until_gone(db: &TestDb, id: u64) {
    eventually("the killed connection is gone", || async {
        let left: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?")
                .bind(id)
                .fetch_one(&db.admin)
                .await
                .expect("processlist");
        (left == 0).then_some(())
    })
    .await;
}

/// The slot's row locked from an admin connection, as by a competing
/// transaction: the app's transactions that need it block inside.
struct SlotLock {
    tx: Transaction<'static, MySql>,
    /// The locking connection, which is not a waiter.
    connection: u64,
}

impl SlotLock {
    async fn take(db: &TestDb, slot: SlotId) -> Self {
        let mut tx = db.admin.begin().await.expect("begin");
        let connection = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
            .fetch_one(&mut *tx)
            .await
            .expect("CONNECTION_ID()");
        sqlx::query("SELECT id FROM slots WHERE id = ? FOR UPDATE")
            .bind(slot.0)
            .fetch_one(&mut *tx)
            .await
            .expect("lock the slot row");
        Self { tx, connection }
    }

    async fn release(self) {
        self.tx.rollback().await.expect("release the slot row");
    }

    /// The connection, other than those in `seen`, of a statement on
    /// `slots` that is still running: with the row locked, one that waits
    /// for it, inside its transaction. (PROCESSLIST rather than INNODB_TRX:
    /// the latter is a cache that is not refreshed while read more often
    /// than every 100 ms, by any session.) Never this very probe run by
    /// another of the test's pooled connections: just answered, it can
    /// still show as running with `slots` in its text, and the kill that
    /// followed went to that connection, the killer's own ("KILL
    /// CONNECTION …: Connection was killed", once in a full run).
    async fn waiter(&self, db: &TestDb, seen: &[u64]) -> u64 {
        eventually("a request waits for the slot's row lock", || async {
            let running: Vec<u64> = sqlx::query_scalar(
                "SELECT CAST(ID AS UNSIGNED) FROM information_schema.PROCESSLIST \
                 WHERE DB = ? AND ID <> ? AND ID <> CONNECTION_ID() \
                 AND COMMAND <> 'Sleep' AND INFO LIKE '%slots%' \
                 AND INFO NOT LIKE '%information\\_schema.PROCESSLIST%'",
            )
            .bind(&db.name)
            .bind(self.connection)
            .fetch_all(&db.admin)
            .await
            .expect("processlist");
            running.into_iter().find(|id| !seen.contains(id))
        })
        .await
    }
}

/// Starts `request` while the slot's row is locked, and kills the
/// connection of each of its first `kills` attempts as it waits for that
/// lock, inside its transaction. Returns the ids killed, the lock, and the
/// request still running.
async fn kill_attempts_waiting_for<F>(
    db: &TestDb,
    slot: SlotId,
    kills: usize,
    request: F,
) -> (Vec<u64>, SlotLock, tokio::task::JoinHandle<Answer>)
where
    F: Future<Output = Answer> + Send + 'static,
{
    let lock = SlotLock::take(db, slot).await;
    let running = tokio::spawn(request);
    let mut killed = Vec::new();
    for _ in 0..kills {
        let victim = lock.waiter(db, &killed).await;
        kill(db, Kill::Connection, victim).await;
        killed.push(victim);
    }
    (killed, lock, running)
}

/// Kills the first attempt of `request` inside its transaction; the
/// service's retry must come back on a new connection (seen waiting for the
/// lock again) and, once the lock is released, succeed.
async fn killed_once_then_retried<F>(db: &TestDb, slot: SlotId, request: F) -> Answer
where
    F: Future<Output = Answer> + Send + 'static,
{
    let (killed, lock, running) = kill_attempts_waiting_for(db, slot, 1, request).await;
    let retry = lock.waiter(db, &killed).await;
    assert_ne!(retry, killed[0], "the retry runs on a new connection");
    lock.release().await;
    running.await.expect("request task")
}

// ---- connections that die between requests --------------------------------

#[tokio::test]
async fn a_connection_killed_between_requests_is_replaced_and_every_endpoint_then_succeeds() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    let first = hold(&app, slot, &key()).await;
    first.assert_status(201, "hold before any kill");
    let held = first.hold_id();
    let second = hold(&app, slot, &key()).await;
    second.assert_status(201, "second hold");

    for endpoint in ["availability", "hold", "confirm", "cancel"] {
        let before = app_connection(&app).await;
        kill(&db, Kill::Connection, before).await;
        wait_until_gone(&db, before).await;
        let answered = match endpoint {
            "availability" => availability(&app).await,
            "hold" => hold(&app, slot, &key()).await,
            "confirm" => confirm(&app, &held).await,
            _ => cancel(&app, &second.hold_id()).await,
        };
        let expected = if endpoint == "hold" { 201 } else { 200 };
        answered.assert_status(
            expected,
            &format!("{endpoint} after its connection was killed"),
        );
        assert_ne!(
            app_connection(&app).await,
            before,
            "{endpoint}: the dead connection was replaced"
        );
    }
    assert_eq!(status_of(&db, &held).await, "confirmed");
    assert_eq!(db.slot(slot).await, (3, 2));
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_connection_cut_by_the_network_while_the_environment_was_frozen_is_replaced() {
    let db = TestDb::new().await;
    let proxy = Proxy::start().await;
    let app = db.app_through(&proxy);
    let slot = db.insert_slot(2).await;
    let held = hold(&app, slot, &key()).await;
    held.assert_status(201, "hold");
    // Between invocations (the environment frozen), the network drops the
    // pooled connection; it is back by the next invocation.
    for cut in [Mode::Close, Mode::Refuse, Mode::Blackhole] {
        proxy.set(cut).await;
        proxy.set(Mode::Up).await;
        availability(&app)
            .await
            .assert_status(200, &format!("availability after a {cut:?} cut"));
    }
    confirm(&app, &held.hold_id())
        .await
        .assert_status(200, "confirm");
    db.assert_invariants().await;
    db.drop().await;
}

// ---- connections killed inside a transaction --------------------------------

#[tokio::test]
async fn a_hold_killed_while_waiting_for_the_slot_lock_is_retried_on_a_new_connection_and_answers_201()
 {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let k = key();
    let request = {
        let (app, k) = (app.clone(), k.clone());
        async move { hold(&app, slot, &k).await }
    };
    let answered = killed_once_then_retried(&db, slot, request).await;
    answered.assert_status(201, "hold after its first attempt was killed");
    assert_eq!(holds_with_key(&db, &k).await, 1, "exactly one row");
    assert_eq!(status_of(&db, &answered.hold_id()).await, "held");
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_confirm_killed_mid_transaction_is_retried_and_consumes_exactly_one_seat() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let held = hold(&app, slot, &key()).await;
    held.assert_status(201, "hold");
    let id = held.hold_id();
    // Confirm locks the hold row, then blocks on the slot row in the
    // conditional decrement: killed there, it has written nothing.
    let request = {
        let (app, id) = (app.clone(), id.clone());
        async move { confirm(&app, &id).await }
    };
    let answered = killed_once_then_retried(&db, slot, request).await;
    answered.assert_status(200, "confirm after its first attempt was killed");
    assert_eq!(answered.body["status"], "confirmed");
    assert_eq!(status_of(&db, &id).await, "confirmed");
    assert_eq!(db.slot(slot).await, (2, 1), "one seat consumed, once");
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_killed_mid_transaction_is_retried_and_gives_back_exactly_one_seat() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(2).await;
    let held = hold(&app, slot, &key()).await;
    let id = held.hold_id();
    confirm(&app, &id).await.assert_status(200, "confirm");
    assert_eq!(db.slot(slot).await, (2, 1));
    // Cancelling a confirmed hold blocks on the slot row in the increment.
    let request = {
        let (app, id) = (app.clone(), id.clone());
        async move { cancel(&app, &id).await }
    };
    let answered = killed_once_then_retried(&db, slot, request).await;
    answered.assert_status(200, "cancel after its first attempt was killed");
    assert_eq!(answered.body["status"], "cancelled");
    assert_eq!(db.slot(slot).await, (2, 2), "one seat given back, once");
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_hold_killed_on_every_attempt_answers_503_writes_nothing_and_the_next_request_succeeds() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let k = key();
    let request = {
        let (app, k) = (app.clone(), k.clone());
        async move { hold(&app, slot, &k).await }
    };
    // The service retries a lost connection once: kill both attempts.
    let (_, lock, running) = kill_attempts_waiting_for(&db, slot, 2, request).await;
    let answered = running.await.expect("request task");
    lock.release().await;
    answered.assert_unavailable("hold killed twice");
    assert_eq!(holds_with_key(&db, &k).await, 0, "no hold row");
    db.assert_invariants().await;
    // The client's retry with the same key, on the same environment.
    hold(&app, slot, &k)
        .await
        .assert_status(201, "the retried hold");
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_confirm_killed_on_every_attempt_answers_503_and_leaves_hold_and_remaining_untouched() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let held = hold(&app, slot, &key()).await;
    let id = held.hold_id();
    let request = {
        let (app, id) = (app.clone(), id.clone());
        async move { confirm(&app, &id).await }
    };
    let (_, lock, running) = kill_attempts_waiting_for(&db, slot, 2, request).await;
    let answered = running.await.expect("request task");
    lock.release().await;
    answered.assert_unavailable("confirm killed twice");
    assert_eq!(status_of(&db, &id).await, "held");
    assert_eq!(db.slot(slot).await, (1, 1), "no seat consumed");
    db.assert_invariants().await;
    confirm(&app, &id)
        .await
        .assert_status(200, "the retried confirm");
    assert_eq!(db.slot(slot).await, (1, 0));
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_statement_interrupted_by_kill_query_inside_a_hold_is_retried_and_answers_201() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let k = key();
    let lock = SlotLock::take(&db, slot).await;
    let running = {
        let (app, k) = (app.clone(), k.clone());
        tokio::spawn(async move { hold(&app, slot, &k).await })
    };
    let victim = lock.waiter(&db, &[]).await;
    kill(&db, Kill::Query, victim).await;
    // The session survives; whether the retry comes before or after the
    // release, it gets the lock.
    lock.release().await;
    let answered = running.await.expect("request task");
    answered.assert_status(201, "hold after KILL QUERY");
    assert_eq!(holds_with_key(&db, &k).await, 1);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_row_lock_wait_that_times_out_answers_503_promptly_and_writes_nothing() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(1).await;
    let k = key();
    // A competing transaction keeps the slot row for longer than the
    // session's lock wait timeout (3 s).
    let lock = SlotLock::take(&db, slot).await;
    let started = Instant::now();
    let answered = hold(&app, slot, &k).await;
    let took = started.elapsed();
    lock.release().await;
    answered.assert_unavailable("hold behind a lock held too long");
    assert!(took < PROMPTLY, "answered 503 only after {took:?}");
    assert_eq!(holds_with_key(&db, &k).await, 0, "no hold row");
    db.assert_invariants().await;
    hold(&app, slot, &k)
        .await
        .assert_status(201, "the retried hold once the lock is free");
    db.drop().await;
}

// ---- connections killed at random under load -------------------------------

/// A hold a client was told exists, and the states it may be in now given
/// what the client was told since (a 503 may or may not have applied).
struct Told {
    id: u64,
    slot: u64,
    key: String,
    states: Vec<&'static str>,
}

#[derive(Default)]
struct Tally {
    statuses: HashMap<(&'static str, u16), usize>,
    told: Vec<Told>,
}

impl Tally {
    fn see(&mut self, op: &'static str, answered: &Answer, allowed: &[u16]) {
        assert!(
            allowed.contains(&answered.status),
            "{op} answered {} (allowed {allowed:?}): {}",
            answered.status,
            answered.body
        );
        if answered.status == 503 {
            answered.assert_unavailable(op);
        }
        *self.statuses.entry((op, answered.status)).or_default() += 1;
    }
}

/// One execution environment's traffic: holds on random slots, most of them
/// confirmed and/or cancelled, until `until`.
async fn client(app: App, slots: [SlotId; 2], until: Instant) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() < until {
        let slot = slots[rand::random_range(0..slots.len())];
        let k = key();
        let held = hold(&app, slot, &k).await;
        tally.see("hold", &held, &[201, 200, 409, 503]);
        if held.status == 409 {
            assert_eq!(held.body["reason"], "capacity_exhausted", "{}", held.body);
        }
        if !matches!(held.status, 200 | 201) {
            continue;
        }
        assert_eq!(held.body["idempotency_key"], k, "{}", held.body);
        assert_eq!(held.body["slot_id"], slot.0, "{}", held.body);
        let id = held.hold_id();
        let mut told = Told {
            id: id.parse().expect("id"),
            slot: slot.0,
            key: k,
            states: vec!["held"],
        };
        // On the scarce slot every hold ends cancelled, so that its seats
        // keep changing hands under contention.
        let plan = match rand::random_range(0..10) {
            plan if slot == slots[0] => 3 + plan % 6,
            plan => plan,
        };
        let steps: &[(&'static str, &'static str)] = match plan {
            0..=2 => &[("confirm", "confirmed")],
            3..=5 => &[("confirm", "confirmed"), ("cancel", "cancelled")],
            6..=8 => &[("cancel", "cancelled")],
            _ => &[],
        };
        for &(op, state) in steps {
            let answered = match op {
                "confirm" => confirm(&app, &id).await,
                _ => cancel(&app, &id).await,
            };
            tally.see(op, &answered, &[200, 503]);
            if answered.status == 200 {
                assert_eq!(answered.body["status"], state, "{op}: {}", answered.body);
                told.states = vec![state];
            } else {
                told.states.push(state);
            }
        }
        tally.told.push(told);
    }
    tally
}

/// Kills a random connection to the test database every few ms until
/// `until` — mostly whole connections, sometimes just the running query.
/// Returns how many kills landed.
async fn killer(db_name: String, until: Instant) -> usize {
    // Its own connection, to no database, so it never picks itself.
    let mut conn = MySqlConnectOptions::from_str(&server_url())
        .expect("url")
        .connect()
        .await
        .expect("killer connection");
    let mut landed = 0;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(rand::random_range(2..8))).await;
        // The admin pool's idle connections may be picked too: it tests
        // them before use and reconnects; the apps' are the point.
        let ids: Vec<u64> = sqlx::query_scalar(
            "SELECT CAST(ID AS UNSIGNED) FROM information_schema.PROCESSLIST WHERE DB = ?",
        )
        .bind(&db_name)
        .fetch_all(&mut conn)
        .await
        .expect("processlist");
        if ids.is_empty() {
            continue;
        }
        let id = ids[rand::random_range(0..ids.len())];
        let what = if rand::random_range(0..4) == 0 {
            "QUERY"
        } else {
            "CONNECTION"
        };
        // "Unknown thread id" when it died meanwhile: not a landed kill.
        if conn
            .execute(AssertSqlSafe(format!("KILL {what} {id}")))
            .await
            .is_ok()
        {
            landed += 1;
        }
    }
    landed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_connections_killed_at_random_every_answer_is_clean_and_every_hold_told_exists() {
    let db = TestDb::new().await;
    let scarce = db.insert_slot(2).await;
    let ample = db.insert_slot(1000).await;
    let apps: Vec<App> = (0..4).map(|_| db.app()).collect();
    let until = Instant::now() + Duration::from_secs(2);
    let killer = tokio::spawn(killer(db.name.clone(), until));
    let clients: Vec<_> = apps
        .iter()
        .map(|app| tokio::spawn(client(app.clone(), [scarce, ample], until)))
        .collect();
    let mut statuses: HashMap<(&str, u16), usize> = HashMap::new();
    let mut told = Vec::new();
    for running in clients {
        let tally = running.await.expect("client (see its panic above)");
        for (seen, count) in tally.statuses {
            *statuses.entry(seen).or_default() += count;
        }
        told.extend(tally.told);
    }
    let kills = killer.await.expect("killer");
    let mut summary: Vec<_> = statuses.iter().collect();
    summary.sort();
    println!("{kills} kills; answers: {summary:?}");
    assert!(kills >= 20, "only {kills} kills landed");
    assert!(
        statuses.get(&("hold", 201)).is_some_and(|n| *n > 0),
        "no hold succeeded at all: {summary:?}"
    );

    // Every hold a client was told about is stored, as told.
    let rows: Vec<(u64, u64, String, String)> =
        sqlx::query_as("SELECT id, slot_id, idempotency_key, status FROM holds")
            .fetch_all(&db.admin)
            .await
            .expect("holds");
    let stored: HashMap<u64, (u64, String, String)> = rows
        .into_iter()
        .map(|(id, slot, key, status)| (id, (slot, key, status)))
        .collect();
    for hold in &told {
        let (slot, key, status) = stored
            .get(&hold.id)
            .unwrap_or_else(|| panic!("hold {} was answered 201/200 but is not stored", hold.id));
        assert_eq!((*slot, key), (hold.slot, &hold.key), "hold {}", hold.id);
        assert!(
            hold.states.contains(&status.as_str()),
            "hold {} is {status}, but the client was told {:?}",
            hold.id,
            hold.states
        );
    }
    db.assert_invariants().await;

    // No environment is left wedged: each serves again at once.
    for app in &apps {
        hold(app, ample, &key())
            .await
            .assert_status(201, "a hold after the kills stopped");
    }
    db.assert_invariants().await;
    db.drop().await;
}

// ---- the database unreachable -----------------------------------------------

/// Generous against flakiness, yet well inside a Lambda timeout: the pool
/// gives up acquiring after `shared::db::ACQUIRE_TIMEOUT` (3 s).
const PROMPTLY: Duration = Duration::from_secs(5);

/// Up: served. Down (`outage`): every endpoint answers 503 promptly and
/// nothing is written. Up again: the same app, same pool, serves again.
async fn an_outage_answers_503_promptly_and_the_same_app_recovers(outage: Mode) {
    let db = TestDb::new().await;
    let proxy = Proxy::start().await;
    let app = db.app_through(&proxy);
    let slot = db.insert_slot(5).await;
    let to_confirm = hold(&app, slot, &key()).await;
    to_confirm.assert_status(201, "hold while up");
    let to_cancel = hold(&app, slot, &key()).await;
    to_cancel.assert_status(201, "hold while up");
    let (to_confirm, to_cancel) = (to_confirm.hold_id(), to_cancel.hold_id());
    let refused_key = key();

    proxy.set(outage).await;
    for endpoint in ["availability", "hold", "confirm", "cancel"] {
        let started = Instant::now();
        let answered = match endpoint {
            "availability" => availability(&app).await,
            "hold" => hold(&app, slot, &refused_key).await,
            "confirm" => confirm(&app, &to_confirm).await,
            _ => cancel(&app, &to_cancel).await,
        };
        let took = started.elapsed();
        answered.assert_unavailable(&format!("{endpoint} while {outage:?}"));
        assert!(
            took < PROMPTLY,
            "{endpoint} while {outage:?} took {took:?} to answer 503"
        );
    }
    assert_eq!(holds_with_key(&db, &refused_key).await, 0);
    assert_eq!(status_of(&db, &to_confirm).await, "held");
    assert_eq!(status_of(&db, &to_cancel).await, "held");
    assert_eq!(db.slot(slot).await, (5, 5));
    db.assert_invariants().await;

    proxy.set(Mode::Up).await;
    availability(&app)
        .await
        .assert_status(200, "availability once back");
    hold(&app, slot, &refused_key)
        .await
        .assert_status(201, "the refused hold, retried once back");
    confirm(&app, &to_confirm)
        .await
        .assert_status(200, "confirm once back");
    cancel(&app, &to_cancel)
        .await
        .assert_status(200, "cancel once back");
    assert_eq!(db.slot(slot).await, (5, 4));
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn while_the_database_refuses_connections_every_endpoint_answers_503_and_recovery_follows() {
    an_outage_answers_503_promptly_and_the_same_app_recovers(Mode::Refuse).await;
}

#[tokio::test]
async fn while_connections_to_the_database_are_closed_at_once_every_endpoint_answers_503_and_recovery_follows()
 {
    an_outage_answers_503_promptly_and_the_same_app_recovers(Mode::Close).await;
}

#[tokio::test]
async fn while_the_database_never_answers_every_endpoint_answers_503_and_recovery_follows() {
    an_outage_answers_503_promptly_and_the_same_app_recovers(Mode::Blackhole).await;
}

#[tokio::test]
async fn a_request_made_during_a_brief_outage_succeeds_when_the_database_returns_in_time() {
    let db = TestDb::new().await;
    let proxy = Proxy::start().await;
    let app = db.app_through(&proxy);
    let slot = db.insert_slot(1).await;
    availability(&app).await.assert_status(200, "while up");
    proxy.set(Mode::Refuse).await;
    let running = {
        let app = app.clone();
        tokio::spawn(async move { hold(&app, slot, &key()).await })
    };
    // Back well inside the acquire timeout: the pool keeps trying.
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.set(Mode::Up).await;
    let answered = running.await.expect("request task");
    answered.assert_status(201, "hold that waited out the outage");
    db.assert_invariants().await;
    db.drop().await;
}

/// The function timeout of `template.yaml`: past it Lambda kills the
/// invocation and API Gateway answers a bare 500, so the app must have
/// answered 503 itself before.
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_request_in_flight_when_the_network_goes_silent_answers_503_before_the_function_times_out()
 {
    let db = TestDb::new().await;
    let proxy = Proxy::start().await;
    let app = db.app_through(&proxy);
    let slot = db.insert_slot(1).await;
    let k = key();
    // The hold's transaction is inside the server, waiting for the row lock
    // (the admin connection does not go through the proxy).
    let lock = SlotLock::take(&db, slot).await;
    let started = Instant::now();
    let running = {
        let (app, k) = (app.clone(), k.clone());
        tokio::spawn(async move { hold(&app, slot, &k).await })
    };
    lock.waiter(&db, &[]).await;
    // The network goes silent; the server's answer never arrives.
    proxy.set(Mode::Blackhole).await;
    lock.release().await;
    let answered = tokio::time::timeout(FUNCTION_TIMEOUT + Duration::from_secs(5), running)
        .await
        .expect("the request hangs past the function timeout")
        .expect("request task");
    let took = started.elapsed();
    answered.assert_unavailable("hold cut off mid-transaction");
    assert!(took < FUNCTION_TIMEOUT, "answered 503 only after {took:?}");

    proxy.set(Mode::Up).await;
    // The server rolled the cut-off transaction back when its connection
    // closed; whether it had committed or not, the client's retry is safe.
    let retried = hold(&app, slot, &k).await;
    assert!(
        matches!(retried.status, 200 | 201),
        "the retried hold: {} {}",
        retried.status,
        retried.body
    );
    assert_eq!(holds_with_key(&db, &k).await, 1);
    db.assert_invariants().await;
    db.drop().await;
}
