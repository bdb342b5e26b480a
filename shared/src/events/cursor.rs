//! The change feed's cursor (SPEC §12, §15.12): opaque, versioned and
//! integrity-checked, like the availability list's.
//!
//! It carries the feed position `seq` of the last event served (or the
//! position the feed was at when nothing was left to serve): the next page
//! is `seq > after`. Layout (17 bytes, 23 characters of URL-safe base64
//! without padding): `version (1) | after (8) | tag (8)`, the tag being the
//! checksum of the 9 bytes before it under this cursor's own label. A
//! checksum, not a MAC: a forged position grants nothing (visibility is
//! decided per event), and its job is to refuse what the server never
//! issued: a mistyped or truncated cursor, or one from the future.

use crate::slots::cursor::checksum;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const VERSION: u8 = 1;
const LABEL: &[u8] = b"slot-booking event cursor";
const PAYLOAD: usize = 9;

/// A position in the feed: every event with `seq > after` is still ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventCursor {
    pub after: u64,
}

/// Why a cursor is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorError {
    /// Not one the server issued: 422 `cursor`.
    Unknown,
    /// Issued, but retention has deleted events after it: 410
    /// `cursor_expired`.
    Expired,
}

impl EventCursor {
    pub fn encode(self) -> String {
        let mut bytes = Vec::with_capacity(PAYLOAD + 8);
        bytes.push(VERSION);
        bytes.extend_from_slice(&self.after.to_be_bytes());
        let tag = checksum(LABEL, &bytes);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The cursor `raw`, if its form is one the server issues. Whether the
    /// position was ever reached is the feed's to check.
    pub fn decode(raw: &str) -> Result<Self, CursorError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(raw)
            .map_err(|_| CursorError::Unknown)?;
        if bytes.len() != PAYLOAD + 8 || bytes[0] != VERSION {
            return Err(CursorError::Unknown);
        }
        let (payload, tag) = bytes.split_at(PAYLOAD);
        if checksum(LABEL, payload) != tag {
            return Err(CursorError::Unknown);
        }
        let after = u64::from_be_bytes(payload[1..].try_into().map_err(|_| CursorError::Unknown)?);
        Ok(Self { after })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_nothing_else_decodes() {
        for after in [0, 1, 42, u64::MAX] {
            let raw = EventCursor { after }.encode();
            assert_eq!(raw.len(), 23);
            assert_eq!(EventCursor::decode(&raw), Ok(EventCursor { after }));
        }
        let raw = EventCursor { after: 7 }.encode();
        let mut flipped = raw.clone().into_bytes();
        flipped[4] = if flipped[4] == b'A' { b'B' } else { b'A' };
        let availability = crate::slots::cursor::Cursor {
            after: crate::domain::SlotId(7),
            now: None,
        }
        .encode(&crate::slots::cursor::Filters::default());
        for bad in [
            String::new(),
            "7".to_string(),
            raw[..22].to_string(),
            format!("{raw}A"),
            String::from_utf8(flipped).unwrap(),
            availability,
            "€".to_string(),
        ] {
            assert_eq!(
                EventCursor::decode(&bad),
                Err(CursorError::Unknown),
                "{bad:?}"
            );
        }
    }
}
