//! SPEC §16's per-client cap under a randomized workload: several capped
//! clients holding, extending, confirming and cancelling on several slots
//! while sweepers run, checked in consistent snapshots as it runs.

use shared::clients::Needs;
use shared::http;
use slot_booking_tests::caps::*;
use slot_booking_tests::keys::authorized;
use slot_booking_tests::*;
use std::collections::BTreeMap;
use std::time::Duration;

/// Three capped clients, four callers each (each its own environment,
/// holds of 100–650 ms that expire under the workload), holding 1–3 seats
/// on five slots, extending, confirming and cancelling, while two sweepers
/// run. A monitor opens a consistent snapshot, reads its `now` after it,
/// and checks in that one state: no client above its cap, no slot with
/// more seats held and confirmed than its capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_randomized_workload_of_capped_clients_never_takes_one_over_its_cap() {
    use rand::{Rng, SeedableRng};
    let db = TestDb::new().await;
    let caps = [4u32, 6, 9];
    let mut clients = Vec::new();
    for (i, cap) in caps.iter().enumerate() {
        clients.push(capped_client(&db, &format!("busy-{i}"), *cap).await);
    }
    let mut slots = Vec::new();
    // Room for the confirmed seats of the whole run: the caps, not the
    // slots, are what runs out.
    for _ in 0..5 {
        slots.push(db.insert_slot(100).await);
    }
    let slots = std::sync::Arc::new(slots);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut apps = Vec::new();
    for i in 0..12u64 {
        let app = db.app_with_hold_ttl(Duration::from_millis(100 + 50 * i));
        let bearer = clients[i as usize % 3].bearer();
        let until = tokio::time::Instant::now() + Duration::from_secs(5);
        app.gate
            .identify(Some(&bearer), Needs::Booker, until)
            .await
            .expect("known key");
        apps.push(app);
    }
    let sweepers = [db.app(), db.app()];
    for sweeper in &sweepers {
        warm(sweeper).await;
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(apps.len() + sweepers.len()));
    let workers: Vec<_> = apps
        .into_iter()
        .enumerate()
        .map(|(i, app)| {
            let (client, slots, barrier) = (clients[i % 3].clone(), slots.clone(), barrier.clone());
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
                let mut mine: Vec<String> = Vec::new();
                let mut seen: BTreeMap<String, u64> = BTreeMap::new();
                let bearer = client.bearer();
                barrier.wait().await;
                while tokio::time::Instant::now() < deadline {
                    let roll = rng.random_range(0..100);
                    let (op, (status, body)) = if roll < 50 || mine.is_empty() {
                        let slot = slots[rng.random_range(0..slots.len())];
                        let q = rng.random_range(1..=3);
                        let (status, body, _) =
                            capped_hold(&app, &client, slot, new_key().as_str(), q).await;
                        if status == 201 {
                            mine.push(id_of(&body));
                        }
                        ("hold", (status, body))
                    } else {
                        let id = mine.swap_remove(rng.random_range(0..mine.len()));
                        let (op, request) = match roll {
                            50..65 => ("confirm", confirm_request(&id)),
                            65..85 => ("extend", extend_request(&id)),
                            _ => ("cancel", cancel_request(&id)),
                        };
                        let request = authorized(request, Some(&bearer));
                        let answer = match op {
                            "confirm" => http::confirm(&app, request).await,
                            "extend" => http::extend_hold(&app, request).await,
                            _ => http::cancel(&app, request).await,
                        };
                        let (status, body) = read(answer.unwrap());
                        if op == "extend" && status == 200 {
                            mine.push(id);
                        }
                        (op, (status, body))
                    };
                    let reason = body["reason"].as_str().unwrap_or("");
                    assert!(status < 500, "{op}: {status} {body}");
                    *seen.entry(format!("{op} {status} {reason}")).or_default() += 1;
                }
                seen
            })
        })
        .collect();
    let sweeps: Vec<_> = sweepers
        .into_iter()
        .map(|sweeper| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                while tokio::time::Instant::now() < deadline {
                    sweeper
                        .booking
                        .sweep(shared::booking::SweepLimits {
                            max_due: 100,
                            sample: 100,
                            budget: Duration::from_secs(8),
                        })
                        .await
                        .expect("sweep");
                }
            })
        })
        .collect();
    let mut checks = 0;
    let mut broken = Vec::new();
    while tokio::time::Instant::now() < deadline {
        broken.extend(snapshot_broken(&db, &clients, &caps).await);
        checks += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
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
    broken.extend(snapshot_broken(&db, &clients, &caps).await);
    assert!(broken.is_empty(), "{broken:?} ({checks} checks)");
    eprintln!("{checks} snapshot checks; {outcomes:?}");
    assert!(
        outcomes
            .keys()
            .any(|o| o.starts_with("hold 409 hold_limit_reached")),
        "the caps were reached: {outcomes:?}"
    );
    db.assert_counters_exact("after the workload").await;
    db.drop().await;
}
