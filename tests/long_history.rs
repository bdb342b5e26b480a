//! Issue 45, point 2: a slot's history never jams it. One slot with a long
//! history of ended holds (cancelled within the retention, expired before
//! its watermark) is swept and deleted within each one's deadline, and
//! nothing is left running on the database. The history is built in bulk
//! (`INSERT … SELECT` over a numbers table): `LONG_HISTORY` rows, 300,000
//! unless the environment says otherwise (2,400,000 was run by hand).

use shared::booking::SweepLimits;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::*;
use std::time::{Duration, Instant};

fn history_rows() -> u64 {
    std::env::var("LONG_HISTORY")
        .ok()
        .and_then(|rows| rows.parse().ok())
        .unwrap_or(300_000)
}

const DIGITS: &str = "(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
     UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
     UNION ALL SELECT 8 UNION ALL SELECT 9)";

/// `rows` ended holds on `slot`, written as an operator (or years of
/// hold-and-cancel) would leave them: every other one cancelled, the others expired unconfirmed, one
/// every 0.2 s back from now (2.4 M: 5.6 days, within the retention). One statement of a numbers table.
async fn long_history(db: &TestDb, slot: SlotId, rows: u64) {
    // As many digits as `rows` needs: 0 ≤ i < rows, each once.
    let digits = rows.saturating_sub(1).max(1).to_string().len();
    let numbers = (0..digits)
        .map(|d| format!("{} * d{d}.n", 10u64.pow(d as u32)))
        .collect::<Vec<_>>()
        .join(" + ");
    let tables = (0..digits)
        .map(|d| format!("{DIGITS} d{d}"))
        .collect::<Vec<_>>()
        .join(", ");
    let numbers = format!("SELECT {numbers} AS i FROM {tables}");
    let insert = format!(
        "INSERT INTO holds (slot_id, idempotency_key, status, expires_at, cancelled_at, \
         created_at, updated_at) \
         SELECT ?, UUID(), IF(i % 2 = 0, 'cancelled', 'held'), \
         UTC_TIMESTAMP(6) - INTERVAL 60 SECOND - INTERVAL i * 200000 MICROSECOND, \
         IF(i % 2 = 0, UTC_TIMESTAMP(6) - INTERVAL 120 SECOND - INTERVAL i * 200000 MICROSECOND, NULL), \
         UTC_TIMESTAMP(6) - INTERVAL 400 SECOND - INTERVAL i * 200000 MICROSECOND, \
         UTC_TIMESTAMP(6) FROM ({numbers}) numbers WHERE i < {rows}"
    );
    let started = Instant::now();
    sqlx::query(sqlx::AssertSqlSafe(insert))
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .expect("the history");
    eprintln!("{rows} ended holds written in {:?}", started.elapsed());
    // As the service leaves them: none counted, the watermark at now.
    sqlx::query(
        "UPDATE slots SET held = 0, remaining = capacity, \
         reclaimed_until = UTC_TIMESTAMP(6) WHERE id = ?",
    )
    .bind(slot.0)
    .execute(&db.admin)
    .await
    .unwrap();
}

/// The statements still running on the test's database, and its open
/// transactions, but this query's own; asked again for up to a second
/// while any is left (a connection the service just closed, its work
/// committed or rolled back, can take that long to leave the server's
/// lists on a loaded machine; a killed or rolling-back statement takes
/// far longer).
async fn still_running(db: &TestDb) -> (Vec<String>, i64) {
    let mut seen = running_now(db).await;
    for _ in 0..10 {
        if seen == (vec![], 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = running_now(db).await;
    }
    seen
}

async fn running_now(db: &TestDb) -> (Vec<String>, i64) {
    let running: Vec<String> = sqlx::query_scalar(
        "SELECT CONCAT(COMMAND, ': ', COALESCE(INFO, '')) FROM information_schema.processlist \
         WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND <> 'Sleep'",
    )
    .bind(&db.name)
    .fetch_all(&db.admin)
    .await
    .unwrap();
    let open: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.innodb_trx t \
         JOIN information_schema.processlist p ON p.ID = t.trx_mysql_thread_id \
         WHERE p.DB = ? AND p.ID <> CONNECTION_ID()",
    )
    .bind(&db.name)
    .fetch_one(&db.admin)
    .await
    .unwrap();
    (running, open)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_with_a_long_ended_history_is_swept_and_deleted_within_the_deadlines() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    let others = [db.insert_slot(2).await, db.insert_slot(3).await];
    long_history(&db, slot, history_rows()).await;
    let app = db.app();
    let (status, active) = read(
        http::hold(
            &app,
            hold_request(&slot.0.to_string(), Some(&new_key().to_string())),
        )
        .await
        .unwrap(),
    );
    assert_eq!(status, 201, "{active}");
    // A sweep whose statements are stopped after about 0.4 s: a check
    // that read the slot's history was killed there on every run, and its
    // slot came first again in the next.
    for run in 0..3 {
        let started = Instant::now();
        let report = app
            .booking
            .sweep(SweepLimits {
                max_due: 10,
                sample: 10,
                budget: Duration::from_millis(500),
            })
            .await
            .unwrap();
        let took = started.elapsed();
        eprintln!("sweep {run}: {took:?} {report:?}");
        assert_eq!(
            (report.failed, report.visited, report.repaired),
            (0, 3, 0),
            "every slot checked, the long one too: {report:?}"
        );
        assert!(took < Duration::from_millis(600), "{took:?}");
    }
    let checked: Vec<(u64,)> = sqlx::query_as(
        "SELECT id FROM slots WHERE checked_at > UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE ORDER BY id",
    )
    .fetch_all(&db.admin)
    .await
    .unwrap();
    assert_eq!(checked, [(slot.0,), (others[0].0,), (others[1].0,)]);
    db.assert_counters_exact("after the sweeps").await;
    assert_eq!(still_running(&db).await, (vec![], 0));

    // The delete: refused while the hold is active, then, once it is
    // cancelled, done within each request's deadline (2.5 s here, 8 s in
    // the functions), as many requests as it takes.
    let (status, body) = read(
        http::cancel(&app, cancel_request(&id_of(&active)))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let mut answers = Vec::new();
    let deleted = loop {
        let started = Instant::now();
        let deadline = Instant::now() + Duration::from_millis(2500);
        let outcome = app.slots.until(deadline).delete(slot).await;
        let took = started.elapsed();
        assert!(took < Duration::from_millis(2700), "{took:?}: {outcome:?}");
        assert_eq!(still_running(&db).await, (vec![], 0), "after {outcome:?}");
        match outcome {
            Ok(deleted) => break deleted,
            Err(err) => {
                assert_eq!(err.status(), 503, "{err:?}");
                answers.push(took);
                // About 35,000 rows a request of 2.5 s on the test machine.
                let most = 20 + history_rows() / 10_000;
                assert!((answers.len() as u64) < most, "never deleted: {answers:?}");
            }
        }
    };
    eprintln!(
        "deleted after {} answers of 503: {answers:?}",
        answers.len()
    );
    assert_eq!(deleted.id, slot);
    assert_eq!(db.count_holds(slot, "TRUE").await, 0);
    assert_eq!(still_running(&db).await, (vec![], 0));
    db.drop().await;
}
