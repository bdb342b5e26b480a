//! `POST /holds/{id}/confirm` and `DELETE /holds/{id}`: the owner's or an
//! admin's; anyone else gets the 404 of a missing hold.

use super::{HandlerResult, booking_for, caller, error_response, json, path_id};
use crate::App;
use crate::clients::Needs;
use crate::domain::HoldId;
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
