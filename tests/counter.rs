//! The held-seats counter (docs/DESIGN.md) against the count-based oracle:
//! a slot driven through thousands of holds, confirms, cancels, expiries
//! and reclaims, checked after every single step.

use rand::{Rng, SeedableRng};
use shared::domain::{HoldId, SlotId};
use shared::http;
use slot_booking_tests::extend_request;
use slot_booking_tests::seats::hold_seats;
use slot_booking_tests::*;
use std::time::Duration;

/// `remaining − (seats of the holds matching ACTIVE_HOLD)` for one slot,
/// with the counter checked against its definition (in seats), in one
/// consistent snapshot judged at a time after it.
async fn oracle(db: &TestDb, slot: u64, step: usize) -> i64 {
    let mut tx = db
        .admin
        .begin_with("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .unwrap();
    let (held, counted, oracle): (u32, i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT s.held, \
         (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM holds h \
          WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > s.reclaimed_until), \
         CAST(s.remaining AS SIGNED) - (SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) \
          FROM holds WHERE slot_id = s.id AND {}) \
         FROM slots s WHERE s.id = ?",
        shared::booking::ACTIVE_HOLD
    )))
    .bind(slot)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(
        i64::from(held),
        counted,
        "step {step}: held must count the seats of unreclaimed held holds"
    );
    assert!(oracle >= 0, "step {step}: oversold ({oracle})");
    oracle
}

/// After every step: the bookable figure of the hold path's own query and
/// of the availability projection equal the oracle, and every invariant
/// holds. Holds expire while this runs (only freeing seats, nothing else
/// happens meanwhile), so each figure is bracketed by the oracle read just
/// before and just after it.
async fn check_against_oracle(db: &TestDb, app: &shared::App, slot: u64, step: usize) {
    let before = oracle(db, slot, step).await;
    let bookable = app
        .booking
        .bookable(SlotId(slot))
        .await
        .unwrap()
        .expect("slot");
    let listed = app.booking.availability().await.unwrap();
    let listed = listed
        .iter()
        .find(|s| s.slot_id == SlotId(slot))
        .unwrap()
        .remaining;
    let after = oracle(db, slot, step).await;
    assert!(
        (before..=after).contains(&bookable),
        "step {step}: the hold path's figure {bookable} is not the oracle's ({before}..={after})"
    );
    assert!(
        (before..=after).contains(&i64::from(listed)),
        "step {step}: the projection's figure {listed} is not the oracle's ({before}..={after})"
    );
    db.assert_invariants().await;
}

#[tokio::test]
async fn the_counter_matches_the_count_based_oracle_through_thousands_of_steps() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(4).await;
    let s = slot.0.to_string();
    // Holds that expire within a few steps, and holds that live.
    let brief = db.app_with_hold_ttl(Duration::from_millis(40));
    let lasting = db.app_with_hold_ttl(Duration::from_secs(300));
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5107);
    let mut holds: Vec<(String, String)> = Vec::new(); // (id, key)
    let mut tally = std::collections::BTreeMap::<String, usize>::new();
    for step in 0..2500 {
        let roll = rng.random_range(0..100);
        let (op, status) = if roll < 45 || holds.is_empty() {
            let app = if rng.random_bool(0.9) {
                &brief
            } else {
                &lasting
            };
            let key = new_key().to_string();
            let (status, body) = read(http::hold(app, hold_request(&s, Some(&key))).await.unwrap());
            if status == 201 {
                holds.push((id_of(&body), key));
            }
            ("hold", status)
        } else if roll < 55 {
            let (_, key) = &holds[rng.random_range(0..holds.len())];
            (
                "replay",
                read(
                    http::hold(&lasting, hold_request(&s, Some(key)))
                        .await
                        .unwrap(),
                )
                .0,
            )
        } else if roll < 63 {
            // Often the newest hold, so that brief holds get confirmed too.
            let pick = if rng.random_bool(0.5) {
                holds.len() - 1
            } else {
                rng.random_range(0..holds.len())
            };
            let (id, _) = &holds[pick];
            (
                "confirm",
                read(http::confirm(&lasting, confirm_request(id)).await.unwrap()).0,
            )
        } else if roll < 92 {
            let (id, _) = &holds[rng.random_range(0..holds.len())];
            (
                "cancel",
                read(http::cancel(&lasting, cancel_request(id)).await.unwrap()).0,
            )
        } else if roll < 97 {
            tokio::time::sleep(Duration::from_millis(rng.random_range(1..20))).await;
            ("wait", 0)
        } else {
            lasting.booking.reclaim_expired(100).await.unwrap();
            ("sweep", 0)
        };
        *tally.entry(format!("{op} {status}")).or_default() += 1;
        check_against_oracle(&db, &lasting, slot.0, step).await;
    }
    println!("{tally:?}");
    for expected in [
        "hold 201",
        "hold 409",
        "confirm 200",
        "confirm 409",
        "cancel 200",
    ] {
        assert!(
            tally.get(expected).copied().unwrap_or(0) > 20,
            "{expected} too rare: {tally:?}"
        );
    }
    db.drop().await;
}

/// The same walk in seats (SPEC §9): holds of 1–5 seats, replays with the
/// same and with another quantity, and extensions — by a brief TTL, by a
/// long one, and by a long one capped at 120 ms of lifetime (so that a
/// brief hold is stretched, then refused) — checked after every step.
#[tokio::test]
async fn the_counter_matches_the_oracle_in_seats_through_quantities_and_extensions() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(12).await;
    let s = slot.0.to_string();
    let brief = db.app_with_hold_ttl(Duration::from_millis(40));
    let lasting = db.app_with_hold_ttl(Duration::from_secs(300));
    let capped = db.app_with_lifetime(Duration::from_secs(300), Duration::from_millis(120));
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5108);
    let mut holds: Vec<(String, String, u32)> = Vec::new(); // (id, key, quantity)
    let mut tally = std::collections::BTreeMap::<String, usize>::new();
    for step in 0..2500 {
        let roll = rng.random_range(0..100);
        // Often the newest hold, so that brief holds get confirmed and
        // extended too.
        let pick = match holds.len() {
            0 => 0,
            n if rng.random_bool(0.5) => n - 1,
            n => rng.random_range(0..n),
        };
        let (op, status, reason) = if roll < 40 || holds.is_empty() {
            let app = if rng.random_bool(0.85) {
                &brief
            } else {
                &lasting
            };
            let (key, quantity) = (new_key().to_string(), rng.random_range(1..=5));
            let (status, body, _) = hold_seats(app, &s, &key, quantity).await;
            if status == 201 {
                assert_eq!(body["quantity"], quantity, "step {step}");
                holds.push((id_of(&body), key, quantity));
            }
            ("hold", status, body)
        } else if roll < 47 {
            let (id, key, quantity) = &holds[pick];
            let (status, body, replayed) = hold_seats(&lasting, &s, key, *quantity).await;
            assert!(
                status == 200 && replayed && id_of(&body) == *id,
                "step {step}: a replay answers its hold: {status} {body}"
            );
            ("replay", status, body)
        } else if roll < 50 {
            let (_, key, quantity) = &holds[pick];
            let (status, body, _) = hold_seats(&lasting, &s, key, quantity % 5 + 1).await;
            assert_eq!(status, 422, "step {step}: another quantity: {body}");
            ("reuse", status, body)
        } else if roll < 60 {
            let (status, body) = read(
                http::confirm(&lasting, confirm_request(&holds[pick].0))
                    .await
                    .unwrap(),
            );
            ("confirm", status, body)
        } else if roll < 77 {
            let app = match rng.random_range(0..3) {
                0 => &brief,
                1 => &lasting,
                _ => &capped,
            };
            let (status, body) = read(
                http::extend_hold(app, extend_request(&holds[pick].0))
                    .await
                    .unwrap(),
            );
            ("extend", status, body)
        } else if roll < 88 {
            let (status, body) = read(
                http::cancel(&lasting, cancel_request(&holds[pick].0))
                    .await
                    .unwrap(),
            );
            // Mostly forget a cancelled hold: the walk goes on meeting
            // live ones.
            if status == 200 && rng.random_bool(0.7) {
                holds.swap_remove(pick);
            }
            ("cancel", status, body)
        } else if roll < 96 {
            tokio::time::sleep(Duration::from_millis(rng.random_range(1..20))).await;
            ("wait", 0, serde_json::Value::Null)
        } else {
            lasting.booking.reclaim_expired(100).await.unwrap();
            ("sweep", 0, serde_json::Value::Null)
        };
        let reason = reason["reason"].as_str().unwrap_or("");
        *tally.entry(format!("{op} {status} {reason}")).or_default() += 1;
        check_against_oracle(&db, &lasting, slot.0, step).await;
    }
    println!("{tally:?}");
    for (expected, least) in [
        ("hold 201 ", 100),
        ("hold 409 capacity_exhausted", 100),
        ("confirm 200 ", 20),
        ("confirm 409 hold_expired", 5),
        ("cancel 200 ", 20),
        ("extend 200 ", 20),
        ("extend 409 hold_expired", 5),
        ("extend 409 extension_limit_reached", 5),
    ] {
        assert!(
            tally.get(expected).copied().unwrap_or(0) >= least,
            "{expected} too rare: {tally:?}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn the_sweeper_gives_expired_seats_back_without_changing_what_is_bookable() {
    let db = TestDb::new().await;
    let app = db.app_with_hold_ttl(Duration::from_millis(50));
    let mut slots = Vec::new();
    for _ in 0..3 {
        let slot = db.insert_slot(3).await;
        for _ in 0..3 {
            let key = new_key().to_string();
            let request = hold_request(&slot.0.to_string(), Some(&key));
            assert_eq!(read(http::hold(&app, request).await.unwrap()).0, 201);
        }
        slots.push(slot);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for slot in &slots {
        check_against_oracle(&db, &app, slot.0, 0).await;
        assert_eq!(db.count_holds(*slot, "TRUE").await, 3);
    }
    let reclaimed = app.booking.reclaim_expired(100).await.unwrap();
    assert_eq!(reclaimed, 9);
    for slot in &slots {
        let held: u32 = sqlx::query_scalar("SELECT held FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&db.admin)
            .await
            .unwrap();
        assert_eq!(held, 0, "every expired seat given back");
        check_against_oracle(&db, &app, slot.0, 1).await;
    }
    assert_eq!(
        app.booking.reclaim_expired(100).await.unwrap(),
        0,
        "nothing twice"
    );
    // An expired, reclaimed hold can still be cancelled; it gives nothing back twice.
    let first: u64 = sqlx::query_scalar("SELECT MIN(id) FROM holds")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    let (status, _) = read(
        http::cancel(&app, cancel_request(&HoldId(first).to_string()))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200);
    check_against_oracle(&db, &app, slots[0].0, 2).await;
    db.drop().await;
}
