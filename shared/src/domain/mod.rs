//! Domain values and the resources the API returns.
//!
//! Values are validated when they are built (`parse`), so the service layer
//! never sees a malformed id or key.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Serialize, Serializer};
use std::fmt;

mod entry;
pub use entry::{Entry, EntryId, EntryStatus};

/// A slot's primary key: `BIGINT UNSIGNED`, 1 to 2^64−1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct SlotId(pub u64);

/// A hold's primary key: `BIGINT UNSIGNED`, 1 to 2^64−1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct HoldId(pub u64);

/// One request, the same on each of its attempts (`holds.created_by`,
/// `holds.confirmed_by`): a random 63-bit number, so that it fits every
/// integer column and two requests never share one in practice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

impl RequestId {
    pub fn random() -> Self {
        Self(rand::random::<u64>() >> 1)
    }
}

/// An `api_clients` primary key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ClientId(pub u64);

impl ClientId {
    pub fn parse(raw: &str) -> Option<Self> {
        parse_path_id(raw).map(Self)
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

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
    /// The waiting-list entry it was offered to (SPEC §18), never shown.
    #[serde(skip)]
    pub entry_id: Option<EntryId>,
    /// The request that created it, and the one that confirmed it: a
    /// retry after a lost answer knows its own change by them. Never shown.
    #[serde(skip)]
    pub created_by: Option<RequestId>,
    #[serde(skip)]
    pub confirmed_by: Option<RequestId>,
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

/// The slot resource (SPEC §10): `capacity = confirmed + held + remaining`,
/// all read from one snapshot. `remaining` has the availability list's
/// meaning (bookable now); `held` counts the seats of active holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slot {
    pub id: SlotId,
    #[serde(serialize_with = "utc_micros")]
    pub starts_at: DateTime<Utc>,
    #[serde(serialize_with = "utc_micros")]
    pub ends_at: DateTime<Utc>,
    pub capacity: u32,
    pub confirmed: u32,
    pub held: u32,
    pub remaining: u32,
    /// The most seats one client may have on this slot (SPEC §16); `None`:
    /// no limit.
    pub max_seats_per_client: Option<u32>,
    /// The seats its waiting entries ask for (SPEC §18).
    pub waiting: u32,
    #[serde(serialize_with = "utc_micros")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "utc_micros")]
    pub updated_at: DateTime<Utc>,
}

/// Parses an instant as the API accepts it (SPEC §15.10): RFC 3339's
/// `YYYY-MM-DDTHH:MM:SS[.fraction]` with `T` or `t`, then `Z`, `z` or
/// `±hh:mm`. A space for `T` (which chrono's own RFC 3339 parser allows),
/// a missing offset, a leap second, more precision than the microsecond
/// the database stores, and a UTC year outside `DATETIME`'s 1000–9999 are
/// refused, with the reason as a sentence's end ("must …").
pub fn parse_instant(raw: &str) -> Result<DateTime<Utc>, &'static str> {
    const SHAPE: &str = "must be an RFC 3339 time with an offset, such as 2026-12-01T09:00:00Z \
                         or 2026-12-01T10:00:00+01:00 (in a query string, + is sent as %2B)";
    let bytes = raw.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|b| b.iter().all(u8::is_ascii_digit))
    };
    let shaped = bytes.len() >= 20
        && digits(0..4)
        && bytes[4] == b'-'
        && digits(5..7)
        && bytes[7] == b'-'
        && digits(8..10)
        && matches!(bytes[10], b'T' | b't')
        && digits(11..13)
        && bytes[13] == b':'
        && digits(14..16)
        && bytes[16] == b':'
        && digits(17..19);
    if !shaped {
        return Err(SHAPE);
    }
    let mut rest = &bytes[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 {
            return Err(SHAPE);
        }
        if fraction[..n].iter().skip(6).any(|b| *b != b'0') {
            return Err("must not be more precise than a microsecond");
        }
        rest = &fraction[n..];
    }
    let offset_ok = match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|b| b.is_ascii_digit()),
        _ => false,
    };
    if !offset_ok {
        return Err(SHAPE);
    }
    let parsed = DateTime::parse_from_rfc3339(raw).map_err(|_| "must be a real date and time")?;
    if parsed.timestamp_subsec_nanos() >= 1_000_000_000 {
        return Err("must not be a leap second");
    }
    let utc = parsed.with_timezone(&Utc);
    if !storable(&utc) {
        return Err("must fall in the years 1000 to 9999 (UTC)");
    }
    Ok(utc)
}

/// Whether the database can hold `at`: a `DATETIME`'s UTC years 1000 to
/// 9999. Every instant that reaches a statement has passed here, the ones
/// a cursor carries back included (sqlx's encoder fails on the others).
pub fn storable(at: &DateTime<Utc>) -> bool {
    (1000..=9999).contains(&chrono::Datelike::year(at))
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
mod tests;
