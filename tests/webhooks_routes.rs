//! `GET /webhooks/{id}/deliveries` and `POST /webhooks/{id}/ping` (SPEC
//! §20, §23.3, §23.11) through their handlers, against the real database
//! and real receivers on 127.0.0.1: the deliveries the engine made, newest
//! first and paged; the ping signed as a delivery, answered whatever the
//! receiver says, never recorded and never disabling; the address check
//! and the timeout at the ping.

use lambda_http::http::{Method, header};
use lambda_http::{Request, Response};
use serde_json::Value;
use shared::App;
use shared::clients::Role;
use shared::config::{AuthMode, HoldRules, WebhookRules};
use shared::http;
use slot_booking_tests::delivery::*;
use slot_booking_tests::keys::{TestClient, clients_request};
use slot_booking_tests::receiver::{Receiver, Reply};
use slot_booking_tests::*;
use standardwebhooks::Webhook;
use std::time::Duration;

const FIELDS: [&str; 9] = [
    "attempts",
    "delivered_at",
    "event_id",
    "event_type",
    "last_attempt_at",
    "last_error",
    "last_status_code",
    "next_attempt_at",
    "status",
];

/// An `api-key` environment whose webhooks open the tests' sealed secrets
/// under `rules`, and whose ping waits 500 ms.
fn app(db: &TestDb, rules: WebhookRules) -> App {
    let base = db.app_with_rules(
        AuthMode::ApiKey,
        Duration::from_secs(300),
        HoldRules::default(),
    );
    let mut app = App::new(shared::Config {
        webhooks: rules,
        ..base.config.clone()
    })
    .expect("app");
    app.webhooks = app
        .webhooks
        .clone()
        .with_key(Some(seal_key()))
        .with_ping_timeout(Duration::from_millis(500));
    app
}

/// One page of subscription `id`'s deliveries: status, body, and the query
/// of its `next` link.
async fn deliveries_page(
    app: &App,
    by: &TestClient,
    id: u64,
    query: &str,
) -> (u16, Value, Option<String>) {
    let path = format!("/webhooks/{id}/deliveries");
    let mut event = event_json(
        "apigw_v2_availability.json",
        &path,
        Some(&id.to_string()),
        &[],
    );
    event["routeKey"] = "GET /webhooks/{id}/deliveries".into();
    event["rawQueryString"] = query.into();
    let request: Request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let response: Response<_> = http::list_webhook_deliveries(app, by.by(request))
        .await
        .unwrap();
    let next = response.headers().get(header::LINK).map(|link| {
        let link = link.to_str().unwrap();
        let prefix = format!("<{path}?");
        assert!(link.starts_with(&prefix), "{link}");
        link[prefix.len()..link.len() - ">; rel=\"next\"".len()].to_string()
    });
    let (status, body) = read(response);
    (status, body, next)
}

async fn ping(app: &App, by: &TestClient, id: u64) -> (u16, Value) {
    let id = id.to_string();
    let path = format!("/webhooks/{id}/ping");
    let request = clients_request(Method::POST, &path, Some(&id), None);
    read(http::ping_webhook(app, by.by(request)).await.unwrap())
}

fn keys(body: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort();
    keys
}

/// `(status, error)` of a ping's answer; its latency is a number.
fn outcome(answer: &Value) -> (Value, Value) {
    assert_eq!(
        keys(answer),
        ["error", "latency_ms", "status_code"],
        "{answer}"
    );
    assert!(answer["latency_ms"].is_u64(), "{answer}");
    (answer["status_code"].clone(), answer["error"].clone())
}

#[tokio::test]
async fn the_deliveries_are_listed_newest_first_with_their_fields_and_paged() {
    let db = TestDb::new().await;
    let app = app(&db, dev_rules());
    let admin = db.client("admin", Role::Admin, None).await;
    let alice = db.client("alice", Role::Booker, None).await;
    let bob = db.client("bob", Role::Booker, None).await;
    // A slot of capacity 2 is refused every time (500); the others taken.
    let receiver = Receiver::start(|received| {
        if received.body["data"]["capacity"] == 2 {
            Reply::Status(500)
        } else {
            Reply::Status(200)
        }
    })
    .await;
    let (sub, _) = subscribe(&db, &alice, &receiver.url(), None).await;
    for (hour, capacity) in [(8, 1), (10, 2), (12, 1)] {
        slot(&app, &admin, hour, capacity).await;
    }
    let deliverer = deliverer(&db, quick(), dev_rules());
    drive_until(&deliverer, 40, || async {
        let rows = deliveries(&db, sub).await;
        rows.len() == 3 && rows.iter().all(|row| row.1 != "pending")
    })
    .await;
    let newest_first: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(event_id AS CHAR) FROM webhook_deliveries \
         WHERE subscription_id = ? ORDER BY seq DESC",
    )
    .bind(sub)
    .fetch_all(&db.admin)
    .await
    .unwrap();

    let (status, all, next) = deliveries_page(&app, &alice, sub, "").await;
    assert_eq!((status, next), (200, None), "{all}");
    let all = all.as_array().unwrap().clone();
    let ids: Vec<&str> = all
        .iter()
        .map(|d| d["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, newest_first, "newest first, ids as the feed's strings");
    for delivery in &all {
        assert_eq!(keys(delivery), FIELDS, "{delivery}");
        assert_eq!(delivery["event_type"], "slot.created");
        assert!(delivery["last_attempt_at"].is_string(), "{delivery}");
        assert_eq!(delivery["next_attempt_at"], Value::Null, "{delivery}");
    }
    let summary: Vec<(Value, Value, Value, Value, bool)> = all
        .iter()
        .map(|d| {
            (
                d["status"].clone(),
                d["attempts"].clone(),
                d["last_status_code"].clone(),
                d["last_error"].clone(),
                d["delivered_at"].is_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("delivered".into(), 1.into(), 200.into(), Value::Null, true),
            ("failed".into(), 3.into(), 500.into(), Value::Null, false),
            ("delivered".into(), 1.into(), 200.into(), Value::Null, true),
        ],
        "the third slot's, the second's (tried 3 times), the first's"
    );

    // Pages of 2, then 1, following the link as given.
    let (status, first, next) = deliveries_page(&app, &alice, sub, "limit=2").await;
    assert_eq!(status, 200, "{first}");
    let next = next.expect("a next link");
    let (status, second, last) = deliveries_page(&app, &alice, sub, &next).await;
    assert_eq!((status, last), (200, None), "{second}");
    let mut paged = first.as_array().unwrap().clone();
    paged.extend(second.as_array().unwrap().iter().cloned());
    assert_eq!(paged, all, "the pages, in order, are the whole list");

    // An admin reads anyone's; another booker is told nothing exists.
    let (status, _, _) = deliveries_page(&app, &admin, sub, "").await;
    assert_eq!(status, 200);
    let (status, body, _) = deliveries_page(&app, &bob, sub, "").await;
    assert_eq!(
        (status, body["reason"].clone()),
        (404, "not_found".into()),
        "{body}"
    );
    let (status, _, _) = deliveries_page(&app, &alice, sub + 1000, "").await;
    assert_eq!(status, 404);

    // Deleted (the tombstone): gone for this route too.
    sqlx::query("UPDATE webhook_subscriptions SET deleted_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(sub)
        .execute(&db.admin)
        .await
        .unwrap();
    let (status, body, _) = deliveries_page(&app, &alice, sub, "").await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn bad_unknown_and_repeated_parameters_are_a_422_each_under_its_name() {
    let db = TestDb::new().await;
    let app = app(&db, dev_rules());
    let alice = db.client("alice", Role::Booker, None).await;
    let (sub, _) = subscribe(&db, &alice, "http://127.0.0.1:9/hook", None).await;
    for (query, fields) in [
        ("limit=0", vec!["limit"]),
        ("limit=1001", vec!["limit"]),
        ("limit=%2B5", vec!["limit"]),
        ("limit=1&limit=2", vec!["limit"]),
        ("cursor=abc", vec!["cursor"]),
        ("after=1", vec!["after"]),
        (
            "limit=x&cursor=y&client_id=1",
            vec!["client_id", "cursor", "limit"],
        ),
    ] {
        let (status, body, _) = deliveries_page(&app, &alice, sub, query).await;
        assert_eq!(status, 422, "{query}: {body}");
        assert_eq!(body["reason"], "validation_failed", "{query}: {body}");
        let mut named: Vec<&str> = body["errors"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        named.sort();
        assert_eq!(named, fields, "{query}: {body}");
    }
}

#[tokio::test]
async fn a_ping_is_signed_as_a_delivery_and_answers_the_receivers_status() {
    let db = TestDb::new().await;
    let app = app(&db, dev_rules());
    let alice = db.client("alice", Role::Booker, None).await;
    let bob = db.client("bob", Role::Booker, None).await;
    let receiver = Receiver::answering(204).await;
    let (sub, secret) = subscribe(&db, &alice, &receiver.url(), None).await;

    let (status, answer) = ping(&app, &alice, sub).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(outcome(&answer), (204.into(), Value::Null));
    let received = receiver.received();
    assert_eq!(received.len(), 1, "one request, now");
    let request = &received[0];
    let id = request.header("webhook-id");
    assert!(id.starts_with("ping_") && id.len() > 20, "{id}");
    assert_eq!(request.body["id"], id);
    assert_eq!(request.body["type"], "webhook.ping");
    assert_eq!(request.body["data"]["subscription_id"], sub);
    assert!(request.body["occurred_at"].is_string(), "{}", request.raw);
    assert_eq!(request.header("content-type"), "application/json");
    let mut headers = lambda_http::http::HeaderMap::new();
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        headers.insert(name, request.header(name).parse().unwrap());
    }
    Webhook::new(&secret.expose())
        .unwrap()
        .verify(request.raw.as_bytes(), &headers)
        .expect("the signature verifies with the subscription's secret");

    // A second ping is a new id; neither is a delivery.
    ping(&app, &alice, sub).await;
    let ids: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_string())
        .collect();
    assert_ne!(ids[0], ids[1]);
    assert!(deliveries(&db, sub).await.is_empty(), "not recorded");

    // Another client's subscription: 404, and nothing sent.
    let (status, body) = ping(&app, &bob, sub).await;
    assert_eq!(
        (status, body["reason"].clone()),
        (404, "not_found".into()),
        "{body}"
    );
    assert_eq!(receiver.received().len(), 2);
}

#[tokio::test]
async fn a_ping_answered_500_or_410_is_a_200_and_never_disables() {
    let db = TestDb::new().await;
    let app = app(&db, dev_rules());
    let alice = db.client("alice", Role::Booker, None).await;
    let receiver = Receiver::answering(500).await;
    let (sub, _) = subscribe(&db, &alice, &receiver.url(), None).await;

    for code in [500, 410] {
        receiver.set(move |_| Reply::Status(code));
        for _ in 0..3 {
            let (status, answer) = ping(&app, &alice, sub).await;
            assert_eq!(status, 200, "{answer}");
            assert_eq!(outcome(&answer), (code.into(), Value::Null));
        }
        assert_eq!(
            subscription_status(&db, sub).await,
            ("enabled".to_string(), None),
            "after pings answered {code}"
        );
    }
    assert!(deliveries(&db, sub).await.is_empty());
}

#[tokio::test]
async fn a_ping_checks_the_address_and_waits_no_longer_than_the_timeout() {
    let db = TestDb::new().await;
    let alice = db.client("alice", Role::Booker, None).await;
    let receiver = Receiver::start(|_| Reply::Hang).await;

    // `localhost` with WEBHOOK_ALLOW_PRIVATE off: refused before any request.
    let strict = app(
        &db,
        WebhookRules {
            allow_http: true,
            allow_private: false,
            ..WebhookRules::default()
        },
    );
    let (by_name, _) = subscribe(&db, &alice, &receiver.url_by_name(), None).await;
    let (status, answer) = ping(&strict, &alice, by_name).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        outcome(&answer),
        (Value::Null, "address_not_allowed".into())
    );
    assert!(receiver.received().is_empty(), "nothing sent");

    // Allowed, but the receiver never answers: a timeout.
    let open = app(&db, dev_rules());
    let (status, answer) = ping(&open, &alice, by_name).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(outcome(&answer), (Value::Null, "timeout".into()));
    assert_eq!(receiver.received().len(), 1, "sent, unanswered");
    assert_eq!(
        subscription_status(&db, by_name).await,
        ("enabled".to_string(), None)
    );
}
