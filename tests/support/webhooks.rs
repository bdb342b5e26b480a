//! Webhooks' subscriptions through their handlers (tests/webhooks_api.rs):
//! an `api-key` environment with the webhook key, each route's request,
//! and what the database keeps of a subscription.

use super::keys::{TestClient, clients_request};
use super::{TestDb, event_json, read};
use base64::Engine;
use lambda_http::http::{Method, header};
use lambda_http::{Request, Response};
use serde_json::Value;
use shared::config::{AuthMode, WebhookRules};
use shared::webhooks::SealKey;
use shared::{App, http};

/// A public address: no DNS needed, and allowed under the template's rules.
pub const URL: &str = "https://93.184.215.14/hook";

pub fn key() -> SealKey {
    SealKey::from_base64(&base64::engine::general_purpose::STANDARD.encode([42u8; 32])).unwrap()
}

/// One `api-key` environment with the webhook key and `rules`.
pub fn app_with(db: &TestDb, rules: WebhookRules) -> App {
    let mut app = App::new(shared::Config {
        webhooks: rules,
        ..db.app_in(AuthMode::ApiKey, 0).config.clone()
    })
    .expect("app");
    app.webhooks = app.webhooks.clone().with_key(Some(key()));
    app
}

pub fn app(db: &TestDb) -> App {
    app_with(db, WebhookRules::default())
}

pub fn request(method: Method, path: &str, id: Option<&str>, body: Option<&Value>) -> Request {
    clients_request(method, path, id, body)
}

pub async fn create(app: &App, by: &TestClient, body: Value) -> (u16, Value) {
    let request = request(Method::POST, "/webhooks", None, Some(&body));
    read(http::create_webhook(app, by.by(request)).await.unwrap())
}

pub async fn get(app: &App, by: &TestClient, id: &str) -> (u16, Value) {
    let request = request(Method::GET, &format!("/webhooks/{id}"), Some(id), None);
    read(http::get_webhook(app, by.by(request)).await.unwrap())
}

pub async fn patch(app: &App, by: &TestClient, id: &str, body: Value) -> (u16, Value) {
    let request = request(
        Method::PATCH,
        &format!("/webhooks/{id}"),
        Some(id),
        Some(&body),
    );
    read(http::patch_webhook(app, by.by(request)).await.unwrap())
}

pub async fn delete(app: &App, by: &TestClient, id: &str) -> (u16, Value) {
    let request = request(Method::DELETE, &format!("/webhooks/{id}"), Some(id), None);
    read(http::delete_webhook(app, by.by(request)).await.unwrap())
}

pub async fn rotate(app: &App, by: &TestClient, id: &str) -> (u16, Value) {
    let path = format!("/webhooks/{id}/secret");
    let request = request(Method::POST, &path, Some(id), None);
    read(
        http::rotate_webhook_secret(app, by.by(request))
            .await
            .unwrap(),
    )
}

/// One page: status, body and the query of its `next` link.
pub async fn list(app: &App, by: &TestClient, query: &str) -> (u16, Value, Option<String>) {
    let mut event = event_json("apigw_v2_availability.json", "/webhooks", None, &[]);
    event["routeKey"] = "GET /webhooks".into();
    event["rawQueryString"] = query.into();
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let response: Response<_> = http::list_webhooks(app, by.by(request)).await.unwrap();
    let next = response.headers().get(header::LINK).map(|link| {
        let link = link.to_str().unwrap();
        link["</webhooks?".len()..link.len() - ">; rel=\"next\"".len()].to_string()
    });
    let (status, body) = read(response);
    (status, body, next)
}

/// What the database keeps of subscription `id`: both sealed secrets and
/// the previous one's end, in seconds from now.
pub async fn stored(db: &TestDb, id: u64) -> (Vec<u8>, Option<Vec<u8>>, Option<i64>, u64) {
    sqlx::query_as(
        "SELECT secret_sealed, previous_sealed, \
         TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), previous_until), scanned_through \
         FROM webhook_subscriptions WHERE id = ?",
    )
    .bind(id)
    .fetch_one(&db.admin)
    .await
    .unwrap()
}

pub const FIELDS: [&str; 9] = [
    "client_id",
    "created_at",
    "description",
    "disabled_reason",
    "event_types",
    "id",
    "status",
    "updated_at",
    "url",
];

pub fn fields(body: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort();
    names
}
