//! The randomized workload: every operation of the lifecycle from parallel
//! callers, holds expiring under them and sweeps running beside them,
//! while a monitor checks every invariant in one snapshot at a time.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use shared::App;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Each caller's answers, as `"<operation> <status> <reason>"` → count.
type Outcomes = BTreeMap<String, u64>;

/// A hold of this caller's: its slot, its key (`None`: an offer's, whose
/// key is the server's) and its id (`None`: the hold was refused).
#[derive(Clone)]
struct Mine {
    slot: SlotId,
    key: Option<String>,
    id: Option<String>,
    /// Not yet seen cancelled or expired.
    live: bool,
}

/// The slots' capacities. The roomy last one takes most moves; the others
/// fill, and their lines form.
const CAPACITIES: [u32; 5] = [1, 2, 3, 5, 12];

/// What a workload may answer, by operation: anything else fails the run.
const ALLOWED: [&str; 20] = [
    "hold 201 ",
    "hold 200 ",
    "hold 409 capacity_exhausted",
    "confirm 200 ",
    "confirm 409 hold_cancelled",
    "confirm 409 hold_expired",
    "cancel 200 ",
    "cancel 409 hold_expired",
    "cancel 409 hold_cancelled",
    "move 200 ",
    "move 409 capacity_exhausted",
    "move 409 hold_cancelled",
    "move 409 hold_expired",
    "join 201 ",
    "join 409 seats_available",
    "leave 200 ",
    "sweep ok ",
    "offered 200 ",
    "hold 409 hold_expired",
    "hold 409 hold_cancelled",
];

/// Several slots, mixed hold / replay / confirm / cancel / move (SPEC §17,
/// to another slot) / join / leave (SPEC §18) from parallel callers for a
/// few seconds, with holds expiring under them and a sweeper offering
/// their seats; afterwards, and in one snapshot at a time while it runs,
/// every invariant holds on the rows: bookable ≥ 0, `remaining = capacity
/// − confirmed`, the counter's definition D, and the lines' (§18).
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_randomized_concurrent_workload_never_breaks_an_invariant() {
    let db = TestDb::new().await;
    let mut slots = Vec::new();
    for capacity in CAPACITIES {
        slots.push(db.insert_slot(capacity).await);
    }
    let slots = Arc::new(slots);
    let deadline = Instant::now() + Duration::from_secs(5);
    let ttl = Duration::from_millis(400);
    let apps = db.warm_apps(10, ttl).await;
    let sweeper = db.warm_apps(1, ttl).await.remove(0);
    let callers = together(apps, move |_, app| caller(app, slots.clone(), deadline));
    let sweeps = async {
        let mut sweeps = 0u64;
        while Instant::now() < deadline {
            sweeper.booking.reclaim_expired(100).await.expect("a sweep");
            sweeps += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sweeps
    };
    let (outcomes, checks, sweeps) = tokio::join!(callers, monitor(&db, deadline), sweeps);
    let mut seen = Outcomes::new();
    for per_caller in outcomes {
        for (outcome, n) in per_caller {
            *seen.entry(outcome).or_default() += n;
        }
    }
    let events: BTreeMap<String, i64> =
        sqlx::query_as("SELECT type, COUNT(*) FROM events GROUP BY type")
            .fetch_all(&db.admin)
            .await
            .unwrap()
            .into_iter()
            .collect();
    println!("outcomes: {seen:#?}\nevents: {events:#?}\nchecks: {checks}, sweeps: {sweeps}");
    for outcome in seen.keys() {
        assert!(ALLOWED.contains(&outcome.as_str()), "unexpected {outcome}");
    }
    // The run did what it claims to test.
    for (outcome, least) in [("hold 201 ", 20), ("confirm 200 ", 5), ("cancel 200 ", 5)] {
        assert!(
            seen.get(outcome).copied().unwrap_or(0) >= least,
            "{outcome}"
        );
    }
    for kind in ["hold.moved", "waitlist.joined", "waitlist.offered"] {
        assert!(events.get(kind).copied().unwrap_or(0) > 0, "no {kind}");
    }
    assert!(checks > 10 && sweeps > 10);
    db.assert_invariants().await;
    db.assert_held_counter().await;
    db.assert_lines().await;
    db.drop().await;
}

/// One caller until `deadline`: mostly new holds, then operations on its
/// own holds and entries, picked at random.
async fn caller(app: App, slots: Arc<Vec<SlotId>>, deadline: Instant) -> Outcomes {
    let mut rng = StdRng::from_rng(&mut rand::rng());
    let mut mine: Vec<Mine> = Vec::new();
    let mut entries: Vec<String> = Vec::new();
    let mut outcomes = Outcomes::new();
    while Instant::now() < deadline {
        let roll = rng.random_range(0..100);
        let slot = slots[rng.random_range(0..slots.len())];
        let (operation, (status, body)) = match roll {
            _ if roll < 35 || mine.is_empty() => ("hold", new_hold(&app, slot, &mut mine).await),
            35..45 => match mine[rng.random_range(0..mine.len())].clone() {
                Mine {
                    slot,
                    key: Some(key),
                    ..
                } => ("hold", hold(&app, slot, &key).await),
                Mine { id: Some(id), .. } => ("confirm", confirm(&app, &id).await),
                _ => continue,
            },
            45..85 => {
                // The latest of its holds not seen ended, most likely
                // still active (or confirmed).
                let Some(pick) = mine.iter().rposition(|hold| hold.live) else {
                    continue;
                };
                let id = mine[pick].id.clone().unwrap_or_default();
                let answer = match roll {
                    45..62 => ("confirm", confirm(&app, &id).await),
                    62..72 => ("cancel", cancel(&app, &id).await),
                    _ => {
                        // Another slot: a move within one changes nothing.
                        let others: Vec<SlotId> = slots
                            .iter()
                            .copied()
                            .filter(|s| *s != mine[pick].slot)
                            .collect();
                        let to = others[rng.random_range(0..others.len())];
                        let answer = move_to(&app, &id, to).await;
                        if answer.0 == 200 {
                            // A replay of its key names it there now.
                            mine[pick].slot = to;
                        }
                        ("move", answer)
                    }
                };
                let ended = ["hold_cancelled", "hold_expired"];
                let body = &answer.1.1;
                if body["status"] == "cancelled" || ended.iter().any(|r| body["reason"] == *r) {
                    mine[pick].live = false;
                }
                answer
            }
            85..92 => {
                // At most the slot's capacity (a larger entry is a 422).
                let most = CAPACITIES[slots.iter().position(|s| *s == slot).unwrap_or(0)];
                let quantity = rng.random_range(1..=most.min(2));
                let body = format!(r#"{{"quantity": {quantity}}}"#);
                let request = join_request(&slot.0.to_string(), &new_key().to_string(), &body);
                let answer = read(http::join_waitlist(&app, request).await.unwrap());
                if answer.0 == 201 {
                    entries.push(id_of(&answer.1));
                }
                ("join", answer)
            }
            _ => {
                let Some(entry) = entries.pop() else { continue };
                let request = entry_request("DELETE", &entry);
                let answer = read(http::leave_waitlist(&app, request).await.unwrap());
                // Offered meanwhile: the offer's hold is this caller's.
                if let Some(hold) = answer.1["hold_id"].as_u64() {
                    let slot = SlotId(answer.1["slot_id"].as_u64().unwrap_or_default());
                    let id = Some(hold.to_string());
                    let live = true;
                    mine.push(Mine {
                        slot,
                        key: None,
                        id,
                        live,
                    });
                    *outcomes.entry("offered 200 ".into()).or_default() += 1;
                }
                ("leave", answer)
            }
        };
        let reason = body["reason"].as_str().unwrap_or("");
        *outcomes
            .entry(format!("{operation} {status} {reason}"))
            .or_default() += 1;
    }
    outcomes
}

async fn new_hold(app: &App, slot: SlotId, mine: &mut Vec<Mine>) -> (u16, Value) {
    let key = new_key().to_string();
    let answer = hold(app, slot, &key).await;
    let id = (answer.0 == 201).then(|| id_of(&answer.1));
    let live = id.is_some();
    mine.push(Mine {
        slot,
        key: Some(key),
        id,
        live,
    });
    answer
}

async fn hold(app: &App, slot: SlotId, key: &str) -> (u16, Value) {
    let request = hold_request(&slot.0.to_string(), Some(key));
    read(http::hold(app, request).await.unwrap())
}

async fn confirm(app: &App, id: &str) -> (u16, Value) {
    read(http::confirm(app, confirm_request(id)).await.unwrap())
}

async fn cancel(app: &App, id: &str) -> (u16, Value) {
    read(http::cancel(app, cancel_request(id)).await.unwrap())
}

async fn move_to(app: &App, id: &str, to: SlotId) -> (u16, Value) {
    let body = format!(r#"{{"slot_id": {to}}}"#);
    read(http::move_hold(app, move_request(id, &body)).await.unwrap())
}

/// Until `deadline`, the invariants in one snapshot at a time; returns how
/// many snapshots it checked.
async fn monitor(db: &TestDb, deadline: Instant) -> u64 {
    let mut checks = 0;
    while Instant::now() < deadline {
        // The snapshot first, then the clock: judged at a time after the
        // snapshot, a hold that expired (and whose seat was resold)
        // between a statement's start and its snapshot cannot pass for
        // active. That gap once flagged two slots under heavy load.
        let mut tx = db
            .admin
            .begin_with("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            .await
            .unwrap();
        let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        // Bookable never negative in any committed state (SPEC §9).
        let negative: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM slots s WHERE CAST(s.remaining AS SIGNED) < \
             (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM holds h \
              WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > ?)",
        )
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        // The ledger and D, in the same snapshot (no clock involved).
        let ledger: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM slots s WHERE s.remaining <> s.capacity - \
             (SELECT COALESCE(SUM(h.quantity), 0) FROM holds h \
              WHERE h.slot_id = s.id AND h.status = 'confirmed') \
             OR s.held <> (SELECT COALESCE(SUM(h.quantity), 0) FROM holds h \
              WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > s.reclaimed_until)",
        )
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        // The lines (SPEC §18), the same snapshot.
        let lines = line::broken(&mut tx).await;
        tx.rollback().await.unwrap();
        assert_eq!(negative, 0, "a committed state oversold");
        assert_eq!(ledger, 0, "a committed state broke the ledger or D");
        assert!(
            lines.is_empty(),
            "a committed state broke a line: {lines:#?}"
        );
        checks += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    checks
}
