//! Requests to the slot routes (SPEC §10) through the handlers, and the
//! ledger check every slot answer must pass.

use crate::keys::{TestClient, authorized, clients_request};
use crate::{TestDb, hold_request, new_key, read, with_body};
use lambda_http::http::Method;
use lambda_http::{Body, Request};
use serde_json::{Value, json};
use shared::domain::SlotId;
use shared::{App, http};

/// `method` on `path` with `id` as the path parameter and this body text.
pub fn request(method: Method, path: &str, id: Option<&str>, body: Option<&str>) -> Request {
    let mut request = clients_request(method, path, id, None);
    if let Some(body) = body {
        *request.body_mut() = Body::Text(body.to_string());
    }
    request
}

pub async fn call(app: &App, who: Option<&TestClient>, request: Request) -> (u16, Value) {
    let route = (request.method().clone(), request.uri().path().to_string());
    let bearer = who.map(TestClient::bearer);
    let request = authorized(request, bearer.as_deref());
    let response = match route.0 {
        Method::POST => http::create_slots(app, request).await,
        Method::GET => http::get_slot(app, request).await,
        Method::PATCH => http::update_slot(app, request).await,
        Method::DELETE => http::delete_slot(app, request).await,
        other => panic!("no slot route for {other}"),
    };
    read(response.unwrap())
}

pub async fn create(app: &App, admin: &TestClient, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    call(
        app,
        Some(admin),
        request(Method::POST, "/slots", None, Some(&body)),
    )
    .await
}

pub async fn get(app: &App, who: Option<&TestClient>, id: &str) -> (u16, Value) {
    let path = format!("/slots/{id}");
    call(app, who, request(Method::GET, &path, Some(id), None)).await
}

pub async fn patch(app: &App, who: &TestClient, id: u64, body: &Value) -> (u16, Value) {
    let (path, id, body) = (format!("/slots/{id}"), id.to_string(), body.to_string());
    call(
        app,
        Some(who),
        request(Method::PATCH, &path, Some(&id), Some(&body)),
    )
    .await
}

pub async fn delete(app: &App, who: &TestClient, id: u64) -> (u16, Value) {
    let (path, id) = (format!("/slots/{id}"), id.to_string());
    call(
        app,
        Some(who),
        request(Method::DELETE, &path, Some(&id), None),
    )
    .await
}

/// `capacity = confirmed + held + remaining`, and the figures as expected.
pub fn assert_ledger(slot: &Value, capacity: u64, confirmed: u64, held: u64) {
    let figure = |name: &str| {
        slot[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: {slot}"))
    };
    assert_eq!(
        figure("confirmed") + figure("held") + figure("remaining"),
        figure("capacity"),
        "{slot}"
    );
    assert_eq!(
        (figure("capacity"), figure("confirmed"), figure("held")),
        (capacity, confirmed, held),
        "{slot}"
    );
}

pub fn slot_body(starts: &str, ends: &str, capacity: u32) -> Value {
    json!({"starts_at": starts, "ends_at": ends, "capacity": capacity})
}

/// Tomorrow's `hour`:00 UTC, as RFC 3339 (a slot that has started takes no
/// holds).
pub fn tomorrow(hour: u32) -> String {
    let day = chrono::Utc::now().date_naive() + chrono::Days::new(1);
    format!("{day}T{hour:02}:00:00Z")
}

/// A hold of `quantity` seats by `anonymous` (open mode): its status and body.
pub async fn hold(app: &App, slot: u64, quantity: u32) -> (u16, Value) {
    let request = hold_request(&slot.to_string(), Some(new_key().as_str()));
    let request = with_body(request, &json!({ "quantity": quantity }).to_string());
    read(http::hold(app, request).await.unwrap())
}

/// What each racing caller got, as `"<status> <reason>"`.
pub fn outcome(status: u16, body: &Value) -> String {
    format!("{status} {}", body["reason"].as_str().unwrap_or(""))
}

pub async fn slot_exists(db: &TestDb, slot: SlotId) -> bool {
    sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM slots WHERE id = ?")
        .bind(slot.0)
        .fetch_one(&db.admin)
        .await
        .unwrap()
        == 1
}
