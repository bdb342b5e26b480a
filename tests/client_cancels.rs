//! Bookings a client cancels count against its cap (SPEC §23.8, changing
//! §16): holding, confirming and cancelling in a loop is refused at the
//! cap until `CLIENT_CANCEL_WINDOW` has passed since each cancellation, by
//! the database's clock; a window of 0 turns it off; an admin's cancel of
//! a client's booking does not count against it; a hold that arrives
//! while such a cancel commits waits for it and counts it; parallel holds
//! racing the cancels never take the client over its cap; the hoarding
//! report names the cancellations.

use shared::App;
use shared::booking::{ClientExpired, Hoarding};
use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::caps::*;
use slot_booking_tests::keys::TestClient;
use slot_booking_tests::locks::EventsLock;
use slot_booking_tests::*;
use std::time::Duration;

async fn confirm(app: &App, client: &TestClient, id: &str) -> (u16, serde_json::Value) {
    read(
        http::confirm(app, client.by(confirm_request(id)))
            .await
            .unwrap(),
    )
}

async fn cancel(app: &App, client: &TestClient, id: &str) -> (u16, serde_json::Value) {
    read(
        http::cancel(app, client.by(cancel_request(id)))
            .await
            .unwrap(),
    )
}

/// A booking of `quantity` seats on `slot`: held, then confirmed.
async fn booking(app: &App, client: &TestClient, slot: SlotId, quantity: u32) -> String {
    let held = capped_hold(app, client, slot, new_key().as_str(), quantity).await;
    assert_eq!(held.0, 201, "{}", held.1);
    let id = id_of(&held.1);
    let confirmed = confirm(app, client, &id).await;
    assert_eq!(confirmed.0, 200, "{}", confirmed.1);
    id
}

/// Moves a cancellation's `counts_until` to `now + seconds` by the
/// database's clock, as the window passing (or an operator) would.
async fn counts_until(db: &TestDb, id: &str, seconds: i64) {
    sqlx::query(
        "UPDATE holds SET counts_until = UTC_TIMESTAMP(6) + INTERVAL ? SECOND WHERE id = ?",
    )
    .bind(seconds)
    .bind(id)
    .execute(&db.admin)
    .await
    .expect("move the window");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hold_confirm_cancel_in_a_loop_is_refused_at_the_cap_until_the_window_passes() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "looper", 2).await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let app = warm_apps_for(&db, 1, &client).await.remove(0);
    let first = booking(&app, &client, a, 2).await;
    let cancelled = cancel(&app, &client, &first).await;
    assert_eq!(cancelled.0, 200, "{}", cancelled.1);
    // Nothing is held, but the cancelled booking's 2 seats count.
    assert_eq!(client_seats(&db, &client).await, 0);
    let refused = capped_hold(&app, &client, b, new_key().as_str(), 1).await;
    assert_eq!(refused.0, 409, "{}", refused.1);
    assert_eq!(refused.1["reason"], "hold_limit_reached", "{}", refused.1);
    let message = refused.1["message"].as_str().unwrap();
    assert!(
        message.contains("at most 2 seats") && message.contains("has 2"),
        "{message}"
    );
    // A second before the window ends: still counted.
    counts_until(&db, &first, 1).await;
    let still = capped_hold(&app, &client, b, new_key().as_str(), 1).await;
    assert_eq!(still.1["reason"], "hold_limit_reached", "{}", still.1);
    // At its end, by the database's clock: no longer.
    counts_until(&db, &first, 0).await;
    let freed = capped_hold(&app, &client, b, new_key().as_str(), 2).await;
    assert_eq!(freed.0, 201, "the window passed: {}", freed.1);
    // And the loop again: the second booking's cancellation counts too.
    let second = id_of(&freed.1);
    assert_eq!(confirm(&app, &client, &second).await.0, 200);
    assert_eq!(cancel(&app, &client, &second).await.0, 200);
    let again = capped_hold(&app, &client, a, new_key().as_str(), 1).await;
    assert_eq!(again.1["reason"], "hold_limit_reached", "{}", again.1);
    db.assert_invariants().await;
    db.assert_counters_exact("after the loop").await;
    db.drop().await;
}

/// A cancel of a held (never confirmed) hold frees its seats at once, and
/// an admin's cancel of a client's booking is not the client's: neither
/// counts against the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_bookings_a_client_cancels_itself_count_against_its_cap() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "booker", 2).await;
    let admin = db.client("admin", Role::Admin, None).await;
    let slot = db.insert_slot(10).await;
    let app = warm_apps_for(&db, 1, &client).await.remove(0);
    let held = capped_hold(&app, &client, slot, new_key().as_str(), 2).await;
    assert_eq!(cancel(&app, &client, &id_of(&held.1)).await.0, 200);
    let booked = booking(&app, &client, slot, 2).await;
    let by_admin = cancel(&app, &admin, &booked).await;
    assert_eq!(by_admin.0, 200, "{}", by_admin.1);
    let next = capped_hold(&app, &client, slot, new_key().as_str(), 2).await;
    assert_eq!(
        next.0, 201,
        "nothing the client cancelled counts: {}",
        next.1
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_window_of_zero_lets_the_loop_run_and_still_reports_it() {
    let db = TestDb::new().await;
    sqlx::query("UPDATE sweep_reports SET reported_until = UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE")
        .execute(&db.admin)
        .await
        .unwrap();
    let client = capped_client(&db, "looper", 2).await;
    let slot = db.insert_slot(10).await;
    let rules = HoldRules {
        cancel_window: Duration::ZERO,
        ..HoldRules::default()
    };
    let app = db.app_with_rules(AuthMode::ApiKey, Duration::from_secs(300), rules);
    let mut cancelled = Vec::new();
    for _ in 0..3 {
        let id = booking(&app, &client, slot, 2).await;
        assert_eq!(cancel(&app, &client, &id).await.0, 200);
        cancelled.push(id);
    }
    // Settled, as the report wants its cancellations.
    for id in &cancelled {
        sqlx::query(
            "UPDATE holds SET cancelled_at = cancelled_at - INTERVAL 1 MINUTE WHERE id = ?",
        )
        .bind(id)
        .execute(&db.admin)
        .await
        .unwrap();
    }
    let report = app.booking.hoarding_report().await.expect("report");
    assert_eq!(
        (report.cancelled, report.cancelled_seats),
        (3, 6),
        "{report:?}"
    );
    db.drop().await;
}

/// The hoarding report counts each booking its own client cancelled once,
/// per client, most seats first, beside the expiries; a cancel of a held
/// hold and an admin's cancel of a client's booking are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_hoarding_report_counts_bookings_cancelled_by_their_clients_once() {
    let db = TestDb::new().await;
    sqlx::query("UPDATE sweep_reports SET reported_until = UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE")
        .execute(&db.admin)
        .await
        .unwrap();
    let a = capped_client(&db, "hoarder", 100).await;
    let b = capped_client(&db, "casual", 100).await;
    let admin = db.client("admin", Role::Admin, None).await;
    let slot = db.insert_slot(100).await;
    let app = warm_apps_for(&db, 1, &a).await.remove(0);
    let mut cancelled = Vec::new();
    for (client, quantity) in [(&a, 3), (&a, 4), (&b, 2)] {
        let id = booking(&app, client, slot, quantity).await;
        assert_eq!(cancel(&app, client, &id).await.0, 200);
        cancelled.push(id);
    }
    let held = capped_hold(&app, &a, slot, new_key().as_str(), 5).await;
    assert_eq!(cancel(&app, &a, &id_of(&held.1)).await.0, 200);
    let by_admin = booking(&app, &b, slot, 6).await;
    assert_eq!(cancel(&app, &admin, &by_admin).await.0, 200);
    for id in cancelled.iter().chain([&id_of(&held.1), &by_admin]) {
        sqlx::query(
            "UPDATE holds SET cancelled_at = cancelled_at - INTERVAL 1 MINUTE WHERE id = ?",
        )
        .bind(id)
        .execute(&db.admin)
        .await
        .unwrap();
    }
    let report = app.booking.hoarding_report().await.expect("report");
    assert_eq!(
        report,
        Hoarding {
            cancelled: 3,
            cancelled_seats: 9,
            top_cancelled: vec![
                ClientExpired {
                    client_id: a.id.0,
                    holds: 2,
                    seats: 7
                },
                ClientExpired {
                    client_id: b.id.0,
                    holds: 1,
                    seats: 2
                },
            ],
            ..Hoarding::default()
        }
    );
    let again = app.booking.hoarding_report().await.expect("report");
    assert_eq!(again, Hoarding::default(), "each cancellation once");
    db.drop().await;
}

/// A cancel of a booking has decided and written everything and waits
/// at its event (a slow disk), holding its locks. A hold of the same
/// client on another slot arrives: it must wait for the cancel and count
/// its seats, not read the booking as still confirmed and pass. Never 2
/// held plus 2 cancelled under a cap of 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_waits_for_a_cancel_of_a_booking_and_counts_it() {
    let db = TestDb::new().await;
    let client = capped_client(&db, "racer", 2).await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let mut apps = warm_apps_for(&db, 2, &client).await;
    let (canceller, holder) = (apps.remove(0), apps.remove(0));
    let booked = booking(&canceller, &client, a, 2).await;
    // The bound is exact again (nothing held): the hold's count decides.
    sqlx::query("UPDATE client_allowances SET held = 0 WHERE client_id = ?")
        .bind(client.id.0)
        .execute(&db.admin)
        .await
        .unwrap();

    let events = EventsLock::take(&db).await;
    let cancelling = tokio::spawn({
        let client = client.clone();
        async move { cancel(&canceller, &client, &booked).await }
    });
    db.wait_for_lock_waiters(1).await;
    let holding = tokio::spawn({
        let client = client.clone();
        async move { capped_hold(&holder, &client, b, new_key().as_str(), 2).await }
    });
    // It queues behind the cancel (or, were it not to, answers at once).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !holding.is_finished()
        && db.lock_waiters().await < 2
        && tokio::time::Instant::now() < deadline
    {}
    events.release().await;
    let (cancelled, held) = (cancelling.await.unwrap(), holding.await.unwrap());
    assert_eq!(cancelled.0, 200, "{}", cancelled.1);
    assert_eq!(held.0, 409, "the cancelled booking counts: {}", held.1);
    assert_eq!(held.1["reason"], "hold_limit_reached");
    db.drop().await;
}

/// One round: a client capped at `CAP` with `CAP` one-seat bookings; its
/// cancels of all of them and twice as many one-seat holds on four slots,
/// all released together from separate environments. The client's holds
/// and counted cancels take its allowance row in turn, and each reads its
/// now after that lock: ordered by those instants, the running count of
/// held plus cancelled seats is within the cap at every hold granted.
async fn holds_racing_cancels(db: &TestDb, round: usize) {
    const CAP: u32 = 4;
    let client = capped_client(db, &format!("racer-{round}"), CAP).await;
    let mut slots = Vec::new();
    for _ in 0..4 {
        slots.push(db.insert_slot(20).await);
    }
    let setup = warm_apps_for(db, 1, &client).await.remove(0);
    let mut bookings = Vec::new();
    for i in 0..CAP as usize {
        bookings.push(booking(&setup, &client, slots[i % 4], 1).await);
    }
    let callers = 3 * CAP as usize;
    let apps = warm_apps_for(db, callers, &client).await;
    let answers = together(apps, {
        let (client, slots) = (client.clone(), slots.clone());
        move |i, app| {
            let (client, slot) = (client.clone(), slots[i % 4]);
            let booked = bookings.get(i).cloned();
            async move {
                match booked {
                    Some(id) => ("cancel", cancel(&app, &client, &id).await),
                    None => {
                        let (status, body, _) =
                            capped_hold(&app, &client, slot, new_key().as_str(), 1).await;
                        ("hold", (status, body))
                    }
                }
            }
        }
    })
    .await;
    for (what, (status, body)) in &answers {
        match (*what, *status) {
            ("cancel", 200) | ("hold", 201) => {}
            ("hold", 409) => assert_eq!(body["reason"], "hold_limit_reached", "{body}"),
            _ => panic!("{what}: unexpected {status} {body}"),
        }
    }
    // Every hold granted and every counted cancel, in the order of the
    // instants read after the client's lock.
    let steps: Vec<(chrono::NaiveDateTime, String, i64)> = sqlx::query_as(
        "SELECT created_at, 'hold', CAST(quantity AS SIGNED) FROM holds \
         WHERE client_id = ? AND status = 'held' \
         UNION ALL SELECT cancelled_at, 'cancel', CAST(quantity AS SIGNED) FROM holds \
         WHERE client_id = ? AND counts_until IS NOT NULL ORDER BY 1",
    )
    .bind(client.id.0)
    .bind(client.id.0)
    .fetch_all(&db.admin)
    .await
    .unwrap();
    let mut counted = 0;
    for (at, what, quantity) in &steps {
        counted += quantity;
        if what == "hold" {
            assert!(
                counted <= i64::from(CAP),
                "round {round}: a hold at {at} took the client to {counted} over {CAP}: {steps:?}"
            );
        }
    }
    let granted = steps.iter().filter(|(_, w, _)| w == "hold").count();
    assert!(granted <= CAP as usize, "{steps:?}");
    db.assert_invariants().await;
    db.assert_counters_exact("after the race").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn parallel_holds_racing_cancels_of_bookings_never_take_a_client_over_its_cap() {
    let db = TestDb::new().await;
    for round in 0..4 {
        holds_racing_cancels(&db, round).await;
    }
    db.drop().await;
}
