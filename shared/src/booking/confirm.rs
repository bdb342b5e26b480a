//! Confirm: turn an active hold into a booking, consuming its seats.

use super::confirm_call;
use super::sql::{find_by_id, find_touchable, lock_hold, lock_slot};
use super::written::Written;
use super::{Booking, Transition};
use crate::clients::Caller;
use crate::db::Tx;
use crate::domain::{Hold, HoldId, HoldStatus};
use crate::error::Error;
use crate::events::{EventType, commit_with, hold_event};
use crate::telemetry::{self, Metric};
use sqlx::MySql;
use sqlx::pool::PoolConnection;

impl Booking {
    /// Turns a held, unexpired hold into a booking and consumes its
    /// quantity of seats.
    ///
    /// Idempotent: a confirmed hold answers with itself, even after its
    /// `expires_at` has passed. The seat is taken by a conditional decrement
    /// decided by rows affected: no read-then-write of `remaining`. The
    /// cache is invalidated after the commit, and also whenever the commit
    /// may have happened unseen (see `invalidate_unless_unchanged`).
    ///
    /// Only the hold's owner or an admin may confirm it; for anyone else it
    /// does not exist (the same 404 as a missing hold).
    pub async fn confirm(&self, caller: &Caller, hold_id: HoldId) -> Result<Transition, Error> {
        let outcome = transition!(
            self,
            "confirm",
            EventType::HoldConfirmed,
            |conn, written| { self.confirm_once(&mut conn, caller, hold_id, &mut written) }
        );
        if let Ok(done) = &outcome
            && done.changed
        {
            telemetry::count(Metric::SeatsConfirmed, done.hold.quantity.into());
        }
        outcome
    }

    /// The confirm's writes, after [`super::LOCK_SLOT`] and
    /// [`super::LOCK_HOLD`]: the seat is consumed by a decrement that
    /// carries its own condition. The hold's seats move from `held` to the
    /// booked: `LEAST` only absorbs an out-of-band edit of `held`.
    pub const CONFIRM_CONSUME: &'static str = "UPDATE slots SET remaining = remaining - ?, held = held - LEAST(held, ?), \
         updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ? AND remaining >= ?";
    pub const CONFIRM_MARK: &'static str = "UPDATE holds SET status = 'confirmed', confirmed_at = UTC_TIMESTAMP(6), \
         updated_at = UTC_TIMESTAMP(6), confirmed_by = ? WHERE id = ?";

    /// One attempt; `None` when a move (`move.rs`) took the hold to
    /// another slot between the plain read and the locks.
    async fn confirm_once(
        &self,
        conn: &mut PoolConnection<MySql>,
        caller: &Caller,
        hold_id: HoldId,
        written: &mut Written,
    ) -> Result<Option<Transition>, Error> {
        // A plain read, the owner's or an admin's only (checked once,
        // before any lock), answers the final states without any lock and
        // tells which slot to lock. Not "expired": a confirm that decided
        // "active" under the lock may still commit (see `find_touchable`).
        let hold = find_touchable(conn, caller, hold_id).await?;
        let slot_id = hold.slot_id;
        if let Some(done) = ours(written, &hold) {
            return Ok(Some(done));
        }
        if let Some(done) = decided_final(hold.clone())? {
            return Ok(Some(done));
        }
        // The common path, in one CALL that commits (`confirm_call.rs`): the
        // statements below, in their order, inside the server. An offered
        // hold (its entry is fulfilled with it), or one the procedure
        // declines, is decided by the locked path.
        written.confirming(&hold);
        if hold.entry_id.is_none()
            && let Some(hold) = confirm_call::confirm(conn, &hold, written).await?
        {
            return Ok(Some(Transition {
                hold,
                changed: true,
            }));
        }
        let mut tx = Tx::begin(conn).await?;
        // Lock order of every transaction: the slot row, then hold rows.
        lock_slot(&mut tx, slot_id).await?;
        // Check again under the locks, in this order: "already confirmed"
        // first (a confirmed hold stays confirmable after its expiry), then
        // cancelled, then expired. The expiry is decided here, by a
        // statement sent after the slot's lock: hold creation decides
        // "still active?" under that same lock, so the two decisions are
        // serialised. A hold created after the expiry that did not count
        // this one can never see it confirmed (bookable would be −1).
        let (hold, expired) = lock_hold(&mut tx, hold_id).await?;
        let quantity = hold.quantity;
        // A retry whose earlier attempt's COMMIT landed unseen (it may have
        // been in flight until this lock was granted) finds it here.
        if let Some(done) = ours(written, &hold) {
            tx.rollback().await?;
            return Ok(Some(done));
        }
        if hold.slot_id != slot_id {
            tx.rollback().await?; // moved meanwhile (`move.rs`): read it again
            return Ok(None);
        }
        if let Some(decided) = confirm_decided(hold, expired).transpose() {
            tx.rollback().await?;
            return decided.map(Some);
        }
        // Consume the seats: check and write are one statement. The hold is
        // active, so it is counted in `held` (expires_at > now >=
        // reclaimed_until); the guard only absorbs out-of-band edits.
        let consumed = sqlx::query(Self::CONFIRM_CONSUME)
            .bind(quantity)
            .bind(quantity)
            .bind(slot_id.0)
            .bind(quantity)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if consumed == 0 {
            tx.rollback().await?;
            return Err(Error::CapacityExhausted(slot_id));
        }
        sqlx::query(Self::CONFIRM_MARK)
            .bind(written.request().0)
            .bind(hold_id.0)
            .execute(&mut *tx)
            .await?;
        let hold = find_by_id(&mut *tx, hold_id)
            .await?
            .ok_or(Error::HoldNotFound(hold_id))?;
        let mut events = vec![hold_event(EventType::HoldConfirmed, &hold)?];
        // An offered hold fulfils its waiting-list entry (SPEC §18).
        events.extend(super::waitlist::offer_fulfilled(&mut tx, &hold).await?);
        written.record(&hold);
        commit_with(tx, &events).await?;
        Ok(Some(Transition {
            hold,
            changed: true,
        }))
    }
}

/// This request's own confirmation, committed by an earlier attempt whose
/// answer was lost: answered as that attempt would have (a change).
fn ours(written: &Written, found: &Hold) -> Option<Transition> {
    written.confirmed(found).map(|hold| Transition {
        hold,
        changed: true,
    })
}

/// The decisions a plain read may make, on final states only: confirmed →
/// replay; cancelled → refused.
fn decided_final(hold: Hold) -> Result<Option<Transition>, Error> {
    match hold.status {
        HoldStatus::Confirmed => Ok(Some(Transition {
            hold,
            changed: false,
        })),
        HoldStatus::Cancelled => Err(Error::HoldCancelled(hold.id)),
        HoldStatus::Held => Ok(None),
    }
}

/// The decisions under the locks, in the required order: confirmed →
/// replay; cancelled → refused; expired → refused (by the now of a
/// statement sent after the slot's lock).
fn confirm_decided(hold: Hold, expired: bool) -> Result<Option<Transition>, Error> {
    if hold.status == HoldStatus::Held && expired {
        return Err(Error::HoldExpired(hold.id));
    }
    decided_final(hold)
}
