//! `DELETE /webhooks/{id}` in bounded steps (shared/src/webhooks/remove.rs):
//! marked first, so that nothing sends or dispatches for it, its
//! deliveries purged in batches within the request's deadline (503 until
//! done), then 200 + the subscription as it was, again on a retry.

use serde_json::json;
use shared::clients::{Caller, Role};
use shared::config::WebhookRules;
use shared::error::Error;
use shared::webhooks::WebhookId;
use shared::webhooks::remove::{PURGE_BATCH, SCANNED_FOREVER};
use slot_booking_tests::webhooks::*;
use slot_booking_tests::*;
use std::time::Duration;

/// `rows` deliveries of subscription `id`, half of them delivered, one
/// per event (test data: `INSERT … SELECT` is fine off the hot path).
async fn deliveries(db: &TestDb, id: u64, rows: u32) {
    // A thousand at a time: the server's `max_recursive_iterations`.
    for start in (0..rows).step_by(1000) {
        sqlx::query(
            "INSERT INTO webhook_deliveries (subscription_id, event_id, seq, event_type, \
             subject, status, next_attempt_at, created_at) \
             WITH RECURSIVE n(i) AS (SELECT ? + 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) \
             SELECT ?, i, i, 'hold.created', CONCAT('hold:', i), \
             IF(i % 2 = 0, 'delivered', 'pending'), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM n",
        )
        .bind(start)
        .bind(rows.min(start + 1000))
        .bind(id)
        .execute(&db.admin)
        .await
        .unwrap();
    }
}

async fn count(db: &TestDb, id: u64) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM webhook_deliveries WHERE subscription_id = ?")
        .bind(id)
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

/// The row as the delete left it: status, deleted, scanned_through and
/// the sealed secret's length.
async fn row(db: &TestDb, id: u64) -> Option<(String, bool, u64, usize)> {
    let row: Option<(String, bool, u64, Vec<u8>)> = sqlx::query_as(
        "SELECT status, deleted_at IS NOT NULL, scanned_through, secret_sealed \
         FROM webhook_subscriptions WHERE id = ?",
    )
    .bind(id)
    .fetch_optional(&db.admin)
    .await
    .unwrap();
    row.map(|(status, deleted, scanned, sealed)| (status, deleted, scanned, sealed.len()))
}

#[tokio::test]
async fn a_long_history_is_purged_in_batches_across_retries_and_a_retry_after_the_end_answers_the_same()
 {
    let db = TestDb::new().await;
    let app = app(&db);
    let shop = db.client("shop", Role::Booker, None).await;
    let rival = db.client("rival", Role::Booker, None).await;
    let (status, made) = create(&app, &shop, json!({"url": URL, "description": "big"})).await;
    assert_eq!(status, 201, "{made}");
    let id = id_of(&made);
    let key = made["id"].as_u64().unwrap();
    let (_, before) = get(&app, &shop, &id).await;
    let rows = PURGE_BATCH * 2 + 1;
    deliveries(&db, key, rows).await;

    // Too little time left for one batch: the mark is made, nothing
    // purged, 503 (Retry-After: `Error::Unavailable`'s).
    let caller = Caller {
        id: shop.id,
        role: Role::Booker,
        rate: None,
        held_cap: None,
    };
    let cut = tokio::time::Instant::now() + Duration::from_millis(500);
    let err = app
        .webhooks
        .delete(&caller, WebhookId(key), cut)
        .await
        .expect_err("no time to purge: not done");
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    assert_eq!(count(&db, key).await, i64::from(rows), "nothing purged yet");
    assert_eq!(
        row(&db, key).await,
        Some(("disabled".into(), true, SCANNED_FOREVER, 0)),
        "marked: no claim (disabled), no dispatch (scanned past the feed), no secret"
    );
    // Being deleted, it exists for no other route.
    assert_eq!(get(&app, &shop, &id).await.0, 404);
    let enable = patch(&app, &shop, &id, json!({"status": "enabled"})).await;
    assert_eq!(enable.0, 404, "not enabled again mid-delete: {}", enable.1);
    assert_eq!(rotate(&app, &shop, &id).await.0, 404);
    let (_, page, _) = list(&app, &shop, "").await;
    assert_eq!(page, json!([]), "listed no more");
    assert_eq!(
        delete(&app, &rival, &id).await.0,
        404,
        "still not the rival's"
    );

    // The retry finishes the purge and answers as the first would have.
    let (status, gone) = delete(&app, &shop, &id).await;
    assert_eq!(
        (status, &gone),
        (200, &before),
        "the subscription as it was"
    );
    assert_eq!(count(&db, key).await, 0, "every delivery purged");
    // A retry after a lost answer finds it done: the same answer.
    assert_eq!(delete(&app, &shop, &id).await, (200, before.clone()));
    assert_eq!(get(&app, &shop, &id).await.0, 404);
}

#[tokio::test]
async fn a_disabled_subscription_is_answered_disabled_and_day_old_tombstones_go_with_a_later_delete()
 {
    let db = TestDb::new().await;
    let app = app_with(
        &db,
        WebhookRules {
            max_per_client: 2,
            ..WebhookRules::default()
        },
    );
    let shop = db.client("shop", Role::Booker, None).await;
    let (_, first) = create(&app, &shop, json!({"url": URL})).await;
    let (_, second) = create(&app, &shop, json!({"url": URL})).await;
    let (first_id, second_id) = (id_of(&first), id_of(&second));
    let (status, off) = patch(&app, &shop, &second_id, json!({"status": "disabled"})).await;
    assert_eq!(status, 200, "{off}");
    deliveries(&db, second["id"].as_u64().unwrap(), 3).await;

    assert_eq!(delete(&app, &shop, &first_id).await.0, 200);
    for _ in 0..2 {
        let (status, gone) = delete(&app, &shop, &second_id).await;
        assert_eq!(
            (status, &gone),
            (200, &off),
            "disabled, by_client, as it was"
        );
    }
    let first_key = first["id"].as_u64().unwrap();
    assert!(row(&db, first_key).await.is_some(), "its tombstone");
    sqlx::query(
        "UPDATE webhook_subscriptions SET deleted_at = deleted_at - INTERVAL 2 DAY WHERE id = ?",
    )
    .bind(first_key)
    .execute(&db.admin)
    .await
    .unwrap();
    // The limit counts no tombstone.
    let (status, third) = create(&app, &shop, json!({"url": URL})).await;
    assert_eq!(status, 201, "{third}");
    assert_eq!(delete(&app, &shop, &id_of(&third)).await.0, 200);
    assert_eq!(row(&db, first_key).await, None, "a day old: gone");
    assert!(row(&db, second["id"].as_u64().unwrap()).await.is_some());
}
