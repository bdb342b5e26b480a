//! Watching for hoarding (SPEC §16): the sweep's report counts each hold
//! that ended unconfirmed at its expiry exactly once, per client, most
//! seats first; confirmed and cancelled holds, and expiries too recent to
//! be final, are not counted; two reports that overlap split the holds
//! between them.

use shared::booking::{ClientExpired, Hoarding};
use shared::clients::{Caller, ClientId, Role};
use shared::domain::{HoldId, SlotId};
use slot_booking_tests::*;

fn caller(id: ClientId) -> Caller {
    Caller {
        id,
        role: Role::Booker,
        rate: None,
        held_cap: None,
    }
}

async fn hold(db: &TestDb, who: ClientId, slot: SlotId, quantity: u32) -> HoldId {
    let app = db.app();
    let outcome = app
        .booking
        .hold(&caller(who), slot, quantity, &new_key())
        .await;
    outcome.expect("hold").hold.id
}

/// Expired `ago` seconds ago, by the database's clock.
async fn age(db: &TestDb, holds: &[HoldId], ago: u32) {
    for id in holds {
        sqlx::query(
            "UPDATE holds SET expires_at = UTC_TIMESTAMP(6) - INTERVAL ? SECOND WHERE id = ?",
        )
        .bind(ago)
        .bind(id.0)
        .execute(&db.admin)
        .await
        .expect("age");
    }
}

#[tokio::test]
async fn each_hold_expired_unconfirmed_is_reported_once_per_client_most_seats_first() {
    let db = TestDb::new().await;
    sqlx::query("UPDATE sweep_reports SET reported_until = UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE")
        .execute(&db.admin)
        .await
        .unwrap();
    let a = db.client("hoarder", Role::Booker, None).await.id;
    let b = db.client("casual", Role::Booker, None).await.id;
    let slot = db.insert_slot(50).await;
    let mut expired = Vec::new();
    for _ in 0..3 {
        expired.push(hold(&db, a, slot, 2).await);
    }
    expired.push(hold(&db, b, slot, 1).await);
    let confirmed = hold(&db, a, slot, 5).await;
    let cancelled = hold(&db, a, slot, 5).await;
    let recent = hold(&db, b, slot, 4).await;
    let hidden = hold(&db, b, slot, 1).await;
    let app = db.app();
    let owner = caller(a);
    app.booking
        .confirm(&owner, confirmed)
        .await
        .expect("confirm");
    app.booking.cancel(&owner, cancelled).await.expect("cancel");
    age(&db, &expired, 60).await;
    age(&db, &[confirmed], 60).await;
    // Cancelled a second before it would have expired: not an expiry.
    sqlx::query(
        "UPDATE holds SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 60 SECOND, \
         cancelled_at = UTC_TIMESTAMP(6) - INTERVAL 61 SECOND WHERE id = ?",
    )
    .bind(cancelled.0)
    .execute(&db.admin)
    .await
    .unwrap();
    // Expired, then cancelled: still a hold that expired unconfirmed.
    age(&db, &[hidden], 60).await;
    let cancel = app.booking.cancel(&caller(b), hidden).await;
    assert!(
        cancel.is_ok(),
        "an expired hold may be cancelled: {cancel:?}"
    );
    // Expired, but within the time a decision under a lock may still commit.
    age(&db, &[recent], 5).await;

    let report = app.booking.hoarding_report().await.expect("report");
    assert_eq!(
        report,
        Hoarding {
            holds: 5,
            seats: 8,
            top: vec![
                ClientExpired {
                    client_id: a.0,
                    holds: 3,
                    seats: 6
                },
                ClientExpired {
                    client_id: b.0,
                    holds: 2,
                    seats: 2
                },
            ],
            ..Hoarding::default()
        }
    );
    let again = app.booking.hoarding_report().await.expect("report");
    assert_eq!(again, Hoarding::default(), "each hold once");

    // Once settled, the recent one is reported, by the next report only.
    age(&db, &[recent], 60).await;
    sqlx::query("UPDATE sweep_reports SET reported_until = UTC_TIMESTAMP(6) - INTERVAL 2 MINUTE")
        .execute(&db.admin)
        .await
        .unwrap();
    let later = app.booking.hoarding_report().await.expect("report");
    assert_eq!((later.holds, later.seats), (6, 12), "{later:?}");
    db.drop().await;
}

/// Two sweeps that overlap: their reports take turns on the report's row,
/// so together they count every hold once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_reports_at_once_count_each_hold_once_between_them() {
    let db = TestDb::new().await;
    sqlx::query("UPDATE sweep_reports SET reported_until = UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE")
        .execute(&db.admin)
        .await
        .unwrap();
    let a = db.client("hoarder", Role::Booker, None).await.id;
    let slot = db.insert_slot(50).await;
    let mut holds = Vec::new();
    for _ in 0..10 {
        holds.push(hold(&db, a, slot, 1).await);
    }
    age(&db, &holds, 60).await;
    let apps = db.warm_apps(2, std::time::Duration::from_secs(300)).await;
    let reports = together(apps, |_, app| async move {
        app.booking.hoarding_report().await.expect("report")
    })
    .await;
    let counted: u64 = reports.iter().map(|r| r.holds).sum();
    assert_eq!(counted, 10, "{reports:?}");
    db.drop().await;
}
