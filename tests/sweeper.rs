//! The sweeper against concurrent holds: a sweep that queued on a slot's
//! lock behind a hold's reclaim must never move the watermark back (the
//! interleaving an independent review found oversells), and under a
//! workload with sweeps running back to back the counter stays exact (D)
//! and nothing is oversold, in every committed state.

use futures::future::join_all;
use shared::App;
use shared::booking::SweepLimits;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::locks::SlotLock;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

async fn hold(app: &App, slot: SlotId) -> (u16, serde_json::Value) {
    let key = new_key().to_string();
    read(
        http::hold(app, hold_request(&slot.0.to_string(), Some(&key)))
            .await
            .unwrap(),
    )
}

/// The review's interleaving, driven deterministically (capacity 3):
/// H1 is long, H3 has expired but is still counted, H2 expires soon; the
/// counter is full. With the slot locked by the test, a hold A (its
/// pre-check sees H3's seat) queues first, a sweep queues second; H2
/// expires; the lock is released. A's reclaim gives back H3 and H2 at a
/// time t2 and takes a seat; the sweep, whose statement started before
/// H2 expired, must not write its older "now" over t2 — that would count
/// H2 again and let one hold too many through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sweep_that_waited_for_the_slot_lock_never_moves_the_watermark_back() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    let long = db.app_with_hold_ttl(Duration::from_secs(300));
    let short = db.app_with_hold_ttl(Duration::from_millis(50));
    let h2_ttl = Duration::from_millis(2500);
    let mid = db.app_with_hold_ttl(h2_ttl);
    let (a, sweeper) = (db.app(), db.app());
    for app in [&long, &short, &mid, &a, &sweeper] {
        warm(app).await;
    }
    assert_eq!(hold(&long, slot).await.0, 201, "H1");
    assert_eq!(hold(&short, slot).await.0, 201, "H3");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(hold(&mid, slot).await.0, 201, "H2");
    let h2_expires = Instant::now() + h2_ttl;

    let lock = SlotLock::take(&db, slot).await;
    let a = tokio::spawn(async move { hold(&a, slot).await });
    db.wait_for_lock_waiters(1).await;
    let sweep = tokio::spawn(async move { sweeper.booking.reclaim_expired(10).await });
    db.wait_for_lock_waiters(2).await;
    assert!(
        Instant::now() < h2_expires,
        "both queued while H2 was active"
    );
    tokio::time::sleep(
        h2_expires.saturating_duration_since(Instant::now()) + Duration::from_millis(100),
    )
    .await;
    lock.release().await;
    let (a, swept) = (a.await.unwrap(), sweep.await.unwrap());
    assert_eq!(a.0, 201, "A takes the seat H3 and H2 freed: {}", a.1);
    swept.expect("the sweep succeeds");

    // One seat is left (H1 and A are active): exactly one more hold fits.
    let more = db.app();
    let outcomes: Vec<u16> = join_all((0..3).map(|_| hold(&more, slot)))
        .await
        .into_iter()
        .map(|(status, _)| status)
        .collect();
    db.assert_invariants().await;
    db.assert_counters_exact("after the sweep").await;
    assert_eq!(
        outcomes.iter().filter(|&&s| s == 201).count(),
        1,
        "{outcomes:?}"
    );
    db.drop().await;
}

/// Twelve parallel callers hold (holds of 100–650 ms, so they expire under
/// the workload), confirm and cancel on a few small slots while two
/// sweepers run back to back; a monitor checks D and bookable ≥ 0 for every slot in one
/// snapshot, over and over, while it runs, and once more at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_workload_with_sweeps_running_concurrently_keeps_the_counter_exact() {
    use rand::{Rng, SeedableRng};
    let db = TestDb::new().await;
    let mut slots = Vec::new();
    for capacity in [3, 5, 8] {
        slots.push(db.insert_slot(capacity).await);
    }
    let slots = Arc::new(slots);
    let callers = 12;
    let mut apps = Vec::new();
    for i in 0..callers {
        let app = db.app_with_hold_ttl(Duration::from_millis(100 + 50 * i));
        warm(&app).await;
        apps.push(app);
    }
    let sweepers = [db.app(), db.app()];
    for sweeper in &sweepers {
        warm(sweeper).await;
    }
    let barrier = Arc::new(Barrier::new(callers as usize + sweepers.len()));
    let deadline = Instant::now() + Duration::from_secs(5);

    let workers = apps.into_iter().map(|app| {
        let (slots, barrier) = (slots.clone(), barrier.clone());
        tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
            let mut mine: Vec<String> = Vec::new();
            let mut seen: BTreeMap<String, u64> = BTreeMap::new();
            barrier.wait().await;
            while Instant::now() < deadline {
                let roll = rng.random_range(0..100);
                let (status, body) = if roll < 70 || mine.is_empty() {
                    let response = hold(&app, slots[rng.random_range(0..slots.len())]).await;
                    if response.0 == 201 {
                        mine.push(id_of(&response.1));
                    }
                    response
                } else {
                    let id = mine[rng.random_range(0..mine.len())].clone();
                    if roll < 80 {
                        read(http::confirm(&app, confirm_request(&id)).await.unwrap())
                    } else {
                        read(http::cancel(&app, cancel_request(&id)).await.unwrap())
                    }
                };
                let reason = body["reason"].as_str().unwrap_or("");
                *seen.entry(format!("{status} {reason}")).or_default() += 1;
            }
            seen
        })
    });
    let workers: Vec<_> = workers.collect();
    // Two sweepers: a run that outlasts its schedule overlaps the next.
    let sweeps: Vec<_> = sweepers
        .into_iter()
        .map(|sweeper| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let (mut runs, mut reclaimed) = (0u64, 0u64);
                while Instant::now() < deadline {
                    reclaimed += sweeper.booking.reclaim_expired(100).await.expect("sweep");
                    runs += 1;
                }
                (runs, reclaimed)
            })
        })
        .collect();
    let mut checks = 0;
    let mut broken = Vec::new();
    while Instant::now() < deadline {
        for check in db.counter_checks().await {
            if !check.exact() || check.bookable < 0 {
                broken.push(check);
            }
        }
        checks += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for worker in join_all(workers).await {
        for (outcome, n) in worker.unwrap() {
            *outcomes.entry(outcome).or_default() += n;
        }
    }
    let (mut runs, mut reclaimed) = (0, 0);
    for sweep in join_all(sweeps).await {
        let (r, n) = sweep.unwrap();
        (runs, reclaimed) = (runs + r, reclaimed + n);
    }
    println!(
        "outcomes {outcomes:?}; sweeps {runs}, reclaimed {reclaimed}; {checks} checks, {} broken",
        broken.len()
    );
    assert!(
        broken.is_empty(),
        "{} of {checks} checks broke D or oversold, first: {:?}",
        broken.len(),
        &broken[..broken.len().min(5)]
    );
    let allowed = [
        "200 ",
        "201 ",
        "409 capacity_exhausted",
        "409 hold_cancelled",
        "409 hold_expired",
    ];
    for outcome in outcomes.keys() {
        assert!(
            allowed.contains(&outcome.as_str()),
            "{outcome}: {outcomes:?}"
        );
    }
    assert!(
        outcomes.get("201 ").copied().unwrap_or(0) > 50,
        "{outcomes:?}"
    );
    assert!(
        reclaimed > 0 && runs > 10,
        "the sweeper worked: {runs} runs"
    );
    assert!(checks > 20);
    db.assert_invariants().await;
    db.assert_counters_exact("at the end").await;
    db.drop().await;
}

async fn held_and_remaining(db: &TestDb, slot: SlotId) -> (u32, u32) {
    sqlx::query_as("SELECT held, remaining FROM slots WHERE id = ?")
        .bind(slot.0)
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

fn limits(max_due: u32, sample: u32, budget: Duration) -> SweepLimits {
    SweepLimits {
        max_due,
        sample,
        budget,
    }
}

/// SPEC §9 "Self-check": counters edited out of band (as by an operator, or
/// a bug) are found and repaired by the next sweep, under the slot's lock.
#[tokio::test]
async fn a_counter_edited_out_of_band_heals_within_one_sweep() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    let quiet = db.insert_slot(2).await;
    let app = db.app();
    let (_, first) = hold(&app, slot).await;
    hold(&app, slot).await;
    let confirmed = read(
        http::confirm(&app, confirm_request(&id_of(&first)))
            .await
            .unwrap(),
    );
    assert_eq!(confirmed.0, 200);
    // Truth: one confirmed, one active hold.
    assert_eq!(held_and_remaining(&db, slot).await, (1, 4));
    for (id, held, remaining) in [(slot, 4, 2), (quiet, 1, 1)] {
        sqlx::query("UPDATE slots SET held = ?, remaining = ? WHERE id = ?")
            .bind(held)
            .bind(remaining)
            .bind(id.0)
            .execute(&db.admin)
            .await
            .unwrap();
    }
    let report = app
        .booking
        .sweep(limits(10, 10, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!(report.repaired, 4, "two counters on each slot: {report:?}");
    assert_eq!(held_and_remaining(&db, slot).await, (1, 4));
    assert_eq!(held_and_remaining(&db, quiet).await, (0, 2));
    db.assert_counters_exact("after the repair").await;
    db.assert_invariants().await;
    let again = app
        .booking
        .sweep(limits(10, 10, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!(again.repaired, 0, "nothing left to repair: {again:?}");
    db.drop().await;
}

/// Three slots with expired seats to give back, due oldest first: A, B, C.
async fn three_due_slots(db: &TestDb) -> [SlotId; 3] {
    let short = db.app_with_hold_ttl(Duration::from_millis(20));
    let slots = [
        db.insert_slot(1).await,
        db.insert_slot(1).await,
        db.insert_slot(1).await,
    ];
    for slot in slots {
        assert_eq!(hold(&short, slot).await.0, 201);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    slots
}

#[tokio::test]
async fn the_sweeper_takes_the_slot_due_longest_first() {
    let db = TestDb::new().await;
    let [a, b, c] = three_due_slots(&db).await;
    let app = db.app();
    let report = app
        .booking
        .sweep(limits(1, 0, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!((report.visited, report.reclaimed), (1, 1), "{report:?}");
    assert_eq!(held_and_remaining(&db, a).await.0, 0, "A was due first");
    assert_eq!(held_and_remaining(&db, b).await.0, 1);
    assert_eq!(held_and_remaining(&db, c).await.0, 1);
    db.drop().await;
}

/// A slot whose lock is held elsewhere costs the run that slot only: the
/// others are swept, and the run still ends within its budget.
#[tokio::test]
async fn a_locked_slot_does_not_stop_the_sweep_and_the_run_keeps_its_budget() {
    let db = TestDb::new().await;
    let [a, b, c] = three_due_slots(&db).await;
    let app = db.app();
    let lock = SlotLock::take(&db, a).await;
    let report = app
        .booking
        .sweep(limits(10, 0, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!(
        (report.visited, report.failed, report.reclaimed),
        (2, 1, 2),
        "{report:?}"
    );
    assert_eq!(held_and_remaining(&db, b).await.0, 0);
    assert_eq!(held_and_remaining(&db, c).await.0, 0);

    // With less budget than one lock wait, the run gives up on A and ends.
    let d = db.insert_slot(1).await;
    let short = db.app_with_hold_ttl(Duration::from_millis(20));
    hold(&short, d).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let report = app
        .booking
        .sweep(limits(10, 0, Duration::from_millis(500)))
        .await
        .unwrap();
    assert!(
        report.out_of_time && report.failed == 1 && report.visited == 0,
        "{report:?}"
    );
    lock.release().await;
    let report = app
        .booking
        .sweep(limits(10, 0, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!((report.visited, report.failed), (2, 0), "{report:?}");
    db.assert_counters_exact("after the lock went").await;
    db.drop().await;
}

/// The claim that finds a slot's counter empty moves the watermark up to
/// its now (taken after the lock), so the projection's scan window starts
/// recently rather than at the slot's last reclaim, however old.
#[tokio::test]
async fn a_hold_on_an_empty_counter_brings_the_watermark_up_to_now() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let watermark = async || -> chrono::DateTime<chrono::Utc> {
        sqlx::query_scalar("SELECT reclaimed_until FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&db.admin)
            .await
            .unwrap()
    };
    let before = chrono::Utc::now() - chrono::Duration::seconds(60);
    assert!(watermark().await < before, "a new slot's watermark is old");
    let app = db.app();
    assert_eq!(hold(&app, slot).await.0, 201);
    let moved = watermark().await;
    assert!(moved > before, "moved to now: {moved}");
    assert_eq!(hold(&app, slot).await.0, 201);
    assert_eq!(
        watermark().await,
        moved,
        "a counter that is not empty keeps it"
    );
    db.assert_counters_exact("after the holds").await;
    db.drop().await;
}

// ---- retention (SPEC §9) --------------------------------------------------

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

/// A hold row as an operator (or a past request) left it, written with the
/// contract's columns: times are seconds from now (negative: ago; `None`:
/// NULL), the owner is `anonymous`. Returns its key.
async fn past_hold(
    db: &TestDb,
    slot: SlotId,
    status: &str,
    expires: i64,
    confirmed: Option<i64>,
    cancelled: Option<i64>,
) -> String {
    let key = new_key().to_string();
    sqlx::query(
        "INSERT INTO holds (slot_id, idempotency_key, status, expires_at, confirmed_at, \
         cancelled_at, created_at, updated_at) VALUES (?, ?, ?, \
         UTC_TIMESTAMP(6) + INTERVAL ? SECOND, UTC_TIMESTAMP(6) + INTERVAL ? SECOND, \
         UTC_TIMESTAMP(6) + INTERVAL ? SECOND, UTC_TIMESTAMP(6) + INTERVAL ? SECOND, \
         UTC_TIMESTAMP(6))",
    )
    .bind(slot.0)
    .bind(&key)
    .bind(status)
    .bind(expires)
    .bind(confirmed)
    .bind(cancelled)
    .bind(expires - 300)
    .execute(&db.admin)
    .await
    .unwrap();
    key
}

/// The slot's counters as the service would have left them after those
/// rows: none of them counted (the watermark an hour back, later than
/// every expiry written above but the active ones), `confirmed` seats sold.
async fn settle(db: &TestDb, slot: SlotId, confirmed: u32) {
    sqlx::query(
        "UPDATE slots SET held = 0, remaining = capacity - ?, \
         reclaimed_until = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?",
    )
    .bind(confirmed)
    .bind(slot.0)
    .execute(&db.admin)
    .await
    .unwrap();
}

fn retention_of(days: u64) -> shared::config::HoldRules {
    shared::config::HoldRules {
        retention: Duration::from_secs(days * 86_400),
        ..shared::config::HoldRules::default()
    }
}

async fn keys_left(db: &TestDb, slot: SlotId) -> Vec<String> {
    sqlx::query_scalar("SELECT idempotency_key FROM holds WHERE slot_id = ? ORDER BY id")
        .bind(slot.0)
        .fetch_all(&db.admin)
        .await
        .unwrap()
}

#[tokio::test]
async fn ended_holds_that_never_were_bookings_are_deleted_after_the_retention_and_the_rest_kept() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(10).await;
    let expired = past_hold(&db, slot, "held", -2 * DAY, None, None).await;
    let cancelled = past_hold(&db, slot, "cancelled", -2 * DAY + 240, None, Some(-2 * DAY)).await;
    // Expired two days ago, cancelled since: it ended when it expired.
    let lapsed_then_cancelled = past_hold(&db, slot, "held", -2 * DAY, None, Some(-HOUR)).await;
    sqlx::query("UPDATE holds SET status = 'cancelled' WHERE idempotency_key = ?")
        .bind(&lapsed_then_cancelled)
        .execute(&db.admin)
        .await
        .unwrap();
    let booking = past_hold(&db, slot, "confirmed", -3 * DAY, Some(-3 * DAY - 60), None).await;
    let booking_cancelled = past_hold(
        &db,
        slot,
        "cancelled",
        -3 * DAY,
        Some(-3 * DAY - 60),
        Some(-2 * DAY),
    )
    .await;
    let recently_expired = past_hold(&db, slot, "held", -2 * HOUR, None, None).await;
    let recently_cancelled = past_hold(&db, slot, "cancelled", 240, None, Some(-HOUR)).await;
    settle(&db, slot, 1).await;
    let week = db.app_with_rules(
        shared::config::AuthMode::Open,
        Duration::from_secs(300),
        shared::config::HoldRules::default(),
    );
    let day = db.app_with_rules(
        shared::config::AuthMode::Open,
        Duration::from_secs(300),
        retention_of(1),
    );
    let request = with_body(
        hold_request(&slot.0.to_string(), Some(&new_key().to_string())),
        r#"{"quantity": 2}"#,
    );
    let (status, active) = read(http::hold(&day, request).await.unwrap());
    assert_eq!(status, 201, "{active}");
    db.assert_counters_exact("before the sweep").await;
    db.assert_invariants().await;
    let before = held_and_remaining(&db, slot).await;
    assert_eq!(before, (2, 9));
    let all = keys_left(&db, slot).await;
    assert_eq!(all.len(), 8);

    // The default retention is seven days: nothing is old enough.
    let report = week
        .booking
        .sweep(limits(10, 10, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!((report.deleted, report.repaired), (0, 0), "{report:?}");
    assert_eq!(keys_left(&db, slot).await, all);

    let report = day
        .booking
        .sweep(limits(10, 10, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!((report.deleted, report.repaired), (3, 0), "{report:?}");
    let kept = keys_left(&db, slot).await;
    let active_key = active["idempotency_key"].as_str().unwrap().to_string();
    assert_eq!(
        kept,
        [
            booking.clone(),
            booking_cancelled,
            recently_expired.clone(),
            recently_cancelled,
            active_key
        ]
    );
    assert_eq!(
        held_and_remaining(&db, slot).await,
        before,
        "deleting changes no counter"
    );
    db.assert_counters_exact("after the deletion").await;
    db.assert_invariants().await;

    // A kept hold's key still replays; a deleted one's makes a new hold.
    for (key, status) in [(&recently_expired, 200), (&booking, 200), (&expired, 201)] {
        let (answered, body) = read(
            http::hold(&day, hold_request(&slot.0.to_string(), Some(key)))
                .await
                .unwrap(),
        );
        assert_eq!(answered, status, "{key}: {body}");
        assert_eq!(body["idempotency_key"], key.as_str());
    }
    let again = day
        .booking
        .sweep(limits(10, 10, Duration::from_secs(8)))
        .await
        .unwrap();
    assert_eq!(again.deleted, 0, "{again:?}");
    assert_eq!(db.count_holds(slot, "TRUE").await, 6);
    let gone: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM holds WHERE idempotency_key IN (?, ?)")
            .bind(&cancelled)
            .bind(&lapsed_then_cancelled)
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert_eq!(gone, 0);
    db.drop().await;
}

/// `rows` ended, never-confirmed holds on `slot`, expired two days ago.
async fn many_expired(db: &TestDb, slot: SlotId, rows: usize) {
    for chunk in 0..rows.div_ceil(500) {
        let n = (rows - chunk * 500).min(500);
        let mut insert = sqlx::QueryBuilder::new(
            "INSERT INTO holds (slot_id, idempotency_key, status, expires_at, created_at) ",
        );
        insert.push_values(0..n, |mut row, _| {
            row.push_bind(slot.0)
                .push_bind(new_key().to_string())
                .push("'held'")
                .push("UTC_TIMESTAMP(6) - INTERVAL 2 DAY")
                .push("UTC_TIMESTAMP(6) - INTERVAL 2 DAY - INTERVAL 5 MINUTE");
        });
        insert.build().execute(&db.admin).await.unwrap();
    }
}

#[tokio::test]
async fn a_slot_with_more_ended_holds_than_a_batch_is_emptied_over_several_sweeps() {
    let db = TestDb::new().await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    many_expired(&db, a, 2500).await;
    many_expired(&db, b, 1200).await;
    let booking = past_hold(&db, a, "confirmed", -3 * DAY, Some(-3 * DAY - 60), None).await;
    settle(&db, a, 1).await;
    settle(&db, b, 0).await;
    db.assert_counters_exact("before the sweeps").await;
    let app = db.app_with_rules(
        shared::config::AuthMode::Open,
        Duration::from_secs(300),
        retention_of(1),
    );
    let mut runs = Vec::new();
    for _ in 0..4 {
        let report = app
            .booking
            .sweep(limits(10, 10, Duration::from_secs(8)))
            .await
            .unwrap();
        assert_eq!(
            (report.visited, report.failed, report.repaired),
            (2, 0, 0),
            "{report:?}"
        );
        runs.push((
            report.deleted,
            db.count_holds(a, "TRUE").await,
            db.count_holds(b, "TRUE").await,
        ));
    }
    // At most 1000 per slot and visit.
    assert_eq!(
        runs,
        [(2000, 1501, 200), (1200, 501, 0), (500, 1, 0), (0, 1, 0)]
    );
    assert_eq!(keys_left(&db, a).await, [booking]);
    assert_eq!(held_and_remaining(&db, a).await, (0, 4));
    assert_eq!(held_and_remaining(&db, b).await, (0, 5));
    db.assert_counters_exact("after the sweeps").await;
    db.assert_invariants().await;
    db.drop().await;
}
