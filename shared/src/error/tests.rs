use super::*;

#[test]
fn every_reason_of_the_spec_maps_to_its_status() {
    let cases = [
        (
            Error::CapacityExhausted(SlotId(3)),
            409,
            "capacity_exhausted",
        ),
        (
            Error::HoldLimitReached {
                cap: 500,
                held: 498,
            },
            409,
            "hold_limit_reached",
        ),
        (Error::HoldCancelled(HoldId(1)), 409, "hold_cancelled"),
        (Error::ClientRevoked(ClientId(4)), 409, "client_revoked"),
        (
            Error::PayloadTooLarge {
                size: 1025,
                limit: 1024,
            },
            413,
            "payload_too_large",
        ),
        (Error::HoldExpired(HoldId(1)), 409, "hold_expired"),
        (
            Error::IdempotencyKeyReuse(KeyReuse::Slot {
                used_for: SlotId(2),
            }),
            422,
            "idempotency_key_reuse",
        ),
        (
            Error::IdempotencyKeyReuse(KeyReuse::Quantity {
                used_for: 2,
                asked: 3,
            }),
            422,
            "idempotency_key_reuse",
        ),
        (Error::HoldConfirmed(HoldId(1)), 409, "hold_confirmed"),
        (
            Error::ExtensionLimitReached(HoldId(1)),
            409,
            "extension_limit_reached",
        ),
        (Error::SlotClosed(SlotId(1)), 409, "slot_closed"),
        (
            Error::CapacityBelowCommitted {
                slot: SlotId(1),
                capacity: 3,
                confirmed: 2,
                held: 2,
            },
            409,
            "capacity_below_committed",
        ),
        (
            Error::SlotHasBookings {
                slot: SlotId(1),
                confirmed: 1,
                held: 0,
            },
            409,
            "slot_has_bookings",
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
        (
            Error::Unauthenticated(Unauthenticated::Missing),
            401,
            "unauthenticated",
        ),
        (Error::Forbidden, 403, "forbidden"),
        (Error::RateLimited { retry_after: 1 }, 429, "rate_limited"),
        (Error::ClientNotFound(ClientId(4)), 404, "not_found"),
        (
            Error::MethodNotAllowed {
                method: "PUT".into(),
                allow: &["GET", "DELETE"],
            },
            405,
            "method_not_allowed",
        ),
        (Error::NameTaken("a".into()), 409, "name_taken"),
        (Error::LastAdmin(ClientId(2)), 409, "last_admin"),
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

#[test]
fn hold_limit_reached_gives_the_cap_and_the_seats_held_as_the_readme_shows() {
    let err = Error::HoldLimitReached {
        cap: 500,
        held: 498,
    };
    let readme = include_str!("../../../README.md");
    let shown = format!(
        "{{\"message\":\"{}\",\"reason\":\"hold_limit_reached\"}}   # 409",
        err.message()
    );
    assert!(readme.contains(&shown), "README shows {shown}");
}
