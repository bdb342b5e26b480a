//! The reclaim: under a slot's row lock, give back the seats of the holds
//! that expired since the slot's watermark (their quantities), and move the watermark to now.
//! The hold path runs it when the counter says full.

use super::sql::HoldRow;
use super::waitlist::offer::{Line, offer_to, offers_ended};
use crate::domain::{Hold, SlotId};
use crate::error::Error;
use crate::events::{record_events, record_expired};
use chrono::{DateTime, Utc};
use sqlx::MySqlConnection;
use std::time::Duration;

/// The reclaim's statements, in order. The lock comes first and reads no
/// clock: its `UTC_TIMESTAMP(6)` would be fixed when it *started*, before
/// its lock wait, and a hold's reclaim granted the lock meanwhile may have
/// moved the watermark past it (an older "now" written back would count
/// the holds that reclaim subtracted again: the sweeper oversold so).
/// It also reads what the line's offers need (SPEC §18): when the slot
/// starts (compared with the count's `now`) and the line's smallest entry.
pub const RECLAIM_LOCK: &str = "SELECT remaining, held, reclaimed_until, waiting, starts_at, waiting_min \
     FROM slots WHERE id = ? FOR UPDATE";
/// Sent after the lock, so its `now` is later than every watermark written
/// before; it is also the statement that counts, with that very `now`.
/// The first plain read of the transaction: its snapshot follows the lock.
/// Then the earliest expiry still counted once the watermark is at that
/// now, one dive into the same index: the projection's floor, exact
/// (docs/DESIGN.md, "The projection's floor"). Binds: slot, watermark,
/// slot, watermark.
pub const RECLAIM_COUNT: &str = "SELECT UTC_TIMESTAMP(6), CAST(COALESCE(SUM(quantity), 0) AS SIGNED), \
     (SELECT MIN(expires_at) FROM holds FORCE INDEX (holds_slot_id_status_expires_at_index) \
     WHERE slot_id = ? AND status = 'held' AND expires_at > GREATEST(?, UTC_TIMESTAMP(6))) FROM holds \
     FORCE INDEX (holds_slot_id_status_expires_at_index) \
     WHERE slot_id = ? AND status = 'held' AND expires_at > ? AND expires_at <= UTC_TIMESTAMP(6)";
/// `GREATEST`: the watermark never moves back, whatever clock fed it. The
/// floor is left as it was when the counter counts no hold. Binds: the
/// earliest counted expiry, expired seats, now, slot.
pub const RECLAIM_APPLY: &str = "UPDATE slots SET held_expires_min = COALESCE(?, held_expires_min), \
     held = held - LEAST(held, ?), reclaimed_until = GREATEST(reclaimed_until, ?) WHERE id = ?";

/// The holds a reclaim window gives back: `held` ones of the slot that
/// expired after the old watermark and at or before the new one (the
/// reclaim's own `now`, bound). Each expiry falls in exactly one window,
/// since watermarks only move up: so each gets one `hold.expired`.
pub const RECLAIM_EXPIRED: &str = concat!(
    "SELECT ",
    hold_columns!(),
    " FROM holds FORCE INDEX (holds_slot_id_status_expires_at_index) \
     WHERE slot_id = ? AND status = 'held' AND expires_at > ? AND expires_at <= ? ORDER BY expires_at, id"
);

/// Under the slot's lock, in the transaction that moves its watermark
/// from `after` to `until`: one `hold.expired` per hold that window gives
/// back, in the order they expired.
pub(crate) async fn record_window(
    conn: &mut MySqlConnection,
    slot_id: SlotId,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<(), Error> {
    let holds = sqlx::query_as::<_, HoldRow>(RECLAIM_EXPIRED)
        .bind(slot_id.0)
        .bind(after)
        .bind(until)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(HoldRow::into_hold)
        .collect::<Result<Vec<Hold>, Error>>()?;
    record_expired(conn, &holds).await?;
    // An offered hold given back ends its entry (SPEC §18).
    offers_ended(conn, &holds).await
}

/// A slot's counters after [`reclaim_locked`], and its watermark then.
pub(crate) struct Counters {
    pub remaining: u32,
    pub held: u32,
    /// `held` counts no hold that expires at or before it.
    pub watermark: DateTime<Utc>,
    /// The reclaim's now, from after the lock.
    pub now: DateTime<Utc>,
    /// The seats the slot's waiting entries ask for (SPEC §18).
    pub waiting: u32,
    /// The seats offered to its line since (`reclaim_and_offer`).
    pub offered: u32,
    /// When the slot starts; it has started if this is at or before `now`.
    pub starts_at: DateTime<Utc>,
    /// The smallest quantity its waiting entries ask for (none: no line).
    pub smallest: Option<u32>,
}

/// Under the slot's row lock (taken here, first): subtracts from `held` the
/// seats of the holds that expired since the slot's reclaim watermark and
/// moves the watermark to now. Afterwards `held` is exactly the seats of
/// the slot's active holds.
/// `None` when the slot does not exist.
pub(crate) async fn reclaim_locked(
    conn: &mut MySqlConnection,
    slot_id: SlotId,
) -> Result<Option<Counters>, Error> {
    type Locked = (u32, u32, DateTime<Utc>, u32, DateTime<Utc>, Option<u32>);
    let row: Option<Locked> = sqlx::query_as(RECLAIM_LOCK)
        .bind(slot_id.0)
        .fetch_optional(&mut *conn)
        .await?;
    let Some((remaining, held, watermark, waiting, starts_at, smallest)) = row else {
        return Ok(None);
    };
    // Every hold of this slot is inserted, confirmed or cancelled under
    // this lock, so this count cannot miss or double one.
    let (now, expired, floor): (DateTime<Utc>, i64, Option<DateTime<Utc>>) =
        sqlx::query_as(RECLAIM_COUNT)
            .bind(slot_id.0)
            .bind(watermark)
            .bind(slot_id.0)
            .bind(watermark)
            .fetch_one(&mut *conn)
            .await?;
    if expired > 0 {
        record_window(&mut *conn, slot_id, watermark, now).await?;
    }
    let expired = u32::try_from(expired).unwrap_or(u32::MAX);
    // The watermark moves to now even when nothing expired: it bounds the
    // projection's scan window.
    sqlx::query(RECLAIM_APPLY)
        .bind(floor.map(|floor| floor.naive_utc()))
        .bind(expired)
        .bind(now)
        .bind(slot_id.0)
        .execute(&mut *conn)
        .await?;
    Ok(Some(Counters {
        remaining,
        held: held.saturating_sub(expired),
        watermark: watermark.max(now),
        now,
        waiting,
        offered: 0,
        starts_at,
        smallest,
    }))
}

/// Under the slot's lock (taken here if not yet): a reclaim, then, on a
/// slot with a line, the offers of what is free, for `ttl`, with their
/// events. Afterwards `held` is exact and no waiting entry's quantity fits
/// `remaining − held`: what is left may go to anyone. `None`: no such
/// slot.
pub(crate) async fn reclaim_and_offer(
    conn: &mut MySqlConnection,
    slot: SlotId,
    ttl: Duration,
) -> Result<Option<Counters>, Error> {
    let Some(mut counters) = reclaim_locked(conn, slot).await? else {
        return Ok(None);
    };
    if counters.waiting > 0 {
        let free = counters.remaining.saturating_sub(counters.held);
        // The reclaim read the line's state with its lock and its now.
        let line = Line {
            started: counters.starts_at <= counters.now,
            smallest: counters.smallest,
        };
        let mut events = Vec::new();
        let left = offer_to(conn, slot, free, ttl, line, &mut events).await?;
        record_events(conn, &events).await?;
        counters.offered = free - left;
        counters.held = counters.held.saturating_add(counters.offered);
    }
    Ok(Some(counters))
}
