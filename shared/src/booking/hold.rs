//! Hold: claim one seat of a slot for the hold TTL.

use super::reclaim::reclaim_locked;
use super::sql::{find_by_id, find_by_key};
use super::{Booking, HoldOutcome};
use crate::clients::{Caller, ClientId};
use crate::db;
use crate::domain::{Hold, HoldId, IdempotencyKey, SlotId};
use crate::error::Error;
use sqlx::{Connection, MySqlConnection};

impl Booking {
    /// Places a hold on one seat of `slot_id` for the configured hold TTL.
    ///
    /// Guarantees: never more active holds than `remaining` (the seat is
    /// claimed by a conditional increment of `slots.held` under the slot's
    /// row lock), one hold per idempotency key (the UNIQUE index), and a
    /// replay of a key returns its original hold, whatever its state now.
    /// A key used for another slot is refused. A slot with no bookable
    /// seat is refused without waiting for its row lock.
    ///
    /// The hold belongs to `caller`, and its key is looked up among the
    /// caller's holds only: the same key from two clients makes two holds.
    pub async fn hold(
        &self,
        caller: &Caller,
        slot_id: SlotId,
        key: &IdempotencyKey,
    ) -> Result<HoldOutcome, Error> {
        let client = caller.id;
        db::transact!(&self.pool, "hold", self.deadline(), |conn| {
            self.hold_once(&mut conn, client, slot_id, key).await
        })
    }

    /// The hold's statements, in the order [`Booking::hold`] sends them
    /// (public so that the bench's raw sequences send these very strings).
    /// The pre-check: the key's hold and the slot's bookable figure.
    pub const HOLD_PRECHECK: &'static str = concat!(
        "SELECT (SELECT id FROM holds WHERE client_id = ? AND idempotency_key = ?) AS key_hold, (",
        slot_bookable!(),
        ") AS bookable"
    );
    /// The claim: a conditional increment of the held-seats counter. It
    /// reads no clock (its `now` would predate its lock wait); the new
    /// figure comes back as the statement's insert id, which tells whether
    /// the counter was empty.
    pub const HOLD_CLAIM: &'static str = "UPDATE slots SET held = LAST_INSERT_ID(held + 1), \
         updated_at = UTC_TIMESTAMP(6) WHERE id = ? AND held < remaining";
    /// After a claim that found the counter empty: any watermark up to now
    /// is then exact, and a recent one keeps the projection's scan window
    /// short. Sent after the lock, so its `now` follows every watermark
    /// written before; `GREATEST` never moves it back.
    pub const HOLD_WATERMARK: &'static str = "UPDATE slots SET reclaimed_until = \
         GREATEST(reclaimed_until, UTC_TIMESTAMP(6)) WHERE id = ?";
    /// The claim after a reclaim, which holds the lock and found a free seat.
    pub const HOLD_CLAIM_RECLAIMED: &'static str = "UPDATE slots SET held = held + 1 WHERE id = ?";
    /// Sent under the slot's lock: its `now` follows the watermark, so the
    /// new hold is counted (D). It may wait on the key's UNIQUE index, but
    /// only ever after the slot's lock was granted.
    pub const HOLD_INSERT: &'static str = "INSERT INTO holds (slot_id, client_id, idempotency_key, status, expires_at, created_at, updated_at) \
         VALUES (?, ?, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";

    async fn hold_once(
        &self,
        conn: &mut MySqlConnection,
        client: ClientId,
        slot_id: SlotId,
        key: &IdempotencyKey,
    ) -> Result<HoldOutcome, Error> {
        // 1. One plain read, no lock: the key's hold, if any, and what the
        //    slot has bookable right now, in one snapshot. Key first (an
        //    ordinary retry is a replay), then the slot. A sold-out slot is
        //    refused here, so a storm of holds on it never queues on the
        //    row lock: "full" is true at this snapshot, and the key was not
        //    used at this snapshot either, so 409 is a correct answer.
        let (key_hold, bookable): (Option<u64>, Option<i64>) = sqlx::query_as(Self::HOLD_PRECHECK)
            .bind(client.0)
            .bind(key.as_str())
            .bind(slot_id.0)
            .fetch_one(&mut *conn)
            .await?;
        if let Some(id) = key_hold {
            let hold = find_by_id(&mut *conn, HoldId(id)).await?;
            return replay(hold.ok_or(Error::HoldNotFound(HoldId(id)))?, slot_id);
        }
        // No figure is not proof that the slot is missing: a scalar subquery
        // cut short by a killed query comes back NULL. The locked path
        // below decides "no such slot" from the slot's row itself.
        if bookable.is_some_and(|bookable| bookable <= 0) {
            return Err(Error::CapacityExhausted(slot_id));
        }

        let mut tx = conn.begin().await?;
        // 2. Claim a seat: the condition is inside the write, and the write
        //    takes the slot's row lock. It is the transaction's first
        //    statement, so no snapshot exists yet: every plain read below
        //    sees all that committed before the lock was granted.
        let claim = sqlx::query(Self::HOLD_CLAIM)
            .bind(slot_id.0)
            .execute(&mut *tx)
            .await?;
        if claim.rows_affected() == 1 && claim.last_insert_id() == 1 {
            // 2a. The counter was empty: no counted hold exists, so the
            //     watermark may move up to now, sent after the lock.
            sqlx::query(Self::HOLD_WATERMARK)
                .bind(slot_id.0)
                .execute(&mut *tx)
                .await?;
        } else if claim.rows_affected() == 0 {
            // 2b. Full by the counter. Give back the seats of holds that
            //     expired since the last reclaim, then claim if one is free.
            let Some(counters) = reclaim_locked(&mut tx, slot_id).await? else {
                return Err(Error::SlotNotFound(slot_id));
            };
            // A request with the same key may have committed while we
            // waited for the lock: on a full slot it must be replayed, not
            // refused (on a slot with room the UNIQUE index catches it).
            if let Some(hold) = find_by_key(&mut *tx, client, key).await? {
                return replay(hold, slot_id);
            }
            if counters.held >= counters.remaining {
                tx.commit().await?; // keep the reclaim
                return Err(Error::CapacityExhausted(slot_id));
            }
            sqlx::query(Self::HOLD_CLAIM_RECLAIMED)
                .bind(slot_id.0)
                .execute(&mut *tx)
                .await?;
        }
        // 3. Insert. A concurrent request with the same key waits here on
        //    the UNIQUE index until we commit, then fails and replays us.
        let ttl_micros = i64::try_from(self.hold_ttl.as_micros()).unwrap_or(i64::MAX);
        let inserted = sqlx::query(Self::HOLD_INSERT)
            .bind(slot_id.0)
            .bind(client.0)
            .bind(key.as_str())
            .bind(ttl_micros)
            .execute(&mut *tx)
            .await;
        let id = match inserted {
            Ok(done) => HoldId(done.last_insert_id()),
            Err(err) if db::is_unique_violation(&err) => {
                drop(tx); // rolls the claim back
                // The winner has committed (the index waited for it): its
                // hold is the answer.
                return match find_by_key(&mut *conn, client, key).await? {
                    Some(hold) => replay(hold, slot_id),
                    None => Err(Error::Internal(err)),
                };
            }
            Err(err) => return Err(err.into()),
        };
        let hold = find_by_id(&mut *tx, id)
            .await?
            .ok_or(Error::HoldNotFound(id))?;
        tx.commit().await?;
        Ok(HoldOutcome {
            hold,
            created: true,
        })
    }
}

/// A key's hold answers a request for the same slot; for another slot it is
/// refused, since returning it would hand the client a slot it never asked for.
fn replay(hold: Hold, slot_id: SlotId) -> Result<HoldOutcome, Error> {
    if hold.slot_id == slot_id {
        Ok(HoldOutcome {
            hold,
            created: false,
        })
    } else {
        Err(Error::IdempotencyKeyReuse {
            used_for: hold.slot_id,
        })
    }
}
