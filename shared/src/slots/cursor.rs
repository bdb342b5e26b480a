//! The availability list's cursor (SPEC §11, §15.12): opaque to clients,
//! versioned, integrity-checked and bound to the filters it was issued
//! for.
//!
//! A cursor carries what the next page needs to continue the same walk:
//! the last slot id seen (keyset pagination: the next page is `id > last`)
//! and, when `from` is absent, the `now` of the walk's first page, frozen,
//! so that every page filters "not ended" against the same instant and a
//! walk is one consistent set. It also carries a digest of the filters
//! (`from`, `to`, `available`; not `limit`, which may change between
//! pages), so a cursor sent with other filters is refused.
//!
//! Layout (34 bytes, 46 characters of URL-safe base64 without padding):
//! `version (1) | flags (1) | last id (8) | now µs (8) | filters (8) | tag (8)`,
//! integers big-endian. The tag is the first 8 bytes of SHA-256 over a
//! fixed label and the 26 bytes before it. It is a checksum, not a MAC:
//! there is no secret, so a client could forge a cursor, but a forged
//! cursor grants nothing the client cannot already ask for with filters.
//! Its job is to refuse (422 `cursor`) anything the server never issued:
//! a truncated, mistyped or altered cursor, or one of another version; and
//! since anyone can compute the tag, a `now` the database cannot hold is
//! refused too (SPEC §16: a forged cursor is a 422, never a 500).

use crate::domain::{SlotId, storable};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

/// The only version issued and accepted so far.
const VERSION: u8 = 1;
/// `flags` bit 0: the cursor carries a frozen `now`.
const HAS_NOW: u8 = 1;
const LABEL: &[u8] = b"slot-booking availability cursor";
const PAYLOAD: usize = 26;
const LENGTH: usize = PAYLOAD + 8;

/// What selects the slots of a walk (SPEC §11); `limit` is not part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Filters {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// `available=true`; `false` (or absent) is no filter.
    pub available: bool,
}

impl Filters {
    /// The filters in a canonical form (instants in UTC microseconds, so
    /// `10:00+01:00` and `09:00Z` are one filter), digested.
    fn digest(&self) -> [u8; 8] {
        let at = |t: Option<DateTime<Utc>>| {
            t.map_or_else(|| "-".to_string(), |t| t.timestamp_micros().to_string())
        };
        let canonical = format!(
            "from={};to={};available={}",
            at(self.from),
            at(self.to),
            u8::from(self.available)
        );
        first8(&Sha256::digest(canonical.as_bytes()))
    }
}

/// Where a walk stands after a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The last slot id served; the next page starts after it.
    pub after: SlotId,
    /// The first page's `now`, when the walk is "not ended" (no `from`).
    pub now: Option<DateTime<Utc>>,
}

/// Why a cursor is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorError {
    /// Not one the server issued (or altered, truncated, another version).
    Unknown,
    /// Issued for other `from`, `to` or `available`.
    OtherFilters,
}

impl Cursor {
    /// The opaque form, bound to `filters`.
    pub fn encode(&self, filters: &Filters) -> String {
        let mut bytes = Vec::with_capacity(LENGTH);
        bytes.push(VERSION);
        bytes.push(if self.now.is_some() { HAS_NOW } else { 0 });
        bytes.extend_from_slice(&self.after.0.to_be_bytes());
        let now = self.now.map_or(0, |now| now.timestamp_micros());
        bytes.extend_from_slice(&now.to_be_bytes());
        bytes.extend_from_slice(&filters.digest());
        let tag = tag(&bytes);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The cursor `raw`, if the server issued it for these `filters`. A
    /// walk without `from` must carry its frozen `now`, and one with
    /// `from` must not.
    pub fn decode(raw: &str, filters: &Filters) -> Result<Self, CursorError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(raw)
            .map_err(|_| CursorError::Unknown)?;
        if bytes.len() != LENGTH || bytes[0] != VERSION {
            return Err(CursorError::Unknown);
        }
        let (payload, sent_tag) = bytes.split_at(PAYLOAD);
        if tag(payload) != sent_tag {
            return Err(CursorError::Unknown);
        }
        let flags = payload[1];
        let after = u64::from_be_bytes(payload[2..10].try_into().unwrap_or_default());
        let micros = i64::from_be_bytes(payload[10..18].try_into().unwrap_or_default());
        if payload[18..26] != filters.digest() {
            return Err(CursorError::OtherFilters);
        }
        let now = match flags {
            // The checksum has no secret: a value the server never issues
            // is refused here, not by the database's date encoder (a 500).
            HAS_NOW => Some(
                DateTime::from_timestamp_micros(micros)
                    .filter(storable)
                    .ok_or(CursorError::Unknown)?,
            ),
            0 => None,
            _ => return Err(CursorError::Unknown),
        };
        if now.is_some() == filters.from.is_some() {
            return Err(CursorError::Unknown);
        }
        Ok(Self {
            after: SlotId(after),
            now,
        })
    }
}

fn tag(payload: &[u8]) -> [u8; 8] {
    checksum(LABEL, payload)
}

/// The first 8 bytes of SHA-256 over `label` and `payload`: the tag of
/// every cursor the server issues (the change feed's too), each kind with
/// its own label so that one kind's cursor is never another's.
pub(crate) fn checksum(label: &[u8], payload: &[u8]) -> [u8; 8] {
    let mut hash = Sha256::new();
    hash.update(label);
    hash.update(payload);
    first8(&hash.finalize())
}

fn first8(digest: &[u8]) -> [u8; 8] {
    let mut out = [0; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::parse_instant;

    fn not_ended() -> (Cursor, Filters) {
        let now = parse_instant("2026-12-01T09:00:00.123456Z").unwrap();
        let filters = Filters {
            to: Some(parse_instant("2027-01-01T00:00:00Z").unwrap()),
            ..Filters::default()
        };
        let cursor = Cursor {
            after: SlotId(41),
            now: Some(now),
        };
        (cursor, filters)
    }

    #[test]
    fn a_cursor_round_trips_with_its_filters_and_frozen_now() {
        let (cursor, filters) = not_ended();
        let raw = cursor.encode(&filters);
        assert_eq!(raw.len(), 46);
        assert!(
            raw.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(Cursor::decode(&raw, &filters), Ok(cursor));
        let from = Filters {
            from: filters.to,
            ..Filters::default()
        };
        let windowed = Cursor {
            after: SlotId(u64::MAX),
            now: None,
        };
        assert_eq!(Cursor::decode(&windowed.encode(&from), &from), Ok(windowed));
    }

    #[test]
    fn the_same_instant_in_another_offset_is_the_same_filter() {
        let (cursor, filters) = not_ended();
        let raw = cursor.encode(&filters);
        let same = Filters {
            to: Some(parse_instant("2027-01-01T01:00:00+01:00").unwrap()),
            ..filters
        };
        assert_eq!(Cursor::decode(&raw, &same), Ok(cursor));
    }

    #[test]
    fn a_cursor_with_other_filters_is_refused() {
        let (cursor, filters) = not_ended();
        let raw = cursor.encode(&filters);
        for other in [
            Filters::default(),
            Filters {
                available: true,
                ..filters
            },
            Filters {
                to: Some(parse_instant("2027-01-01T00:00:00.000001Z").unwrap()),
                ..filters
            },
        ] {
            assert_eq!(
                Cursor::decode(&raw, &other),
                Err(CursorError::OtherFilters),
                "{other:?}"
            );
        }
    }

    #[test]
    fn anything_the_server_did_not_issue_is_unknown() {
        let (cursor, filters) = not_ended();
        let raw = cursor.encode(&filters);
        let mut flipped = raw.clone().into_bytes();
        flipped[5] = if flipped[5] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        let mut v2 = URL_SAFE_NO_PAD.decode(&raw).unwrap();
        v2[0] = 2;
        for bad in [
            String::new(),
            "abc".to_string(),
            raw[..45].to_string(),
            format!("{raw}A"),
            format!("{raw}="),
            raw.replace('-', "+"),
            flipped,
            URL_SAFE_NO_PAD.encode(v2),
            "€".to_string(),
        ] {
            if bad == raw {
                continue;
            }
            assert_eq!(
                Cursor::decode(&bad, &filters),
                Err(CursorError::Unknown),
                "{bad:?}"
            );
        }
    }
}
