//! SPEC §12's races, through the handlers against the real database: the
//! out-of-order commit (an event allocated first and committed last), and
//! eight writers racing a poller that follows `next`.

use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use shared::events::EVENT_INSERT;
use shared::{App, http};
use slot_booking_tests::events::Follower;
use slot_booking_tests::*;
use sqlx::Connection;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

#[tokio::test]
async fn an_event_allocated_first_and_committed_last_is_served_once_after_the_later_one() {
    let db = TestDb::new().await;
    let app = db.app_with_rules(
        AuthMode::Open,
        Duration::from_secs(300),
        HoldRules::default(),
    );
    let admin = db.client("admin", Role::Admin, None).await;
    let slot = db.insert_slot(5).await;
    let mut follower = Follower::new();
    follower.poll(&app, &admin).await;

    // Writer A allocates its event's id and stays open.
    let mut a = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let mut open = a.begin().await.unwrap();
    let early = sqlx::query(EVENT_INSERT)
        .bind("slot.updated")
        .bind(None::<u64>)
        .bind(slot.0)
        .bind(None::<u64>)
        .bind(None::<chrono::NaiveDateTime>)
        .bind(r#"{"writer":"A"}"#)
        .execute(&mut *open)
        .await
        .unwrap()
        .last_insert_id();
    // Writer B allocates later and commits first: a real hold.
    let (status, late) = slot_booking_tests::slots::hold(&app, slot.0, 1).await;
    assert_eq!(status, 201, "{late}");
    let started = Instant::now();
    assert_eq!(follower.poll(&app, &admin).await, 1, "B, while A is open");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the poll never waits for A"
    );
    let b = follower.seen[0]["id"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();
    assert!(early < b, "A allocated first ({early} < {b})");
    assert_eq!(follower.poll(&app, &admin).await, 0);
    open.commit().await.unwrap();
    assert_eq!(follower.poll(&app, &admin).await, 1, "A, after its commit");
    assert_eq!(follower.poll(&app, &admin).await, 0);
    let order: Vec<u64> = follower
        .seen
        .iter()
        .map(|e| e["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(order, [b, early], "each once, in commit order");
    db.drop().await;
}

/// What one writer's 2xx answers changed, in its order: (hold id, type).
type Changes = Vec<(u64, &'static str)>;

async fn write_for(app: App, i: usize, slots: Vec<u64>, until: Instant) -> Changes {
    let mut changes = Changes::new();
    let mut n = 0usize;
    while Instant::now() < until {
        n += 1;
        let slot = slots[(i + n) % slots.len()];
        let (status, body) = slot_booking_tests::slots::hold(&app, slot, 1 + (n % 2) as u32).await;
        if status != 201 {
            assert_eq!(status, 409, "{body}");
            continue;
        }
        let id = id_of(&body);
        let hold_id: u64 = id.parse().unwrap();
        changes.push((hold_id, "hold.created"));
        let steps: &[(&str, &'static str)] = match n % 4 {
            0 => &[("confirm", "hold.confirmed")],
            1 => &[("extend", "hold.extended"), ("cancel", "hold.cancelled")],
            2 => &[("confirm", "hold.confirmed"), ("cancel", "hold.cancelled")],
            _ => &[],
        };
        for (route, kind) in steps {
            let request = match *route {
                "confirm" => confirm_request(&id),
                "extend" => extend_request(&id),
                _ => cancel_request(&id),
            };
            let response = match *route {
                "confirm" => http::confirm(&app, request).await,
                "extend" => http::extend_hold(&app, request).await,
                _ => http::cancel(&app, request).await,
            };
            let (status, body) = read(response.expect("handled"));
            if status == 200 {
                changes.push((hold_id, kind));
            } else {
                assert_eq!(status, 409, "{body}");
                break;
            }
        }
    }
    changes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_writers_and_a_poller_see_every_change_once_each_holds_in_order() {
    let db = TestDb::new().await;
    let admin = db.client("admin", Role::Admin, None).await;
    // Room for most holds, and one small slot where claims race and lose.
    let mut slots = Vec::new();
    for capacity in [500, 500, 500, 3] {
        slots.push(db.insert_slot(capacity).await.0);
    }
    let apps = db.warm_apps(8, Duration::from_secs(300)).await;
    let poller_app = db.app_with_hold_ttl(Duration::from_secs(300));
    let until = Instant::now() + Duration::from_secs(4);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let done = done.clone();
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut follower = Follower::new();
            let mut polls = 0u32;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                follower.poll(&poller_app, &admin).await;
                polls += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Everything has committed: poll until nothing is new twice.
            let mut quiet = 0;
            while quiet < 2 {
                quiet = if follower.poll(&poller_app, &admin).await == 0 {
                    quiet + 1
                } else {
                    0
                };
            }
            (follower.seen, polls)
        })
    };
    let writes = together(apps, {
        let slots = slots.clone();
        move |i, app| write_for(app, i, slots.clone(), until)
    })
    .await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (seen, polls) = poller.await.unwrap();

    let mut expected: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for change in writes.iter().flatten() {
        expected.entry(change.0).or_default().push(change.1);
    }
    let total: usize = expected.values().map(Vec::len).sum();
    assert!(
        total > 200 && polls > 10,
        "a real race: {total} changes, {polls} polls"
    );
    let ids: HashSet<&str> = seen.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), seen.len(), "no event twice");
    let mut got: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for event in &seen {
        let kind = event["type"].as_str().unwrap();
        assert!(kind.starts_with("hold."), "{event}");
        got.entry(event["data"]["id"].as_u64().unwrap())
            .or_default()
            .push(kind);
    }
    assert_eq!(seen.len(), total, "every 2xx change, once");
    assert_eq!(
        got, expected,
        "each hold's events, in the order they happened"
    );
    db.assert_invariants().await;
    db.drop().await;
}
