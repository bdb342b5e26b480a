//! SPEC §20: workers racing for one subscription's heads, a failing
//! subscription disabled, and the two signatures of a rotation.

use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use shared::webhooks::WebhookSecret;
use shared::webhooks::deliver::Cursors;
use slot_booking_tests::delivery::*;
use slot_booking_tests::receiver::Receiver;
use slot_booking_tests::*;
use standardwebhooks::Webhook;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Barrier;

fn keyed(db: &TestDb) -> shared::App {
    db.app_with_rules(
        AuthMode::ApiKey,
        Duration::from_secs(300),
        HoldRules::default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_workers_never_claim_one_head_twice_nor_more_than_the_concurrency() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(200).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    // 20 subjects, one due head each.
    for hour in 0..20 {
        slot(&app, &admin, hour, 5).await;
    }
    let mut settings = quick();
    settings.timeout = Duration::from_secs(30);
    settings.concurrency = 8;
    deliverer(&db, settings.clone(), dev_rules())
        .dispatch(&mut Cursors::default())
        .await
        .unwrap();
    assert_eq!(deliveries(&db, sub).await.len(), 20);
    // Eight workers, each its own connection, released together.
    let barrier = Arc::new(Barrier::new(8));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (worker, barrier) = (
            deliverer(&db, settings.clone(), dev_rules()),
            barrier.clone(),
        );
        workers.push(tokio::spawn(async move {
            barrier.wait().await;
            worker.claim(&mut Cursors::default()).await.unwrap()
        }));
    }
    let mut claimed = Vec::new();
    for worker in workers {
        claimed.extend(worker.await.unwrap().into_iter().map(|c| c.delivery));
    }
    let distinct: HashSet<u64> = claimed.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        claimed.len(),
        "a head claimed twice: {claimed:?}"
    );
    assert_eq!(claimed.len(), 8, "the concurrency, in all: {claimed:?}");
}

#[tokio::test]
async fn a_final_failure_with_nothing_delivered_for_the_limit_disables_the_subscription_failing() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(500).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    slot(&app, &admin, 8, 5).await;
    let mut settings = quick();
    settings.retries = Vec::new();
    // An hour: nothing delivered since its creation a moment ago.
    settings.disable_after = Duration::from_secs(3600);
    let deliverer = deliverer(&db, settings.clone(), dev_rules());
    drive_until(&deliverer, 20, || async {
        deliveries(&db, sub)
            .await
            .first()
            .is_some_and(|d| d.1 == "failed")
    })
    .await;
    assert_eq!(subscription_status(&db, sub).await.0, "enabled");
    // No limit: the same failure disables it.
    settings.disable_after = Duration::ZERO;
    let deliverer = deliverer_for(&db, settings);
    slot(&app, &admin, 9, 5).await;
    drive_until(&deliverer, 20, || async {
        subscription_status(&db, sub).await.0 == "disabled"
    })
    .await;
    assert_eq!(
        subscription_status(&db, sub).await,
        ("disabled".into(), Some("failing".into()))
    );
}

fn deliverer_for(
    db: &TestDb,
    settings: shared::webhooks::DeliverySettings,
) -> shared::webhooks::Deliverer {
    deliverer(db, settings, dev_rules())
}

#[tokio::test]
async fn while_a_rotated_secret_lives_each_request_carries_both_signatures() {
    let db = TestDb::new().await;
    let app = keyed(&db);
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(200).await;
    let (sub, current) = subscribe(&db, &admin, &receiver.url(), None).await;
    let previous = WebhookSecret::generate().unwrap();
    sqlx::query(
        "UPDATE webhook_subscriptions SET previous_sealed = ?, \
         previous_until = UTC_TIMESTAMP(6) + INTERVAL 1 DAY WHERE id = ?",
    )
    .bind(seal_key().seal(&previous).unwrap())
    .bind(sub)
    .execute(&db.admin)
    .await
    .unwrap();
    slot(&app, &admin, 8, 5).await;
    let deliverer = deliverer(&db, quick(), dev_rules());
    drive_until(&deliverer, 20, || async { !receiver.received().is_empty() }).await;
    let received = &receiver.received()[0];
    assert_eq!(
        received.header("webhook-signature").split(' ').count(),
        2,
        "{received:?}"
    );
    for secret in [&current, &previous] {
        let mut headers = lambda_http::http::HeaderMap::new();
        for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            headers.insert(name, received.header(name).parse().unwrap());
        }
        Webhook::new(&secret.expose())
            .unwrap()
            .verify(received.raw.as_bytes(), &headers)
            .expect("either secret verifies");
    }
}
