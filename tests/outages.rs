//! Outages under load, against servers the test starts itself
//! (`support/private_mariadb.rs`, `support/private_redis.rs`), never the
//! machine's shared ones: the database crashed (SIGKILL) or shut down
//! (SIGTERM) and restarted while parallel callers (each its own execution
//! environment, one connection) hold, confirm, cancel and read; the cache
//! restarted while callers read and write through it.
//!
//! In each: no 500 and no panic, every acknowledged hold, confirm and
//! cancel is in the database as answered, the invariants and the counter's
//! definition hold, and every caller is served again within seconds of
//! the recovery, by the same environment.

use shared::App;
use shared::cache::CacheSettings;
use shared::domain::SlotId;
use slot_booking_tests::answers::*;
use slot_booking_tests::private_mariadb::PrivateMariaDb;
use slot_booking_tests::private_redis::PrivateRedis;
use slot_booking_tests::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CALLERS: usize = 4;

/// The database stays down this long: past the pool's acquire timeout, so
/// that requests waiting for a connection give up and answer 503 (a
/// shorter outage is waited out, and never seen by a client).
const DATABASE_DOWN_FOR: Duration = Duration::from_secs(5);

/// The cache stays down this long, past its skip window after a failure.
const CACHE_DOWN_FOR: Duration = Duration::from_secs(3);

/// Generous bound on "served again within seconds of the recovery".
const RESUMES_WITHIN: Duration = Duration::from_secs(15);

/// What a caller shares with the test while it runs.
#[derive(Default)]
struct Progress {
    stop: AtomicBool,
    /// When the caller last got an answer other than 503.
    last_served: Mutex<Option<Instant>>,
}

impl Progress {
    fn served(&self) {
        *self.last_served.lock().expect("lock") = Some(Instant::now());
    }

    fn served_since(&self, since: Instant) -> bool {
        self.last_served
            .lock()
            .expect("lock")
            .is_some_and(|at| at > since)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A hold a caller was told exists, and the states it may be in now given
/// what it was told since (an abandoned 503 may or may not have applied).
struct Told {
    id: u64,
    slot: u64,
    key: String,
    states: Vec<&'static str>,
}

#[derive(Default)]
struct Record {
    statuses: HashMap<(&'static str, u16), usize>,
    told: Vec<Told>,
}

impl Record {
    /// Counts the answer, after checking it is one the endpoint may give.
    fn see(&mut self, op: &'static str, answered: &Answer, allowed: &[u16], progress: &Progress) {
        assert!(
            allowed.contains(&answered.status),
            "{op} answered {} (allowed {allowed:?}): {}",
            answered.status,
            answered.body
        );
        if answered.status == 503 {
            answered.assert_unavailable(op);
        } else {
            progress.served();
        }
        *self.statuses.entry((op, answered.status)).or_default() += 1;
    }
}

/// Sends `call` again while it answers 503 (as a client honouring
/// `Retry-After` would, sooner), until it gets another answer or the run
/// ends; returns the last answer.
async fn until_served<F, Fut>(
    op: &'static str,
    allowed: &[u16],
    record: &mut Record,
    progress: &Progress,
    mut call: F,
) -> Answer
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    loop {
        let answered = call().await;
        record.see(op, &answered, allowed, progress);
        if answered.status != 503 || progress.stopped() {
            return answered;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One execution environment's traffic until told to stop: a read, then a
/// hold (retried with its key), most of them confirmed and/or cancelled.
async fn caller(app: App, slots: [SlotId; 2], progress: Arc<Progress>) -> Record {
    let mut record = Record::default();
    while !progress.stopped() {
        let read = availability(&app).await;
        record.see("availability", &read, &[200, 503], &progress);
        let slot = slots[rand::random_range(0..slots.len())];
        let k = key();
        let allowed = [201, 200, 409, 503];
        let held = until_served("hold", &allowed, &mut record, &progress, || {
            hold(&app, slot, &k)
        })
        .await;
        if held.status == 409 {
            assert_eq!(held.body["reason"], "capacity_exhausted", "{}", held.body);
        }
        if !matches!(held.status, 200 | 201) {
            continue;
        }
        assert_eq!(
            (&held.body["idempotency_key"], &held.body["slot_id"]),
            (&k.clone().into(), &slot.0.into()),
            "{}",
            held.body
        );
        let id = held.hold_id();
        let mut told = Told {
            id: id.parse().expect("id"),
            slot: slot.0,
            key: k,
            states: vec!["held"],
        };
        let steps: &[(&'static str, &'static str)] = match rand::random_range(0..4) {
            0 => &[("confirm", "confirmed")],
            1 => &[("confirm", "confirmed"), ("cancel", "cancelled")],
            2 => &[("cancel", "cancelled")],
            _ => &[],
        };
        for &(op, state) in steps {
            let answered = until_served(op, &[200, 503], &mut record, &progress, || async {
                match op {
                    "confirm" => confirm(&app, &id).await,
                    _ => cancel(&app, &id).await,
                }
            })
            .await;
            if answered.status == 200 {
                assert_eq!(answered.body["status"], state, "{op}: {}", answered.body);
                told.states = vec![state];
            } else {
                told.states.push(state);
                break;
            }
        }
        record.told.push(told);
    }
    record
}

/// Waits until every caller has been served after `since`; fails after
/// [`RESUMES_WITHIN`].
async fn all_served_after(progress: &[Arc<Progress>], since: Instant, what: &str) {
    let deadline = since + RESUMES_WITHIN;
    while !progress.iter().all(|p| p.served_since(since)) {
        let waiting = progress.iter().filter(|p| !p.served_since(since)).count();
        assert!(
            Instant::now() < deadline,
            "{waiting} of {} callers not served again within {RESUMES_WITHIN:?} of {what}",
            progress.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every hold a caller was told about is stored as told; the invariants,
/// the counter's definition and `bookable ≥ 0` hold.
async fn check_database(db: &TestDb, app: &App, told: &[Told], slots: [SlotId; 2]) {
    let rows: Vec<(u64, u64, String, String)> =
        sqlx::query_as("SELECT id, slot_id, idempotency_key, status FROM holds")
            .fetch_all(&db.admin)
            .await
            .expect("holds");
    let stored: HashMap<u64, (u64, String, String)> = rows
        .into_iter()
        .map(|(id, slot, key, status)| (id, (slot, key, status)))
        .collect();
    for hold in told {
        let (slot, key, status) = stored
            .get(&hold.id)
            .unwrap_or_else(|| panic!("hold {} was acknowledged but is not stored", hold.id));
        assert_eq!((*slot, key), (hold.slot, &hold.key), "hold {}", hold.id);
        assert!(
            hold.states.contains(&status.as_str()),
            "hold {} is {status}, but its caller was told {:?}",
            hold.id,
            hold.states
        );
    }
    db.assert_invariants().await;
    db.assert_held_counter().await;
    for slot in slots {
        let bookable = app.booking.bookable(slot).await.expect("bookable");
        assert!(
            bookable.is_some_and(|n| n >= 0),
            "slot {slot}: {bookable:?}"
        );
    }
}

#[derive(Debug, Clone, Copy)]
enum Stop {
    /// SIGKILL: a crash; InnoDB recovers on restart.
    Crash,
    /// SIGTERM: a clean shutdown, open transactions rolled back.
    Shutdown,
}

async fn the_database_stopped_and_restarted_under_load(stop: Stop) {
    let mut server = PrivateMariaDb::start().await;
    println!("private MariaDB ready in {:?}", server.setup);
    let db = TestDb::on(&server.url()).await;
    let slots = [db.insert_slot(3).await, db.insert_slot(1000).await];
    let apps: Vec<App> = (0..CALLERS).map(|_| db.app()).collect();
    let progress: Vec<Arc<Progress>> = (0..CALLERS).map(|_| Arc::default()).collect();
    let callers: Vec<_> = apps
        .iter()
        .zip(&progress)
        .map(|(app, p)| tokio::spawn(caller(app.clone(), slots, p.clone())))
        .collect();

    // Load first, so that the stop lands on requests in flight.
    let started = Instant::now();
    all_served_after(&progress, started, "the start").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    match stop {
        Stop::Crash => server.crash().await,
        Stop::Shutdown => server.shut_down().await,
    }
    tokio::time::sleep(DATABASE_DOWN_FOR).await;
    server.restart().await;
    let recovered = Instant::now();
    all_served_after(&progress, recovered, "the restart").await;
    println!(
        "{stop:?}: every caller served again {:?} after the restart",
        recovered.elapsed()
    );
    // Some more load on the recovered server, then stop.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for p in &progress {
        p.stop.store(true, Ordering::Relaxed);
    }
    let mut statuses: HashMap<(&str, u16), usize> = HashMap::new();
    let mut told = Vec::new();
    for running in callers {
        let record = running.await.expect("caller (see its panic above)");
        for (seen, count) in record.statuses {
            *statuses.entry(seen).or_default() += count;
        }
        told.extend(record.told);
    }
    let mut summary: Vec<_> = statuses.iter().collect();
    summary.sort();
    println!(
        "{stop:?}: {} holds acknowledged; answers: {summary:?}",
        told.len()
    );
    let unavailable: usize = statuses
        .iter()
        .filter(|((_, status), _)| *status == 503)
        .map(|(_, n)| n)
        .sum();
    assert!(unavailable > 0, "the outage was never seen: {summary:?}");

    check_database(&db, &apps[0], &told, slots).await;
    // The same environments serve at once.
    for app in &apps {
        hold(app, slots[1], &key())
            .await
            .assert_status(201, "a hold after the run");
    }
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_crashing_under_load_loses_no_acknowledged_write_and_service_resumes() {
    the_database_stopped_and_restarted_under_load(Stop::Crash).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_shut_down_under_load_loses_no_acknowledged_write_and_service_resumes() {
    the_database_stopped_and_restarted_under_load(Stop::Shutdown).await;
}

/// Reads through the cache until told to stop; every one must be a 200.
/// Returns `(when, X-Cache)` of each.
async fn reader(app: App, progress: Arc<Progress>) -> Vec<(Instant, String)> {
    let mut seen = Vec::new();
    while !progress.stopped() {
        let read = availability(&app).await;
        read.assert_status(200, "availability with the cache restarting");
        let how = read.x_cache.clone().expect("X-Cache");
        // "Served" here means "served by the cache again".
        if how != "bypass" {
            progress.served();
        }
        seen.push((Instant::now(), how));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    seen
}

/// Holds, confirms and cancels through the cache (confirm and cancel
/// invalidate) until told to stop; every one must succeed.
async fn writer(app: App, slot: SlotId, progress: Arc<Progress>) -> usize {
    let mut cycles = 0;
    while !progress.stopped() {
        let held = hold(&app, slot, &key()).await;
        held.assert_status(201, "hold with the cache restarting");
        let id = held.hold_id();
        confirm(&app, &id)
            .await
            .assert_status(200, "confirm with the cache restarting");
        cancel(&app, &id)
            .await
            .assert_status(200, "cancel with the cache restarting");
        cycles += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cycles
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_restarting_under_load_fails_no_request_and_is_used_again_after() {
    let db = TestDb::new().await;
    let mut redis = PrivateRedis::start().await;
    println!("private Redis ready in {:?}", redis.setup);
    let slot = db.insert_slot(5).await;
    let settings = CacheSettings::new(Duration::from_secs(2));
    let redis_url = redis.url();
    let app = || db.cached_app(&redis_url, settings);
    let progress: Vec<Arc<Progress>> = (0..CALLERS).map(|_| Arc::default()).collect();
    let readers: Vec<_> = progress
        .iter()
        .map(|p| tokio::spawn(reader(app(), p.clone())))
        .collect();
    let writing = Arc::new(Progress::default());
    let writer = tokio::spawn(writer(app(), slot, writing.clone()));

    let started = Instant::now();
    all_served_after(&progress, started, "the start").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.crash().await;
    let crashed = Instant::now();
    tokio::time::sleep(CACHE_DOWN_FOR).await;
    redis.restart().await;
    let recovered = Instant::now();
    all_served_after(&progress, recovered, "the cache's restart").await;
    println!(
        "every reader served by the cache again {:?} after its restart",
        recovered.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    writing.stop.store(true, Ordering::Relaxed);
    let cycles = writer.await.expect("writer (see its panic above)");
    for p in &progress {
        p.stop.store(true, Ordering::Relaxed);
    }
    let mut by_phase: HashMap<(&str, String), usize> = HashMap::new();
    for running in readers {
        for (at, how) in running.await.expect("reader (see its panic above)") {
            let phase = if at < crashed {
                "before"
            } else if at < recovered {
                "down"
            } else {
                "after"
            };
            *by_phase.entry((phase, how)).or_default() += 1;
        }
    }
    let mut summary: Vec<_> = by_phase.iter().collect();
    summary.sort();
    println!("{cycles} write cycles; reads by phase and X-Cache: {summary:?}");
    assert!(
        by_phase.contains_key(&("down", "bypass".into())),
        "no read was served from the database while the cache was down: {summary:?}"
    );

    // Every write stopped: once the fresh copy written before the last
    // invalidation has expired, the cache serves the database's figures.
    tokio::time::sleep(settings.ttl + Duration::from_millis(500)).await;
    let cached = availability(&app()).await;
    let truth = availability(&db.app()).await;
    cached.assert_status(200, "cached read after the run");
    assert_eq!(cached.body, truth.body, "the cache serves what is stored");
    db.assert_invariants().await;
    db.assert_held_counter().await;
    db.drop().await;
}

/// The proof (docs/DESIGN.md) needs REPEATABLE READ; a server whose
/// default is READ COMMITTED (a parameter group, an operator's `SET
/// GLOBAL`) must not change what the service runs under. A private server
/// again: the shared one's default is not ours to change.
#[tokio::test]
async fn every_connection_runs_repeatable_read_whatever_the_servers_default() {
    let server = PrivateMariaDb::start().await;
    let admin = shared::db::connect_lazy(&server.url(), 1).expect("pool");
    sqlx::query("SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .execute(&admin)
        .await
        .unwrap();
    let plain: String = sqlx::query_scalar("SELECT @@GLOBAL.tx_isolation")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(plain, "READ-COMMITTED");
    let service = shared::db::connect_lazy(&server.url(), 1).expect("pool");
    let level: String = sqlx::query_scalar("SELECT @@SESSION.tx_isolation")
        .fetch_one(&service)
        .await
        .unwrap();
    assert_eq!(level, "REPEATABLE-READ");
}
