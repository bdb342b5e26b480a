//! Domain values and the resources the API returns.
//!
//! Values are validated when they are built (`parse`), so the service layer
//! never sees a malformed id or key.

use crate::clients::ClientId;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Serialize, Serializer};
use std::fmt;

/// A slot's primary key: `BIGINT UNSIGNED`, 1 to 2^64−1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct SlotId(pub u64);

/// A hold's primary key: `BIGINT UNSIGNED`, 1 to 2^64−1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct HoldId(pub u64);

/// Parses a path id: decimal digits only (no sign, no spaces), 1 to 2^64−1.
/// Anything else is `None`, which the API answers with 404 rather than 422:
/// no such resource can exist.
pub fn parse_path_id(raw: &str) -> Option<u64> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse::<u64>().ok().filter(|id| *id > 0)
}

impl SlotId {
    pub fn parse(raw: &str) -> Option<Self> {
        parse_path_id(raw).map(Self)
    }
}

impl HoldId {
    pub fn parse(raw: &str) -> Option<Self> {
        parse_path_id(raw).map(Self)
    }
}

impl fmt::Display for SlotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for HoldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A client-chosen idempotency key: a UUID in the canonical hyphenated
/// 8-4-4-4-12 form, any case, stored lower-case (it fills `CHAR(36)`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Accepts exactly 36 characters: hex digits with hyphens at positions
    /// 8, 13, 18 and 23. Braces, `urn:uuid:` and the 32-hex form are refused
    /// so that one key has one spelling (`uuid::Uuid::parse_str` accepts all
    /// of them).
    pub fn parse(raw: &str) -> Option<Self> {
        let bytes = raw.as_bytes();
        if bytes.len() != 36 {
            return None;
        }
        let well_formed = bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
        well_formed.then(|| Self(raw.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The stored state of a hold. An *expired* hold keeps `Held`: expiry is a
/// property of the query (see [`crate::booking::ACTIVE_HOLD`]), not a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HoldStatus {
    Held,
    Confirmed,
    Cancelled,
}

impl HoldStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "held" => Some(Self::Held),
            "confirmed" => Some(Self::Confirmed),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }
}

/// The hold resource as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hold {
    pub id: HoldId,
    pub slot_id: SlotId,
    /// The owner: decides who may see and change the hold, never shown.
    #[serde(skip)]
    pub client_id: ClientId,
    pub status: HoldStatus,
    /// Seats claimed, all or nothing (SPEC §9).
    pub quantity: u32,
    /// `held` and unexpired by the database's clock when it was read.
    pub active: bool,
    pub idempotency_key: String,
    #[serde(serialize_with = "utc_micros")]
    pub expires_at: DateTime<Utc>,
    #[serde(serialize_with = "utc_micros_opt")]
    pub confirmed_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "utc_micros_opt")]
    pub cancelled_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "utc_micros")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "utc_micros")]
    pub updated_at: DateTime<Utc>,
}

/// One line of `GET /slots/availability`. `remaining` is what a client can
/// still book: the slot's remaining seats minus its active holds, never < 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlotAvailability {
    pub slot_id: SlotId,
    pub capacity: u32,
    pub remaining: u32,
    #[serde(serialize_with = "utc_micros")]
    pub starts_at: DateTime<Utc>,
    #[serde(serialize_with = "utc_micros")]
    pub ends_at: DateTime<Utc>,
}

/// `2026-11-30T10:05:00.123456Z`: UTC, microseconds, as stored.
pub(crate) fn utc_micros<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Micros, true))
}

pub(crate) fn utc_micros_opt<S: Serializer>(
    at: &Option<DateTime<Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => utc_micros(at, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
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
    fn hold_times_serialise_as_utc_with_microseconds() {
        let at = DateTime::parse_from_rfc3339("2026-11-30T10:05:00.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let hold = Hold {
            id: HoldId(42),
            slot_id: SlotId(3),
            client_id: crate::clients::ClientId(7),
            status: HoldStatus::Held,
            quantity: 2,
            active: true,
            idempotency_key: "k".into(),
            expires_at: at,
            confirmed_at: None,
            cancelled_at: None,
            created_at: at,
            updated_at: at,
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
}
