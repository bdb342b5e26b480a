//! Requests and answers of SPEC §9 (holds of several seats, extensions,
//! replays), built like the seed's, and environments with their own hold
//! rules.

use super::{TestDb, event_json, read};
use lambda_http::{Body, Request, Response};
use serde_json::Value;
use shared::App;
use shared::config::HoldRules;
use std::time::Duration;

/// `POST /slots/{slot}/hold` with the body `{"quantity": n}`.
pub fn hold_seats_request(slot: &str, key: &str, quantity: u32) -> Request {
    let mut event = event_json(
        "apigw_v2_hold.json",
        &format!("/slots/{slot}/hold"),
        Some(slot),
        &[("idempotency-key", Some(key))],
    );
    let body = serde_json::json!({ "quantity": quantity }).to_string();
    event["headers"]["content-length"] = body.len().to_string().into();
    event["body"] = body.into();
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

/// `POST /holds/{hold}/extend`.
pub fn extend_request(hold: &str) -> Request {
    let path = format!("/holds/{hold}/extend");
    let mut event = event_json("apigw_v2_confirm.json", &path, Some(hold), &[]);
    // The confirm fixture is the same shape of event; only its route differs.
    let route: Value = "POST /holds/{id}/extend".into();
    event["routeKey"] = route.clone();
    event["requestContext"]["routeKey"] = route;
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

/// [`read`], and whether the answer carries `Idempotent-Replayed: true`.
pub fn read_replayed(response: Response<Body>) -> (u16, Value, bool) {
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|value| value == "true");
    let (status, body) = read(response);
    (status, body, replayed)
}

/// A hold of `quantity` seats through the handler: status, body, replayed.
pub async fn hold_seats(app: &App, slot: &str, key: &str, quantity: u32) -> (u16, Value, bool) {
    read_replayed(
        shared::http::hold(app, hold_seats_request(slot, key, quantity))
            .await
            .expect("hold handler"),
    )
}

impl TestDb {
    /// An environment whose holds live `hold_ttl` and whose extensions stop
    /// at `max_lifetime` after creation.
    pub fn app_with_lifetime(&self, hold_ttl: Duration, max_lifetime: Duration) -> App {
        let config = shared::Config {
            holds: HoldRules {
                max_lifetime,
                ..HoldRules::default()
            },
            ..self.config(hold_ttl)
        };
        App::new(config).expect("app")
    }
}
