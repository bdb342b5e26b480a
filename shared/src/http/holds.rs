//! `POST /holds/{id}/confirm`, `DELETE /holds/{id}`, `GET /holds/{id}`,
//! `GET /holds?idempotency_key=` and `POST /holds/{id}/extend`: the
//! owner's or an admin's; anyone else gets the 404 of a missing hold.

use super::{HandlerResult, booking_for, caller, error_response, json, path_id};
use crate::App;
use crate::clients::Needs;
use crate::domain::{HoldId, IdempotencyKey};
use crate::error::Error;
use lambda_http::Request;
use lambda_http::http::StatusCode;

/// `POST /holds/{id}/confirm`
pub async fn confirm(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let hold_id = path_id(&request, &["holds", "{id}", "confirm"])
            .and_then(HoldId::parse)
            .ok_or(Error::NotFound("hold"))?;
        booking_for(app, &request).confirm(&caller, hold_id).await
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
        let caller = caller(app, &request, Needs::Booker).await?;
        let hold_id = path_id(&request, &["holds", "{id}"])
            .and_then(HoldId::parse)
            .ok_or(Error::NotFound("hold"))?;
        booking_for(app, &request).cancel(&caller, hold_id).await
    }
    .await;
    Ok(match outcome {
        Ok(done) => json(StatusCode::OK, &done.hold),
        Err(err) => error_response(&err),
    })
}

/// `GET /holds/{id}`
pub async fn get_hold(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let hold_id = path_id(&request, &["holds", "{id}"])
            .and_then(HoldId::parse)
            .ok_or(Error::NotFound("hold"))?;
        booking_for(app, &request).get_hold(&caller, hold_id).await
    }
    .await;
    Ok(match outcome {
        Ok(hold) => json(StatusCode::OK, &hold),
        Err(err) => error_response(&err),
    })
}

/// `GET /holds?idempotency_key=K`: the caller's own hold with that key, for
/// a client that lost the answer to its hold request.
pub async fn find_hold(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let key = key_parameter(&request)?;
        booking_for(app, &request).find_hold(&caller, &key).await
    }
    .await;
    Ok(match outcome {
        Ok(hold) => json(StatusCode::OK, &hold),
        Err(err) => error_response(&err),
    })
}

/// `POST /holds/{id}/extend`
pub async fn extend_hold(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let hold_id = path_id(&request, &["holds", "{id}", "extend"])
            .and_then(HoldId::parse)
            .ok_or(Error::NotFound("hold"))?;
        booking_for(app, &request).extend(&caller, hold_id).await
    }
    .await;
    Ok(match outcome {
        Ok(hold) => json(StatusCode::OK, &hold),
        Err(err) => error_response(&err),
    })
}

/// The `idempotency_key` query parameter, validated like the header. API
/// Gateway decodes the query string; an event without parameters (a
/// function URL, a generated event) is read from the URI.
fn key_parameter(request: &Request) -> Result<IdempotencyKey, Error> {
    const FIELD: &str = "idempotency_key";
    let raw = super::query_pairs(request)
        .into_iter()
        .find_map(|(key, value)| (key == FIELD).then_some(value));
    super::slots::parse_key(raw.as_deref())
}
