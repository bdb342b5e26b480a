//! `GET /slots/availability` and `POST /slots/{id}/hold`.

use super::{HandlerResult, booking_for, caller, error_response, json, json_bytes, path_id};
use crate::App;
use crate::clients::Needs;
use crate::domain::{IdempotencyKey, SlotId};
use crate::error::Error;
use lambda_http::Request;
use lambda_http::http::{HeaderValue, StatusCode, header};

/// `GET /slots/availability`. `X-Cache` tells how it was served (hit,
/// stale, miss, bypass) and `Age` how old the figures are, in seconds.
/// The rate limit is checked in the cache read's own round trip.
pub async fn availability(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let deadline = super::deadline(&request);
        let caller = app
            .gate
            .identify(
                super::authorization(&request),
                Needs::Booker,
                deadline.into(),
            )
            .await?;
        app.booking
            .until(deadline)
            .availability_json(caller.limit())
            .await
    }
    .await;
    Ok(match outcome {
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
    // Checks run in the spec's order: the caller, the header, then the key
    // (in the service), then the slot. An id that cannot name a slot is a
    // 404.
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let key = idempotency_key(&request)?;
        let slot_id = path_id(&request, &["slots", "{id}", "hold"])
            .and_then(SlotId::parse)
            .ok_or(Error::NotFound("slot"))?;
        booking_for(app, &request)
            .hold(&caller, slot_id, &key)
            .await
    }
    .await;
    Ok(match outcome {
        Ok(outcome) if outcome.created => json(StatusCode::CREATED, &outcome.hold),
        Ok(outcome) => json(StatusCode::OK, &outcome.hold),
        Err(err) => error_response(&err),
    })
}

/// The `Idempotency-Key` header (names match in any case), validated.
pub(super) fn idempotency_key(request: &Request) -> Result<IdempotencyKey, Error> {
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
