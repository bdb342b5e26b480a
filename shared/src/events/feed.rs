//! `GET /events`: a page of the feed, oldest first, for one client.

use super::cursor::{CursorError, EventCursor};
use super::record::{EventType, MOVED_FROM};
use super::sequence::sequence;
use crate::clients::{Caller, Role};
use crate::db::{self, Deadline};
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Connection, MySqlConnection, MySqlPool};
use std::time::Instant;

/// The feed's bounds, read in the page's snapshot.
pub const FEED_BOUNDS: &str =
    "SELECT sequenced_through, purged_through FROM event_feed WHERE id = 1";
/// An admin's page: every event.
pub const PAGE_ALL: &str = "SELECT id, seq, type, occurred_at, data FROM events \
     FORCE INDEX (events_seq_index) WHERE seq > ? ORDER BY seq LIMIT ?";
/// A booker's page: its holds' events and every slot's, two ranges of one
/// index, each read in `seq` order and cut at `limit`, merged and cut
/// again on ids and positions alone (a temporary table of integers, in
/// memory: one with the `data` column would be written to disk), then the
/// page's rows by primary key. The caller orders them by `seq`.
pub const PAGE_OWN: &str = "SELECT e.id, e.seq, e.type, e.occurred_at, e.data FROM ( \
     SELECT id FROM ( \
     (SELECT id, seq FROM events FORCE INDEX (events_client_id_seq_index) \
      WHERE client_id = ? AND seq > ? ORDER BY seq LIMIT ?) \
     UNION ALL \
     (SELECT id, seq FROM events FORCE INDEX (events_client_id_seq_index) \
      WHERE client_id IS NULL AND seq > ? ORDER BY seq LIMIT ?) \
     ) mine ORDER BY seq LIMIT ?) page JOIN events e ON e.id = page.id";

/// One event as the API serves it (SPEC §12): `id` is a string.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    #[serde(serialize_with = "as_string")]
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(serialize_with = "crate::domain::utc_micros")]
    pub occurred_at: DateTime<Utc>,
    pub data: serde_json::Value,
    /// `hold.moved` only (SPEC §17, §19.5): the slot the hold left, a
    /// number beside `data`, which is the hold as in every hold event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_slot_id: Option<u64>,
    /// The feed position: the cursor's, never shown.
    #[serde(skip)]
    pub seq: u64,
}

fn as_string<S: serde::Serializer>(id: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(id)
}

/// A page, where the next one starts, and the feed's head.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub events: Vec<Event>,
    pub next: EventCursor,
    /// After every event numbered when the page was read: a reader that
    /// wants only what happens from now on starts here, without walking
    /// the feed (`Link: rel="last"`).
    pub head: EventCursor,
}

/// The feed service. Cheap to clone; scope it to a request with
/// [`Feed::until`].
#[derive(Clone)]
pub struct Feed {
    pool: MySqlPool,
    deadline: Deadline,
}

impl Feed {
    pub fn new(pool: MySqlPool) -> Self {
        Self {
            pool,
            deadline: Deadline::default(),
        }
    }

    /// This service, answering by `deadline`.
    pub fn until(&self, deadline: Instant) -> Self {
        Self {
            deadline: Deadline::at(deadline),
            ..self.clone()
        }
    }

    /// Up to `limit` events after `after` (from the oldest kept when
    /// `None`) that `caller` may see: an admin every event, anyone else
    /// its own holds' and every slot's (SPEC §8).
    pub async fn page(
        &self,
        caller: &Caller,
        after: Option<EventCursor>,
        limit: u32,
    ) -> Result<Page, Error> {
        db::transact!(&self.pool, "events", self.deadline.due(), |conn| {
            read_page(&mut conn, caller, after, limit).await
        })
    }
}

/// An event's columns as read, before its `data` is parsed.
#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    id: u64,
    seq: u64,
    #[sqlx(rename = "type")]
    kind: String,
    occurred_at: DateTime<Utc>,
    data: String,
}

impl EventRow {
    /// A `hold.moved` row keeps `from_slot_id` inside its `data`
    /// (`record::moved_event`); it is served beside it.
    pub(super) fn into_event(self) -> Result<Event, Error> {
        let mut data: serde_json::Value = serde_json::from_str(&self.data).map_err(|err| {
            Error::Internal(sqlx::Error::Decode(
                format!("event {} has data that is not JSON: {err}", self.id).into(),
            ))
        })?;
        let from_slot_id = match data.as_object_mut() {
            Some(data) if self.kind == EventType::HoldMoved.as_str() => {
                data.remove(MOVED_FROM).and_then(|from| from.as_u64())
            }
            _ => None,
        };
        Ok(Event {
            id: self.id,
            kind: self.kind,
            occurred_at: self.occurred_at,
            data,
            from_slot_id,
            seq: self.seq,
        })
    }
}

async fn read_page(
    conn: &mut MySqlConnection,
    caller: &Caller,
    after: Option<EventCursor>,
    limit: u32,
) -> Result<Page, Error> {
    // 1. Number what has committed since the last run (unless another
    //    sequencer is at it), so that a poll sees the latest changes.
    sequence(&mut *conn).await?;
    let mut tx = conn.begin().await?;
    let page = page_in(&mut tx, caller, after, limit).await?;
    tx.commit().await?;
    Ok(page)
}

/// One page read in the caller's open transaction, by the feed's one rule
/// of who sees what: `GET /events`, and the webhooks' dispatcher, which
/// reads a subscription's client's feed under the subscription's lock
/// (`webhooks::dispatch`). The transaction's snapshot must not be taken
/// before this call (REPEATABLE READ: its first plain read takes it).
pub(crate) async fn page_in(
    tx: &mut MySqlConnection,
    caller: &Caller,
    after: Option<EventCursor>,
    limit: u32,
) -> Result<Page, Error> {
    // One snapshot for the bounds and the page: in it, the numbered
    // events are exactly 1..=through (the sequencer's proof), and those
    // retention left are the ones above `purged`.
    let (through, purged): (u64, u64) = sqlx::query_as(FEED_BOUNDS).fetch_one(&mut *tx).await?;
    let from = match after {
        None => purged,
        Some(EventCursor { after }) if after > through => {
            return Err(cursor_error(CursorError::Unknown));
        }
        Some(EventCursor { after }) if after < purged => {
            return Err(cursor_error(CursorError::Expired));
        }
        Some(EventCursor { after }) => after,
    };
    let mut rows: Vec<EventRow> = if caller.role == Role::Admin {
        sqlx::query_as(PAGE_ALL)
            .bind(from)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?
    } else {
        sqlx::query_as(PAGE_OWN)
            .bind(caller.id.0)
            .bind(from)
            .bind(limit)
            .bind(from)
            .bind(limit)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?
    };
    rows.sort_unstable_by_key(|row| row.seq);
    // A full page continues after its last event; a short one holds
    // every event the caller may see up to `through`, so the next page
    // starts there (an idle booker's cursor keeps up with the feed rather
    // than fall behind retention).
    let next = match rows.last() {
        Some(last) if rows.len() >= limit as usize => last.seq,
        _ => through.max(from),
    };
    let events = rows
        .into_iter()
        .map(EventRow::into_event)
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(Page {
        events,
        next: EventCursor { after: next },
        head: EventCursor {
            after: through.max(from),
        },
    })
}

fn cursor_error(error: CursorError) -> Error {
    match error {
        CursorError::Unknown => Error::invalid("cursor", "is not a cursor this server issued"),
        CursorError::Expired => Error::CursorExpired,
    }
}

/// One event by id, as the feed serves it: a webhook's body (SPEC §20,
/// "exactly as `GET /events` shows it"). `None`: retention deleted it.
pub const EVENT_BY_ID: &str =
    "SELECT id, seq, type, occurred_at, data FROM events WHERE id = ? AND seq IS NOT NULL";

pub(crate) async fn event_by_id(
    conn: &mut MySqlConnection,
    id: u64,
) -> Result<Option<Event>, Error> {
    let row: Option<EventRow> = sqlx::query_as(EVENT_BY_ID)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.map(EventRow::into_event).transpose()
}
