//! Hold: claim `quantity` seats of a slot, all or nothing, for the hold TTL.

use super::allowance;
use super::fair::{
    Precheck, Verdict, answer, locked_verdict, over_cap, over_share, share_precheck,
};
use super::hold_call::{self, Asked, Placed};
use super::reclaim::reclaim_and_offer;
use super::replay::{Wanted, replay};
use super::sql::{find_by_id, find_by_key, guard, key_winner, lock_slot};
use super::written::Written;
use super::{Booking, HoldOutcome};
use crate::clients::Caller;
use crate::db::counter::{client_held, slot_bookable};
use crate::db::{self, Tx};
use crate::domain::{Hold, HoldId, IdempotencyKey, SlotId};
use crate::error::Error;
use crate::events::{EventType, commit_with, hold_event};
use crate::telemetry::{self, Metric};
use sqlx::MySql;
use sqlx::pool::PoolConnection;

/// The pre-check's columns but the cap's, shared by both of its forms.
macro_rules! hold_precheck {
    () => {
        concat!(
            "SELECT (SELECT id FROM holds WHERE client_id = ? AND idempotency_key = ?) AS key_hold, (",
            slot_bookable!(),
            ") AS bookable, (SELECT starts_at <= UTC_TIMESTAMP(6) FROM slots WHERE id = ?) AS closed, ",
            share_precheck!()
        )
    };
}

impl Booking {
    /// Places a hold on `quantity` seats of `slot_id` (all or nothing) for
    /// the configured hold TTL.
    ///
    /// Guarantees: never more seats in active holds than `remaining` (the
    /// seats are claimed by a conditional increment of `slots.held` under
    /// the slot's row lock), one hold per idempotency key (the UNIQUE
    /// index), and a replay of a key with the same slot and quantity returns
    /// its original hold, whatever its state now; a key used for another
    /// slot or quantity is refused (its fingerprint). A slot without
    /// `quantity` bookable seats, or one that has started, is refused
    /// without waiting for its row lock.
    ///
    /// The hold belongs to `caller`, and its key is looked up among the
    /// caller's holds only: the same key from two clients makes two holds.
    /// A caller with a cap never has more seats in active holds than it
    /// (SPEC §16; docs/DESIGN.md, "One client's cap"): its holds take its
    /// client row's lock before the slot's, and count under both.
    pub async fn hold(
        &self,
        caller: &Caller,
        slot_id: SlotId,
        quantity: u32,
        key: &IdempotencyKey,
    ) -> Result<HoldOutcome, Error> {
        let wanted = Wanted { slot_id, quantity };
        let mut written = Written::default();
        let mut offered = false;
        let outcome = db::transact!(&self.pool, "hold", self.deadline(), |conn| {
            self.hold_once(&mut conn, caller, wanted, key, (&mut written, &mut offered))
                .await
        })
        .map_err(|err| written.unknown_if_sent(err));
        self.invalidate_after_offers(offered).await;
        if let Ok(done) = &outcome
            && done.created
        {
            telemetry::count(Metric::HoldsCreated, 1);
            telemetry::count(Metric::SeatsHeld, done.hold.quantity.into());
        }
        outcome
    }

    /// The hold's statements, in the order [`Booking::hold`] sends them
    /// (public so that the bench's raw sequences send these very strings).
    /// The pre-check: the key's hold, the slot's bookable figure, whether
    /// it has started, and its share per client with this client's seats
    /// on it (`fair.rs`).
    pub const HOLD_PRECHECK: &'static str =
        concat!(hold_precheck!(), ", CAST(NULL AS SIGNED) AS client_held");
    /// The same for a capped client refused at its cap here lately, with
    /// the seats of its active holds last, counted only when its
    /// allowance's bound (below) would not pass this hold: a hoarder over
    /// its cap is refused here, without a lock; a client under it reads
    /// none of its holds. Extra binds: quantity, cap, client, client.
    pub const HOLD_PRECHECK_CAPPED: &'static str = concat!(
        hold_precheck!(),
        ", (SELECT IF(a.held + ? <= ? AND a.counted_at >= a.recount_after, NULL, (",
        client_held!(),
        ")) FROM client_allowances a WHERE a.client_id = ?) AS client_held"
    );
    /// The claim: a conditional increment of the held-seats counter by the
    /// quantity. It reads no clock for a decision (its `now` would predate
    /// its lock wait); the new figure comes back as the statement's insert
    /// id, which tells whether the counter was empty. A slot with a line
    /// never passes it (SPEC §18); by the primary key alone (DESIGN, "The
    /// waiting list"). The projection's floor goes down to its now + TTL,
    /// no later than the hold's expiry (set there on an empty counter;
    /// before `held`, which it reads: DESIGN, "The projection's floor").
    /// Binds: TTL in microseconds, quantity, slot, quantity.
    pub const HOLD_CLAIM: &'static str = "UPDATE slots FORCE INDEX (PRIMARY) SET held_expires_min = \
         LEAST(IF(held = 0, TIMESTAMP'9999-12-31 00:00:00', held_expires_min), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), \
         held = LAST_INSERT_ID(held + ?), \
         updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ? AND held + ? <= remaining AND waiting = 0";
    /// After a claim that found the counter empty: any watermark up to now
    /// is then exact, and a recent one keeps the projection's scan window
    /// short. Sent after the lock, so its `now` follows every watermark
    /// written before; `GREATEST` never moves it back.
    pub const HOLD_WATERMARK: &'static str = "UPDATE slots SET reclaimed_until = \
         GREATEST(reclaimed_until, UTC_TIMESTAMP(6)) WHERE id = ?";
    /// The claim after a reclaim, which holds the lock and found the seats;
    /// the floor as [`Booking::HOLD_CLAIM`] moves it. Binds: TTL, quantity, slot.
    pub const HOLD_CLAIM_RECLAIMED: &'static str = "UPDATE slots SET held_expires_min = \
         LEAST(IF(held = 0, TIMESTAMP'9999-12-31 00:00:00', held_expires_min), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), \
         held = held + ? WHERE id = ?";
    /// Sent under the slot's lock (and a capped client's rows), after the
    /// watermark: its `now` follows every watermark written before, so the
    /// hold made from it is counted (D), and "has the slot started?" is
    /// decided at a moment of the lock. It also tells whether the slot has
    /// a share: a slot without one at the pre-check may have gained one
    /// since. A locking read of the row this transaction holds: no wait,
    /// and the row as it is, whenever the snapshot was taken.
    pub const HOLD_GUARD: &'static str = "SELECT UTC_TIMESTAMP(6) AS now, starts_at <= UTC_TIMESTAMP(6) AS closed, \
         max_seats_per_client IS NOT NULL AS shared FROM slots WHERE id = ? FOR UPDATE";
    /// The hold, its times from the guard's `now`. A simple INSERT (one row
    /// of VALUES), never an `INSERT … SELECT`: InnoDB's consecutive mode
    /// (MariaDB's default) holds the table's AUTO-INC lock through a whole
    /// `INSERT … SELECT`, lock waits included, and a simple INSERT of any
    /// transaction then queues behind it (docs/DESIGN.md, "The implicit
    /// locks"). It may wait on the key's UNIQUE index or, for its foreign
    /// key, on a shared lock of the client's `api_clients` row, only ever
    /// after the slot's lock was granted. Binds: slot, client, quantity,
    /// key, now, TTL in microseconds, now, now, the request's number.
    pub const HOLD_INSERT: &'static str = "INSERT INTO holds (slot_id, client_id, quantity, idempotency_key, status, expires_at, created_at, updated_at, created_by) \
         VALUES (?, ?, ?, ?, 'held', ? + INTERVAL ? MICROSECOND, ?, ?, ?)";

    async fn hold_once(
        &self,
        conn: &mut PoolConnection<MySql>,
        caller: &Caller,
        wanted: Wanted,
        key: &IdempotencyKey,
        (written, offered): (&mut Written, &mut bool),
    ) -> Result<HoldOutcome, Error> {
        let Wanted { slot_id, quantity } = wanted;
        let (client, cap) = (caller.id, caller.held_cap);
        // Every path that finds the key's hold answers through this: the
        // replay, or this request's own hold, committed by an earlier
        // attempt whose answer was lost (201, as that answer said).
        let found = |hold: Hold| match written.created(&hold) {
            Some(hold) => Ok(HoldOutcome {
                hold,
                created: true,
            }),
            None => replay(hold, wanted),
        };
        // 1. One plain read, no lock: the key's hold, if any, what the slot
        //    has bookable right now and whether it has started, in one
        //    snapshot. Key first (an ordinary retry is a replay, even on a
        //    slot that has started since), then the slot. A slot without
        //    the seats is refused here, so a storm of holds on it never
        //    queues on the row lock: "full" is true at this snapshot, and
        //    the key was not used at this snapshot either, so 409 is a
        //    correct answer; "started" is final. The same holds of a capped
        //    client's seats, read for a client this environment refused at
        //    its cap lately (`allowance::AtCap`): a hoarder queues on the
        //    locks once in each environment (again only after a minute
        //    without a refusal there), not once per request; any other
        //    capped hold reads what an uncapped one reads.
        let counts = cap.filter(|_| self.at_cap.was_refused(client));
        let precheck = match counts {
            Some(_) => Self::HOLD_PRECHECK_CAPPED,
            None => Self::HOLD_PRECHECK,
        };
        let mut precheck = sqlx::query_as(precheck)
            .bind(client.0)
            .bind(key.as_str())
            .bind(slot_id.0)
            .bind(slot_id.0)
            .bind(slot_id.0)
            .bind(client.0)
            .bind(slot_id.0);
        if let Some(cap) = counts {
            precheck = precheck
                .bind(quantity)
                .bind(cap)
                .bind(client.0)
                .bind(client.0);
        }
        let seen: Precheck = precheck.fetch_one(&mut **conn).await?;
        let (key_hold, bookable, closed) = (seen.key_hold, seen.bookable, seen.closed);
        if let Some(id) = key_hold {
            let hold = find_by_id(&mut **conn, HoldId(id)).await?;
            return found(hold.ok_or(Error::HoldNotFound(HoldId(id)))?);
        }
        // No figure is not proof that the slot is missing: a scalar subquery
        // cut short by a killed query comes back NULL. The locked path
        // below decides "no such slot" from the slot's row itself.
        if closed == Some(true) {
            // "Started" is final, "the key is unused" is not: a hold with
            // this key decided under the slot's lock before the start (this
            // request's lost attempt, or the client's duplicate) may still
            // be committing. The key is looked at again under that lock.
            let mut tx = Tx::begin(conn).await?;
            lock_slot(&mut tx, slot_id).await?;
            let hold = find_by_key(&mut *tx, client, key).await?;
            tx.rollback().await?;
            return match hold {
                Some(hold) => found(hold),
                None => Err(Error::SlotClosed(slot_id)),
            };
        }
        if bookable.is_some_and(|bookable| bookable < i64::from(quantity)) {
            return Err(Error::CapacityExhausted(slot_id));
        }
        // The slot's share, then the client's cap (SPEC §19.1), only for a
        // slot that exists (404 first).
        if bookable.is_some()
            && let Some(refused) = over_share(slot_id, seen.share, seen.slot_seats, quantity)
                .or_else(|| over_cap(cap, seen.client_held, quantity))
        {
            return Err(self.refusing(client, refused));
        }

        // 2. The common path, in one CALL that commits (`hold_call.rs`):
        //    it sends the statements below, in their order, inside the
        //    server. A slot with a share, or one that may be missing, is
        //    decided by the locked path alone.
        let ttl_micros = i64::try_from(self.hold_ttl.as_micros()).unwrap_or(i64::MAX);
        if seen.share.is_none() && bookable.is_some() {
            let asked = Asked {
                client,
                cap,
                slot_id,
                quantity,
                key,
                ttl_micros,
            };
            match hold_call::place(conn, &asked, written).await? {
                Placed::Made(hold) => {
                    return Ok(HoldOutcome {
                        hold,
                        created: true,
                    });
                }
                Placed::KeyTaken(hold) => return found(hold),
                Placed::Declined => {}
            }
        }
        let mut tx = Tx::begin(conn).await?;
        // 2'. The locked path. Claim the seats: the condition is inside the write, and the
        //    write takes the slot's row lock. No snapshot exists before it
        //    (no plain read was sent in this transaction): every plain read
        //    below sees all that committed before the lock was granted.
        //    2'. A capped client's allowance first, in the same CALL
        //    (`allowance.rs`): the client's lock before the slot's.
        let (claim, count) = match cap {
            Some(cap) => {
                let claimed =
                    allowance::claim(&mut tx, client, cap, quantity, slot_id, ttl_micros).await?;
                (claimed.slot, (!claimed.passed).then_some(cap))
            }
            None => {
                let claim = sqlx::query(Self::HOLD_CLAIM)
                    .bind(ttl_micros)
                    .bind(quantity)
                    .bind(slot_id.0)
                    .bind(quantity)
                    .execute(&mut *tx)
                    .await?;
                ((claim.rows_affected(), claim.last_insert_id()), None)
            }
        };
        if count.is_some() {
            allowance::lock_for_count(&mut tx, client).await?;
        }
        let (rows_affected, last_insert_id) = claim;
        if rows_affected == 1 && last_insert_id == u64::from(quantity) {
            // 2a. The counter was empty: no counted hold exists, so the
            //     watermark may move up to now, sent after the lock.
            sqlx::query(Self::HOLD_WATERMARK)
                .bind(slot_id.0)
                .execute(&mut *tx)
                .await?;
        } else if rows_affected == 0 {
            // 2b. Full by the counter, or a line waits. Give back the seats
            //     of holds that expired since the last reclaim, offer the
            //     line what fits it, then claim if enough is left.
            let Some(counters) = reclaim_and_offer(&mut tx, slot_id, self.hold_ttl).await? else {
                tx.rollback().await?;
                return Err(Error::SlotNotFound(slot_id));
            };
            *offered |= counters.offered > 0;
            // A request with the same key may have committed while we
            // waited for the lock: on a full slot it must be replayed, not
            // refused (on a slot with room the UNIQUE index catches it).
            if let Some(hold) = find_by_key(&mut *tx, client, key).await? {
                tx.rollback().await?; // a later reclaim redoes this one
                return found(hold);
            }
            if u64::from(counters.held) + u64::from(quantity) > u64::from(counters.remaining) {
                if cap.is_some() && count.is_none() {
                    // The bound moved for a hold that is not made.
                    allowance::give_back(&mut tx, client, quantity).await?;
                }
                // Keep the reclaim and its offers; the refusal stands even
                // if this COMMIT's answer is lost (DESIGN, "Retried after
                // an unseen COMMIT").
                if let Err(err) = tx.commit().await {
                    tracing::warn!(error = %err, "a refused hold's reclaim may not have landed");
                }
                return Err(Error::CapacityExhausted(slot_id));
            }
            sqlx::query(Self::HOLD_CLAIM_RECLAIMED)
                .bind(ttl_micros)
                .bind(quantity)
                .bind(slot_id.0)
                .execute(&mut *tx)
                .await?;
        }
        // 2c. The rest of SPEC §19.1's order, after the capacity, under the
        //     slot's lock (and a capped client's row): started, the slot's
        //     share, the client's cap, in one statement. Every hold,
        //     confirm and cancel of this slot waits for that lock, every
        //     capped hold and extension of this client for that row: the
        //     figures are final. A same-key hold committed before our locks
        //     is this request's lost attempt or its twin: a replay. Sent
        //     only when there is something to decide; a slot without a
        //     share at the pre-check is checked by the guard (3) instead.
        let checked = seen.share.is_some() || count.is_some();
        if checked {
            match locked_verdict(&mut tx, client, count, key, slot_id, quantity).await? {
                (Verdict::Pass, Some(counted)) => {
                    allowance::set(&mut tx, client, counted, quantity).await?;
                }
                (Verdict::Pass, None) => {}
                (ended, _) => {
                    tx.rollback().await?; // the claim
                    return answer(conn, ended, found)
                        .await
                        .map_err(|refused| self.refusing(client, refused));
                }
            }
        }
        // 3. The guard, under the lock: started, then a share set after
        //    the pre-check (decided now, under the lock).
        let guard = guard(&mut tx, slot_id).await?;
        if guard.closed {
            // The slot started while this request waited for its lock.
            tx.rollback().await?; // the claim
            // A same-key request that committed meanwhile is still a
            // replay (on a slot with room nothing else found it).
            return match find_by_key(&mut **conn, client, key).await? {
                Some(hold) => found(hold),
                None => Err(Error::SlotClosed(slot_id)),
            };
        }
        if guard.shared && !checked {
            match locked_verdict(&mut tx, client, None, key, slot_id, quantity).await? {
                (Verdict::Pass, _) => {}
                (ended, _) => {
                    tx.rollback().await?; // the claim
                    return answer(conn, ended, found).await;
                }
            }
        }
        // 4. Insert. A concurrent request with the same key waits here on
        //    the UNIQUE index until we commit, then fails and replays us.
        let inserted = sqlx::query(Self::HOLD_INSERT)
            .bind(slot_id.0)
            .bind(client.0)
            .bind(quantity)
            .bind(key.as_str())
            .bind(guard.now)
            .bind(ttl_micros)
            .bind(guard.now)
            .bind(guard.now)
            .bind(written.request().0)
            .execute(&mut *tx)
            .await;
        let id = match inserted {
            Ok(done) => HoldId(done.last_insert_id()),
            Err(err) if db::is_unique_violation(&err) => {
                tx.rollback().await?; // the claim
                // The winner's hold is the answer, or, for another
                // fingerprint, 422.
                return found(key_winner(conn, client, key, err).await?);
            }
            Err(err) => return Err(err.into()),
        };
        let hold = find_by_id(&mut *tx, id)
            .await?
            .ok_or(Error::HoldNotFound(id))?;
        // 5. Its event, last, in the same transaction: with the COMMIT.
        let event = hold_event(EventType::HoldCreated, &hold)?;
        written.record(&hold);
        commit_with(tx, &[event]).await?;
        Ok(HoldOutcome {
            hold,
            created: true,
        })
    }
}
