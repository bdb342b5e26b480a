//! The Lambda handlers, a room per resource, and what they share: the
//! caller, the deadline, path ids, JSON bodies and responses.
//!
//! Every handler answers inside `Ok(Response)`: an `Err` from a Lambda
//! handler is a failed invocation, which API Gateway turns into a bare 500.

mod availability;
mod clients;
mod events;
mod headers;
mod holds;
mod pages;
mod routes;
mod serve;
mod slot_admin;
mod slots;
mod waitlist;
mod webhook_deliveries;
mod webhooks;

pub use availability::availability;
pub use clients::{create_client, list_clients, patch_client, revoke_client};
pub use events::{MAX_EVENTS, list_events};
pub use headers::finish;
pub use holds::{cancel, confirm, extend_hold, find_hold, get_hold, move_hold};
pub use pages::{CONSOLE, DOCS, console_page, docs_page, openapi_document};
pub use routes::ROUTES;
pub use serve::{Handler, PlainHandler, serve, serve_without_app};
pub use slot_admin::{create_slots, delete_slot, get_slot, update_slot};
pub use slots::hold;
pub use waitlist::{get_entry, join_waitlist, leave_waitlist};
pub use webhook_deliveries::{list_webhook_deliveries, ping_webhook};
pub use webhooks::{
    create_webhook, delete_webhook, get_webhook, list_webhooks, patch_webhook,
    rotate_webhook_secret,
};

use crate::App;
use crate::booking::Booking;
use crate::clients::{Caller, Needs};
use crate::error::Error;
use crate::telemetry::{self, Metric};
use lambda_http::http::{HeaderValue, StatusCode, header};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Serialize;
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime};

pub type HandlerResult = Result<Response<Body>, lambda_http::Error>;

/// Any route the API does not have (API Gateway's `$default` route), in
/// the API's own error format rather than the gateway's bare body: a path
/// the API serves with other methods is a 405 naming them in `Allow`
/// (SPEC §19.8), any other path a 404.
pub async fn not_found(request: Request) -> HandlerResult {
    let method = request.method().as_str();
    let err = match routes::methods_of(route_path(&request)) {
        Some(allow) if !allow.contains(&method) => Error::MethodNotAllowed {
            method: crate::error::sent_name(method),
            allow,
        },
        _ => Error::NotFound("route"),
    };
    Ok(error_response(&err))
}

/// The path as the API's routes name it: the raw path without the stage,
/// when the API is reached through a named one (the template's is
/// `$default`, which adds none).
fn route_path(request: &Request) -> &str {
    let raw = request.raw_http_path();
    let path = if raw.is_empty() {
        request.uri().path()
    } else {
        raw
    };
    let stage = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context.stage.as_deref(),
        _ => None,
    };
    match stage {
        Some(stage) if stage != "$default" => path
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(stage))
            .filter(|p| p.starts_with('/'))
            .unwrap_or(path),
        _ => path,
    }
}

/// The service, bound to answer before this invocation's deadline.
fn booking_for(app: &App, request: &Request) -> Booking {
    app.booking.until(deadline(request))
}

/// When this invocation must have its answer (see [`answer_by`]).
fn deadline(request: &Request) -> Instant {
    let deadline = request
        .lambda_context_ref()
        .map(|context| context.deadline());
    answer_by(deadline, SystemTime::now(), Instant::now())
}

/// The caller, if it may use a route that `needs` this, within its rate
/// limit: authentication comes before every other check, so a request
/// refused with 401 tells nothing about the resource and counts against
/// nobody.
async fn caller(app: &App, request: &Request, needs: Needs) -> Result<Caller, Error> {
    app.gate
        .admit(authorization(request), needs, deadline(request).into())
        .await
}

/// The `Authorization` header (names match in any case); a value that is
/// not text counts as a malformed key.
fn authorization(request: &Request) -> Option<&str> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or("-"))
}

/// Kept back from Lambda's deadline to send the answer.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// When the service must have its answer: Lambda's deadline for this
/// invocation less a margin. A deadline that is missing or cannot be one
/// (in the past, or beyond Lambda's 15-minute maximum: `cargo lambda
/// watch` sends a fixed 600,000 ms after the epoch) gives the default
/// budget instead.
fn answer_by(deadline: Option<SystemTime>, now: SystemTime, clock: Instant) -> Instant {
    const LONGEST_INVOCATION: Duration = Duration::from_secs(15 * 60);
    let left = deadline
        .and_then(|deadline| deadline.duration_since(now).ok())
        .filter(|left| *left <= LONGEST_INVOCATION);
    match left {
        Some(left) => clock + left.saturating_sub(ANSWER_MARGIN),
        None => clock + crate::booking::DEFAULT_BUDGET,
    }
}

/// The `id` path parameter, or, when the event carries none (a `$default`
/// route, a function URL, a generated event), the segment of the raw path
/// that stands at `{id}` in `route`. The route is matched against the end
/// of the path so that a stage prefix does not matter.
pub fn path_id<'r>(request: &'r Request, route: &[&str]) -> Option<&'r str> {
    if let Some(id) = request
        .path_parameters_ref()
        .and_then(|params| params.first("id"))
    {
        return Some(id);
    }
    let raw = request.raw_http_path();
    let path = if raw.is_empty() {
        request.uri().path()
    } else {
        raw
    };
    id_from_path(path, route)
}

fn id_from_path<'p>(path: &'p str, route: &[&str]) -> Option<&'p str> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let tail = segments.get(segments.len().checked_sub(route.len())?..)?;
    let mut id = None;
    for (segment, expected) in tail.iter().zip(route) {
        match *expected {
            "{id}" => id = Some(*segment),
            literal if literal == *segment => {}
            _ => return None,
        }
    }
    id
}

/// A JSON response with `Content-Type: application/json`.
pub fn json(status: StatusCode, value: &impl Serialize) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => json_bytes(status, bytes),
        Err(err) => {
            if !telemetry::refused("internal_error", &err, true) {
                tracing::error!(error = %err, "response failed to serialise");
            }
            json_bytes(
                StatusCode::INTERNAL_SERVER_ERROR,
                br#"{"message":"An unexpected error occurred.","reason":"internal_error"}"#
                    .to_vec(),
            )
        }
    }
}

/// Already-encoded JSON, served as it is (the cache's bytes).
pub fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Body::Binary(bytes));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The most a body may weigh (SPEC §16), checked after the key and
/// before any parsing: 413 `payload_too_large` beyond.
pub mod body_limit {
    /// Hold (and, with SPEC §17–18, move and waiting-list) bodies.
    pub const BOOKING: usize = 1024;
    /// `POST /slots`: one slot or a batch.
    pub const SLOTS: usize = 256 * 1024;
    /// Every other admin body.
    pub const ADMIN: usize = 8 * 1024;
}

/// The body's bytes, if it weighs at most `limit`.
fn sized_body(request: &Request, limit: usize) -> Result<&[u8], Error> {
    let bytes: &[u8] = match request.body() {
        Body::Empty => b"",
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => b"",
    };
    if bytes.len() > limit {
        return Err(Error::PayloadTooLarge {
            size: bytes.len(),
            limit,
        });
    }
    Ok(bytes)
}

/// The body as JSON, whatever its `Content-Type`; an empty body is `{}`.
/// Over `limit` bytes it is a 413, unread; anything that is not JSON is a
/// 422 under `body`.
fn json_body(request: &Request, limit: usize) -> Result<Value, Error> {
    let bytes = sized_body(request, limit)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice(bytes)
        .map_err(|_| Error::invalid("body", "The body must be valid JSON."))
}

/// The error as JSON. Server-side causes are logged (on the request's
/// summary line), never sent.
pub fn error_response(err: &Error) -> Response<Body> {
    let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let server_side = err.is_server_side();
    if !telemetry::refused(err.reason(), err, server_side) {
        // Not inside an invocation (a test calling a handler): no summary
        // line will say it.
        if server_side {
            tracing::error!(reason = err.reason(), error = %err, "request failed");
        } else {
            tracing::info!(reason = err.reason(), error = %err, "request refused");
        }
    }
    if matches!(err, Error::RateLimited { .. }) {
        telemetry::count(Metric::RateLimited, 1);
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        telemetry::count(Metric::ServiceUnavailable, 1);
    }
    let mut response = json(status, &err.to_body());
    let headers = response.headers_mut();
    match err {
        // Every 503 says when the service may serve again; one whose
        // change may have been made says also, in its message, to read
        // before sending the change again.
        Error::Unavailable(_) | Error::OutcomeUnknown(_) => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        Error::RateLimited { retry_after } => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        Error::Unauthenticated(why) => {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(why.challenge()),
            );
        }
        Error::MethodNotAllowed { allow, .. } => {
            if let Ok(allow) = HeaderValue::from_str(&allow.join(", ")) {
                headers.insert(header::ALLOW, allow);
            }
        }
        _ => {}
    }
    response
}

/// `Link: <…>; rel="next"` on `response`: this request's path as the
/// client sent it (a stage prefix included) with `query`, the next page's
/// parameters, written so that they need no escaping (cursors in URL-safe
/// base64, instants in UTC).
pub(super) fn link_next(request: &Request, query: &str, response: &mut Response<Body>) {
    links(request, &[(query, "next")], response);
}

/// `Link` with one target per `(query, rel)`, in order, comma-separated
/// (RFC 8288), each as [`link_next`] writes its one.
pub(super) fn links(request: &Request, targets: &[(&str, &str)], response: &mut Response<Body>) {
    let raw = request.raw_http_path();
    let path = if raw.is_empty() {
        request.uri().path()
    } else {
        raw
    };
    let value = targets
        .iter()
        .map(|(query, rel)| format!("<{path}?{query}>; rel=\"{rel}\""))
        .collect::<Vec<_>>()
        .join(", ");
    if let Ok(link) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::LINK, link);
    }
}

/// Every query parameter as sent, decoded, in order. API Gateway decodes
/// the query string; an event without parameters (a function URL, a
/// generated event) is read from the URI.
pub(super) fn query_pairs(request: &Request) -> Vec<(String, String)> {
    let from_event: Vec<(String, String)> = request
        .query_string_parameters_ref()
        .map(|params| {
            params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    if !from_event.is_empty() {
        return from_event;
    }
    let Some(query) = request.uri().query() else {
        return Vec::new();
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_due_before_lambdas_deadline_and_a_bogus_deadline_gets_the_default() {
        let (now, clock) = (SystemTime::now(), Instant::now());
        let in_3s = now + Duration::from_secs(3);
        assert_eq!(
            answer_by(Some(in_3s), now, clock),
            clock + Duration::from_secs(3) - ANSWER_MARGIN
        );
        let default = clock + crate::booking::DEFAULT_BUDGET;
        let emulator = SystemTime::UNIX_EPOCH + Duration::from_millis(600_000);
        assert_eq!(answer_by(Some(emulator), now, clock), default);
        let in_a_day = now + Duration::from_secs(86_400);
        assert_eq!(answer_by(Some(in_a_day), now, clock), default);
        assert_eq!(answer_by(None, now, clock), default);
        let in_100ms = now + Duration::from_millis(100);
        assert_eq!(answer_by(Some(in_100ms), now, clock), clock, "no time left");
    }

    #[test]
    fn ids_are_read_from_the_end_of_the_raw_path_whatever_the_stage() {
        let hold = ["slots", "{id}", "hold"];
        assert_eq!(id_from_path("/slots/7/hold", &hold), Some("7"));
        assert_eq!(id_from_path("/prod/slots/7/hold/", &hold), Some("7"));
        assert_eq!(id_from_path("/slots/7/confirm", &hold), None);
        assert_eq!(id_from_path("/hold", &hold), None);
        assert_eq!(id_from_path("/holds/12", &["holds", "{id}"]), Some("12"));
        assert_eq!(id_from_path("/holds//", &["holds", "{id}"]), None);
    }
}
