//! Requests and answers of SPEC §9 (holds of several seats, extensions,
//! replays), built like the seed's, and environments with their own hold
//! rules.

use super::{TestDb, hold_request, read, with_body};
use lambda_http::{Body, Request, Response};
use serde_json::Value;
use shared::App;
use shared::config::{AuthMode, HoldRules};
use std::time::Duration;

/// `POST /slots/{slot}/hold` with the body `{"quantity": n}`.
pub fn hold_seats_request(slot: &str, key: &str, quantity: u32) -> Request {
    let body = serde_json::json!({ "quantity": quantity }).to_string();
    with_body(hold_request(slot, Some(key)), &body)
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
    /// at `max_lifetime` after creation (open mode, as the seed's tests).
    pub fn app_with_lifetime(&self, hold_ttl: Duration, max_lifetime: Duration) -> App {
        let rules = HoldRules {
            max_lifetime,
            ..HoldRules::default()
        };
        self.app_with_rules(AuthMode::Open, hold_ttl, rules)
    }
}
