//! Request parsing and JSON responses for the Lambda handlers.
//!
//! Every handler answers inside `Ok(Response)`: an `Err` from a Lambda
//! handler is a failed invocation, which API Gateway turns into a bare 500.

use crate::App;
use crate::booking::Booking;
use crate::domain::{HoldId, IdempotencyKey, SlotId};
use crate::error::Error;
use lambda_http::http::{HeaderValue, StatusCode, header};
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Serialize;
use std::time::{Duration, Instant, SystemTime};

pub type HandlerResult = Result<Response<Body>, lambda_http::Error>;

/// `GET /slots/availability`. `X-Cache` tells how it was served (hit,
/// stale, miss, bypass) and `Age` how old the figures are, in seconds.
pub async fn availability(app: &App, request: Request) -> HandlerResult {
    Ok(match booking_for(app, &request).availability_json().await {
        Ok(served) => {
            let mut response = json_bytes(StatusCode::OK, served.body);
            let headers = response.headers_mut();
            headers.insert("x-cache", HeaderValue::from_static(served.status.as_str()));
            headers.insert(header::AGE, HeaderValue::from(served.age.as_secs()));
            response
        }
        Err(err) => error_response(&err),
    })
}

/// `POST /slots/{id}/hold` with an `Idempotency-Key` header.
pub async fn hold(app: &App, request: Request) -> HandlerResult {
    // Checks run in the spec's order: the header, then the key (in the
    // service), then the slot. An id that cannot name a slot is a 404.
    let outcome = async {
        let key = idempotency_key(&request)?;
        let slot_id = path_id(&request, &["slots", "{id}", "hold"])
            .and_then(SlotId::parse)
            .ok_or(Error::NotFound("slot"))?;
        booking_for(app, &request).hold(slot_id, &key).await
    }
    .await;
    Ok(match outcome {
        Ok(outcome) if outcome.created => json(StatusCode::CREATED, &outcome.hold),
        Ok(outcome) => json(StatusCode::OK, &outcome.hold),
        Err(err) => error_response(&err),
    })
}

/// `POST /holds/{id}/confirm`
pub async fn confirm(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let hold_id = path_id(&request, &["holds", "{id}", "confirm"])
            .and_then(HoldId::parse)
            .ok_or(Error::NotFound("hold"))?;
        booking_for(app, &request).confirm(hold_id).await
    }
    .await;
    Ok(match outcome {
        Ok(done) => json(StatusCode::OK, &done.hold),
        Err(err) => error_response(&err),
    })
}

/// `DELETE /holds/{id}`
pub async fn cancel(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let hold_id = path_id(&request, &["holds", "{id}"])
            .and_then(HoldId::parse)
            .ok_or(Error::NotFound("hold"))?;
        booking_for(app, &request).cancel(hold_id).await
    }
    .await;
    Ok(match outcome {
        Ok(done) => json(StatusCode::OK, &done.hold),
        Err(err) => error_response(&err),
    })
}

/// Any route the API does not have (API Gateway's `$default` route): a 404
/// in the API's own error format rather than the gateway's bare body.
pub async fn not_found(_request: Request) -> HandlerResult {
    Ok(error_response(&Error::NotFound("route")))
}

/// The service, bound to answer before this invocation's deadline.
fn booking_for(app: &App, request: &Request) -> Booking {
    let deadline = request
        .lambda_context_ref()
        .map(|context| context.deadline());
    app.booking
        .until(answer_by(deadline, SystemTime::now(), Instant::now()))
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

/// The `Idempotency-Key` header (names match in any case), validated.
fn idempotency_key(request: &Request) -> Result<IdempotencyKey, Error> {
    const FIELD: &str = "idempotency_key";
    let raw = match request.headers().get("idempotency-key") {
        None => {
            return Err(Error::invalid(
                FIELD,
                "The idempotency key field is required.",
            ));
        }
        Some(value) => value.to_str().unwrap_or_default().trim(),
    };
    if raw.is_empty() {
        return Err(Error::invalid(
            FIELD,
            "The idempotency key field is required.",
        ));
    }
    IdempotencyKey::parse(raw).ok_or_else(|| {
        Error::invalid(
            FIELD,
            "The idempotency key field must be a valid UUID (8-4-4-4-12 hexadecimal digits).",
        )
    })
}

/// A JSON response with `Content-Type: application/json`.
pub fn json(status: StatusCode, value: &impl Serialize) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => json_bytes(status, bytes),
        Err(err) => {
            tracing::error!(error = %err, "response failed to serialise");
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

/// The error as JSON. Server-side causes are logged here, never sent.
pub fn error_response(err: &Error) -> Response<Body> {
    let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if err.is_server_side() {
        tracing::error!(reason = err.reason(), error = %err, "request failed");
    } else {
        tracing::info!(reason = err.reason(), error = %err, "request refused");
    }
    let mut response = json(status, &err.to_body());
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
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
