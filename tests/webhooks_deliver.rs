//! SPEC §20, the delivery engine against real HTTP receivers on
//! 127.0.0.1: who receives what, the request (the feed's rendering, its
//! id and signature), retries, order per subject without head-of-line
//! blocking, 410, disabled and enabled again. The crash and the address
//! check are in `webhooks_crash.rs`.

use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use slot_booking_tests::delivery::*;
use slot_booking_tests::events::Follower;
use slot_booking_tests::receiver::{Receiver, Reply};
use slot_booking_tests::*;
use standardwebhooks::Webhook;
use std::time::Duration;

fn keyed(db: &TestDb) -> shared::App {
    db.app_with_rules(
        AuthMode::ApiKey,
        Duration::from_secs(300),
        HoldRules::default(),
    )
}

#[tokio::test]
async fn a_booker_receives_its_own_holds_and_every_slot_and_an_admin_everything_signed() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let alice = db.client("alice", Role::Booker, None).await;
    let bob = db.client("bob", Role::Booker, None).await;
    let (to_alice, to_admin) = (
        Receiver::answering(200).await,
        Receiver::answering(204).await,
    );
    let (alice_sub, alice_secret) = subscribe(&db, &alice, &to_alice.url(), None).await;
    let (admin_sub, admin_secret) = subscribe(&db, &admin, &to_admin.url(), None).await;

    let slot = slot(&app, &admin, 8, 5).await;
    let mine = hold(&app, &alice, slot).await;
    let bobs = hold(&app, &bob, slot).await;
    let deliverer = deliverer(&db, quick(), dev_rules());
    drive_until(&deliverer, 20, || async {
        to_alice.received().len() >= 2 && to_admin.received().len() >= 3
    })
    .await;

    assert_eq!(
        to_alice.events(),
        vec![
            format!("slot.created {slot}"),
            format!("hold.created {mine}")
        ],
        "alice: the slot's event and her hold's, never bob's"
    );
    assert_eq!(
        to_admin.events(),
        vec![
            format!("slot.created {slot}"),
            format!("hold.created {mine}"),
            format!("hold.created {bobs}")
        ]
    );
    // Byte for byte what GET /events serves the admin, signed by the
    // subscription's secret (Standard Webhooks' own library verifies it).
    let mut follower = Follower::new();
    while follower.poll(&app, &admin).await > 0 {}
    for (received, served) in to_admin.received().iter().zip(&follower.seen) {
        assert_eq!(&received.body, served);
        assert_eq!(
            received.header("webhook-id"),
            served["id"].as_str().unwrap()
        );
        assert_eq!(received.header("content-type"), "application/json");
    }
    for (receiver, secret) in [(&to_alice, &alice_secret), (&to_admin, &admin_secret)] {
        let verifier = Webhook::new(&secret.expose()).unwrap();
        for received in receiver.received() {
            let mut headers = lambda_http::http::HeaderMap::new();
            for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
                headers.insert(name, received.header(name).parse().unwrap());
            }
            verifier
                .verify(received.raw.as_bytes(), &headers)
                .expect("the signature verifies");
        }
    }
    for subscription in [alice_sub, admin_sub] {
        for delivery in deliveries(&db, subscription).await {
            assert_eq!(
                (delivery.1.as_str(), delivery.2),
                ("delivered", 1),
                "{delivery:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_failing_event_is_retried_by_the_schedule_under_one_id_then_failed() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(503).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), Some(r#"["slot.*"]"#)).await;
    slot(&app, &admin, 8, 5).await;
    let deliverer = deliverer(&db, quick(), dev_rules());
    // The first attempt and the schedule's two retries, then failed.
    drive_until(&deliverer, 30, || async {
        deliveries(&db, sub)
            .await
            .first()
            .is_some_and(|d| d.1 == "failed")
    })
    .await;
    let received = receiver.received();
    assert_eq!(received.len(), 3, "{:?}", receiver.events());
    let ids: Vec<&str> = received.iter().map(|r| r.header("webhook-id")).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(
        deliveries(&db, sub).await,
        vec![("slot.created".into(), "failed".into(), 3, Some(503), None)]
    );
    // One retry: the next attempt is set a schedule's wait after this one.
    let mut one = quick();
    one.retries = vec![Duration::from_secs(3600)];
    slot(&app, &admin, 9, 5).await;
    let deliverer = deliverer_with(&db, one);
    drive_until(&deliverer, 20, || async {
        deliveries(&db, sub).await.get(1).is_some_and(|d| d.2 == 1)
    })
    .await;
    let wait: i64 = sqlx::query_scalar(
        "SELECT TIMESTAMPDIFF(SECOND, last_attempt_at, next_attempt_at) FROM webhook_deliveries \
         WHERE subscription_id = ? ORDER BY seq DESC LIMIT 1",
    )
    .bind(sub)
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert!((3599..=3601).contains(&wait), "{wait}");
}

fn deliverer_with(
    db: &TestDb,
    settings: shared::webhooks::DeliverySettings,
) -> shared::webhooks::Deliverer {
    deliverer(db, settings, dev_rules())
}

#[tokio::test]
async fn a_subject_waits_for_its_failing_head_while_other_subjects_go_on() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let alice = db.client("alice", Role::Booker, None).await;
    let slot = slot(&app, &admin, 8, 5).await;
    let receiver = Receiver::answering(200).await;
    let (sub, _) = subscribe(&db, &alice, &receiver.url(), Some(r#"["hold.*"]"#)).await;
    let stuck = hold(&app, &alice, slot).await;
    let flowing = hold(&app, &alice, slot).await;
    cancel(&app, &alice, stuck).await;
    cancel(&app, &alice, flowing).await;
    // Every event of `stuck` fails (retried an hour later).
    receiver.set(move |received| {
        if received.body["data"]["id"].as_u64() == Some(stuck) {
            Reply::Status(500)
        } else {
            Reply::Status(200)
        }
    });
    let mut settings = quick();
    settings.retries = vec![Duration::from_secs(3600)];
    let deliverer = deliverer_with(&db, settings);
    drive_until(&deliverer, 20, || async { receiver.received().len() >= 3 }).await;
    // A few more rounds: nothing more may come.
    // More rounds: nothing more may come (`stuck`'s cancel waits behind
    // its failed head).
    drive(&deliverer, 3).await;
    let events = receiver.events();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(
        events.contains(&format!("hold.created {stuck}")),
        "{events:?}"
    );
    let position = |event: String| events.iter().position(|e| *e == event);
    assert!(
        position(format!("hold.created {flowing}")) < position(format!("hold.cancelled {flowing}")),
        "{events:?}"
    );
    assert!(
        position(format!("hold.cancelled {flowing}")).is_some(),
        "{events:?}"
    );
    let statuses: Vec<(String, u32)> = deliveries(&db, sub)
        .await
        .into_iter()
        .map(|d| (d.1, d.2))
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("pending".into(), 1),
            ("delivered".into(), 1),
            ("pending".into(), 0),
            ("delivered".into(), 1)
        ]
    );
}
