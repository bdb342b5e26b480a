//! Offers (SPEC §18): under a slot's lock, its counters exact, the seats
//! free go to the slot's waiting entries, first fit in arrival order; and
//! the ends of entries — an offered hold confirmed (fulfilled) or ended
//! unconfirmed, waiting entries of a slot that started or shrank.
//!
//! Every function here runs inside a transaction that holds the slot's row
//! lock, after the statements that made `held` exact (a reclaim): the
//! `now`s they write and compare come from statements sent after that lock.

use super::sql::{EntryRow, FIND_ENTRY};
use crate::domain::{ClientId, Entry, EntryId, EntryStatus, Hold, HoldId, HoldStatus, SlotId};
use crate::error::Error;
use crate::events::{EventType, NewEvent, entry_event, hold_event, record_events};
use chrono::{DateTime, Utc};
use sqlx::{FromRow, MySqlConnection};
use std::time::Duration;

/// Whether the slot started (a now after its lock), and its line's
/// smallest quantity.
pub const OFFER_STATE: &str =
    "SELECT starts_at <= UTC_TIMESTAMP(6), waiting_min FROM slots WHERE id = ?";

/// The earliest waiting entry whose quantity `free` seats cover, of a
/// client not revoked, with a `now` after the slot's lock for its hold's
/// times (so it is counted: D). Entries change only under the slot's
/// lock, which is held: the entry read is the one marked next. A locking
/// read, entry and client rows alike, so that it sees both as they are,
/// whenever the caller's snapshot was taken: a revocation in flight is
/// waited for and seen (SPEC §23.9: a revoked client is never offered
/// seats; docs/DESIGN.md, "Revoking a client"). The client row's lock is
/// the shared one the hold's foreign key takes next anyway; the entry's
/// becomes exclusive with [`OFFER_MARK`]. The entries first, by the
/// first-fit index (`STRAIGHT_JOIN`), each fitting one's client by its
/// primary key.
pub const OFFER_PICK: &str = "SELECT e.id, e.client_id, e.quantity, e.idempotency_key, e.created_at, \
     UTC_TIMESTAMP(6) AS now FROM waitlist_entries e \
     FORCE INDEX (waitlist_entries_slot_id_status_id_index) \
     STRAIGHT_JOIN api_clients c ON c.id = e.client_id \
     WHERE e.slot_id = ? AND e.status = 'waiting' AND e.quantity <= ? AND c.revoked_at IS NULL \
     ORDER BY e.id LIMIT 1 LOCK IN SHARE MODE";
/// The entry's hold: its client's, its quantity, a key of the server's
/// own (the client's keys are its own to choose), the usual TTL from the
/// pick's `now`. A simple INSERT after a read, never one `INSERT …
/// SELECT`: that would hold the table's AUTO-INC lock while it waited for
/// its foreign key's shared lock on the client's `api_clients` row, and
/// every hold's INSERT would queue behind it (docs/DESIGN.md, "The
/// implicit locks"). Binds: slot, client, entry, quantity, key, now, TTL
/// in microseconds, now, now.
pub const OFFER_INSERT: &str = "INSERT INTO holds (slot_id, client_id, entry_id, quantity, idempotency_key, \
     status, expires_at, created_at, updated_at) \
     VALUES (?, ?, ?, ?, ?, 'held', ? + INTERVAL ? MICROSECOND, ?, ?)";

/// The seats offered move from the line to the held counter, and the
/// line's smallest quantity follows what is left of it, in one statement
/// after the offers; the projection's floor goes down to the offers'
/// earliest expiry (set there on an empty counter, as the
/// hold's claim does; docs/DESIGN.md, "The projection's floor").
pub const OFFER_COUNT: &str = "UPDATE slots SET held_expires_min = \
     LEAST(IF(held = 0, TIMESTAMP'9999-12-31 00:00:00', held_expires_min), ?), \
     held = held + ?, waiting = waiting - LEAST(waiting, ?), \
     waiting_min = (SELECT MIN(quantity) FROM waitlist_entries WHERE slot_id = ? AND status = 'waiting'), \
     updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ?";
/// The entry offered, at its hold's making.
pub const OFFER_MARK: &str = "UPDATE waitlist_entries SET status = 'offered', hold_id = ?, \
     updated_at = ? WHERE id = ?";
/// The line's smallest quantity, after entries left it.
pub const WAITING_MIN: &str = "UPDATE slots SET waiting_min = \
     (SELECT MIN(quantity) FROM waitlist_entries WHERE slot_id = ? AND status = 'waiting') WHERE id = ?";

/// What the offers of a slot need to know of it, read after its lock:
/// whether it started (by a now after the lock), its line's smallest
/// quantity.
pub(crate) struct Line {
    pub started: bool,
    pub smallest: Option<u32>,
}

/// [`offer_to`], the line's state read here ([`OFFER_STATE`]).
pub(crate) async fn offer_locked(
    conn: &mut MySqlConnection,
    slot: SlotId,
    free: u32,
    ttl: Duration,
) -> Result<u32, Error> {
    let (started, smallest): (bool, Option<u32>) = sqlx::query_as(OFFER_STATE)
        .bind(slot.0)
        .fetch_one(&mut *conn)
        .await?;
    let mut events = Vec::new();
    let left = offer_to(
        conn,
        slot,
        free,
        ttl,
        Line { started, smallest },
        &mut events,
    )
    .await?;
    record_events(conn, &events).await?;
    Ok(left)
}

/// Offers `free` seats of `slot` to its line: repeatedly the earliest
/// waiting entry they cover gets a hold of its quantity for `ttl`, until
/// none fits what is left. First fit in arrival order: an entry passed
/// over was larger than the seats left then, and only fewer are left
/// after. Returns the seats left; the offers' events are added to
/// `events`, for the caller to write after its own.
pub(crate) async fn offer_to(
    conn: &mut MySqlConnection,
    slot: SlotId,
    mut free: u32,
    ttl: Duration,
    line: Line,
    events: &mut Vec<NewEvent>,
) -> Result<u32, Error> {
    // A started slot offers nothing, its line ends (SPEC §18); seats fewer
    // than the smallest entry fit nobody: no scan.
    if line.started {
        expire_waiting_into(conn, slot, None, events).await?;
        return Ok(free);
    }
    if line.smallest.is_none_or(|smallest| free < smallest) {
        return Ok(free);
    }
    // Entries of revoked clients that these seats fit end first (SPEC
    // §23.9: never offered): passed over, they would stand before the
    // entries offered (first fit) and keep seats they fit from everyone.
    let revoked = super::revoked::in_line(conn, slot, free).await?;
    expire_entries(conn, slot, &revoked, events).await?;
    let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
    let mut seats = 0u32;
    let mut earliest = None;
    while free > 0 {
        // The next entry, then its hold: none picked, none fits.
        let Some(picked) = sqlx::query_as::<_, Picked>(OFFER_PICK)
            .bind(slot.0)
            .bind(free)
            .fetch_optional(&mut *conn)
            .await?
        else {
            break;
        };
        let (hold, offered) = picked.offer(slot, ttl);
        let made = sqlx::query(OFFER_INSERT)
            .bind(slot.0)
            .bind(hold.client_id.0)
            .bind(offered.id.0)
            .bind(hold.quantity)
            .bind(&hold.idempotency_key)
            .bind(picked.now)
            .bind(ttl)
            .bind(picked.now)
            .bind(picked.now)
            .execute(&mut *conn)
            .await?;
        let hold = Hold {
            id: HoldId(made.last_insert_id()),
            ..hold
        };
        let offered = Entry {
            hold_id: Some(hold.id),
            ..offered
        };
        sqlx::query(OFFER_MARK)
            .bind(hold.id.0)
            .bind(offered.updated_at)
            .bind(offered.id.0)
            .execute(&mut *conn)
            .await?;
        seats = seats.saturating_add(offered.quantity);
        earliest =
            Some(earliest.map_or(hold.expires_at, |e: DateTime<Utc>| e.min(hold.expires_at)));
        events.push(entry_event(EventType::WaitlistOffered, &offered)?);
        events.push(hold_event(EventType::HoldCreated, &hold)?);
        free = free.saturating_sub(offered.quantity);
    }
    if let Some(earliest) = earliest {
        sqlx::query(OFFER_COUNT)
            .bind(earliest.naive_utc())
            .bind(seats)
            .bind(seats)
            .bind(slot.0)
            .bind(slot.0)
            .execute(&mut *conn)
            .await?;
    }
    Ok(free)
}

/// Entries whose offered hold ended unconfirmed (cancelled, or given back
/// after its expiry): `expired`, with their events. Their seats are the
/// caller's to offer on.
pub(crate) async fn offers_ended(conn: &mut MySqlConnection, holds: &[Hold]) -> Result<(), Error> {
    let mut events = Vec::new();
    offers_ended_into(conn, holds, &mut events).await?;
    record_events(conn, &events).await
}

/// [`offers_ended`], its events added to `events` for the caller to write.
pub(crate) async fn offers_ended_into(
    conn: &mut MySqlConnection,
    holds: &[Hold],
    events: &mut Vec<NewEvent>,
) -> Result<(), Error> {
    for entry in holds.iter().filter_map(|hold| hold.entry_id) {
        if let Some(ended) = end(conn, entry, "offered", "expired").await? {
            events.push(entry_event(EventType::WaitlistExpired, &ended)?);
        }
    }
    Ok(())
}

/// An offered hold confirmed: its entry `fulfilled`, with its event.
pub(crate) async fn offer_fulfilled(
    conn: &mut MySqlConnection,
    hold: &Hold,
) -> Result<Vec<NewEvent>, Error> {
    let Some(entry) = hold.entry_id else {
        return Ok(Vec::new());
    };
    Ok(match end(conn, entry, "offered", "fulfilled").await? {
        Some(ended) => vec![entry_event(EventType::WaitlistFulfilled, &ended)?],
        None => Vec::new(),
    })
}

/// The waiting entries of `slot` (those asking for more than `above`
/// seats, when given) end `expired`: the slot started, or its capacity
/// fell below them (SPEC §18). The counters follow, then the events.
pub(crate) async fn expire_waiting(
    conn: &mut MySqlConnection,
    slot: SlotId,
    above: Option<u32>,
) -> Result<u64, Error> {
    let mut events = Vec::new();
    let ended = expire_waiting_into(conn, slot, above, &mut events).await?;
    record_events(conn, &events).await?;
    Ok(ended)
}

/// [`expire_waiting`], its events added to `events` for the caller to
/// write after its own.
pub(crate) async fn expire_waiting_into(
    conn: &mut MySqlConnection,
    slot: SlotId,
    above: Option<u32>,
    events: &mut Vec<NewEvent>,
) -> Result<u64, Error> {
    let ids: Vec<u64> = sqlx::query_scalar(WAITING_OF_SLOT)
        .bind(slot.0)
        .bind(above.unwrap_or(0))
        .fetch_all(&mut *conn)
        .await?;
    expire_entries(conn, slot, &ids, events).await?;
    Ok(ids.len() as u64)
}

/// The waiting entries `ids` of `slot` end `expired` (those still
/// waiting), each with its event added to `events`, the line's counters
/// after them (W1).
pub(crate) async fn expire_entries(
    conn: &mut MySqlConnection,
    slot: SlotId,
    ids: &[u64],
    events: &mut Vec<NewEvent>,
) -> Result<(), Error> {
    let mut seats = 0u32;
    for id in ids {
        if let Some(ended) = end(conn, EntryId(*id), "waiting", "expired").await? {
            seats = seats.saturating_add(ended.quantity);
            events.push(entry_event(EventType::WaitlistExpired, &ended)?);
        }
    }
    if seats > 0 {
        sqlx::query(LINE_LEFT)
            .bind(seats)
            .bind(slot.0)
            .execute(&mut *conn)
            .await?;
        waiting_min(conn, slot).await?;
    }
    Ok(())
}

/// The slot's waiting entries asking for more than `?` seats, locked.
pub const WAITING_OF_SLOT: &str = "SELECT id FROM waitlist_entries \
     FORCE INDEX (waitlist_entries_slot_id_status_id_index) \
     WHERE slot_id = ? AND status = 'waiting' AND quantity > ? ORDER BY id FOR UPDATE";
/// Seats that left the line (a leave, an expiry).
pub const LINE_LEFT: &str = "UPDATE slots SET waiting = waiting - LEAST(waiting, ?), \
     updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ?";
/// An entry's end, from one status to another, by rows affected.
pub const END_ENTRY: &str = "UPDATE waitlist_entries SET status = ?, updated_at = UTC_TIMESTAMP(6) \
     WHERE id = ? AND status = ?";

/// `entry` from `from` to `to`, read back; `None` if it was not `from`.
pub(crate) async fn end(
    conn: &mut MySqlConnection,
    entry: EntryId,
    from: &str,
    to: &str,
) -> Result<Option<Entry>, Error> {
    let ended = sqlx::query(END_ENTRY)
        .bind(to)
        .bind(entry.0)
        .bind(from)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if ended == 0 {
        return Ok(None);
    }
    Ok(Some(read_entry(conn, entry).await?))
}

pub(crate) async fn waiting_min(conn: &mut MySqlConnection, slot: SlotId) -> Result<(), Error> {
    sqlx::query(WAITING_MIN)
        .bind(slot.0)
        .bind(slot.0)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

async fn read_entry(conn: &mut MySqlConnection, entry: EntryId) -> Result<Entry, Error> {
    sqlx::query_as::<_, EntryRow>(FIND_ENTRY)
        .bind(entry.0)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(Error::NotFound("waiting-list entry"))?
        .into_entry()
}

/// [`OFFER_PICK`]'s row: the entry to offer, and the `now` of its hold.
#[derive(FromRow)]
struct Picked {
    id: u64,
    client_id: u64,
    quantity: u32,
    idempotency_key: String,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
}

impl Picked {
    /// The hold [`OFFER_INSERT`] makes of this entry (its id is the
    /// INSERT's), and the entry as [`OFFER_MARK`] leaves it: `offered`,
    /// its `updated_at` the hold's making, no position. Every field is
    /// what the INSERT writes: a read back would tell nothing new.
    fn offer(&self, slot: SlotId, ttl: i64) -> (Hold, Entry) {
        let expires_at = self.now + chrono::Duration::microseconds(ttl);
        let hold = Hold {
            id: HoldId(0),
            slot_id: slot,
            client_id: ClientId(self.client_id),
            status: HoldStatus::Held,
            quantity: self.quantity,
            active: expires_at > self.now,
            idempotency_key: uuid::Uuid::new_v4().hyphenated().to_string(),
            expires_at,
            confirmed_at: None,
            cancelled_at: None,
            created_at: self.now,
            updated_at: self.now,
            entry_id: Some(EntryId(self.id)),
            created_by: None,
            confirmed_by: None,
        };
        let offered = Entry {
            id: EntryId(self.id),
            slot_id: slot,
            client_id: ClientId(self.client_id),
            quantity: self.quantity,
            status: EntryStatus::Offered,
            position: None,
            hold_id: None,
            idempotency_key: self.idempotency_key.clone(),
            created_at: self.created_at,
            updated_at: self.now,
        };
        (hold, offered)
    }
}
