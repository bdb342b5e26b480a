//! Move: carry an active hold or a confirmed booking to another slot, all
//! or nothing (SPEC §17).
//!
//! Two slot rows are locked, in ascending id order, before anything is
//! decided: two moves in opposite directions queue instead of
//! deadlocking, and every other writer of either slot (a hold, a confirm,
//! a cancel, an extension, the sweeper, an administrator) takes one of
//! these locks first, so the figures and the `now` read after them are
//! final (docs/DESIGN.md, "A move holds both slots").

use super::fair::{incomplete, over_share};
use super::reclaim::reclaim_and_offer;
use super::sql::{HoldRow, find_by_id, find_touchable};
use super::written::Written;
use super::{Booking, Transition};
use crate::clients::Caller;
use crate::db::Tx;
use crate::db::counter::slot_client_seats;
use crate::domain::{Hold, HoldId, HoldStatus, SlotId};
use crate::error::Error;
use crate::events::{EventType, commit_with, moved_event, record_events};
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{MySql, MySqlConnection};

impl Booking {
    /// Moves the hold `hold_id` to slot `to`, keeping its id, key, owner,
    /// status, quantity and `expires_at`. Refused, in this order and
    /// changing nothing: cancelled, expired (decided under the locks),
    /// target missing, either slot started, the target without the seats,
    /// the owner's share of the target. Moving to the slot it is on answers
    /// the hold unchanged (`changed: false`), so a retry after a lost
    /// answer is harmless. The owner's cap is not checked: a move releases
    /// exactly what it claims. The cache is invalidated as after a cancel.
    ///
    /// Only the hold's owner or an admin may move it; for anyone else it
    /// does not exist (the same 404 as a missing hold).
    pub async fn move_hold(
        &self,
        caller: &Caller,
        hold_id: HoldId,
        to: SlotId,
    ) -> Result<Transition, Error> {
        transition!(self, "move", EventType::HoldMoved, |conn, written| {
            self.move_once(&mut conn, caller, hold_id, to, &mut written)
        })
    }

    /// Both slots' row locks, in one statement that scans the primary key
    /// upwards: the lower id is locked first. Which rows come back tells
    /// which slots exist. A locking read: no snapshot, and no clock.
    pub const MOVE_LOCK_SLOTS: &'static str =
        "SELECT id, waiting FROM slots WHERE id IN (?, ?) ORDER BY id FOR UPDATE";
    /// After both slots' locks, one statement with one `now` locks the
    /// hold and reads everything a refusal needs: expired? when the slots
    /// start (compared with that now, or with a later reclaim's), the
    /// target's share and the owner's seats on it (counted
    /// only when it has one; −1 when it has none, so that a NULL, a
    /// subquery cut short, is told apart). Its subqueries lock nothing.
    /// Binds: target ×2, owner, target, hold.
    pub const MOVE_LOCK: &'static str = concat!(
        "SELECT ",
        hold_columns!(),
        ", expires_at <= UTC_TIMESTAMP(6) AS expired, ",
        "UTC_TIMESTAMP(6) AS now, ",
        "(SELECT s.starts_at FROM slots s WHERE s.id = holds.slot_id) AS from_starts, ",
        "(SELECT s.starts_at FROM slots s WHERE s.id = ?) AS to_starts, ",
        "(SELECT s.max_seats_per_client FROM slots s WHERE s.id = ?) AS share, ",
        "(SELECT IF(s.max_seats_per_client IS NULL, -1, (",
        slot_client_seats!(),
        ")) FROM slots s WHERE s.id = ?) AS seats ",
        "FROM holds WHERE id = ? FOR UPDATE"
    );
    /// A booking's seats on the target: its `remaining` less its held
    /// seats must cover them, decided by rows affected. `held` may still
    /// count expired holds; a reclaim then decides exactly. By the primary
    /// key alone, as the hold's claim (`Booking::HOLD_CLAIM` says why).
    pub const MOVE_CONSUME: &'static str = "UPDATE slots FORCE INDEX (PRIMARY) SET remaining = remaining - ?, \
         updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ? AND remaining >= held + ? \
         AND waiting = 0";
    /// A booking's seats on the target after a reclaim and the line's
    /// offers, which found them (the figures exact under the lock).
    pub const MOVE_CONSUME_RECLAIMED: &'static str = "UPDATE slots SET remaining = remaining - ?, \
         updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ?";
    /// A held hold's expiry on the target's floor ([`held_floor`]). Binds:
    /// quantity, expiry, expiry, target.
    pub const MOVE_FLOOR: &'static str = "UPDATE slots SET held_expires_min = \
         IF(held = ?, ?, LEAST(held_expires_min, ?)) WHERE id = ?";
    /// Sent last, under every lock: the `now` it writes is inside them.
    pub const MOVE_MARK: &'static str =
        "UPDATE holds SET slot_id = ?, updated_at = UTC_TIMESTAMP(6) WHERE id = ?";

    /// One attempt; `None` when a move took the hold to another slot
    /// between the plain read and the locks: the caller reads it again.
    async fn move_once(
        &self,
        conn: &mut PoolConnection<MySql>,
        caller: &Caller,
        hold_id: HoldId,
        to: SlotId,
        written: &mut Written,
    ) -> Result<Option<Transition>, Error> {
        // A plain read, the owner's or an admin's only (checked once,
        // before any lock): which slot to lock, and the final refusal.
        // Not "expired": a confirm that decided "active" may still commit.
        let hold = find_touchable(conn, caller, hold_id).await?;
        if let Some(done) = ours(conn, written, &hold).await? {
            return Ok(Some(done));
        }
        if hold.status == HoldStatus::Cancelled {
            return Err(Error::HoldCancelled(hold_id));
        }
        let (from, owner) = (hold.slot_id, hold.client_id);
        let mut tx = Tx::begin(conn).await?;
        let locked: Vec<(u64, u32)> = sqlx::query_as(Self::MOVE_LOCK_SLOTS)
            .bind(from.0.min(to.0))
            .bind(from.0.max(to.0))
            .fetch_all(&mut *tx)
            .await?;
        let found: Option<Locked> = sqlx::query_as(Self::MOVE_LOCK)
            .bind(to.0)
            .bind(to.0)
            .bind(owner.0)
            .bind(to.0)
            .bind(hold_id.0)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(found) = found else {
            tx.rollback().await?;
            return Err(Error::HoldNotFound(hold_id));
        };
        let hold = found.row.into_hold()?;
        // A retry whose earlier attempt's COMMIT landed unseen finds it
        // here, once that COMMIT can no longer be in flight.
        if let Some(done) = ours(&mut tx, written, &hold).await? {
            tx.rollback().await?;
            return Ok(Some(done));
        }
        if hold.slot_id != from {
            // Another move won the race for it: the slot it is on now is
            // not one whose lock this attempt holds.
            tx.rollback().await?;
            return Ok(None);
        }
        let refused = match hold.status {
            HoldStatus::Cancelled => Some(Error::HoldCancelled(hold_id)),
            HoldStatus::Held if found.expired => Some(Error::HoldExpired(hold_id)),
            _ if to == from => {
                tx.rollback().await?;
                return Ok(Some(Transition {
                    hold,
                    changed: false,
                }));
            }
            _ if !locked.iter().any(|(id, _)| *id == to.0) => Some(Error::SlotNotFound(to)),
            _ => None,
        };
        if let Some(refused) = refused {
            tx.rollback().await?;
            return Err(refused);
        }
        // Both rows are locked, so a figure that came back NULL was cut
        // short (a scalar subquery of a stopped statement): it decides
        // nothing.
        let (Some(to_starts), Some(from_starts)) = (found.to_starts, found.from_starts) else {
            return Err(incomplete("slot"));
        };
        // Either slot started by `now`: the target's first.
        let started = |now: DateTime<Utc>| {
            if to_starts <= now {
                Some(Error::SlotClosed(to))
            } else if from_starts <= now {
                Some(Error::SlotClosed(from))
            } else {
                None
            }
        };
        let share = match (found.share, found.seats) {
            (None, Some(-1)) => None,
            (Some(share), Some(seats)) if seats >= 0 => Some((share, seats)),
            _ => return Err(incomplete("fair use")),
        };
        if let Some(refused) = started(found.now) {
            tx.rollback().await?;
            return Err(refused);
        }
        // The target's seats first (SPEC §19.1: capacity, then the share),
        // by a write that carries its own condition.
        if let Some(refused) = claim_target(&mut tx, &hold, to, started, self.hold_ttl).await? {
            tx.rollback().await?; // and the reclaim: a later one redoes it
            return Err(refused);
        }
        if let Some(refused) =
            share.and_then(|(share, seats)| over_share(to, Some(share), Some(seats), hold.quantity))
        {
            tx.rollback().await?;
            return Err(refused);
        }
        // The old slot's seats, as a cancel gives them back: an active
        // hold is counted in `held` (it expires after the watermark); a
        // booking's seats return to `remaining`, capped at capacity.
        let release = match hold.status {
            HoldStatus::Held => sqlx::query(Self::CANCEL_RELEASE)
                .bind(hold.quantity)
                .bind(from.0)
                .bind(hold.expires_at),
            _ => sqlx::query(Self::CANCEL_RETURN)
                .bind(hold.quantity)
                .bind(from.0),
        };
        release.execute(&mut *tx).await?;
        sqlx::query(Self::MOVE_MARK)
            .bind(to.0)
            .bind(hold_id.0)
            .execute(&mut *tx)
            .await?;
        let moved = find_by_id(&mut *tx, hold_id)
            .await?
            .ok_or(Error::HoldNotFound(hold_id))?;
        let event = moved_event(&moved, from)?;
        written.record(&moved);
        // The old slot's line gets the seats freed (SPEC §17, §18), after
        // this move's event: cause before effect.
        let line = locked
            .iter()
            .any(|&(id, waiting)| id == from.0 && waiting > 0);
        if line {
            record_events(&mut tx, &[event]).await?;
            reclaim_and_offer(&mut tx, from, self.hold_ttl).await?;
            tx.commit().await?;
        } else {
            commit_with(tx, &[event]).await?;
        }
        Ok(Some(Transition {
            hold: moved,
            changed: true,
        }))
    }
}

/// Claims the hold's seats on `to`, under its lock: an active hold's by
/// the hold path's conditional increment of `held`, a booking's by
/// [`Booking::MOVE_CONSUME`]. When the counter says no, the seats of
/// holds expired since the watermark are given back and the figures,
/// exact then, decide, at the reclaim's now: the move is decided there,
/// so the hold's expiry and `started` (either slot's) are decided again
/// by it first. `Some`: refused, the transaction to be rolled back.
async fn claim_target(
    conn: &mut MySqlConnection,
    hold: &Hold,
    to: SlotId,
    started: impl Fn(DateTime<Utc>) -> Option<Error>,
    ttl: std::time::Duration,
) -> Result<Option<Error>, Error> {
    let quantity = hold.quantity;
    let booked = hold.status == HoldStatus::Confirmed;
    let ttl_micros = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
    let claim = if booked {
        sqlx::query(Booking::MOVE_CONSUME)
    } else {
        sqlx::query(Booking::HOLD_CLAIM).bind(ttl_micros)
    };
    let claim = claim.bind(quantity).bind(to.0).bind(quantity);
    if claim.execute(&mut *conn).await?.rows_affected() == 1 {
        return held_floor(conn, hold, to, booked).await;
    }
    // A line on the target is offered first: a move takes only what no
    // waiting entry can use (SPEC §18).
    let Some(counters) = reclaim_and_offer(conn, to, ttl).await? else {
        return Err(Error::SlotNotFound(to));
    };
    // The reclaim's now is later than `MOVE_LOCK`'s: a held hold that
    // expired in between is expired now, and counted on the target it
    // would break D there (its expiry at or before the new watermark,
    // which no reclaim or cancel would ever give back).
    if !booked && hold.expires_at <= counters.watermark {
        return Ok(Some(Error::HoldExpired(hold.id)));
    }
    if let Some(closed) = started(counters.now) {
        return Ok(Some(closed));
    }
    if u64::from(counters.held) + u64::from(quantity) > u64::from(counters.remaining) {
        return Ok(Some(Error::CapacityExhausted(to)));
    }
    // The figures are exact and the line has had what fits it: the rest
    // may go to this move (the guarded claims would refuse it for the
    // line's sake alone).
    let claim = if booked {
        sqlx::query(Booking::MOVE_CONSUME_RECLAIMED)
    } else {
        sqlx::query(Booking::HOLD_CLAIM_RECLAIMED).bind(ttl_micros)
    };
    claim.bind(quantity).bind(to.0).execute(&mut *conn).await?;
    held_floor(conn, hold, to, booked).await
}

/// A held hold keeps its expiry on the target, which may be earlier than
/// the claim's now plus the TTL: the target's floor goes down to it, or
/// is that expiry when the hold is the only one counted there (the claim
/// left `held` at its quantity). Under the target's lock, after the claim
/// (docs/DESIGN.md, "The projection's floor").
async fn held_floor(
    conn: &mut MySqlConnection,
    hold: &Hold,
    to: SlotId,
    booked: bool,
) -> Result<Option<Error>, Error> {
    if !booked {
        sqlx::query(Booking::MOVE_FLOOR)
            .bind(hold.quantity)
            .bind(hold.expires_at.naive_utc())
            .bind(hold.expires_at.naive_utc())
            .bind(to.0)
            .execute(&mut *conn)
            .await?;
    }
    Ok(None)
}

#[derive(sqlx::FromRow)]
struct Locked {
    #[sqlx(flatten)]
    row: HoldRow,
    expired: bool,
    /// The statement's own, after the slots' locks.
    now: DateTime<Utc>,
    /// NULL only when cut short (both rows are locked; a missing target
    /// was refused before).
    from_starts: Option<DateTime<Utc>>,
    to_starts: Option<DateTime<Utc>>,
    share: Option<u32>,
    /// −1: the target has no share.
    seats: Option<i64>,
}

/// Whether this request's earlier attempt moved the hold, its answer
/// lost: as for an extension, the hold unchanged since says so itself;
/// otherwise its `hold.moved` event tells, once that attempt's fate is
/// settled (under the locks, or when a later change shows it).
async fn ours(
    conn: &mut MySqlConnection,
    written: &Written,
    found: &Hold,
) -> Result<Option<Transition>, Error> {
    let done = match written.unchanged(found) {
        Some(done) => Some(done),
        None => written.announced(conn, EventType::HoldMoved).await?,
    };
    Ok(done.map(|hold| Transition {
        hold,
        changed: true,
    }))
}
