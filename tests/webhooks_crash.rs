//! SPEC §20 against real HTTP receivers on 127.0.0.1: a worker that dies
//! between the receiver's 2xx and its record, 410, a timeout, a disabled
//! subscription enabled again, and a name that resolves to loopback.

use shared::clients::Role;
use shared::config::{AuthMode, HoldRules, WebhookRules};
use shared::webhooks::deliver::Cursors;
use slot_booking_tests::delivery::*;
use slot_booking_tests::receiver::{Receiver, Reply};
use slot_booking_tests::*;
use std::time::Duration;

fn keyed(db: &TestDb) -> shared::App {
    db.app_with_rules(
        AuthMode::ApiKey,
        Duration::from_secs(300),
        HoldRules::default(),
    )
}

#[tokio::test]
async fn a_worker_killed_after_the_receivers_2xx_leaves_it_to_be_sent_again_under_the_same_id() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(200).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    slot(&app, &admin, 8, 5).await;
    let deliverer = deliverer(&db, quick(), dev_rules());
    // The worker's steps, by hand: dispatch, claim, send... and it dies
    // before the record.
    let mut cursors = Cursors::default();
    deliverer.dispatch(&mut cursors).await.unwrap();
    let claimed = deliverer.claim(&mut cursors).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let answer = deliverer.send(&claimed[0]).await.expect("sent");
    assert_eq!(answer.status_code, Some(200));
    drop(claimed);
    assert_eq!(receiver.received().len(), 1);
    // Leased meanwhile: no other worker sends it.
    assert!(deliverer.claim(&mut cursors).await.unwrap().is_empty());
    // Once the lease runs out, another run sends it again, same id.
    drive_until(&deliverer, 20, || async {
        deliveries(&db, sub)
            .await
            .first()
            .is_some_and(|d| d.1 == "delivered")
    })
    .await;
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[0].header("webhook-id"),
        received[1].header("webhook-id")
    );
    assert_eq!(received[0].raw, received[1].raw);
    assert_eq!(deliveries(&db, sub).await[0].2, 1, "the recorded attempt");
}

#[tokio::test]
async fn a_410_disables_the_subscription_gone_and_nothing_more_is_sent() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(410).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    slot(&app, &admin, 8, 5).await;
    let deliverer = deliverer(&db, quick(), dev_rules());
    drive_until(&deliverer, 20, || async {
        subscription_status(&db, sub).await.0 == "disabled"
    })
    .await;
    assert_eq!(
        subscription_status(&db, sub).await,
        ("disabled".into(), Some("gone".into()))
    );
    slot(&app, &admin, 9, 5).await;
    drive(&deliverer, 3).await;
    assert_eq!(receiver.received().len(), 1);
    let statuses: Vec<String> = deliveries(&db, sub)
        .await
        .into_iter()
        .map(|d| d.1)
        .collect();
    assert_eq!(statuses, vec!["pending", "pending"], "they wait for it");
}

#[tokio::test]
async fn a_receiver_that_hangs_is_a_timeout() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::start(|_| Reply::Hang).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    slot(&app, &admin, 8, 5).await;
    let deliverer = deliverer(&db, quick(), dev_rules());
    drive_until(&deliverer, 20, || async {
        deliveries(&db, sub).await.first().is_some_and(|d| d.2 >= 1)
    })
    .await;
    let delivery = &deliveries(&db, sub).await[0];
    assert_eq!((delivery.3, delivery.4.as_deref()), (None, Some("timeout")));
}

#[tokio::test]
async fn a_redirect_is_a_failed_attempt_and_is_not_followed() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let elsewhere = Receiver::answering(200).await;
    let to = elsewhere.url();
    let receiver = Receiver::start(move |_| Reply::Redirect(to.clone())).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    slot(&app, &admin, 8, 5).await;
    let deliverer = deliverer(&db, quick(), dev_rules());
    drive_until(&deliverer, 20, || async {
        deliveries(&db, sub).await.first().is_some_and(|d| d.2 >= 1)
    })
    .await;
    let delivery = &deliveries(&db, sub).await[0];
    assert_eq!((delivery.1.as_str(), delivery.3), ("pending", Some(307)));
    assert!(elsewhere.received().is_empty(), "followed");
}

#[tokio::test]
async fn a_disabled_subscription_s_events_wait_and_go_oldest_first_once_enabled() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(200).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), Some(r#"["slot.created"]"#)).await;
    sqlx::query(
        "UPDATE webhook_subscriptions SET status = 'disabled', disabled_reason = 'by_client' WHERE id = ?",
    )
    .bind(sub)
    .execute(&db.admin)
    .await
    .unwrap();
    let mut slots = Vec::new();
    for hour in 8..12 {
        slots.push(format!(
            "slot.created {}",
            slot(&app, &admin, hour, 5).await
        ));
    }
    let mut settings = quick();
    settings.concurrency = 1;
    let deliverer = deliverer(&db, settings, dev_rules());
    drive(&deliverer, 2).await;
    assert!(receiver.received().is_empty());
    assert_eq!(deliveries(&db, sub).await.len(), 4, "dispatched, waiting");
    sqlx::query(
        "UPDATE webhook_subscriptions SET status = 'enabled', disabled_reason = NULL WHERE id = ?",
    )
    .bind(sub)
    .execute(&db.admin)
    .await
    .unwrap();
    drive_until(&deliverer, 20, || async { receiver.received().len() >= 4 }).await;
    assert_eq!(receiver.events(), slots);
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_unless_private_addresses_are_allowed() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(200).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url_by_name(), None).await;
    slot(&app, &admin, 8, 5).await;
    let rules = WebhookRules {
        allow_http: true,
        allow_private: false,
        ..WebhookRules::default()
    };
    let deliverer = deliverer(&db, quick(), rules);
    drive_until(&deliverer, 20, || async {
        deliveries(&db, sub).await.first().is_some_and(|d| d.2 >= 1)
    })
    .await;
    let delivery = &deliveries(&db, sub).await[0];
    assert_eq!(delivery.4.as_deref(), Some("address_not_allowed"));
    assert!(receiver.received().is_empty());
    // Allowed (as under `make dev`), the same name is reached.
    let allowed = shared::webhooks::Deliverer::new(
        shared::db::connect_lazy(&db.url, 2).unwrap(),
        quick(),
        seal_key(),
        dev_rules(),
    );
    drive_until(&allowed, 20, || async { !receiver.received().is_empty() }).await;
}

#[tokio::test]
async fn retention_waits_for_the_dispatcher_and_a_delivery_whose_event_it_deleted_ends_expired() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(200).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    sqlx::query("UPDATE webhook_subscriptions SET status = 'disabled' WHERE id = ?")
        .bind(sub)
        .execute(&db.admin)
        .await
        .unwrap();
    slot(&app, &admin, 8, 5).await;
    // Every event is past a retention that ends tomorrow.
    let purge = || async {
        let mut conn = db.admin.acquire().await.unwrap();
        shared::events::sequence(&mut conn).await.unwrap();
        let cutoff = chrono::Utc::now() + chrono::Duration::days(1);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        shared::events::purge(&mut conn, cutoff, shared::events::Unsent::Purge, deadline)
            .await
            .unwrap()
    };
    let kept = purge().await;
    assert_eq!(
        (kept.deleted, kept.waiting_for_publisher),
        (0, true),
        "not dispatched yet: kept"
    );
    let deliverer = deliverer(&db, quick(), dev_rules());
    deliverer.dispatch(&mut Cursors::default()).await.unwrap();
    assert_eq!(purge().await.deleted, 1, "its delivery is written: deleted");
    sqlx::query("UPDATE webhook_subscriptions SET status = 'enabled' WHERE id = ?")
        .bind(sub)
        .execute(&db.admin)
        .await
        .unwrap();
    drive_until(&deliverer, 20, || async {
        deliveries(&db, sub)
            .await
            .first()
            .is_some_and(|d| d.1 == "failed")
    })
    .await;
    assert_eq!(
        deliveries(&db, sub).await,
        vec![(
            "slot.created".into(),
            "failed".into(),
            0,
            None,
            Some("expired".into())
        )]
    );
    assert!(receiver.received().is_empty());
    // Ended, and its event gone from the feed: the row goes too (SPEC
    // §23.3).
    assert_eq!(deliverer.prune(&mut Cursors::default()).await.unwrap(), 1);
    assert!(deliveries(&db, sub).await.is_empty());
}
