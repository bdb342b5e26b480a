//! A capacity cut and a delete racing holds and confirms (SPEC §10): truly
//! parallel callers, each on its own connection, released together behind
//! a barrier, several rounds; every invariant is checked after each.

use serde_json::json;
use shared::clients::Role;
use shared::http;
use slot_booking_tests::slots::*;
use slot_booking_tests::*;
use std::time::Duration;

/// A capacity cut racing 20 callers who hold and confirm, each on its own
/// connection, released together; several rounds. Whichever wins, every
/// invariant holds and the counters equal the sums over the holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_capacity_cut_racing_holds_and_confirms_keeps_every_invariant() {
    let db = TestDb::new().await;
    let admin = db.client("slot-admin", Role::Admin, None).await;
    for round in 0..5u32 {
        let slot = db.insert_slot(24).await;
        // Some seats already committed before the race.
        let warmup = db.app();
        hold_and_confirm(&warmup, slot).await;
        let (status, _) = hold(&warmup, slot.0, 2).await;
        assert_eq!(status, 201);
        let cut = 6 + 2 * round;
        let apps = db.warm_apps(21, Duration::from_secs(300)).await;
        let racer = admin.clone();
        let outcomes = together(apps, move |i, app| {
            let admin = racer.clone();
            async move {
                if i == 20 {
                    let (status, body) =
                        patch(&app, &admin, slot.0, &json!({ "capacity": cut })).await;
                    if status == 200 {
                        assert_ledger(
                            &body,
                            u64::from(cut),
                            body["confirmed"].as_u64().unwrap(),
                            body["held"].as_u64().unwrap(),
                        );
                    }
                    return format!("cut {}", outcome(status, &body));
                }
                let (status, held) = hold(&app, slot.0, 1 + (i % 2) as u32).await;
                if status != 201 {
                    return format!("hold {}", outcome(status, &held));
                }
                let request = confirm_request(&id_of(&held));
                let (status, body) = read(http::confirm(&app, request).await.unwrap());
                format!("confirm {}", outcome(status, &body))
            }
        })
        .await;
        for outcome in &outcomes {
            assert!(
                [
                    "cut 200 ",
                    "cut 409 capacity_below_committed",
                    "hold 409 capacity_exhausted",
                    "confirm 200 ",
                    "confirm 409 capacity_exhausted",
                ]
                .contains(&outcome.as_str()),
                "round {round}: unexpected {outcome}"
            );
        }
        db.assert_invariants().await;
        db.assert_counters_exact(&format!("round {round}")).await;
        let (capacity, remaining) = db.slot(slot).await;
        let held: u32 = sqlx::query_scalar("SELECT held FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&db.admin)
            .await
            .unwrap();
        assert!(
            remaining >= held,
            "round {round}: remaining {remaining} < held {held}"
        );
        let cut_won = outcomes.contains(&"cut 200 ".to_string());
        assert_eq!(
            capacity,
            if cut_won { cut } else { 24 },
            "round {round}: {outcomes:?}"
        );
        let (status, read_back) = get(&db.app(), Some(&admin), &slot.0.to_string()).await;
        assert_eq!(status, 200);
        let confirmed = db.seats(slot, "status = 'confirmed'").await as u64;
        let active = db.active_seats(slot).await as u64;
        assert_ledger(&read_back, u64::from(capacity), confirmed, active);
    }
    db.drop().await;
}

/// A delete racing 20 holds on separate connections: either the delete
/// wins (every hold then finds no slot: 404) or a hold wins (the delete is
/// refused), never a hold on a deleted slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_racing_holds_never_leaves_a_hold_on_a_deleted_slot() {
    let db = TestDb::new().await;
    let admin = db.client("slot-admin", Role::Admin, None).await;
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..6 {
        let slot = db.insert_slot(20).await;
        let apps = db.warm_apps(21, Duration::from_secs(300)).await;
        let admin = admin.clone();
        let outcomes = together(apps, move |i, app| {
            let admin = admin.clone();
            async move {
                if i == 0 {
                    let (status, body) = delete(&app, &admin, slot.0).await;
                    return format!("delete {}", outcome(status, &body));
                }
                let (status, body) = hold(&app, slot.0, 1).await;
                format!("hold {}", outcome(status, &body))
            }
        })
        .await;
        let holds_made = outcomes.iter().filter(|o| *o == "hold 201 ").count();
        let rows = db.count_holds(slot, "TRUE").await;
        let exists = slot_exists(&db, slot).await;
        match outcomes[0].as_str() {
            "delete 200 " => {
                assert_eq!(
                    (holds_made, rows, exists),
                    (0, 0, false),
                    "round {round}: {outcomes:?}"
                );
                for outcome in &outcomes[1..] {
                    assert_eq!(outcome, "hold 404 not_found", "round {round}");
                }
            }
            "delete 409 slot_has_bookings" => {
                assert!(holds_made > 0 && exists, "round {round}: {outcomes:?}");
                assert_eq!(rows as usize, holds_made);
            }
            other => panic!("round {round}: the delete answered {other}"),
        }
        seen.insert(outcomes[0].clone());
        db.assert_invariants().await;
        db.assert_counters_exact(&format!("round {round}")).await;
    }
    eprintln!("delete outcomes seen: {seen:?}");
    db.drop().await;
}

/// `slots.updated_at` never moves back: a claim fixes its statement's now
/// before it waits for the slot's lock, and a PATCH that committed during
/// that wait wrote a later time (its statement came after the lock). The
/// claim must not write its older now over it, or the slot resource reads
/// older than its own `slot.updated` event.
///
/// Driven deterministically: the test holds the slot's lock; the PATCH
/// queues first, then the hold's claim (its now fixed); the lock is
/// released: the PATCH commits, then the claim writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_behind_a_patch_never_moves_updated_at_back() {
    let db = TestDb::new().await;
    let admin = db.client("slot-admin", Role::Admin, None).await;
    let slot = db.insert_slot(4).await;
    let apps = db.warm_apps(2, Duration::from_secs(300)).await;
    let lock = locks::SlotLock::take(&db, slot).await;
    let patched = tokio::spawn({
        let app = apps[0].clone();
        async move { patch(&app, &admin, slot.0, &json!({ "capacity": 5 })).await }
    });
    db.wait_for_lock_waiters(1).await;
    let held = tokio::spawn({
        let app = apps[1].clone();
        async move { hold(&app, slot.0, 1).await }
    });
    db.wait_for_lock_waiters(2).await;
    // The PATCH's now, taken after the lock, is then clearly later.
    tokio::time::sleep(Duration::from_millis(50)).await;
    lock.release().await;
    let (patched, held) = (patched.await.unwrap(), held.await.unwrap());
    assert_eq!(patched.0, 200, "{}", patched.1);
    assert_eq!(held.0, 201, "{}", held.1);
    let (_, now) = get(&apps[0], None, &slot.0.to_string()).await;
    let patched_at = patched.1["updated_at"].as_str().unwrap().to_string();
    let stored_at = now["updated_at"].as_str().unwrap().to_string();
    assert!(
        stored_at >= patched_at,
        "updated_at moved back from the PATCH's {patched_at} to {stored_at}"
    );
    db.assert_invariants().await;
    db.drop().await;
}
