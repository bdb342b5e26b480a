//! Extend: keep an active hold longer, up to its lifetime cap (SPEC §9).
//!
//! An extension decides "is the hold still active?" the way confirm does,
//! under the slot's lock, so it is serialised with the hold path's own
//! decision: a hold that a new hold already counted as expired is never
//! revived (its seats may be taken). It decides after its owner's client
//! row too, shared: a capped hold of that client counts the client's
//! active seats under the same row, exclusively, so it never counts a hold
//! as expired that an extension then revives (docs/DESIGN.md, "One
//! client's cap").

use super::Booking;
use super::sql::{HoldRow, find_by_id, find_touchable, lock_slot};
use super::written::Written;
use crate::clients::Caller;
use crate::db::{self, Tx};
use crate::domain::{Hold, HoldId, HoldStatus};
use crate::error::Error;
use crate::events::{EventType, commit_with, hold_event};
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{MySql, MySqlConnection};

impl Booking {
    /// Moves an active hold's `expires_at` to `min(now + HOLD_TTL_SECONDS,
    /// created_at + HOLD_MAX_LIFETIME_SECONDS)`. Refused, in this order
    /// (SPEC §15.8): confirmed, cancelled, expired, slot started, and an
    /// extension that would not move `expires_at` later.
    ///
    /// Only the hold's owner or an admin may extend it; for anyone else it
    /// does not exist. Seats do not change, so the cache is left alone.
    pub async fn extend(&self, caller: &Caller, hold_id: HoldId) -> Result<Hold, Error> {
        let mut written = Written::default();
        db::transact!(&self.pool, "extend", self.deadline(), |conn| {
            loop {
                if let Some(done) = self
                    .extend_once(&mut conn, caller, hold_id, &mut written)
                    .await?
                {
                    break Ok(done);
                }
            }
        })
        .map_err(|err| written.unknown_if_sent(err))
    }

    /// First, before the slot's lock: the owner's allowance row, shared
    /// (or, with none yet, the gap where a capped hold would make it): a
    /// capped hold's count and an extension of that client's hold never
    /// overlap (docs/DESIGN.md, "One client's cap").
    pub const EXTEND_LOCK_CLIENT: &'static str =
        "SELECT client_id FROM client_allowances WHERE client_id = ? LOCK IN SHARE MODE";
    /// After [`super::LOCK_SLOT`], one statement with one `now` (later than
    /// the slot's lock) locks the hold and decides everything: expired?
    /// started? and where the extension would move `expires_at`.
    pub const EXTEND_LOCK: &'static str = concat!(
        "SELECT ",
        hold_columns!(),
        ", expires_at <= UTC_TIMESTAMP(6) AS expired, ",
        "(SELECT s.starts_at <= UTC_TIMESTAMP(6) FROM slots s WHERE s.id = holds.slot_id) AS closed, ",
        "LEAST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, created_at + INTERVAL ? MICROSECOND) AS extended_to ",
        "FROM holds WHERE id = ? FOR UPDATE"
    );
    /// The hold stays counted: it was active (`expires_at > now >=
    /// reclaimed_until`) and only moves later.
    pub const EXTEND_APPLY: &'static str =
        "UPDATE holds SET expires_at = ?, updated_at = UTC_TIMESTAMP(6) WHERE id = ?";

    /// One attempt; `None` when a move (`move.rs`) took the hold to
    /// another slot between the plain read and the locks.
    async fn extend_once(
        &self,
        conn: &mut PoolConnection<MySql>,
        caller: &Caller,
        hold_id: HoldId,
        written: &mut Written,
    ) -> Result<Option<Hold>, Error> {
        // A plain read, the owner's or an admin's only (checked once,
        // before any lock), answers the final states without any lock and
        // tells which slot to lock. Not "expired": an extension that
        // decided "active" under the lock may still commit (see
        // `find_touchable`).
        let hold = find_touchable(conn, caller, hold_id).await?;
        if let Some(done) = ours(conn, written, &hold).await? {
            return Ok(Some(done));
        }
        refuse_final(&hold, false)?;
        let slot_id = hold.slot_id;
        let mut tx = Tx::begin(conn).await?;
        // Lock order of every transaction: the client row, the slot row,
        // then hold rows.
        sqlx::query(Self::EXTEND_LOCK_CLIENT)
            .bind(hold.client_id.0)
            .fetch_optional(&mut *tx)
            .await?;
        lock_slot(&mut tx, slot_id).await?;
        let ttl = micros(self.hold_ttl);
        let lifetime = micros(self.rules.max_lifetime);
        let locked: Locked = sqlx::query_as(Self::EXTEND_LOCK)
            .bind(ttl)
            .bind(lifetime)
            .bind(hold_id.0)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::HoldNotFound(hold_id))?;
        let hold = locked.row.into_hold()?;
        // A retry whose earlier attempt's COMMIT landed unseen finds it
        // here, once that COMMIT can no longer be in flight.
        if let Some(done) = ours(&mut tx, written, &hold).await? {
            tx.rollback().await?;
            return Ok(Some(done));
        }
        if hold.slot_id != slot_id {
            tx.rollback().await?; // moved meanwhile (`move.rs`): read it again
            return Ok(None);
        }
        let refused = refuse_final(&hold, locked.expired)
            .err()
            .or_else(|| {
                locked
                    .closed
                    .unwrap_or(true)
                    .then_some(Error::SlotClosed(slot_id))
            })
            .or_else(|| {
                (locked.extended_to <= hold.expires_at)
                    .then_some(Error::ExtensionLimitReached(hold_id))
            });
        if let Some(refused) = refused {
            tx.rollback().await?;
            return Err(refused);
        }
        sqlx::query(Self::EXTEND_APPLY)
            .bind(locked.extended_to)
            .bind(hold_id.0)
            .execute(&mut *tx)
            .await?;
        let hold = find_by_id(&mut *tx, hold_id)
            .await?
            .ok_or(Error::HoldNotFound(hold_id))?;
        let event = hold_event(EventType::HoldExtended, &hold)?;
        written.record(&hold);
        commit_with(tx, &[event]).await?;
        Ok(Some(hold))
    }
}

#[derive(sqlx::FromRow)]
struct Locked {
    #[sqlx(flatten)]
    row: HoldRow,
    expired: bool,
    /// NULL only if the slot row vanished, which its lock rules out.
    closed: Option<bool>,
    extended_to: DateTime<Utc>,
}

/// Whether this request's earlier attempt extended the hold, its answer
/// lost. Unchanged since, the hold says so itself; otherwise (changed
/// again since, or not by that attempt) its `hold.extended` event tells,
/// once that attempt's fate is settled: under the slot's lock, or on the
/// plain path when a later change shows it (no event yet, before the
/// lock, only means "not yet": the lock decides). Only a retry after a
/// lost connection gets past the first line.
async fn ours(
    conn: &mut MySqlConnection,
    written: &Written,
    found: &Hold,
) -> Result<Option<Hold>, Error> {
    if let Some(done) = written.unchanged(found) {
        return Ok(Some(done));
    }
    written.announced(conn, EventType::HoldExtended).await
}

/// The refusals, in the required order: confirmed, cancelled (each
/// final), then expired, which only a now from under the slot's lock may
/// decide (a plain read passes `false`).
fn refuse_final(hold: &Hold, expired: bool) -> Result<(), Error> {
    match hold.status {
        HoldStatus::Confirmed => Err(Error::HoldConfirmed(hold.id)),
        HoldStatus::Cancelled => Err(Error::HoldCancelled(hold.id)),
        HoldStatus::Held if expired => Err(Error::HoldExpired(hold.id)),
        HoldStatus::Held => Ok(()),
    }
}

fn micros(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}
