//! The per-client cap (SPEC §16) in a recorded history: capped clients,
//! each with two callers of its own released together, holding on four
//! small slots with holds that expire within a second. Every slot's
//! sub-history must be linearizable, a `409 hold_limit_reached` counting as
//! a hold the slot would have granted that changed nothing, and every
//! client's answers must fit its cap at some instant of their calls
//! (`support/history/caps.rs`): never created over it, never refused
//! under it.

use rand::Rng;
use shared::clients::Role;
use shared::config::{Access, AuthMode, HoldRules};
use shared::{App, Config};
use slot_booking_tests::caps::set_cap;
use slot_booking_tests::history::capped::{self, Holds};
use slot_booking_tests::history::{Capped, Recorder, Rules, check, check_caps, outcomes};
use slot_booking_tests::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

const CAPS: [u32; 3] = [1, 2, 3];
const CALLERS_EACH: usize = 2;
const CALLS_EACH: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn capped_clients_histories_fit_their_slots_and_their_caps() {
    let db = TestDb::new().await;
    let ttl = Duration::from_millis(rand::rng().random_range(300..=800));
    let lifetime = ttl + ttl / 4;
    let mut capacities = BTreeMap::new();
    for capacity in [4, 6, 6, 4] {
        capacities.insert(db.insert_slot(capacity).await.0, capacity);
    }
    let slots = Arc::new(capacities.keys().copied().collect::<Vec<_>>());
    let rec = Recorder::new();
    let app = || {
        App::new(Config {
            access: Access {
                mode: AuthMode::ApiKey,
                ..Access::default()
            },
            holds: HoldRules {
                max_lifetime: lifetime,
                // The checker models SPEC §16's cap over holds alone; the
                // callers cancel bookings, which SPEC §23.8 would count
                // for a day (tests/client_cancels.rs): off here.
                cancel_window: Duration::ZERO,
                ..HoldRules::default()
            },
            ..db.config(ttl)
        })
        .expect("app")
    };
    let mut clients = Vec::new();
    let mut callers = Vec::new();
    for (n, cap) in CAPS.iter().enumerate() {
        let client = db.client(&format!("capped-{n}"), Role::Booker, None).await;
        set_cap(&db, &client, *cap).await;
        let holds = Holds::default();
        let mut mine = BTreeSet::new();
        for _ in 0..CALLERS_EACH {
            let caller = callers.len();
            mine.insert(caller);
            let app = app();
            warm(&app).await;
            callers.push((caller, client.clone(), app, holds.clone()));
        }
        clients.push(Capped {
            cap: *cap,
            callers: mine,
        });
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(callers.len()));
    let tasks: Vec<_> = callers
        .into_iter()
        .map(|(caller, client, app, holds)| {
            let (slots, rec, barrier) = (slots.clone(), rec.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                capped::caller(caller, client, app, slots, holds, rec, CALLS_EACH).await;
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("caller");
    }
    let history = rec.history();
    let report = check(&history, &capacities, Rules::new(ttl, lifetime));
    let caps = check_caps(&history, &clients);
    let outcomes = outcomes(&history);
    println!("hold ttl {ttl:?}; history: {report}");
    println!("outcomes: {outcomes:?}");
    assert!(report.linearizable(), "{report}");
    if let Err(why) = caps {
        panic!("{why}");
    }
    for needed in ["hold 201 ", "hold 409 hold_limit_reached", "confirm 200 "] {
        assert!(
            outcomes.contains_key(needed),
            "the workload did no {needed:?}: {outcomes:?}"
        );
    }
    // Holds expired during the run, giving their clients' allowance back:
    // still held past their expiry, or cancelled only after it.
    let expired: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM holds WHERE expires_at <= UTC_TIMESTAMP(6) \
         AND (status = 'held' OR (status = 'cancelled' AND cancelled_at > expires_at))",
    )
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert!(expired > 0, "no hold expired during the run: {outcomes:?}");
    db.assert_invariants().await;
    db.drop().await;
}
