//! Webhooks in tests: subscriptions written by SQL (sealed as the API
//! seals them), a delivery engine with short times, holds and slots made
//! through the handlers, and rounds driven until something is true.

use crate::keys::{TestClient, authorized};
use crate::slots::{create, slot_body, tomorrow};
use crate::{TestDb, hold_request, new_key, read, with_body};
use serde_json::{Value, json};
use shared::config::WebhookRules;
use shared::webhooks::{Deliverer, DeliverySettings, SealKey, WebhookSecret};
use shared::{App, http};
use std::time::Duration;

/// The key every test seals secrets with, as `WEBHOOK_SECRET_KEY`.
pub const SEAL_KEY_BASE64: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

pub fn seal_key() -> SealKey {
    SealKey::from_base64(SEAL_KEY_BASE64).expect("a key")
}

/// Short times: a 500 ms timeout, a 300 ms lease margin, retries after
/// 50 and 100 ms.
pub fn quick() -> DeliverySettings {
    DeliverySettings {
        timeout: Duration::from_millis(500),
        lease_margin: Duration::from_millis(300),
        retries: vec![Duration::from_millis(50), Duration::from_millis(100)],
        ..DeliverySettings::default()
    }
}

/// The rules of `make dev`: http and loopback allowed.
pub fn dev_rules() -> WebhookRules {
    WebhookRules {
        allow_http: true,
        allow_private: true,
        ..WebhookRules::default()
    }
}

pub fn deliverer(db: &TestDb, settings: DeliverySettings, rules: WebhookRules) -> Deliverer {
    let pool = shared::db::connect_lazy(&db.url, 4).expect("pool");
    Deliverer::new(pool, settings, seal_key(), rules)
}

/// A subscription of `client` to `url`, starting at the feed's end, as the
/// API makes one; its secret.
pub async fn subscribe(
    db: &TestDb,
    client: &TestClient,
    url: &str,
    event_types: Option<&str>,
) -> (u64, WebhookSecret) {
    let secret = WebhookSecret::generate().expect("randomness");
    let sealed = seal_key().seal(&secret).expect("sealed");
    let mut conn = db.admin.acquire().await.expect("connection");
    shared::events::sequence(&mut conn)
        .await
        .expect("sequenced");
    let through: u64 = sqlx::query_scalar("SELECT sequenced_through FROM event_feed WHERE id = 1")
        .fetch_one(&mut *conn)
        .await
        .expect("feed");
    let id = sqlx::query(
        "INSERT INTO webhook_subscriptions (client_id, url, event_types, secret_sealed, \
         scanned_through, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    )
    .bind(client.id.0)
    .bind(url)
    .bind(event_types)
    .bind(sealed)
    .bind(through)
    .execute(&mut *conn)
    .await
    .expect("subscription")
    .last_insert_id();
    (id, secret)
}

/// Runs rounds (each a short run that waits for its attempts) until
/// `done` says so; panics after `rounds` of them.
pub async fn drive_until<F, Fut>(deliverer: &Deliverer, rounds: u32, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..rounds {
        if done().await {
            return;
        }
        let until =
            tokio::time::Instant::now() + deliverer.settings().lease() + Duration::from_millis(100);
        deliverer
            .run_until(until, Duration::from_millis(20))
            .await
            .expect("a run");
    }
    assert!(done().await, "not done after {rounds} runs");
}

/// `rounds` short runs, whatever they do.
pub async fn drive(deliverer: &Deliverer, rounds: u32) {
    for _ in 0..rounds {
        let until =
            tokio::time::Instant::now() + deliverer.settings().lease() + Duration::from_millis(100);
        deliverer
            .run_until(until, Duration::from_millis(20))
            .await
            .expect("a run");
    }
}

/// `(event_type, status, attempts, last_status_code, last_error)` of each delivery of
/// `subscription`, in feed order.
pub async fn deliveries(
    db: &TestDb,
    subscription: u64,
) -> Vec<(String, String, u32, Option<u16>, Option<String>)> {
    sqlx::query_as(
        "SELECT event_type, status, attempts, last_status_code, last_error \
         FROM webhook_deliveries WHERE subscription_id = ? ORDER BY seq",
    )
    .bind(subscription)
    .fetch_all(&db.admin)
    .await
    .expect("deliveries")
}

/// The subscription's `(status, disabled_reason)`.
pub async fn subscription_status(db: &TestDb, subscription: u64) -> (String, Option<String>) {
    sqlx::query_as("SELECT status, disabled_reason FROM webhook_subscriptions WHERE id = ?")
        .bind(subscription)
        .fetch_one(&db.admin)
        .await
        .expect("subscription")
}

/// A slot of `capacity` tomorrow at `hour`, by `admin`: its id.
pub async fn slot(app: &App, admin: &TestClient, hour: u32, capacity: u32) -> u64 {
    let (status, body) = create(
        app,
        admin,
        &slot_body(&tomorrow(hour), &tomorrow(hour + 1), capacity),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_u64().expect("slot id")
}

/// A hold of one seat by `who`: its id.
pub async fn hold(app: &App, who: &TestClient, slot: u64) -> u64 {
    let key = new_key().to_string();
    let request = with_body(
        hold_request(&slot.to_string(), Some(&key)),
        &json!({ "quantity": 1 }).to_string(),
    );
    let request = authorized(request, Some(&who.bearer()));
    let (status, body): (u16, Value) = read(http::hold(app, request).await.expect("handled"));
    assert_eq!(status, 201, "{body}");
    body["id"].as_u64().expect("hold id")
}

/// Cancels hold `id` as `who`.
pub async fn cancel(app: &App, who: &TestClient, id: u64) {
    let request = authorized(crate::cancel_request(&id.to_string()), Some(&who.bearer()));
    let (status, body): (u16, Value) = read(http::cancel(app, request).await.expect("handled"));
    assert_eq!(status, 200, "{body}");
}
