//! The waiting list's SQL shared by its operations: the entry resource's
//! columns and its look-ups.

use crate::domain::{ClientId, Entry, EntryId, EntryStatus, HoldId, IdempotencyKey, SlotId};
use crate::error::Error;
use chrono::{DateTime, Utc};

/// The entry resource's columns, for an entry aliased `e`, in `EntryRow`'s
/// order. `position` is read with it: the slot's waiting entries before it
/// (one range of `(slot_id, status, id)`), null unless it waits.
macro_rules! entry_columns {
    () => {
        concat!(
            "e.id, e.slot_id, e.client_id, e.quantity, e.idempotency_key, ",
            "CAST(e.status AS CHAR) AS status, e.hold_id, e.created_at, e.updated_at, ",
            "IF(e.status = 'waiting', 1 + (SELECT COUNT(*) FROM waitlist_entries a ",
            "FORCE INDEX (waitlist_entries_slot_id_status_id_index) ",
            "WHERE a.slot_id = e.slot_id AND a.status = 'waiting' AND a.id < e.id), NULL) AS position"
        )
    };
}

pub const FIND_ENTRY: &str = concat!(
    "SELECT ",
    entry_columns!(),
    " FROM waitlist_entries e WHERE e.id = ?"
);

pub const FIND_ENTRY_BY_KEY: &str = concat!(
    "SELECT ",
    entry_columns!(),
    " FROM waitlist_entries e WHERE e.client_id = ? AND e.idempotency_key = ?"
);

/// An entry row as decoded from MySQL.
#[derive(sqlx::FromRow)]
pub(crate) struct EntryRow {
    id: u64,
    slot_id: u64,
    client_id: u64,
    quantity: u32,
    idempotency_key: String,
    status: String,
    hold_id: Option<u64>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    position: Option<i64>,
}

impl EntryRow {
    pub(crate) fn into_entry(self) -> Result<Entry, Error> {
        let status = EntryStatus::parse(&self.status).ok_or_else(|| {
            Error::Internal(sqlx::Error::Decode(
                format!("unknown waiting-list status {:?}", self.status).into(),
            ))
        })?;
        Ok(Entry {
            id: EntryId(self.id),
            slot_id: SlotId(self.slot_id),
            client_id: ClientId(self.client_id),
            quantity: self.quantity,
            status,
            position: self.position.and_then(|p| u64::try_from(p).ok()),
            hold_id: self.hold_id.map(HoldId),
            idempotency_key: self.idempotency_key,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

pub(crate) async fn find_entry<'c, E>(conn: E, id: EntryId) -> Result<Option<Entry>, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::MySql>,
{
    sqlx::query_as::<_, EntryRow>(FIND_ENTRY)
        .bind(id.0)
        .fetch_optional(conn)
        .await?
        .map(EntryRow::into_entry)
        .transpose()
}

/// The caller's own entry with this key: keys are scoped to their client,
/// apart from its holds' keys (SPEC §18).
pub(crate) async fn find_entry_by_key<'c, E>(
    conn: E,
    client: ClientId,
    key: &IdempotencyKey,
) -> Result<Option<Entry>, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::MySql>,
{
    sqlx::query_as::<_, EntryRow>(FIND_ENTRY_BY_KEY)
        .bind(client.0)
        .bind(key.as_str())
        .fetch_optional(conn)
        .await?
        .map(EntryRow::into_entry)
        .transpose()
}
