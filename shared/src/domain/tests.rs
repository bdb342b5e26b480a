//! The domain types' parsing and serialisation.

use super::*;

#[test]
fn path_ids_are_positive_decimal_digits_within_u64() {
    assert_eq!(parse_path_id("1"), Some(1));
    assert_eq!(parse_path_id("007"), Some(7));
    assert_eq!(parse_path_id("18446744073709551615"), Some(u64::MAX));
    for bad in [
        "",
        "0",
        "-1",
        "+1",
        "abc",
        " 1",
        "1.0",
        "18446744073709551616",
        "١",
    ] {
        assert_eq!(parse_path_id(bad), None, "{bad:?} must not parse");
    }
}

#[test]
fn idempotency_keys_must_be_canonical_hyphenated_uuids_in_any_case() {
    let key = IdempotencyKey::parse("6F1C2A3B-0D4E-4F5A-8B6C-7D8E9F0A1B2C").unwrap();
    assert_eq!(key.as_str(), "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c");
    for bad in [
        "",
        "6f1c2a3b0d4e4f5a8b6c7d8e9f0a1b2c",
        "{6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c}",
        "urn:uuid:6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c",
        "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2g",
        "6f1c2a3b-0d4e-4f5a-8b6c7-d8e9f0a1b2c",
        "' OR 1=1; DROP TABLE holds; --------",
    ] {
        assert!(
            IdempotencyKey::parse(bad).is_none(),
            "{bad:?} must be refused"
        );
    }
}

#[test]
fn instants_are_strict_rfc_3339_with_an_offset() {
    let at = |raw| parse_instant(raw).map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true));
    assert_eq!(
        at("2026-12-01T09:00:00Z").unwrap(),
        "2026-12-01T09:00:00.000000Z"
    );
    assert_eq!(
        at("2026-12-01t10:00:00+01:00").unwrap(),
        "2026-12-01T09:00:00.000000Z"
    );
    assert_eq!(
        at("2026-12-01T09:00:00.5z").unwrap(),
        "2026-12-01T09:00:00.500000Z"
    );
    assert_eq!(
        at("2026-12-01T09:00:00.123456000-00:30").unwrap(),
        "2026-12-01T09:30:00.123456Z"
    );
    for bad in [
        "",
        "2026-12-01 09:00:00Z",
        "2026-12-01T09:00:00",
        "2026-12-01T09:00Z",
        "2026-12-01T09:00:00+0100",
        "2026-12-01T09:00:00+01",
        "2026-12-01T09:00:00 01:00",
        "2026-12-01T09:00:00.Z",
        "2026-12-01T09:00:00.1234567Z",
        "2026-02-30T09:00:00Z",
        "2026-12-01T24:00:00Z",
        "2026-12-31T23:59:60Z",
        "0999-12-31T23:59:59Z",
        "1000-01-01T00:30:00+01:00",
        "2026-12-01T09:00:00Z ",
        "1733043600",
    ] {
        assert!(parse_instant(bad).is_err(), "{bad:?} must be refused");
    }
}

#[test]
fn hold_times_serialise_as_utc_with_microseconds() {
    let at = DateTime::parse_from_rfc3339("2026-11-30T10:05:00.123456Z")
        .unwrap()
        .with_timezone(&Utc);
    let hold = Hold {
        id: HoldId(42),
        slot_id: SlotId(3),
        client_id: ClientId(7),
        status: HoldStatus::Held,
        quantity: 2,
        active: true,
        idempotency_key: "k".into(),
        expires_at: at,
        confirmed_at: None,
        cancelled_at: None,
        created_at: at,
        updated_at: at,
        entry_id: None,
        created_by: Some(RequestId(9)),
        confirmed_by: None,
    };
    let json = serde_json::to_value(&hold).unwrap();
    assert_eq!(json["expires_at"], "2026-11-30T10:05:00.123456Z");
    assert_eq!(json["status"], "held");
    assert_eq!(json["quantity"], 2);
    assert_eq!(json["active"], true);
    assert!(json.get("client_id").is_none(), "the owner is never shown");
    assert_eq!(json["id"], 42);
    assert!(json["confirmed_at"].is_null());
}
