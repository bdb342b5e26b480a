//! What a client sees: each endpoint called through its Lambda handler,
//! and the answer as status, JSON body (checked for leaks by `read`),
//! `Retry-After` and `X-Cache`.

use super::{availability_request, cancel_request, confirm_request, hold_request, id_of, read};
use lambda_http::{Body, Response};
use serde_json::Value;
use shared::domain::SlotId;
use shared::{App, http};

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub retry_after: Option<String>,
    pub x_cache: Option<String>,
}

pub fn answer(response: Response<Body>) -> Answer {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let (retry_after, x_cache) = (header("retry-after"), header("x-cache"));
    let (status, body) = read(response);
    Answer {
        status,
        body,
        retry_after,
        x_cache,
    }
}

impl Answer {
    pub fn assert_status(&self, status: u16, what: &str) {
        assert_eq!(self.status, status, "{what}: {}", self.body);
    }

    /// 503 `service_unavailable`, a message, and when to retry.
    pub fn assert_unavailable(&self, what: &str) {
        self.assert_status(503, what);
        assert_eq!(self.body["reason"], "service_unavailable", "{what}");
        assert!(
            self.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: {}",
            self.body
        );
        assert!(
            self.retry_after
                .as_deref()
                .and_then(|secs| secs.parse::<u32>().ok())
                .is_some_and(|secs| secs > 0),
            "{what}: a 503 tells when to retry, got Retry-After {:?}",
            self.retry_after
        );
    }

    pub fn hold_id(&self) -> String {
        id_of(&self.body)
    }
}

pub async fn hold(app: &App, slot: SlotId, key: &str) -> Answer {
    let request = hold_request(&slot.0.to_string(), Some(key));
    answer(http::hold(app, request).await.expect("handled"))
}

pub async fn confirm(app: &App, hold: &str) -> Answer {
    answer(
        http::confirm(app, confirm_request(hold))
            .await
            .expect("handled"),
    )
}

pub async fn cancel(app: &App, hold: &str) -> Answer {
    answer(
        http::cancel(app, cancel_request(hold))
            .await
            .expect("handled"),
    )
}

pub async fn availability(app: &App) -> Answer {
    answer(
        http::availability(app, availability_request())
            .await
            .expect("handled"),
    )
}

/// A fresh idempotency key, as text.
pub fn key() -> String {
    super::new_key().to_string()
}
