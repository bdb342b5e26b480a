//! `POST /slots/{id}/hold`.

use super::{HandlerResult, booking_for, caller, error_response, json, path_id};
use crate::App;
use crate::clients::Needs;
use crate::domain::{IdempotencyKey, SlotId};
use crate::error::{Error, FieldErrors, sent_name};
use lambda_http::Request;
use lambda_http::http::{HeaderValue, StatusCode};
use serde_json::Value;

/// `POST /slots/{id}/hold` with an `Idempotency-Key` header and an
/// optional body `{"quantity": n}`.
pub async fn hold(app: &App, request: Request) -> HandlerResult {
    // Checks run in the spec's order (§15.6): the caller, the body's size
    // (§16), the header, the body, then the key (in the service), then the
    // slot. An id that
    // cannot name a slot is a 404.
    let outcome = async {
        let caller = caller(app, &request, Needs::Holder).await?;
        let body = super::sized_body(&request, super::body_limit::BOOKING)?;
        let key = idempotency_key(&request)?;
        let max = app.booking.rules().max_quantity;
        let quantity = quantity(body, max)?;
        let slot_id = path_id(&request, &["slots", "{id}", "hold"])
            .and_then(SlotId::parse)
            .ok_or(Error::NotFound("slot"))?;
        booking_for(app, &request)
            .hold(&caller, slot_id, quantity, &key)
            .await
    }
    .await;
    Ok(match outcome {
        Ok(outcome) if outcome.created => json(StatusCode::CREATED, &outcome.hold),
        Ok(outcome) => {
            let mut response = json(StatusCode::OK, &outcome.hold);
            response
                .headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            response
        }
        Err(err) => {
            crate::telemetry::hold_refused(err.reason());
            error_response(&err)
        }
    })
}

/// The hold's body: none (zero bytes) means one seat; anything else must
/// be a JSON object whose only field is `quantity`, an integer from 1 to
/// `max`, whatever the `Content-Type`. Every problem is reported at once.
pub(super) fn quantity(body: &[u8], max: u32) -> Result<u32, Error> {
    if body.is_empty() {
        return Ok(1);
    }
    let object = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => object,
        _ => return Err(Error::invalid("body", "The body must be a JSON object.")),
    };
    let mut errors = FieldErrors::new();
    let mut quantity = 1;
    for (field, value) in &object {
        if field != "quantity" {
            let name = sent_name(field);
            let message = format!("The {name:?} field is not allowed.");
            errors.entry(name.into()).or_default().push(message);
            continue;
        }
        match value.as_u64().filter(|n| (1..=u64::from(max)).contains(n)) {
            Some(n) => quantity = u32::try_from(n).unwrap_or(max),
            None => errors.entry("quantity".into()).or_default().push(format!(
                "The quantity field must be an integer from 1 to {max}."
            )),
        }
    }
    if errors.is_empty() {
        Ok(quantity)
    } else {
        Err(Error::Validation(errors))
    }
}

/// The `Idempotency-Key` header (names match in any case), validated.
pub(super) fn idempotency_key(request: &Request) -> Result<IdempotencyKey, Error> {
    let raw = request
        .headers()
        .get("idempotency-key")
        .map(|value| value.to_str().unwrap_or_default());
    parse_key(raw)
}

/// An idempotency key as sent (header or query parameter): missing or
/// blank, and malformed, are 422 under the field `idempotency_key`.
pub(super) fn parse_key(raw: Option<&str>) -> Result<IdempotencyKey, Error> {
    const FIELD: &str = "idempotency_key";
    match raw.map(str::trim) {
        None | Some("") => Err(Error::invalid(
            FIELD,
            "The idempotency key field is required.",
        )),
        Some(raw) => IdempotencyKey::parse(raw).ok_or_else(|| {
            Error::invalid(
                FIELD,
                "The idempotency key field must be a valid UUID (8-4-4-4-12 hexadecimal digits).",
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::quantity;

    fn reason(body: &str) -> (Vec<String>, String) {
        match quantity(body.as_bytes(), 50).unwrap_err() {
            crate::error::Error::Validation(errors) => (
                errors.keys().map(|k| k.to_string()).collect(),
                errors
                    .values()
                    .flatten()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" | "),
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_body_or_an_empty_object_is_one_seat_and_quantity_is_read() {
        assert_eq!(quantity(b"", 50).unwrap(), 1);
        assert_eq!(quantity(b"{}", 50).unwrap(), 1);
        assert_eq!(quantity(br#"{"quantity": 5}"#, 50).unwrap(), 5);
        assert_eq!(quantity(br#" {"quantity":50} "#, 50).unwrap(), 50);
    }

    #[test]
    fn anything_but_an_object_is_a_body_error() {
        for body in [
            "null",
            "[]",
            "[1]",
            "3",
            "\"x\"",
            "true",
            "{",
            "quantity=2",
            " ",
        ] {
            assert_eq!(reason(body).0, ["body"], "{body:?}");
        }
    }

    #[test]
    fn a_bad_quantity_or_an_unknown_field_is_named() {
        for body in [
            r#"{"quantity": 0}"#,
            r#"{"quantity": 51}"#,
            r#"{"quantity": -1}"#,
            r#"{"quantity": 2.5}"#,
            r#"{"quantity": 2.0}"#,
            r#"{"quantity": "2"}"#,
            r#"{"quantity": null}"#,
            r#"{"quantity": 1e2}"#,
            r#"{"quantity": 18446744073709551616}"#,
        ] {
            assert_eq!(reason(body).0, ["quantity"], "{body}");
        }
        let (fields, message) = reason(r#"{"qty": 2, "quantity": 0}"#);
        assert_eq!(fields, ["qty", "quantity"]);
        assert!(message.contains("\"qty\""), "{message}");
        let long = "x".repeat(1000);
        let (fields, _) = reason(&format!(r#"{{"{long}": 1}}"#));
        assert_eq!(
            fields,
            ["x".repeat(64)],
            "a sent name is cut to 64 characters"
        );
    }
}
