//! The waiting list's entry (SPEC §18): its id, its status and the
//! resource the API returns.

use super::{ClientId, HoldId, SlotId, parse_path_id, utc_micros};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::fmt;

/// A waiting-list entry's primary key: `BIGINT UNSIGNED`, 1 to 2^64−1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct EntryId(pub u64);

impl EntryId {
    pub fn parse(raw: &str) -> Option<Self> {
        parse_path_id(raw).map(Self)
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where an entry stands: `Waiting` until offered seats (`Offered`, its
/// hold made), then `Fulfilled` (the hold confirmed) or `Expired` (the
/// hold ended unconfirmed); or `Left` by its client, or `Expired` while
/// waiting (the slot started, shrank below it, or was deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryStatus {
    Waiting,
    Offered,
    Fulfilled,
    Expired,
    Left,
}

impl EntryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Offered => "offered",
            Self::Fulfilled => "fulfilled",
            Self::Expired => "expired",
            Self::Left => "left",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            Self::Waiting,
            Self::Offered,
            Self::Fulfilled,
            Self::Expired,
            Self::Left,
        ]
        .into_iter()
        .find(|status| status.as_str() == raw)
    }
}

/// The entry resource as the API returns it. `position` is 1 + the
/// waiting entries of its slot ahead of it, read with it (null unless
/// waiting); `hold_id` the offered hold (null until offered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub id: EntryId,
    pub slot_id: SlotId,
    /// The owner: decides who may see and change it, never shown.
    #[serde(skip)]
    pub client_id: ClientId,
    pub quantity: u32,
    pub status: EntryStatus,
    pub position: Option<u64>,
    pub hold_id: Option<HoldId>,
    pub idempotency_key: String,
    #[serde(serialize_with = "utc_micros")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "utc_micros")]
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_serialises_as_spec_18_says_and_hides_its_owner() {
        let at = DateTime::parse_from_rfc3339("2026-12-05T10:00:00.5Z")
            .unwrap()
            .with_timezone(&Utc);
        let entry = Entry {
            id: EntryId(9),
            slot_id: SlotId(3),
            client_id: ClientId(7),
            quantity: 2,
            status: EntryStatus::Waiting,
            position: Some(1),
            hold_id: None,
            idempotency_key: "k".into(),
            created_at: at,
            updated_at: at,
        };
        let json = serde_json::to_value(&entry).unwrap();
        let mut fields: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "created_at",
                "hold_id",
                "id",
                "idempotency_key",
                "position",
                "quantity",
                "slot_id",
                "status",
                "updated_at"
            ]
        );
        assert_eq!(json["status"], "waiting");
        assert_eq!(json["created_at"], "2026-12-05T10:00:00.500000Z");
        for status in ["waiting", "offered", "fulfilled", "expired", "left"] {
            assert_eq!(EntryStatus::parse(status).unwrap().as_str(), status);
        }
        assert_eq!(EntryStatus::parse("held"), None);
    }
}
