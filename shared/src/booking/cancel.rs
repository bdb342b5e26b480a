//! Cancel: give up a hold or a booking.

use super::sql::{find_by_id, find_touchable, lock_hold, lock_slot};
use super::waitlist;
use super::written::Written;
use super::{Booking, Transition};
use crate::clients::Caller;
use crate::db::Tx;
use crate::domain::{Hold, HoldId, HoldStatus};
use crate::error::Error;
use crate::events::{EventType, commit_with, expired_event, hold_event, record_events};
use crate::telemetry::{self, Metric};
use sqlx::MySql;
use sqlx::pool::PoolConnection;

impl Booking {
    /// Cancels a hold. A held hold (active or expired) frees its seats by
    /// leaving the active set; a confirmed one gives its seats back, capped
    /// at capacity. Cancelling a cancelled hold changes nothing. The cache
    /// is invalidated as after a confirm.
    ///
    /// Only the hold's owner or an admin may cancel it; for anyone else it
    /// does not exist (the same 404 as a missing hold).
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
    pub const CANCEL_MARK: &'static str = "UPDATE holds SET status = 'cancelled', cancelled_at = UTC_TIMESTAMP(6), \
         updated_at = UTC_TIMESTAMP(6) WHERE id = ?";

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
        let mut tx = Tx::begin(conn).await?;
        let waiting = lock_slot(&mut tx, slot_id).await?;
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
            .bind(hold_id.0)
            .execute(&mut *tx)
            .await?;
        let hold = find_by_id(&mut *tx, hold_id)
            .await?
            .ok_or(Error::HoldNotFound(hold_id))?;
        events.push(hold_event(EventType::HoldCancelled, &hold)?);
        written.record(&hold);
        if hold.entry_id.is_none() && waiting == 0 {
            commit_with(tx, &events).await?;
        } else {
            // SPEC §18: an offered hold ends its entry; the seats freed go
            // to the slot's line, in this transaction. This cancel's
            // events first: cause before effect.
            record_events(&mut tx, &events).await?;
            waitlist::offers_ended(&mut tx, std::slice::from_ref(&hold)).await?;
            if waiting > 0 {
                waitlist::reclaim_and_offer(&mut tx, slot_id, self.hold_ttl).await?;
            }
            tx.commit().await?;
        }
        Ok(Some(Transition {
            hold,
            changed: true,
        }))
    }
}

/// This request's own cancellation, committed by an earlier attempt whose
/// answer was lost: answered as that attempt would have (a change).
fn ours(written: &Written, found: &Hold) -> Option<Transition> {
    written.cancelled(found).map(|hold| Transition {
        hold,
        changed: true,
    })
}
