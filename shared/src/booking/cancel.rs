//! Cancel: give up a hold or a booking.

use super::allowance;
use super::reclaim::reclaim_and_offer;
use super::sql::{HoldRow, find_by_id, find_touchable, lock_hold};
use super::waitlist;
use super::written::Written;
use super::{Booking, Transition};
use crate::clients::Caller;
use crate::db::Tx;
use crate::domain::{Hold, HoldId, HoldStatus, SlotId};
use crate::error::Error;
use crate::events::{EventType, commit_with, expired_event, hold_event, record_events};
use crate::telemetry::{self, Metric};
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{FromRow, MySql, MySqlConnection, Row};

impl Booking {
    /// Cancels a hold. A held hold (active or expired) frees its seats by
    /// leaving the active set; a confirmed one gives its seats back, capped
    /// at capacity. Cancelling a cancelled hold changes nothing. The cache
    /// is invalidated as after a confirm.
    ///
    /// Only the hold's owner or an admin may cancel it; for anyone else it
    /// does not exist (the same 404 as a missing hold).
    ///
    /// A booking cancelled by its own client counts against that client's
    /// `max_held_seats` for `CLIENT_CANCEL_WINDOW` (SPEC §23.8): its
    /// `counts_until` is set, and a capped client's allowance grows by its
    /// seats under the client's lock, taken first (docs/DESIGN.md, "One
    /// client's cap").
    pub async fn cancel(&self, caller: &Caller, hold_id: HoldId) -> Result<Transition, Error> {
        let outcome = transition!(self, "cancel", EventType::HoldCancelled, |conn, written| {
            self.cancel_once(&mut conn, caller, hold_id, &mut written)
        });
        if let Ok(done) = &outcome
            && done.changed
        {
            telemetry::count(Metric::SeatsCancelled, done.hold.quantity.into());
        }
        outcome
    }

    /// Releases a held hold's claim on `held`, unless a reclaim already
    /// did (it expired at or before the slot's reclaim watermark). `LEAST`
    /// only absorbs an out-of-band edit of `held`.
    pub const CANCEL_RELEASE: &'static str = "UPDATE slots SET held = held - LEAST(held, ?), updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) \
         WHERE id = ? AND reclaimed_until < ?";
    /// Only a confirmation consumed seats, so only its cancellation
    /// returns them; the cap (`LEAST`, SPEC §15.7: capped, never refused)
    /// means no sequence of cancels lifts remaining above capacity.
    pub const CANCEL_RETURN: &'static str = "UPDATE slots SET remaining = LEAST(capacity, remaining + ?), \
         updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ?";
    /// The mark, and until when the cancellation counts against its
    /// client's cap: its own now plus the window, for a booking its own
    /// client cancels (SPEC §23.8); a window of 0 counts it until its own
    /// now, never after. Binds: counted, window seconds, hold.
    pub const CANCEL_MARK: &'static str = "UPDATE holds SET status = 'cancelled', cancelled_at = UTC_TIMESTAMP(6), \
         updated_at = UTC_TIMESTAMP(6), counts_until = IF(?, UTC_TIMESTAMP(6) + INTERVAL ? SECOND, NULL) \
         WHERE id = ?";
    /// The slot's lock, first, with what its line's offers need besides
    /// `waiting` (SPEC §18): when it starts and the line's smallest
    /// quantity. It reads no clock: its now would predate its lock wait.
    pub const CANCEL_LOCK_SLOT: &'static str =
        "SELECT waiting, starts_at, waiting_min FROM slots WHERE id = ? FOR UPDATE";
    /// The cancelled hold read back on a slot with a line, with the seats
    /// its slot's counter shows free after the release and a now after the
    /// lock (has the slot started?). The transaction's first plain read:
    /// its snapshot follows the lock, which no one else has held since,
    /// so it shows the slot as this transaction left it.
    /// `unreclaimed`: some held hold of the slot expired after its
    /// watermark (one probe of the reclaim's own index range); the
    /// counter then under-states what is free, and offers by it could
    /// pass over an earlier, larger entry that the exact figure fits.
    pub const CANCEL_READ_FREED: &'static str = concat!(
        "SELECT ",
        hold_columns!(),
        ", (SELECT CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) FROM slots s \
         WHERE s.id = holds.slot_id) AS free, UTC_TIMESTAMP(6) AS now, \
         EXISTS (SELECT 1 FROM slots s JOIN holds x FORCE INDEX (holds_slot_id_status_expires_at_index) \
         ON x.slot_id = s.id AND x.status = 'held' AND x.expires_at > s.reclaimed_until \
         AND x.expires_at <= UTC_TIMESTAMP(6) WHERE s.id = holds.slot_id) AS unreclaimed \
         FROM holds WHERE id = ?"
    );

    /// One attempt; `None` when a move (`move.rs`) took the hold to
    /// another slot between the plain read and the locks.
    async fn cancel_once(
        &self,
        conn: &mut PoolConnection<MySql>,
        caller: &Caller,
        hold_id: HoldId,
        written: &mut Written,
    ) -> Result<Option<Transition>, Error> {
        // The owner's or an admin's only; checked once, before any lock.
        let hold = find_touchable(conn, caller, hold_id).await?;
        if let Some(done) = ours(written, &hold) {
            return Ok(Some(done));
        }
        if hold.status == HoldStatus::Cancelled {
            return Ok(Some(Transition {
                hold,
                changed: false,
            }));
        }
        let slot_id = hold.slot_id;
        let window = self.rules.cancel_window.as_secs();
        let mut tx = Tx::begin(conn).await?;
        // A booking its capped client cancels: the client's lock first,
        // the bound grown by its seats (SPEC §23.8). Decided on the plain
        // read; a hold confirmed since is read again below.
        let bounded = counted(caller, &hold) && window > 0 && caller.held_cap.is_some();
        if bounded {
            allowance::cancelled(&mut tx, caller.id, hold.quantity).await?;
        }
        let (waiting, starts_at, smallest) = lock_line(&mut tx, slot_id).await?;
        let (hold, expired) = lock_hold(&mut tx, hold_id).await?;
        // A retry whose earlier attempt's COMMIT landed unseen finds it
        // here, once that COMMIT can no longer be in flight.
        if let Some(done) = ours(written, &hold) {
            tx.rollback().await?;
            return Ok(Some(done));
        }
        if hold.slot_id != slot_id {
            tx.rollback().await?; // moved meanwhile (`move.rs`): read it again
            return Ok(None);
        }
        if counted(caller, &hold) && window > 0 && caller.held_cap.is_some() && !bounded {
            tx.rollback().await?; // confirmed meanwhile: again, with the bound
            return Ok(None);
        }
        let release = match hold.status {
            HoldStatus::Cancelled => {
                tx.rollback().await?;
                return Ok(Some(Transition {
                    hold,
                    changed: false,
                }));
            }
            HoldStatus::Held => sqlx::query(Self::CANCEL_RELEASE)
                .bind(hold.quantity)
                .bind(hold.slot_id.0)
                .bind(hold.expires_at),
            HoldStatus::Confirmed => sqlx::query(Self::CANCEL_RETURN)
                .bind(hold.quantity)
                .bind(hold.slot_id.0),
        };
        let released = release.execute(&mut *tx).await?.rows_affected();
        // An expired hold no reclaim has given back (it released its seats
        // just now) has had no `hold.expired` yet: it expired before it
        // was cancelled, so that event comes first. One a reclaim gave
        // back has had it, from that reclaim.
        let mut events = Vec::with_capacity(2);
        if hold.status == HoldStatus::Held && expired && released == 1 {
            events.push(expired_event(&hold)?);
        }
        sqlx::query(Self::CANCEL_MARK)
            .bind(counted(caller, &hold))
            .bind(window)
            .bind(hold_id.0)
            .execute(&mut *tx)
            .await?;
        let (hold, freed) = if waiting > 0 {
            let (hold, freed) = read_freed(&mut tx, hold_id).await?;
            (hold, Some(freed))
        } else {
            let hold = find_by_id(&mut *tx, hold_id)
                .await?
                .ok_or(Error::HoldNotFound(hold_id))?;
            (hold, None)
        };
        events.push(hold_event(EventType::HoldCancelled, &hold)?);
        written.record(&hold);
        match freed {
            None if hold.entry_id.is_none() => commit_with(tx, &events).await?,
            // SPEC §18: an offered hold ends its entry; the seats freed go
            // to the slot's line, in this transaction. Their events follow
            // this cancel's (cause before effect), all written with the
            // COMMIT.
            None | Some(Freed { exact: true, .. }) => {
                waitlist::offer::offers_ended_into(
                    &mut tx,
                    std::slice::from_ref(&hold),
                    &mut events,
                )
                .await?;
                if let Some(freed) = freed {
                    let line = waitlist::offer::Line {
                        started: starts_at <= freed.now,
                        smallest,
                    };
                    let free = freed.free;
                    waitlist::offer::offer_to(
                        &mut tx,
                        slot_id,
                        free,
                        self.hold_ttl,
                        line,
                        &mut events,
                    )
                    .await?;
                }
                commit_with(tx, &events).await?;
            }
            // Expired holds not yet given back: the exact figures first
            // (a reclaim, whose `hold.expired` events it writes as it
            // finds them, after this cancel's), then the offers.
            Some(Freed { exact: false, .. }) => {
                record_events(&mut tx, &events).await?;
                waitlist::offer::offers_ended(&mut tx, std::slice::from_ref(&hold)).await?;
                reclaim_and_offer(&mut tx, slot_id, self.hold_ttl).await?;
                tx.commit().await?;
            }
        }
        Ok(Some(Transition {
            hold,
            changed: true,
        }))
    }
}

/// The slot's lock ([`Booking::CANCEL_LOCK_SLOT`]): `waiting`, when the
/// slot starts, the line's smallest quantity.
async fn lock_line(
    conn: &mut MySqlConnection,
    slot: SlotId,
) -> Result<(u32, DateTime<Utc>, Option<u32>), Error> {
    sqlx::query_as(Booking::CANCEL_LOCK_SLOT)
        .bind(slot.0)
        .fetch_optional(conn)
        .await?
        .ok_or(Error::SlotNotFound(slot))
}

/// What a release left free on a slot with a line.
#[derive(Clone, Copy)]
struct Freed {
    /// By the counter, never below 0.
    free: u32,
    /// A now after the lock.
    now: DateTime<Utc>,
    /// No expired hold awaits a reclaim: the counter is exact.
    exact: bool,
}

/// [`Booking::CANCEL_READ_FREED`]: the hold, and what it freed.
async fn read_freed(conn: &mut MySqlConnection, id: HoldId) -> Result<(Hold, Freed), Error> {
    let row = sqlx::query(Booking::CANCEL_READ_FREED)
        .bind(id.0)
        .fetch_optional(conn)
        .await?
        .ok_or(Error::HoldNotFound(id))?;
    let free: i64 = row.try_get("free")?;
    let unreclaimed: bool = row.try_get("unreclaimed")?;
    let freed = Freed {
        free: u32::try_from(free.max(0)).unwrap_or(0),
        now: row.try_get("now")?,
        exact: !unreclaimed,
    };
    Ok((HoldRow::from_row(&row)?.into_hold()?, freed))
}

/// Whether cancelling `hold`, as it is, counts against its client's cap
/// (SPEC §23.8): a booking, cancelled by its own client (not by an admin
/// for it).
fn counted(caller: &Caller, hold: &Hold) -> bool {
    hold.status == HoldStatus::Confirmed && hold.client_id == caller.id
}

/// This request's own cancellation, committed by an earlier attempt whose
/// answer was lost: answered as that attempt would have (a change).
fn ours(written: &Written, found: &Hold) -> Option<Transition> {
    written.cancelled(found).map(|hold| Transition {
        hold,
        changed: true,
    })
}
