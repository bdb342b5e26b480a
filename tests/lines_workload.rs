//! A randomized workload of everything that inserts holds at once: capped
//! clients near their caps, waiting lines that cancels, expiries and
//! raised capacities feed with offers, moves, an admin's PATCHes of
//! capacity, and sweepers (docs/DESIGN.md, "The implicit locks"). Every
//! answer is below 500, and a monitor's consistent snapshots find no
//! client over its cap and no slot oversold; afterwards the counters and
//! the lines are exact. `LINES_WORKLOAD_SECS` (default 8) runs it longer.

use serde_json::{Value, json};
use shared::booking::SweepLimits;
use shared::clients::{Needs, Role};
use shared::config::AuthMode;
use shared::domain::SlotId;
use shared::{App, http};
use slot_booking_tests::caps::{capped_hold, snapshot_broken};
use slot_booking_tests::keys::{TestClient, authorized};
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const CAPS: [u32; 4] = [3, 4, 0, 0];

fn run_for() -> Duration {
    let secs = std::env::var("LINES_WORKLOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    Duration::from_secs(secs)
}

/// An environment in api-key mode whose holds last `ttl`, knowing `who`.
async fn environment(db: &TestDb, ttl: Duration, who: &[&TestClient]) -> App {
    let mut config = db.config(ttl);
    config.access.mode = AuthMode::ApiKey;
    let app = App::new(config).expect("app");
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    for client in who {
        app.gate
            .identify(Some(&client.bearer()), Needs::Booker, until)
            .await
            .expect("known key");
    }
    app
}

/// One booker's random operations until `deadline`: its outcomes, by
/// operation, status and reason.
async fn booker(
    app: App,
    client: TestClient,
    slots: Arc<Vec<SlotId>>,
    deadline: Instant,
) -> BTreeMap<String, u64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
    let mut mine: Vec<String> = Vec::new();
    let mut seen = BTreeMap::new();
    let bearer = client.bearer();
    while Instant::now() < deadline {
        let roll = rng.random_range(0..100);
        let slot = slots[rng.random_range(0..slots.len())];
        let (op, status, body) = if roll < 40 || mine.is_empty() {
            let q = rng.random_range(1..=2);
            let (status, body, _) = capped_hold(&app, &client, slot, new_key().as_str(), q).await;
            if status == 201 {
                mine.push(id_of(&body));
            }
            if status == 409 && body["reason"] == "capacity_exhausted" && rng.random_bool(0.5) {
                // Full: now and then, wait in its line instead.
                let request = join_request(
                    &slot.0.to_string(),
                    new_key().as_str(),
                    &format!(r#"{{"quantity": {q}}}"#),
                );
                let answer = http::join_waitlist(&app, authorized(request, Some(&bearer))).await;
                let (status, body) = read(answer.unwrap());
                ("join", status, body)
            } else {
                ("hold", status, body)
            }
        } else {
            let id = mine.swap_remove(rng.random_range(0..mine.len()));
            let (op, request) = match roll {
                40..50 => ("confirm", confirm_request(&id)),
                50..58 => ("extend", extend_request(&id)),
                58..70 => (
                    "move",
                    move_request(&id, &json!({ "slot_id": slot.0 }).to_string()),
                ),
                _ => ("cancel", cancel_request(&id)),
            };
            let request = authorized(request, Some(&bearer));
            let answer = match op {
                "confirm" => http::confirm(&app, request).await,
                "extend" => http::extend_hold(&app, request).await,
                "move" => http::move_hold(&app, request).await,
                _ => http::cancel(&app, request).await,
            };
            let (status, body) = read(answer.unwrap());
            if matches!(op, "confirm" | "extend" | "move") && status == 200 {
                mine.push(id);
            }
            (op, status, body)
        };
        let reason = body["reason"].as_str().unwrap_or("");
        assert!(status < 500, "{op}: {status} {body}");
        *seen.entry(format!("{op} {status} {reason}")).or_default() += 1;
    }
    seen
}

/// The admin's PATCHes of capacity (1 to 4 seats) until `deadline`.
async fn admin(
    app: App,
    who: TestClient,
    slots: Arc<Vec<SlotId>>,
    deadline: Instant,
) -> BTreeMap<String, u64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
    let mut seen = BTreeMap::new();
    while Instant::now() < deadline {
        let slot = slots[rng.random_range(0..slots.len())];
        let body = json!({ "capacity": rng.random_range(1..=4) });
        let (status, answer): (u16, Value) = slots::patch(&app, &who, slot.0, &body).await;
        let reason = answer["reason"].as_str().unwrap_or("");
        assert!(status < 500, "patch: {status} {answer}");
        *seen.entry(format!("patch {status} {reason}")).or_default() += 1;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn capped_holds_offers_moves_patches_and_sweeps_answer_no_5xx_and_break_nothing() {
    let db = TestDb::new().await;
    let mut clients = Vec::new();
    for (i, cap) in CAPS.iter().enumerate() {
        let client = db.client(&format!("booker-{i}"), Role::Booker, None).await;
        if *cap > 0 {
            slot_booking_tests::caps::set_cap(&db, &client, *cap).await;
        }
        clients.push(client);
    }
    let root = db.client("slot-admin", Role::Admin, None).await;
    // Two small slots, where lines form, and four with room, where capped
    // clients near their caps count their seats under their rows' locks
    // while the small slots' cancels offer them seats.
    let mut small = Vec::new();
    for _ in 0..2 {
        small.push(db.insert_slot(2).await);
    }
    let mut slots = small.clone();
    for _ in 0..4 {
        slots.push(db.insert_slot(30).await);
    }
    let (slots, small) = (Arc::new(slots), Arc::new(small));
    let deadline = Instant::now() + run_for();
    let mut workers = Vec::new();
    for i in 0..24u64 {
        let client = clients[i as usize % clients.len()].clone();
        let ttl = Duration::from_millis(300 + 50 * i);
        let app = environment(&db, ttl, &[&client]).await;
        warm(&app).await;
        workers.push(tokio::spawn(booker(app, client, slots.clone(), deadline)));
    }
    let patcher = environment(&db, Duration::from_secs(300), &[]).await;
    workers.push(tokio::spawn(admin(patcher, root, small, deadline)));
    let sweeps: Vec<_> = (0..2)
        .map(|_| {
            let sweeper = db.app();
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    let limits = SweepLimits {
                        max_due: 100,
                        sample: 100,
                        budget: Duration::from_secs(8),
                    };
                    sweeper.booking.sweep(limits).await.expect("sweep");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        })
        .collect();
    let mut checks = 0;
    let mut broken = Vec::new();
    while Instant::now() < deadline {
        broken.extend(snapshot_broken(&db, &clients, &CAPS).await);
        checks += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for worker in futures::future::join_all(workers).await {
        for (outcome, n) in worker.unwrap() {
            *outcomes.entry(outcome).or_default() += n;
        }
    }
    for sweep in sweeps {
        sweep.await.unwrap();
    }
    broken.extend(snapshot_broken(&db, &clients, &CAPS).await);
    eprintln!("{checks} snapshot checks; {outcomes:?}");
    assert!(broken.is_empty(), "{broken:?} ({checks} checks)");
    for wanted in [
        "join 201",
        "hold 409 hold_limit_reached",
        "move 200",
        "patch 200",
    ] {
        assert!(
            outcomes.keys().any(|o| o.starts_with(wanted)),
            "the workload reached {wanted}: {outcomes:?}"
        );
    }
    db.assert_counters_exact("after the workload").await;
    db.assert_lines().await;
    db.drop().await;
}
