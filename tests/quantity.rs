//! Holds of several seats (SPEC §9) under true concurrency: the seed's
//! three scenarios in seats, the fingerprint raced by callers that share a
//! key, and a randomized workload of seats, extensions and sweeps checked
//! in every committed state. Each caller is its own execution environment
//! (its own App and connection), all warmed up, then released together.

use futures::future::join_all;
use serde_json::Value;
use shared::App;
use shared::booking::SweepLimits;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::extend_request;
use slot_booking_tests::seats::hold_seats;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

const CALLERS: usize = 20;

type Answer = (u16, Value, bool);

fn tally(responses: &[Answer]) -> BTreeMap<u16, usize> {
    let mut counts = BTreeMap::new();
    for (status, _, _) in responses {
        *counts.entry(*status).or_default() += 1;
    }
    counts
}

async fn hold(app: &App, slot: SlotId, key: &str, quantity: u32) -> Answer {
    hold_seats(app, &slot.0.to_string(), key, quantity).await
}

/// The hold path's own figure and the projection's, which must agree.
async fn bookable(app: &App, slot: SlotId) -> i64 {
    let own = app.booking.bookable(slot).await.unwrap().expect("slot");
    let listed = app.booking.availability().await.unwrap();
    let listed = listed.iter().find(|s| s.slot_id == slot).unwrap().remaining;
    assert_eq!(own, i64::from(listed), "the projection agrees");
    own
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_holds_of_two_seats_on_five_seats_give_two_201_and_eighteen_409() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, move |_, app| async move {
        hold(&app, slot, new_key().as_str(), 2).await
    })
    .await;
    assert_eq!(tally(&responses), BTreeMap::from([(201, 2), (409, 18)]));
    for (status, body, replayed) in &responses {
        match status {
            201 => assert!(body["quantity"] == 2 && !replayed, "{body}"),
            _ => assert_eq!(body["reason"], "capacity_exhausted", "{body}"),
        }
    }
    assert_eq!(db.count_holds(slot, "TRUE").await, 2, "two rows");
    assert_eq!(db.active_seats(slot).await, 4);
    assert_eq!(db.slot(slot).await, (5, 5), "a hold consumes nothing");
    let app = db.app();
    assert_eq!(bookable(&app, slot).await, 1, "one seat left");
    db.assert_invariants().await;
    db.assert_counters_exact("after the holds").await;
    // That seat, and no more: all or nothing.
    assert_eq!(hold(&app, slot, new_key().as_str(), 2).await.0, 409);
    assert_eq!(hold(&app, slot, new_key().as_str(), 1).await.0, 201);
    assert_eq!(bookable(&app, slot).await, 0);
    db.drop().await;
}

async fn twenty_parallel_holds_of_two_seats_with_one_key(capacity: u32) {
    let db = TestDb::new().await;
    let slot = db.insert_slot(capacity).await;
    let key = new_key().to_string();
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, move |_, app| {
        let key = key.clone();
        async move { hold(&app, slot, &key, 2).await }
    })
    .await;
    assert_eq!(
        tally(&responses),
        BTreeMap::from([(200, 19), (201, 1)]),
        "capacity {capacity}"
    );
    let id = responses[0].1["id"].clone();
    for (status, body, replayed) in &responses {
        assert_eq!(body["id"], id, "every caller gets the one hold");
        assert_eq!(body["quantity"], 2);
        assert_eq!(
            *replayed,
            *status == 200,
            "Idempotent-Replayed on replays only"
        );
    }
    assert_eq!(db.count_holds(slot, "TRUE").await, 1, "one row");
    assert_eq!(db.active_seats(slot).await, 2);
    assert_eq!(db.slot(slot).await, (capacity, capacity));
    assert_eq!(bookable(&db.app(), slot).await, i64::from(capacity) - 2);
    db.assert_invariants().await;
    db.assert_counters_exact("after the holds").await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_holds_of_two_seats_with_one_key_give_one_201_and_nineteen_replays() {
    twenty_parallel_holds_of_two_seats_with_one_key(5).await;
}

/// The winner's two seats fill the slot: callers queued behind it find it
/// full and must replay it (the key's re-check under the lock), not 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_holds_of_two_seats_with_one_key_on_two_seats_all_replay_the_winner() {
    twenty_parallel_holds_of_two_seats_with_one_key(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn twenty_parallel_confirms_of_two_seats_on_five_seats_give_two_200_and_eighteen_409() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    // Twenty held holds of two seats on five can only exist out of band
    // (the hold path refuses them), counter included: the decrement's own
    // condition is then the last line of defence.
    for i in 0..CALLERS {
        sqlx::query(
            "INSERT INTO holds (slot_id, quantity, idempotency_key, status, expires_at) \
             VALUES (?, 2, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE)",
        )
        .bind(slot.0)
        .bind(format!("00000000-0000-4000-8000-{i:012}"))
        .execute(&db.admin)
        .await
        .unwrap();
    }
    sqlx::query("UPDATE slots SET held = ? WHERE id = ?")
        .bind(2 * CALLERS as u32)
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let ids: Vec<u64> = sqlx::query_scalar("SELECT id FROM holds WHERE slot_id = ? ORDER BY id")
        .bind(slot.0)
        .fetch_all(&db.admin)
        .await
        .unwrap();
    let ids = Arc::new(ids);
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, move |i, app| {
        let ids = ids.clone();
        async move {
            let (status, body) = read(
                http::confirm(&app, confirm_request(&ids[i].to_string()))
                    .await
                    .unwrap(),
            );
            (status, body, false)
        }
    })
    .await;
    assert_eq!(tally(&responses), BTreeMap::from([(200, 2), (409, 18)]));
    for (status, body, _) in &responses {
        match status {
            200 => assert!(body["status"] == "confirmed" && body["quantity"] == 2),
            _ => assert_eq!(body["reason"], "capacity_exhausted", "{body}"),
        }
    }
    assert_eq!(db.slot(slot).await, (5, 1), "remaining = 5 − 2 × 2");
    assert_eq!(db.seats(slot, "status = 'confirmed'").await, 4);
    assert_eq!(db.count_holds(slot, "status = 'confirmed'").await, 2);
    db.assert_held_counter().await;
    db.drop().await;
}

/// Twenty callers with one key, each asking for the slot and quantity of
/// its fingerprint (`fingerprints[i % len]`), all released together: one
/// hold is made, and every other answer is decided by the winner's
/// fingerprint alone (SPEC §9) — the same one replays it (200,
/// `Idempotent-Replayed: true`), any other is 422 `idempotency_key_reuse`
/// naming what differs (the slot first). Never a second row.
async fn one_key_raced(capacities: &[u32], fingerprints: &[(usize, u32)]) {
    let db = TestDb::new().await;
    let mut slots = Vec::new();
    for capacity in capacities {
        slots.push(db.insert_slot(*capacity).await);
    }
    let asked: Arc<Vec<(SlotId, u32)>> = Arc::new(
        (0..CALLERS)
            .map(|i| {
                let (slot, quantity) = fingerprints[i % fingerprints.len()];
                (slots[slot], quantity)
            })
            .collect(),
    );
    let key = new_key().to_string();
    let apps = db.warm_apps(CALLERS, Duration::from_secs(300)).await;
    let responses = together(apps, {
        let asked = asked.clone();
        move |i, app| {
            let (asked, key) = (asked.clone(), key.clone());
            async move { hold(&app, asked[i].0, &key, asked[i].1).await }
        }
    })
    .await;
    let created: Vec<_> = responses.iter().filter(|r| r.0 == 201).collect();
    assert_eq!(created.len(), 1, "one hold: {:?}", tally(&responses));
    let winner = &created[0].1;
    let (won_slot, won_quantity) = (
        SlotId(winner["slot_id"].as_u64().unwrap()),
        u32::try_from(winner["quantity"].as_u64().unwrap()).unwrap(),
    );
    assert!(!created[0].2, "a new hold is no replay");
    let mut seen = BTreeMap::<String, usize>::new();
    for (i, (status, body, replayed)) in responses.iter().enumerate() {
        let (slot, quantity) = asked[i];
        let outcome = if *status == 201 {
            "201".to_string()
        } else if (slot, quantity) == (won_slot, won_quantity) {
            assert_eq!(*status, 200, "caller {i}, the winner's fingerprint: {body}");
            assert!(replayed, "caller {i}: Idempotent-Replayed");
            assert_eq!(body["id"], winner["id"], "caller {i}: the winner's hold");
            "200 replayed".to_string()
        } else {
            assert_eq!(
                *status, 422,
                "caller {i} asked {quantity} on {slot}: {body}"
            );
            assert_eq!(body["reason"], "idempotency_key_reuse");
            assert!(!replayed);
            let message = body["message"].as_str().unwrap();
            let says = if slot != won_slot {
                format!("slot {won_slot}")
            } else {
                format!("quantity of {won_quantity}, not {quantity}")
            };
            assert!(message.contains(&says), "caller {i}: {message:?}");
            format!("422 {says}")
        };
        *seen.entry(outcome).or_default() += 1;
    }
    println!("winner: {won_quantity} on {won_slot}; answers {seen:?}");
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM holds")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(rows, 1, "one row");
    assert_eq!(db.active_seats(won_slot).await, i64::from(won_quantity));
    db.assert_invariants().await;
    db.assert_counters_exact("after the race").await;
    db.drop().await;
}

/// Three seats: a winner of three fills the slot, so the others find it
/// full, and must still be told 200 or 422 by the key, never 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn one_key_raced_with_quantities_one_and_three_makes_one_hold_and_the_winners_quantity_decides()
 {
    one_key_raced(&[3], &[(0, 1), (0, 3)]).await;
    one_key_raced(&[40], &[(0, 1), (0, 3)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn one_key_raced_on_two_slots_makes_one_hold_and_the_winners_slot_decides() {
    one_key_raced(&[2, 2], &[(0, 2), (1, 2)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn one_key_raced_on_two_slots_with_two_quantities_replays_only_the_exact_fingerprint() {
    one_key_raced(&[3, 3], &[(0, 1), (1, 1), (0, 3), (1, 3)]).await;
}

/// Four slots, twelve parallel callers holding 1–5 seats (holds of
/// 100–650 ms, expiring under the workload), replaying, reusing a key for
/// another quantity, confirming, extending (half of them with a lifetime
/// cap of three TTLs) and cancelling, while two sweepers run back to back.
/// A monitor checks every slot in one snapshot, over and over while it
/// runs and once more at the end: D, `remaining = capacity − confirmed
/// seats`, `0 ≤ remaining ≤ capacity`, `bookable ≥ 0`. A sweep that had
/// to repair a counter means one drifted: that fails too.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_randomized_workload_of_seats_extensions_and_sweeps_keeps_every_invariant() {
    use rand::{Rng, SeedableRng};
    let db = TestDb::new().await;
    let mut slots = Vec::new();
    for capacity in [3, 5, 8, 20] {
        slots.push(db.insert_slot(capacity).await);
    }
    let slots = Arc::new(slots);
    let callers = 12u32;
    let mut apps = Vec::new();
    for i in 0..callers {
        let ttl = Duration::from_millis(100 + 50 * u64::from(i));
        let app = if i % 2 == 0 {
            db.app_with_hold_ttl(ttl)
        } else {
            db.app_with_lifetime(ttl, 3 * ttl)
        };
        warm(&app).await;
        apps.push(app);
    }
    let sweepers = [db.app(), db.app()];
    for sweeper in &sweepers {
        warm(sweeper).await;
    }
    let barrier = Arc::new(Barrier::new(callers as usize + sweepers.len()));
    let deadline = Instant::now() + Duration::from_secs(5);

    let workers: Vec<_> = apps
        .into_iter()
        .map(|app| {
            let (slots, barrier) = (slots.clone(), barrier.clone());
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
                // (slot, key, quantity, id) of this caller's holds.
                let mut mine: Vec<(SlotId, String, u32, String)> = Vec::new();
                let mut seen: BTreeMap<String, u64> = BTreeMap::new();
                barrier.wait().await;
                while Instant::now() < deadline {
                    let roll = rng.random_range(0..100);
                    // Mostly a recent hold, so that some live through
                    // several extensions and reach their cap.
                    let pick = match mine.len() {
                        0 => 0,
                        n if rng.random_bool(0.7) => rng.random_range(n.saturating_sub(6)..n),
                        n => rng.random_range(0..n),
                    };
                    let (op, (status, body)) = if roll < 40 || mine.is_empty() {
                        let slot = slots[rng.random_range(0..slots.len())];
                        let (key, quantity) = (new_key().to_string(), rng.random_range(1..=5));
                        let (status, body, _) = hold(&app, slot, &key, quantity).await;
                        // Some are left to expire, for the reclaims and
                        // the sweepers to give back.
                        if status == 201 && rng.random_bool(0.6) {
                            mine.push((slot, key, quantity, id_of(&body)));
                        }
                        ("hold", (status, body))
                    } else {
                        let (slot, key, quantity, id) = mine[pick].clone();
                        match roll {
                            40..46 => {
                                let (status, body, replayed) =
                                    hold(&app, slot, &key, quantity).await;
                                assert!(status != 200 || replayed, "{body}");
                                ("replay", (status, body))
                            }
                            46..49 => {
                                let other = quantity % 5 + 1;
                                let (status, body, _) = hold(&app, slot, &key, other).await;
                                ("reuse", (status, body))
                            }
                            49..59 => (
                                "confirm",
                                read(http::confirm(&app, confirm_request(&id)).await.unwrap()),
                            ),
                            59..79 => (
                                "extend",
                                read(http::extend_hold(&app, extend_request(&id)).await.unwrap()),
                            ),
                            _ => (
                                "cancel",
                                read(http::cancel(&app, cancel_request(&id)).await.unwrap()),
                            ),
                        }
                    };
                    let reason = body["reason"].as_str().unwrap_or("");
                    // Mostly forget a hold once it is over, so that the
                    // calls go on meeting live holds.
                    let over = (op == "cancel" && status == 200) || reason == "hold_expired";
                    if over && rng.random_bool(0.8) {
                        mine.swap_remove(pick);
                    }
                    *seen.entry(format!("{op} {status} {reason}")).or_default() += 1;
                }
                seen
            })
        })
        .collect();
    // Two sweepers: a run that outlasts its schedule overlaps the next.
    let sweeps: Vec<_> = sweepers
        .into_iter()
        .map(|sweeper| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let mut total = (0u64, 0u64, 0u64); // runs, reclaimed, repaired
                while Instant::now() < deadline {
                    let report = sweeper
                        .booking
                        .sweep(SweepLimits {
                            max_due: 100,
                            sample: 100,
                            budget: Duration::from_secs(8),
                        })
                        .await
                        .expect("sweep");
                    total = (
                        total.0 + 1,
                        total.1 + report.reclaimed,
                        total.2 + report.repaired,
                    );
                }
                total
            })
        })
        .collect();
    let mut checks = 0;
    let mut broken = Vec::new();
    while Instant::now() < deadline {
        broken.extend(db.counter_checks().await.iter().filter_map(|c| c.broken()));
        checks += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for worker in join_all(workers).await {
        for (outcome, n) in worker.unwrap() {
            *outcomes.entry(outcome).or_default() += n;
        }
    }
    let (mut runs, mut reclaimed, mut repaired) = (0, 0, 0);
    for sweep in join_all(sweeps).await {
        let (r, n, m) = sweep.unwrap();
        (runs, reclaimed, repaired) = (runs + r, reclaimed + n, repaired + m);
    }
    println!(
        "outcomes {outcomes:?}; sweeps {runs}, reclaimed {reclaimed}, repaired {repaired}; \
         {checks} checks, {} broken",
        broken.len()
    );
    assert!(
        broken.is_empty(),
        "{} broken in {checks} checks, first: {:?}",
        broken.len(),
        &broken[..broken.len().min(5)]
    );
    assert_eq!(repaired, 0, "no counter drifted");
    // What each operation may answer in a correct run. A confirm of an
    // active hold always finds its seats (they are counted in `remaining`
    // already), so `capacity_exhausted` there would be an oversell.
    let allowed = [
        "hold 201 ",
        "hold 409 capacity_exhausted",
        "replay 200 ",
        "reuse 422 idempotency_key_reuse",
        "confirm 200 ",
        "confirm 409 hold_cancelled",
        "confirm 409 hold_expired",
        "extend 200 ",
        "extend 409 hold_confirmed",
        "extend 409 hold_cancelled",
        "extend 409 hold_expired",
        "extend 409 extension_limit_reached",
        "cancel 200 ",
    ];
    for outcome in outcomes.keys() {
        assert!(
            allowed.contains(&outcome.as_str()),
            "{outcome}: {outcomes:?}"
        );
    }
    for (outcome, least) in [
        ("hold 201 ", 50),
        ("hold 409 capacity_exhausted", 10),
        ("confirm 200 ", 10),
        ("extend 200 ", 10),
        ("cancel 200 ", 10),
    ] {
        assert!(
            outcomes.get(outcome).copied().unwrap_or(0) >= least,
            "{outcome} too rare: {outcomes:?}"
        );
    }
    assert!(
        reclaimed > 0 && runs > 10,
        "the sweeper worked: {runs} runs"
    );
    assert!(checks > 20);
    db.assert_invariants().await;
    db.assert_counters_exact("at the end").await;
    db.drop().await;
}
