//! `POST /slots/{id}/waitlist`, `GET /waitlist/{id}` and `DELETE
//! /waitlist/{id}` (SPEC §18): an entry is its owner's or an admin's;
//! anyone else gets the 404 of a missing entry.

use super::slots::{idempotency_key, quantity};
use super::{HandlerResult, booking_for, caller, error_response, json, path_id};
use crate::App;
use crate::clients::Needs;
use crate::domain::{EntryId, SlotId};
use crate::error::Error;
use lambda_http::Request;
use lambda_http::http::{HeaderValue, StatusCode};

/// `POST /slots/{id}/waitlist` with an `Idempotency-Key` header and an
/// optional body `{"quantity": n}`, checked in the hold's order.
pub async fn join_waitlist(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Holder).await?;
        let body = super::sized_body(&request, super::body_limit::BOOKING)?;
        let key = idempotency_key(&request)?;
        let quantity = quantity(body, app.booking.rules().max_quantity)?;
        let slot_id = path_id(&request, &["slots", "{id}", "waitlist"])
            .and_then(SlotId::parse)
            .ok_or(Error::NotFound("slot"))?;
        booking_for(app, &request)
            .join_waitlist(&caller, slot_id, quantity, &key)
            .await
    }
    .await;
    Ok(match outcome {
        Ok(joined) if joined.created => json(StatusCode::CREATED, &joined.entry),
        Ok(joined) => {
            let mut response = json(StatusCode::OK, &joined.entry);
            response
                .headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            response
        }
        Err(err) => error_response(&err),
    })
}

/// `GET /waitlist/{id}`
pub async fn get_entry(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let id = entry_id(&request)?;
        booking_for(app, &request).waitlist_entry(&caller, id).await
    }
    .await;
    Ok(match outcome {
        Ok(entry) => json(StatusCode::OK, &entry),
        Err(err) => error_response(&err),
    })
}

/// `DELETE /waitlist/{id}`: a waiting entry leaves; any other is answered
/// as it is.
pub async fn leave_waitlist(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let id = entry_id(&request)?;
        booking_for(app, &request).leave_waitlist(&caller, id).await
    }
    .await;
    Ok(match outcome {
        Ok(left) => json(StatusCode::OK, &left.entry),
        Err(err) => error_response(&err),
    })
}

fn entry_id(request: &Request) -> Result<EntryId, Error> {
    path_id(request, &["waitlist", "{id}"])
        .and_then(EntryId::parse)
        .ok_or(Error::NotFound("waiting-list entry"))
}
