//! A revoked client's seats, given back (SPEC §23.9, which changes §8):
//! under each slot's lock, its active holds there are cancelled and its
//! waiting entries end `expired`, each with its event, and the seats freed
//! go to the slot's line at once, as a cancel's do. Its bookings stay.
//!
//! The revocation (`clients/revoke.rs`) runs these in its transaction:
//! every slot locked first, in ascending id order, then each slot's work
//! here, then the client rows (docs/DESIGN.md, "Revoking a client").

use super::Booking;
use super::reclaim::reclaim_locked;
use super::sql::{HoldRow, find_by_id};
use super::waitlist::offer::{LINE_LEFT, end, offer_locked, offers_ended_into, waiting_min};
use crate::domain::{ClientId, EntryId, Hold, SlotId};
use crate::error::Error;
use crate::events::{EventType, entry_event, hold_event, record_events};
use sqlx::{MySql, MySqlConnection, QueryBuilder};
use std::time::Duration;

/// The slots of a client's active holds and waiting entries, lowest id
/// first, at most `?` of them. A plain read, sent before the revoking
/// transaction (autocommitted, its own snapshot), never inside it: the
/// reclaims' counts must be that transaction's first plain reads, after
/// every slot's lock. Each half is one range of a client index, bounded
/// by what the client holds and waits for now.
pub const CLIENT_SLOTS: &str = "SELECT slot_id FROM holds FORCE INDEX (holds_client_id_status_expires_at_index) \
     WHERE client_id = ? AND status = 'held' AND expires_at > UTC_TIMESTAMP(6) \
     UNION SELECT slot_id FROM waitlist_entries FORCE INDEX (waitlist_entries_client_id_status_index) \
     WHERE client_id = ? AND status = 'waiting' ORDER BY slot_id LIMIT ?";

/// The client's active holds on a slot, locked, by the reclaim's now
/// (bound: a now after the slot's lock). Those expired by then are the
/// reclaim's: given back already, they keep their status.
pub const CLIENT_HOLDS_ON_SLOT: &str = concat!(
    "SELECT ",
    hold_columns!(),
    " FROM holds FORCE INDEX (holds_slot_id_client_id_status_expires_at_index) \
     WHERE slot_id = ? AND client_id = ? AND status = 'held' AND expires_at > ? ORDER BY id FOR UPDATE"
);

/// Their seats leave `held`: each expires after the watermark the reclaim
/// just moved to its now, so D counts it (`LEAST` only absorbs an
/// out-of-band edit of `held`).
pub const CLIENT_RELEASE: &str = "UPDATE slots SET held = held - LEAST(held, ?), \
     updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ?";

/// The client's waiting entries on a slot, locked (one range of the
/// client's index: its entries only).
pub const CLIENT_WAITING_ON_SLOT: &str = "SELECT id FROM waitlist_entries \
     FORCE INDEX (waitlist_entries_client_id_status_index) \
     WHERE client_id = ? AND status = 'waiting' AND slot_id = ? ORDER BY id FOR UPDATE";

/// Locks `slots` (ascending ids, no duplicates), lowest first: the
/// primary key is scanned upwards and each row locked as it is reached,
/// as a move locks its two. The revoking transaction's first statement:
/// no snapshot exists before it. A slot deleted meanwhile is skipped.
pub(crate) async fn lock_slots(conn: &mut MySqlConnection, slots: &[SlotId]) -> Result<(), Error> {
    if slots.is_empty() {
        return Ok(());
    }
    let mut lock = QueryBuilder::<MySql>::new("SELECT id FROM slots WHERE id IN (");
    let mut ids = lock.separated(", ");
    for slot in slots {
        ids.push_bind(slot.0);
    }
    lock.push(") ORDER BY id FOR UPDATE");
    // Each batch size is its own text: not kept as a prepared statement.
    lock.build().persistent(false).execute(conn).await?;
    Ok(())
}

/// Under `slot`'s lock (taken by [`lock_slots`], with every other slot of
/// the batch, before any plain read): the reclaim (so `held` is exact and
/// its now follows the lock), then `client`'s active holds there
/// cancelled (`hold.cancelled`; an offered one ends its entry,
/// `waitlist.expired`), its waiting entries `expired` (`waitlist.expired`),
/// and the seats now free offered to the line for `ttl`, their events
/// after these (cause before effect). Returns the seats cancelled.
pub(crate) async fn give_back(
    conn: &mut MySqlConnection,
    slot: SlotId,
    client: ClientId,
    ttl: Duration,
) -> Result<u32, Error> {
    let Some(counters) = reclaim_locked(conn, slot).await? else {
        return Ok(0); // deleted since the client's slots were read
    };
    let holds = sqlx::query_as::<_, HoldRow>(CLIENT_HOLDS_ON_SLOT)
        .bind(slot.0)
        .bind(client.0)
        .bind(counters.now)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(HoldRow::into_hold)
        .collect::<Result<Vec<Hold>, Error>>()?;
    let released = holds.iter().map(|hold| hold.quantity).sum::<u32>();
    let mut events = Vec::with_capacity(holds.len());
    if released > 0 {
        sqlx::query(CLIENT_RELEASE)
            .bind(released)
            .bind(slot.0)
            .execute(&mut *conn)
            .await?;
    }
    let mut cancelled = Vec::with_capacity(holds.len());
    for hold in &holds {
        // Active holds only, never a booking: no cancellation here counts
        // against the client's cap (SPEC §23.8).
        sqlx::query(Booking::CANCEL_MARK)
            .bind(false)
            .bind(0)
            .bind(hold.id.0)
            .execute(&mut *conn)
            .await?;
        let hold = find_by_id(&mut *conn, hold.id)
            .await?
            .ok_or(Error::HoldNotFound(hold.id))?;
        events.push(hold_event(EventType::HoldCancelled, &hold)?);
        cancelled.push(hold);
    }
    // An offered hold cancelled ends its entry (SPEC §18).
    offers_ended_into(conn, &cancelled, &mut events).await?;
    let waiting: Vec<u64> = sqlx::query_scalar(CLIENT_WAITING_ON_SLOT)
        .bind(client.0)
        .bind(slot.0)
        .fetch_all(&mut *conn)
        .await?;
    let mut left = 0u32;
    for id in waiting {
        if let Some(ended) = end(conn, EntryId(id), "waiting", "expired").await? {
            left = left.saturating_add(ended.quantity);
            events.push(entry_event(EventType::WaitlistExpired, &ended)?);
        }
    }
    if left > 0 {
        sqlx::query(LINE_LEFT)
            .bind(left)
            .bind(slot.0)
            .execute(&mut *conn)
            .await?;
        waiting_min(conn, slot).await?;
    }
    record_events(conn, &events).await?;
    // The seats free go to the line, as after a cancel: the counters are
    // exact (the reclaim, then this release, under the lock).
    if counters.waiting.saturating_sub(left) > 0 {
        let held = counters.held.saturating_sub(released);
        let free = counters.remaining.saturating_sub(held);
        offer_locked(conn, slot, free, ttl).await?;
    }
    Ok(released)
}
