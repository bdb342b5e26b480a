//! `POST /holds/{id}/confirm`, `DELETE /holds/{id}`, `GET /holds/{id}`,
//! `GET /holds?idempotency_key=`, `POST /holds/{id}/extend` and
//! `POST /holds/{id}/move`: the owner's or an admin's; anyone else gets
//! the 404 of a missing hold.

use super::{HandlerResult, booking_for, caller, error_response, json, path_id};
use crate::App;
use crate::clients::Needs;
use crate::domain::{HoldId, IdempotencyKey, SlotId};
use crate::error::{Error, FieldErrors, sent_name};
use lambda_http::Request;
use lambda_http::http::StatusCode;
use serde_json::Value;

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
        let caller = caller(app, &request, Needs::Holder).await?;
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

/// `POST /holds/{id}/move` with `{"slot_id": n}` (SPEC §17). Checks in
/// the order of every booking route: the caller, the body's size, the
/// body, then the hold and the slot (in the service).
pub async fn move_hold(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let body = super::sized_body(&request, super::body_limit::BOOKING)?;
        let to = target(body)?;
        let hold_id = path_id(&request, &["holds", "{id}", "move"])
            .and_then(HoldId::parse)
            .ok_or(Error::NotFound("hold"))?;
        booking_for(app, &request)
            .move_hold(&caller, hold_id, to)
            .await
    }
    .await;
    Ok(match outcome {
        Ok(done) => json(StatusCode::OK, &done.hold),
        Err(err) => error_response(&err),
    })
}

/// The move's body: a JSON object whose only field is `slot_id`, a slot id
/// (an integer from 1 to 2^64−1), whatever the `Content-Type`. Every
/// problem is reported at once, each under its own field.
fn target(body: &[u8]) -> Result<SlotId, Error> {
    const FIELD: &str = "slot_id";
    let object = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => object,
        _ => return Err(Error::invalid("body", "The body must be a JSON object.")),
    };
    let mut errors = FieldErrors::new();
    for field in object.keys().filter(|field| *field != FIELD) {
        let name = sent_name(field);
        let message = format!("The {name:?} field is not allowed.");
        errors.entry(name.into()).or_default().push(message);
    }
    let to = object
        .get(FIELD)
        .and_then(Value::as_u64)
        .filter(|id| *id > 0)
        .map(SlotId);
    if to.is_none() {
        let message = match object.get(FIELD) {
            None | Some(Value::Null) => "The slot id field is required.",
            Some(_) => {
                "The slot id field must be a slot id, an integer from 1 to 18446744073709551615."
            }
        };
        errors.entry(FIELD.into()).or_default().push(message.into());
    }
    match to {
        Some(to) if errors.is_empty() => Ok(to),
        _ => Err(Error::Validation(errors)),
    }
}

/// The `idempotency_key` query parameter, validated like the header; a
/// repeated or unknown parameter is a 422 under its own name (SPEC §19.6),
/// every problem at once. API Gateway decodes the query string; an event
/// without parameters (a function URL, a generated event) is read from the
/// URI.
fn key_parameter(request: &Request) -> Result<IdempotencyKey, Error> {
    key_from(&super::query_pairs(request))
}

fn key_from(parameters: &[(String, String)]) -> Result<IdempotencyKey, Error> {
    const FIELD: &str = "idempotency_key";
    let mut errors = FieldErrors::new();
    let mut raw = None;
    for (name, value) in parameters {
        let message = if name != FIELD {
            format!(
                "The {:?} parameter is not allowed; use idempotency_key.",
                sent_name(name)
            )
        } else if raw.replace(value.as_str()).is_some() {
            format!("The {FIELD} parameter may be given only once.")
        } else {
            continue;
        };
        errors
            .entry(sent_name(name).into())
            .or_default()
            .push(message);
    }
    let key = super::slots::parse_key(raw);
    match key {
        Ok(key) if errors.is_empty() => Ok(key),
        Ok(_) => Err(Error::Validation(errors)),
        Err(Error::Validation(more)) => {
            for (field, messages) in more {
                errors.entry(field).or_default().extend(messages);
            }
            Err(Error::Validation(errors))
        }
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::{key_from, target};
    use crate::domain::SlotId;
    use crate::error::Error;

    fn fields(body: &str) -> Vec<String> {
        match target(body.as_bytes()).unwrap_err() {
            Error::Validation(errors) => errors.keys().map(|k| k.to_string()).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_target_is_read_and_everything_else_is_named() {
        assert_eq!(target(br#"{"slot_id": 7}"#).unwrap(), SlotId(7));
        assert_eq!(
            target(br#"{"slot_id":18446744073709551615}"#).unwrap(),
            SlotId(u64::MAX)
        );
        for body in ["", " ", "null", "[]", "7", "\"7\"", "{", "slot_id=7"] {
            assert_eq!(fields(body), ["body"], "{body:?}");
        }
        for body in [
            "{}",
            r#"{"slot_id": null}"#,
            r#"{"slot_id": 0}"#,
            r#"{"slot_id": -1}"#,
            r#"{"slot_id": 1.5}"#,
            r#"{"slot_id": 2.0}"#,
            r#"{"slot_id": "7"}"#,
            r#"{"slot_id": 18446744073709551616}"#,
        ] {
            assert_eq!(fields(body), ["slot_id"], "{body}");
        }
        assert_eq!(fields(r#"{"slot": 7, "slot_id": 7}"#), ["slot"]);
        assert_eq!(fields(r#"{"slot": 7}"#), ["slot", "slot_id"]);
    }

    #[test]
    fn the_key_is_the_only_parameter_and_it_is_given_once() {
        const KEY: &str = "0b6c4a7e-6c1f-4c3e-9a57-3f0d6f1e2a10";
        let pairs = |query: &[(&str, &str)]| -> Vec<(String, String)> {
            query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            key_from(&pairs(&[("idempotency_key", KEY)]))
                .unwrap()
                .to_string(),
            KEY
        );
        for (query, fields) in [
            (vec![], vec!["idempotency_key"]),
            (vec![("idempotency_key", "x")], vec!["idempotency_key"]),
            (
                vec![("idempotency_key", KEY), ("idempotency_key", KEY)],
                vec!["idempotency_key"],
            ),
            (
                vec![("idempotency_key", KEY), ("limit", "5")],
                vec!["limit"],
            ),
            (vec![("key", KEY)], vec!["idempotency_key", "key"]),
            (
                vec![("b", ""), ("idempotency_key", KEY), ("a", "")],
                vec!["a", "b"],
            ),
        ] {
            let Err(Error::Validation(errors)) = key_from(&pairs(&query)) else {
                panic!("{query:?} accepted");
            };
            let got: Vec<&str> = errors.keys().map(|k| k.as_ref()).collect();
            assert_eq!(got, fields, "{query:?}");
        }
    }
}
