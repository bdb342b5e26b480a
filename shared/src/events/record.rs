//! The writers' half of the outbox: one row per change, inserted by the
//! transaction that makes the change, under the slot's lock, after the
//! change's own statements. Nothing here reads or takes another lock. A
//! hold's event is inserted by the statement that commits it
//! ([`commit_with`]), so the feed costs a booking no round trip
//! (docs/BENCHMARKS.md, "outbox").

use crate::db::Tx;
use crate::domain::{Entry, Hold, Slot, SlotId};
use crate::error::Error;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Serialize;
use sqlx::{MySql, MySqlConnection, QueryBuilder};

/// What happened (SPEC §12); the string is the event's `type` and, on
/// EventBridge, its `detail-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    HoldCreated,
    HoldConfirmed,
    HoldCancelled,
    HoldExtended,
    HoldExpired,
    HoldMoved,
    WaitlistJoined,
    WaitlistOffered,
    WaitlistFulfilled,
    WaitlistExpired,
    WaitlistLeft,
    SlotCreated,
    SlotUpdated,
    SlotDeleted,
}

impl EventType {
    pub const ALL: [Self; 14] = [
        Self::HoldCreated,
        Self::HoldConfirmed,
        Self::HoldCancelled,
        Self::HoldExtended,
        Self::HoldExpired,
        Self::HoldMoved,
        Self::WaitlistJoined,
        Self::WaitlistOffered,
        Self::WaitlistFulfilled,
        Self::WaitlistExpired,
        Self::WaitlistLeft,
        Self::SlotCreated,
        Self::SlotUpdated,
        Self::SlotDeleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::HoldCreated => "hold.created",
            Self::HoldConfirmed => "hold.confirmed",
            Self::HoldCancelled => "hold.cancelled",
            Self::HoldExtended => "hold.extended",
            Self::HoldExpired => "hold.expired",
            Self::HoldMoved => "hold.moved",
            Self::WaitlistJoined => "waitlist.joined",
            Self::WaitlistOffered => "waitlist.offered",
            Self::WaitlistFulfilled => "waitlist.fulfilled",
            Self::WaitlistExpired => "waitlist.expired",
            Self::WaitlistLeft => "waitlist.left",
            Self::SlotCreated => "slot.created",
            Self::SlotUpdated => "slot.updated",
            Self::SlotDeleted => "slot.deleted",
        }
    }
}

/// One event, in the order of `record`'s columns (public so that the
/// bench's raw sequences send this very string). `occurred_at` NULL: the
/// statement's own `now`, which follows the slot's lock.
pub const EVENT_INSERT: &str = "INSERT INTO events (type, client_id, slot_id, hold_id, occurred_at, data) \
     VALUES (?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6)), ?)";

/// Rows per INSERT: a batch of slots (≤ 500) or a reclaim's expired holds.
const ROWS_PER_INSERT: usize = 500;
/// Multi-row inserts of at most this many rows stay prepared (`insert`).
const KEPT_ROWS: usize = 4;

/// An event to insert.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub kind: EventType,
    /// Who sees it besides admins: the hold's owner (`None`: everyone).
    pub client_id: Option<u64>,
    pub slot_id: u64,
    pub hold_id: Option<u64>,
    /// `None`: the INSERT's own now.
    pub occurred_at: Option<NaiveDateTime>,
    /// The resource, as JSON.
    pub data: String,
}

fn json<T: Serialize>(resource: &T) -> Result<String, Error> {
    serde_json::to_string(resource)
        .map_err(|err| Error::Internal(sqlx::Error::Encode(Box::new(err))))
}

fn hold_row(kind: EventType, hold: &Hold, occurred_at: DateTime<Utc>) -> Result<NewEvent, Error> {
    Ok(NewEvent {
        kind,
        client_id: Some(hold.client_id.0),
        slot_id: hold.slot_id.0,
        hold_id: Some(hold.id.0),
        occurred_at: Some(occurred_at.naive_utc()),
        data: json(hold)?,
    })
}

/// The event of a change to `hold`, which is the hold as read after the
/// change in the same transaction; it happened at the hold's `updated_at`,
/// written by the change itself. (Public so that the bench's raw sequences
/// build their event with this very function.)
pub fn hold_event(kind: EventType, hold: &Hold) -> Result<NewEvent, Error> {
    hold_row(kind, hold, hold.updated_at)
}

/// Where a `hold.moved` row keeps the slot the hold left: inside its
/// stored `data`, which the feed and the publisher split into the hold
/// resource and the event's own `from_slot_id` (`feed::EventRow`).
pub(crate) const MOVED_FROM: &str = "from_slot_id";

/// `hold.moved` (SPEC §17, §19.5): the hold after the move, as every hold
/// event carries it, and the slot it left.
pub(crate) fn moved_event(hold: &Hold, from: SlotId) -> Result<NewEvent, Error> {
    let mut data = serde_json::to_value(hold)
        .map_err(|err| Error::Internal(sqlx::Error::Encode(Box::new(err))))?;
    if let Some(data) = data.as_object_mut() {
        data.insert(MOVED_FROM.into(), from.0.into());
    }
    Ok(NewEvent {
        data: json(&data)?,
        ..hold_event(EventType::HoldMoved, hold)?
    })
}

/// A `waitlist.*` event (SPEC §18): the entry after the change, seen by
/// its client and admins, at the entry's `updated_at`, written by the
/// change itself.
pub(crate) fn entry_event(kind: EventType, entry: &Entry) -> Result<NewEvent, Error> {
    Ok(NewEvent {
        kind,
        client_id: Some(entry.client_id.0),
        slot_id: entry.slot_id.0,
        hold_id: entry.hold_id.map(|hold| hold.0),
        occurred_at: Some(entry.updated_at.naive_utc()),
        data: json(entry)?,
    })
}

/// `hold.expired` for `hold` (read under the slot's lock, expired by
/// then): it happened at the hold's expiry.
pub(crate) fn expired_event(hold: &Hold) -> Result<NewEvent, Error> {
    hold_row(EventType::HoldExpired, hold, hold.expires_at)
}

/// The `events_commit` procedure (migrations/…_events_commit.sql): the
/// event's INSERT, then COMMIT, in one prepared statement.
pub const EVENTS_COMMIT: &str = "CALL events_commit(?, ?, ?, ?, ?, ?)";

/// Commits `tx` with `events` inserted last, in one round trip for the
/// last of them: the ones before it by the prepared INSERT, the last by
/// [`EVENTS_COMMIT`], which commits ([`Tx::commit_by`]). In order, so
/// each event gets a larger id than those before it. (Public so that the
/// bench's raw sequences commit with this very function.)
pub async fn commit_with(mut tx: Tx<'_>, events: &[NewEvent]) -> Result<(), Error> {
    let Some((last, before)) = events.split_last() else {
        tx.commit().await?;
        return Ok(());
    };
    if !before.is_empty() {
        insert(&mut tx, before).await?;
    }
    let call = sqlx::query(EVENTS_COMMIT)
        .bind(last.kind.as_str())
        .bind(last.client_id)
        .bind(last.slot_id)
        .bind(last.hold_id)
        .bind(last.occurred_at)
        .bind(&last.data);
    tx.commit_by(call).await?;
    Ok(())
}

/// `hold.expired` for each of `holds` (read under the slot's lock, expired
/// by then): it happened at the hold's expiry.
pub(crate) async fn record_expired(
    conn: &mut MySqlConnection,
    holds: &[Hold],
) -> Result<(), Error> {
    let rows = holds
        .iter()
        .map(expired_event)
        .collect::<Result<Vec<_>, _>>()?;
    insert(conn, &rows).await
}

/// One event per slot, each as read after the change (before it, for a
/// deletion), at the slot's `updated_at`.
pub(crate) async fn record_slots(
    conn: &mut MySqlConnection,
    kind: EventType,
    slots: &[Slot],
) -> Result<(), Error> {
    let rows = slots
        .iter()
        .map(|slot| {
            Ok(NewEvent {
                kind,
                client_id: None,
                slot_id: slot.id.0,
                hold_id: None,
                // A deletion leaves no `updated_at` behind: the INSERT's now.
                occurred_at: (kind != EventType::SlotDeleted)
                    .then_some(slot.updated_at.naive_utc()),
                data: json(slot)?,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    insert(conn, &rows).await
}

/// `rows`, inserted now, inside the caller's transaction (events made
/// before its last change: a waiting list's offers and expiries).
pub(crate) async fn record_events(
    conn: &mut MySqlConnection,
    rows: &[NewEvent],
) -> Result<(), Error> {
    insert(conn, rows).await
}

async fn insert(conn: &mut MySqlConnection, rows: &[NewEvent]) -> Result<(), Error> {
    if let [row] = rows {
        sqlx::query(EVENT_INSERT)
            .bind(row.kind.as_str())
            .bind(row.client_id)
            .bind(row.slot_id)
            .bind(row.hold_id)
            .bind(row.occurred_at)
            .bind(&row.data)
            .execute(&mut *conn)
            .await?;
        return Ok(());
    }
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut insert = QueryBuilder::<MySql>::new(
            "INSERT INTO events (type, client_id, slot_id, hold_id, occurred_at, data) ",
        );
        insert.push_values(chunk, |mut values, row| {
            values
                .push_bind(row.kind.as_str())
                .push_bind(row.client_id)
                .push_bind(row.slot_id)
                .push_bind(row.hold_id)
                .push("COALESCE(")
                .push_bind_unseparated(row.occurred_at)
                .push_unseparated(", UTC_TIMESTAMP(6))")
                .push_bind(&row.data);
        });
        // Each batch size is its own text: the few small ones an operation
        // writes (a cancel and its offers) are kept as prepared statements,
        // a round trip fewer each time; a sweep's large batches are not.
        let kept = chunk.len() <= KEPT_ROWS;
        insert.build().persistent(kept).execute(&mut *conn).await?;
    }
    Ok(())
}
