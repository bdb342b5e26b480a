//! The one error type of the service and the one place where it becomes HTTP.
//!
//! The booking service returns [`Error`] with a machine-readable
//! [`Error::reason`]; [`Error::status`] and [`Error::to_body`] are the only
//! mapping to HTTP. Internal causes (SQL, connection strings) are logged by
//! the HTTP layer and never put in a body.

use crate::domain::{HoldId, SlotId};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Field name → messages, Laravel's `errors` shape.
pub type FieldErrors = BTreeMap<&'static str, Vec<String>>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("slot {0} does not exist")]
    SlotNotFound(SlotId),
    #[error("hold {0} does not exist")]
    HoldNotFound(HoldId),
    /// An unknown route, or a path id that cannot name a row (`0`, `-1`,
    /// `abc`, > 2^64−1).
    #[error("no {0} matches the request")]
    NotFound(&'static str),
    #[error("slot {0} has no remaining capacity")]
    CapacityExhausted(SlotId),
    #[error("hold {0} is cancelled")]
    HoldCancelled(HoldId),
    #[error("hold {0} has expired")]
    HoldExpired(HoldId),
    #[error("idempotency key was already used for slot {used_for}")]
    IdempotencyKeyReuse { used_for: SlotId },
    #[error("validation failed: {0:?}")]
    Validation(FieldErrors),
    /// The database cannot be reached, or a lock wait / deadlock outlived
    /// the retries. Nothing was written; the request is safe to retry.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("unexpected database error: {0}")]
    Internal(#[source] sqlx::Error),
}

impl Error {
    /// A validation failure on one field.
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::Validation(BTreeMap::from([(field, vec![message.into()])]))
    }

    /// The stable code a program branches on.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::SlotNotFound(_) | Self::HoldNotFound(_) | Self::NotFound(_) => "not_found",
            Self::CapacityExhausted(_) => "capacity_exhausted",
            Self::HoldCancelled(_) => "hold_cancelled",
            Self::HoldExpired(_) => "hold_expired",
            Self::IdempotencyKeyReuse { .. } => "idempotency_key_reuse",
            Self::Validation(_) => "validation_failed",
            Self::Unavailable(_) => "service_unavailable",
            Self::Internal(_) => "internal_error",
        }
    }

    /// The HTTP status: the single error → status mapping of the service.
    pub fn status(&self) -> u16 {
        match self {
            Self::SlotNotFound(_) | Self::HoldNotFound(_) | Self::NotFound(_) => 404,
            Self::CapacityExhausted(_) | Self::HoldCancelled(_) | Self::HoldExpired(_) => 409,
            Self::IdempotencyKeyReuse { .. } | Self::Validation(_) => 422,
            Self::Unavailable(_) => 503,
            Self::Internal(_) => 500,
        }
    }

    /// A sentence for a person; never carries an internal cause.
    pub fn message(&self) -> String {
        match self {
            Self::SlotNotFound(id) => format!("Slot {id} does not exist."),
            Self::HoldNotFound(id) => format!("Hold {id} does not exist."),
            Self::NotFound(what) => format!("No {what} matches this request."),
            Self::CapacityExhausted(id) => format!("Slot {id} has no remaining capacity."),
            Self::HoldCancelled(id) => format!("Hold {id} has been cancelled."),
            Self::HoldExpired(id) => format!("Hold {id} has expired."),
            Self::IdempotencyKeyReuse { used_for } => {
                format!("This idempotency key was already used for slot {used_for}.")
            }
            Self::Validation(errors) => validation_summary(errors),
            Self::Unavailable(_) => {
                "The service is temporarily unavailable; the request can be retried.".into()
            }
            Self::Internal(_) => "An unexpected error occurred.".into(),
        }
    }

    /// `{"message": …, "reason": …}`, plus `errors` for validation failures.
    pub fn to_body(&self) -> Value {
        let mut body = json!({"message": self.message(), "reason": self.reason()});
        if let Self::Validation(errors) = self {
            body["errors"] = json!(errors);
        }
        body
    }

    /// Errors a client caused are part of normal traffic; the rest are ours.
    pub fn is_server_side(&self) -> bool {
        self.status() >= 500
    }
}

/// Laravel's summary: the first message, and how many more there are.
fn validation_summary(errors: &FieldErrors) -> String {
    let mut messages = errors.values().flatten();
    let first = messages
        .next()
        .cloned()
        .unwrap_or_else(|| "The given data was invalid.".into());
    match messages.count() {
        0 => first,
        1 => format!("{first} (and 1 more error)"),
        more => format!("{first} (and {more} more errors)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_of_the_spec_maps_to_its_status() {
        let cases = [
            (
                Error::CapacityExhausted(SlotId(3)),
                409,
                "capacity_exhausted",
            ),
            (Error::HoldCancelled(HoldId(1)), 409, "hold_cancelled"),
            (Error::HoldExpired(HoldId(1)), 409, "hold_expired"),
            (
                Error::IdempotencyKeyReuse {
                    used_for: SlotId(2),
                },
                422,
                "idempotency_key_reuse",
            ),
            (Error::SlotNotFound(SlotId(9)), 404, "not_found"),
            (Error::HoldNotFound(HoldId(9)), 404, "not_found"),
            (
                Error::invalid("idempotency_key", "x"),
                422,
                "validation_failed",
            ),
            (
                Error::Unavailable(sqlx::Error::PoolTimedOut),
                503,
                "service_unavailable",
            ),
        ];
        for (err, status, reason) in cases {
            assert_eq!((err.status(), err.reason()), (status, reason), "{err}");
        }
    }

    #[test]
    fn the_capacity_message_reads_as_the_spec_example() {
        let body = Error::CapacityExhausted(SlotId(3)).to_body();
        assert_eq!(
            body,
            json!({"message": "Slot 3 has no remaining capacity.", "reason": "capacity_exhausted"})
        );
    }

    #[test]
    fn validation_errors_carry_laravels_errors_object() {
        let body =
            Error::invalid("idempotency_key", "The idempotency key field is required.").to_body();
        assert_eq!(body["reason"], "validation_failed");
        assert_eq!(body["message"], "The idempotency key field is required.");
        assert_eq!(
            body["errors"]["idempotency_key"][0],
            "The idempotency key field is required."
        );
    }

    #[test]
    fn server_side_messages_never_carry_the_internal_cause() {
        let err = Error::Internal(sqlx::Error::Protocol(
            "SELECT secret FROM mysql://root:pw@db".into(),
        ));
        let body = err.to_body().to_string();
        assert!(
            !body.contains("SELECT") && !body.contains("mysql://"),
            "{body}"
        );
    }
}
