//! `GET /slots/{id}` (any client), and `POST /slots`, `PATCH /slots/{id}`,
//! `DELETE /slots/{id}` (admins only): the slot resource (SPEC §10).

use super::{
    HandlerResult, body_limit, caller, deadline, error_response, json, json_body, path_id,
};
use crate::App;
use crate::clients::Needs;
use crate::domain::SlotId;
use crate::error::Error;
use crate::slots::{NewSlots, SlotChange, Slots};
use lambda_http::Request;
use lambda_http::http::StatusCode;

/// `POST /slots`: one object → 201 + the slot; an array → 201 + the
/// slots in the given order.
pub async fn create_slots(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let new = NewSlots::from_json(&json_body(&request, body_limit::SLOTS)?)?;
        let slots = slots_for(app, &request).create(new.as_slice()).await?;
        Ok::<_, Error>((new, slots))
    }
    .await;
    Ok(match outcome {
        Ok((NewSlots::One(_), slots)) if slots.len() == 1 => json(StatusCode::CREATED, &slots[0]),
        Ok((_, slots)) => json(StatusCode::CREATED, &slots),
        Err(err) => error_response(&err),
    })
}

/// `GET /slots/{id}` → 200 + the slot, from the database.
pub async fn get_slot(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Booker).await?;
        let id = slot_id(&request)?;
        slots_for(app, &request).get(id).await
    }
    .await;
    Ok(match outcome {
        Ok(slot) => json(StatusCode::OK, &slot),
        Err(err) => error_response(&err),
    })
}

/// `PATCH /slots/{id}` with any of `starts_at`, `ends_at`, `capacity`.
pub async fn update_slot(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let change = SlotChange::from_json(&json_body(&request, body_limit::ADMIN)?)?;
        let id = slot_id(&request)?;
        slots_for(app, &request).update(id, &change).await
    }
    .await;
    Ok(match outcome {
        Ok(slot) => json(StatusCode::OK, &slot),
        Err(err) => error_response(&err),
    })
}

/// `DELETE /slots/{id}` → 200 + the slot as it was.
pub async fn delete_slot(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let id = slot_id(&request)?;
        slots_for(app, &request).delete(id).await
    }
    .await;
    Ok(match outcome {
        Ok(slot) => json(StatusCode::OK, &slot),
        Err(err) => error_response(&err),
    })
}

/// The path's slot id; one that cannot name a slot is a 404.
fn slot_id(request: &Request) -> Result<SlotId, Error> {
    path_id(request, &["slots", "{id}"])
        .and_then(SlotId::parse)
        .ok_or(Error::NotFound("slot"))
}

/// The service, bound to answer before this invocation's deadline.
fn slots_for(app: &App, request: &Request) -> Slots {
    app.slots.until(deadline(request))
}
