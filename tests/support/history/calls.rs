//! A recorded call's request, made through the HTTP handlers.

use super::{Recorder, Request};
use crate::{
    cancel_request, confirm_request, entry_request, extend_request, get_hold_request, hold_request,
    join_request, move_request,
};
use serde_json::Value;
use shared::App;
use shared::http;

/// Makes `request` through the handlers, recorded.
pub async fn call(app: &App, rec: &Recorder, client: usize, request: &Request) -> (u16, Value) {
    rec.record(client, request.clone(), send(app, request, |r| r))
        .await
}

/// `request` through the handlers, each made by `made` (its caller's
/// credentials): the status and the body.
pub async fn send(
    app: &App,
    request: &Request,
    made: impl Fn(lambda_http::Request) -> lambda_http::Request,
) -> (u16, Value) {
    let response = match request {
        Request::Hold { slot, key } => {
            http::hold(app, made(hold_request(&slot.to_string(), Some(key)))).await
        }
        Request::Confirm { hold } => {
            http::confirm(app, made(confirm_request(&hold.to_string()))).await
        }
        Request::Cancel { hold } => {
            http::cancel(app, made(cancel_request(&hold.to_string()))).await
        }
        Request::Extend { hold } => {
            http::extend_hold(app, made(extend_request(&hold.to_string()))).await
        }
        Request::Move { hold, to } => {
            let body = format!(r#"{{"slot_id": {to}}}"#);
            http::move_hold(app, made(move_request(&hold.to_string(), &body))).await
        }
        Request::Read { hold } => {
            http::get_hold(app, made(get_hold_request(&hold.to_string()))).await
        }
        Request::Join { slot, key } => {
            http::join_waitlist(app, made(join_request(&slot.to_string(), key, ""))).await
        }
        Request::Leave { entry } => {
            http::leave_waitlist(app, made(entry_request("DELETE", &entry.to_string()))).await
        }
        Request::Entry { entry } => {
            http::get_entry(app, made(entry_request("GET", &entry.to_string()))).await
        }
    };
    crate::read(response.expect("handlers answer inside Ok"))
}
