//! A body heavier than its route takes is 413 `payload_too_large` (SPEC
//! §16), after the key is checked and before anything is parsed: at the
//! limit a body is read as usual, one byte over it is refused unread, and
//! nothing is written.

use lambda_http::Request;
use lambda_http::http::Method;
use serde_json::Value;
use shared::clients::Role;
use shared::config::AuthMode;
use shared::http::body_limit;
use shared::{App, http};
use slot_booking_tests::keys::{TestClient, authorized, clients_request};
use slot_booking_tests::seats::hold_seats_request;
use slot_booking_tests::*;

/// `{"x": "…"}`-shaped JSON text of exactly `size` bytes whose only field
/// is `field` (padded with spaces, so it parses whatever its size).
fn padded(json: &str, size: usize) -> String {
    assert!(json.len() <= size);
    format!("{json}{}", " ".repeat(size - json.len()))
}

fn with_text(mut request: Request, body: String) -> Request {
    *request.body_mut() = lambda_http::Body::Text(body);
    request
}

type Handler = fn(
    &App,
    Request,
)
    -> std::pin::Pin<Box<dyn std::future::Future<Output = (u16, Value)> + Send + '_>>;

async fn send(app: &App, handler: Handler, request: Request, key: &TestClient) -> (u16, Value) {
    handler(app, authorized(request, Some(&key.bearer()))).await
}

#[tokio::test]
async fn each_route_reads_a_body_at_its_limit_and_refuses_one_byte_more_unread() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let booker = db.client("shop", Role::Booker, None).await;
    let slot = db.insert_slot(5).await;
    let slot_path = format!("/slots/{}", slot.0);
    let slot_id = slot.0.to_string();

    let hold: Handler = |app, r| Box::pin(async move { read(http::hold(app, r).await.unwrap()) });
    let create_slots: Handler =
        |app, r| Box::pin(async move { read(http::create_slots(app, r).await.unwrap()) });
    let update_slot: Handler =
        |app, r| Box::pin(async move { read(http::update_slot(app, r).await.unwrap()) });
    let create_client: Handler =
        |app, r| Box::pin(async move { read(http::create_client(app, r).await.unwrap()) });
    let patch_client: Handler =
        |app, r| Box::pin(async move { read(http::patch_client(app, r).await.unwrap()) });

    let slot_body =
        r#"{"starts_at":"2030-01-01T08:00:00Z","ends_at":"2030-01-01T09:00:00Z","capacity":3}"#;
    let booker_id = booker.id.0.to_string();
    // (name, handler, request maker, valid JSON, limit, who, status at the limit)
    type Make = Box<dyn Fn() -> Request>;
    let cases: Vec<(&str, Handler, Make, &str, usize, &TestClient, u16)> = vec![
        (
            "hold",
            hold,
            Box::new({
                let id = slot_id.clone();
                move || hold_seats_request(&id, new_key().as_str(), 1)
            }),
            r#"{"quantity":1}"#,
            body_limit::BOOKING,
            &booker,
            201,
        ),
        (
            "create slots",
            create_slots,
            Box::new(|| clients_request(Method::POST, "/slots", None, None)),
            slot_body,
            body_limit::SLOTS,
            &admin,
            201,
        ),
        (
            "update slot",
            update_slot,
            Box::new({
                let (path, id) = (slot_path.clone(), slot_id.clone());
                move || clients_request(Method::PATCH, &path, Some(&id), None)
            }),
            r#"{"capacity":6}"#,
            body_limit::ADMIN,
            &admin,
            200,
        ),
        (
            "create client",
            create_client,
            Box::new(|| clients_request(Method::POST, "/clients", None, None)),
            r#"{"name":"padded"}"#,
            body_limit::ADMIN,
            &admin,
            201,
        ),
        (
            "patch client",
            patch_client,
            Box::new({
                let id = booker_id.clone();
                move || clients_request(Method::PATCH, &format!("/clients/{id}"), Some(&id), None)
            }),
            r#"{"max_held_seats":7}"#,
            body_limit::ADMIN,
            &admin,
            200,
        ),
    ];
    for (name, handler, make, json, limit, who, ok) in cases {
        let counts = db_counts(&db).await;
        let (status, body) = send(
            &app,
            handler,
            with_text(make(), padded(json, limit + 1)),
            who,
        )
        .await;
        assert_eq!(status, 413, "{name}: {body}");
        assert_eq!(body["reason"], "payload_too_large", "{name}: {body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains(&format!("at most {limit}")),
            "{name}: {body}"
        );
        assert_eq!(db_counts(&db).await, counts, "{name}: nothing written");
        // Refused unread: even a body that is not JSON is a 413, not a 422.
        let junk = "x".repeat(limit + 1);
        let (status, _) = send(&app, handler, with_text(make(), junk), who).await;
        assert_eq!(status, 413, "{name}: junk over the limit");
        let (status, body) = send(&app, handler, with_text(make(), padded(json, limit)), who).await;
        assert_eq!(status, ok, "{name} at its limit: {body}");
    }
    db.drop().await;
}

/// The key first: no key, or a booker on an admin route, is told so
/// whatever the body weighs.
#[tokio::test]
async fn the_key_is_checked_before_the_weight() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let booker = db.client("shop", Role::Booker, None).await;
    let heavy = "x".repeat(body_limit::SLOTS + 1);
    let request = with_text(
        clients_request(Method::POST, "/slots", None, None),
        heavy.clone(),
    );
    let (status, body) = read(http::create_slots(&app, request).await.unwrap());
    assert_eq!(
        (status, body["reason"].as_str()),
        (401, Some("unauthenticated")),
        "{body}"
    );
    let request = with_text(
        clients_request(Method::POST, "/slots", None, None),
        heavy.clone(),
    );
    let request = authorized(request, Some(&booker.bearer()));
    let (status, body) = read(http::create_slots(&app, request).await.unwrap());
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    // A hold without its Idempotency-Key header: the weight comes first.
    let request = with_text(hold_request("1", None), heavy);
    let request = authorized(request, Some(&booker.bearer()));
    let (status, body) = read(http::hold(&app, request).await.unwrap());
    assert_eq!(
        (status, body["reason"].as_str()),
        (413, Some("payload_too_large")),
        "{body}"
    );
    db.drop().await;
}

/// Slots, holds and clients: what a refused request must not change.
async fn db_counts(db: &TestDb) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM slots), (SELECT COUNT(*) FROM holds), \
         (SELECT COUNT(*) FROM api_clients)",
    )
    .fetch_one(&db.admin)
    .await
    .expect("counts")
}
