//! The booking use cases: availability, hold, confirm, cancel.
//!
//! Each knows nothing of HTTP. The order of statements inside each
//! transaction is the point of this module and is commented where it is.
//! Expiry is decided by one clock, the database's (`UTC_TIMESTAMP(6)`), in
//! SQL, never by comparing against the application's clock.

use crate::cache::{AvailabilityCache, CacheStatus, Served};
use crate::db::{self, retrying};
use crate::domain::{Hold, HoldId, HoldStatus, IdempotencyKey, SlotAvailability, SlotId};
use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::{MySqlConnection, MySqlPool};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// "A hold occupies a seat": the one definition, used by the capacity check
/// of [`Booking::hold`] and by the availability projection. An expired hold
/// keeps `status = 'held'` and stops counting the instant `expires_at`
/// passes; no sweeper is needed for correctness.
macro_rules! active_hold {
    () => {
        "status = 'held' AND expires_at > UTC_TIMESTAMP(6)"
    };
}
pub const ACTIVE_HOLD: &str = active_hold!();

/// The held-seats counter (docs/DESIGN.md). `slots.held` counts the
/// slot's `held` holds that expire after its reclaim watermark
/// `slots.reclaimed_until`. Among those, the ones already expired still
/// occupy the counter but no longer a seat: this condition finds them, for
/// a hold aliased `x` of a slot aliased `s`. Reclaims and the sweeper move
/// the watermark, so they are few. Hence, with one clock,
/// `held − (holds matching this) = (holds matching ACTIVE_HOLD)`, which
/// the tests check as the oracle after every step.
macro_rules! expired_but_counted {
    () => {
        "x.status = 'held' AND x.expires_at > s.reclaimed_until AND x.expires_at <= UTC_TIMESTAMP(6)"
    };
}

/// What one slot has bookable: `remaining − held + expired-but-counted`.
/// SIGNED: on the UNSIGNED columns a negative intermediate would be error
/// 1690. With `s.id = ?` the slot row is a constant to the optimiser, so
/// the watermark bounds an index range over `(slot_id, status,
/// expires_at)`: the cost is the slot's expired-but-counted holds, not its
/// active ones. The index is forced: statistics sometimes tempt the
/// optimiser into `(status, expires_at)`, ten times slower here.
macro_rules! slot_bookable {
    () => {
        concat!(
            "SELECT CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) + COUNT(x.id) ",
            "FROM slots s LEFT JOIN holds x FORCE INDEX (holds_slot_id_status_expires_at_index) ",
            "ON x.slot_id = s.id AND ",
            expired_but_counted!(),
            " WHERE s.id = ?"
        )
    };
}

/// The expired-but-counted holds of every slot, per slot. The constant
/// lower bound (the oldest watermark of a slot that counts any hold) turns
/// the scan into a range over `(status, expires_at)` that covers the last
/// hold TTL or so, not the whole history of expired holds.
macro_rules! expired_but_counted_per_slot {
    () => {
        concat!(
            "SELECT s.id AS slot_id, COUNT(*) AS n FROM holds x JOIN slots s ON s.id = x.slot_id ",
            "WHERE ",
            expired_but_counted!(),
            " AND x.expires_at > (SELECT MIN(m.reclaimed_until) FROM slots m WHERE m.held > 0) ",
            "GROUP BY s.id"
        )
    };
}

/// The columns of the hold resource, in `HoldRow`'s order.
macro_rules! hold_columns {
    () => {
        "id, slot_id, idempotency_key, status, expires_at, \
         confirmed_at, cancelled_at, created_at, updated_at"
    };
}

/// The booking service. Cheap to clone; build it once per execution
/// environment.
#[derive(Clone)]
pub struct Booking {
    pool: MySqlPool,
    hold_ttl: Duration,
    cache: Option<AvailabilityCache>,
    /// How many projection queries this instance ran: lets operators and
    /// tests see the cache absorbing reads.
    projections: Arc<AtomicU64>,
}

/// What `hold` did: a new hold (201) or the replay of the key's hold (200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldOutcome {
    pub hold: Hold,
    pub created: bool,
}

/// What `confirm` or `cancel` did: `changed` is false for an idempotent
/// replay (already confirmed / already cancelled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub hold: Hold,
    pub changed: bool,
}

impl Booking {
    pub fn new(pool: MySqlPool, hold_ttl: Duration, cache: Option<AvailabilityCache>) -> Self {
        Self {
            pool,
            hold_ttl,
            cache,
            projections: Arc::default(),
        }
    }

    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    pub fn cache(&self) -> Option<&AvailabilityCache> {
        self.cache.as_ref()
    }

    /// Projection queries run by this instance so far.
    pub fn projections_run(&self) -> u64 {
        self.projections.load(Ordering::Relaxed)
    }

    /// The availability list as JSON, through the cache when there is one.
    pub async fn availability_json(&self) -> Result<Served, Error> {
        let compute = || async {
            let slots = self.availability().await?;
            serde_json::to_vec(&slots)
                .map_err(|err| Error::Internal(sqlx::Error::Encode(Box::new(err))))
        };
        match &self.cache {
            Some(cache) => cache.get_or_compute(compute).await,
            None => Ok(Served {
                body: compute().await?,
                status: CacheStatus::Bypass,
                age: Duration::ZERO,
            }),
        }
    }

    /// What one slot has bookable now, by the hold path's own query
    /// (`None`: no such slot). Not clamped: a negative figure would be an
    /// oversell, which the tests look for.
    pub async fn bookable(&self, slot_id: SlotId) -> Result<Option<i64>, Error> {
        Ok(sqlx::query_scalar(slot_bookable!())
            .bind(slot_id.0)
            .fetch_one(&self.pool)
            .await?)
    }

    /// The availability projection. Clamped at 0: an operator's
    /// out-of-band change must not fail the whole list (on UNSIGNED columns
    /// a negative intermediate would be error 1690, hence the SIGNED
    /// arithmetic).
    pub const PROJECTION: &'static str = concat!(
        "SELECT s.id, s.capacity, CAST(GREATEST(",
        "CAST(s.remaining AS SIGNED) - CAST(s.held AS SIGNED) + COALESCE(e.n, 0), 0",
        ") AS UNSIGNED) AS bookable, s.starts_at, s.ends_at ",
        "FROM slots s LEFT JOIN (",
        expired_but_counted_per_slot!(),
        ") e ON e.slot_id = s.id ORDER BY s.id"
    );

    /// Every slot with what a client can still book: `remaining` minus the
    /// slot's active holds, never below 0, ordered by slot id. One query;
    /// its cost does not grow with the number of active holds (see
    /// [`expired_but_counted!`]).
    pub async fn availability(&self) -> Result<Vec<SlotAvailability>, Error> {
        self.projections.fetch_add(1, Ordering::Relaxed);
        let rows: Vec<ProjectionRow> = retrying("availability", || async {
            Ok(sqlx::query_as(Self::PROJECTION)
                .fetch_all(&self.pool)
                .await?)
        })
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(id, capacity, bookable, starts_at, ends_at)| SlotAvailability {
                    slot_id: SlotId(id),
                    capacity,
                    remaining: u32::try_from(bookable).unwrap_or(capacity).min(capacity),
                    starts_at,
                    ends_at,
                },
            )
            .collect())
    }

    /// Places a hold on one seat of `slot_id` for the configured hold TTL.
    ///
    /// Guarantees: never more active holds than `remaining` (the seat is
    /// claimed by a conditional increment of `slots.held` under the slot's
    /// row lock), one hold per idempotency key (the UNIQUE index), and a
    /// replay of a key returns its original hold, whatever its state now.
    /// A key used for another slot is refused. A slot with no bookable
    /// seat is refused without waiting for its row lock.
    pub async fn hold(&self, slot_id: SlotId, key: &IdempotencyKey) -> Result<HoldOutcome, Error> {
        retrying("hold", || self.hold_once(slot_id, key)).await
    }

    /// The hold's statements, in the order [`Booking::hold`] sends them
    /// (public so that the bench's raw sequences send these very strings).
    /// The pre-check: the key's hold and the slot's bookable figure.
    pub const HOLD_PRECHECK: &'static str = concat!(
        "SELECT (SELECT id FROM holds WHERE idempotency_key = ?) AS key_hold, (",
        slot_bookable!(),
        ") AS bookable"
    );
    /// The claim: a conditional increment of the held-seats counter.
    pub const HOLD_CLAIM: &'static str = "UPDATE slots SET reclaimed_until = IF(held = 0, UTC_TIMESTAMP(6), reclaimed_until), \
         held = held + 1, updated_at = UTC_TIMESTAMP(6) WHERE id = ? AND held < remaining";
    /// The claim after a reclaim, which holds the lock and found a free seat.
    pub const HOLD_CLAIM_RECLAIMED: &'static str = "UPDATE slots SET held = held + 1 WHERE id = ?";
    pub const HOLD_INSERT: &'static str = "INSERT INTO holds (slot_id, idempotency_key, status, expires_at, created_at, updated_at) \
         VALUES (?, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";

    async fn hold_once(&self, slot_id: SlotId, key: &IdempotencyKey) -> Result<HoldOutcome, Error> {
        // 1. One plain read, no lock: the key's hold, if any, and what the
        //    slot has bookable right now, in one snapshot. Key first (an
        //    ordinary retry is a replay), then the slot. A sold-out slot is
        //    refused here, so a storm of holds on it never queues on the
        //    row lock: "full" is true at this snapshot, and the key was not
        //    used at this snapshot either, so 409 is a correct answer.
        let (key_hold, bookable): (Option<u64>, Option<i64>) = sqlx::query_as(Self::HOLD_PRECHECK)
            .bind(key.as_str())
            .bind(slot_id.0)
            .fetch_one(&self.pool)
            .await?;
        if let Some(id) = key_hold {
            let hold = find_by_id(&self.pool, HoldId(id)).await?;
            return replay(hold.ok_or(Error::HoldNotFound(HoldId(id)))?, slot_id);
        }
        // No figure is not proof that the slot is missing: a scalar subquery
        // cut short by a killed query comes back NULL. The locked path
        // below decides "no such slot" from the slot's row itself.
        if bookable.is_some_and(|bookable| bookable <= 0) {
            return Err(Error::CapacityExhausted(slot_id));
        }

        let mut tx = self.pool.begin().await?;
        // 2. Claim a seat: the condition is inside the write, and the write
        //    takes the slot's row lock. It is the transaction's first
        //    statement, so no snapshot exists yet: every plain read below
        //    sees all that committed before the lock was granted. When the
        //    counter is empty any watermark up to now is exact, so it moves
        //    to now (assignments run left to right: `held` is still old),
        //    which keeps the projection's scan window short.
        let claimed = sqlx::query(Self::HOLD_CLAIM)
            .bind(slot_id.0)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if claimed == 0 {
            // 2b. Full by the counter. Give back the seats of holds that
            //     expired since the last reclaim, then claim if one is free.
            let Some(counters) = reclaim_locked(&mut tx, slot_id).await? else {
                return Err(Error::SlotNotFound(slot_id));
            };
            // A request with the same key may have committed while we
            // waited for the lock: on a full slot it must be replayed, not
            // refused (on a slot with room the UNIQUE index catches it).
            if let Some(hold) = find_by_key(&mut *tx, key).await? {
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
                return match find_by_key(&self.pool, key).await? {
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

    /// Turns a held, unexpired hold into a booking and consumes one seat.
    ///
    /// Idempotent: a confirmed hold answers with itself, even after its
    /// `expires_at` has passed. The seat is taken by a conditional decrement
    /// decided by rows affected: no read-then-write of `remaining`.
    pub async fn confirm(&self, hold_id: HoldId) -> Result<Transition, Error> {
        let done = retrying("confirm", || self.confirm_once(hold_id)).await?;
        self.invalidate_after_commit(&done).await;
        Ok(done)
    }

    /// The confirm's writes, after [`LOCK_SLOT`] and [`LOCK_HOLD`]: the
    /// seat is consumed by a decrement that carries its own condition.
    pub const CONFIRM_CONSUME: &'static str = "UPDATE slots SET remaining = remaining - 1, held = held - IF(held > 0, 1, 0), \
         updated_at = UTC_TIMESTAMP(6) WHERE id = ? AND remaining > 0";
    pub const CONFIRM_MARK: &'static str = "UPDATE holds SET status = 'confirmed', confirmed_at = UTC_TIMESTAMP(6), \
         updated_at = UTC_TIMESTAMP(6) WHERE id = ?";

    async fn confirm_once(&self, hold_id: HoldId) -> Result<Transition, Error> {
        // A plain read answers the final states without any lock, and
        // tells which slot to lock.
        let (hold, expired) = find_with_expiry(&self.pool, hold_id).await?;
        let slot_id = hold.slot_id;
        if let Some(done) = confirm_decided(hold, expired)? {
            return Ok(done);
        }
        let mut tx = self.pool.begin().await?;
        // Lock order of every transaction: the slot row, then hold rows.
        lock_slot(&mut tx, slot_id).await?;
        // Check again under the locks, in this order: "already confirmed"
        // first (a confirmed hold stays confirmable after its expiry), then
        // cancelled, then expired. The expiry is decided here, after the
        // slot's lock: hold creation decides "still active?" under that
        // same lock, so the two decisions are serialised. A hold created
        // after the expiry that did not count this one can never see it
        // confirmed (bookable would be −1).
        let (hold, expired) = lock_hold(&mut tx, hold_id).await?;
        if let Some(done) = confirm_decided(hold, expired)? {
            return Ok(done);
        }
        // Consume the seat: check and write are one statement. The hold is
        // active, so it is counted in `held` (expires_at > now >=
        // reclaimed_until); the guard only absorbs out-of-band edits.
        let consumed = sqlx::query(Self::CONFIRM_CONSUME)
            .bind(slot_id.0)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if consumed == 0 {
            return Err(Error::CapacityExhausted(slot_id));
        }
        sqlx::query(Self::CONFIRM_MARK)
            .bind(hold_id.0)
            .execute(&mut *tx)
            .await?;
        let hold = find_by_id(&mut *tx, hold_id)
            .await?
            .ok_or(Error::HoldNotFound(hold_id))?;
        tx.commit().await?;
        Ok(Transition {
            hold,
            changed: true,
        })
    }

    /// Cancels a hold. A held hold (active or expired) frees its seat by
    /// leaving the active set; a confirmed one gives its seat back, capped
    /// at capacity. Cancelling a cancelled hold changes nothing.
    pub async fn cancel(&self, hold_id: HoldId) -> Result<Transition, Error> {
        let done = retrying("cancel", || self.cancel_once(hold_id)).await?;
        self.invalidate_after_commit(&done).await;
        Ok(done)
    }

    /// After the commit, never inside the transaction: a reader recomputing
    /// in between would cache the pre-commit figures for a whole TTL. A
    /// hold does not invalidate: the authoritative check is made at hold
    /// time, and a stream of holds must not keep the cache empty.
    async fn invalidate_after_commit(&self, done: &Transition) {
        if let (true, Some(cache)) = (done.changed, &self.cache) {
            cache.invalidate().await;
        }
    }

    async fn cancel_once(&self, hold_id: HoldId) -> Result<Transition, Error> {
        let (hold, _) = find_with_expiry(&self.pool, hold_id).await?;
        if hold.status == HoldStatus::Cancelled {
            return Ok(Transition {
                hold,
                changed: false,
            });
        }
        let mut tx = self.pool.begin().await?;
        lock_slot(&mut tx, hold.slot_id).await?;
        let (hold, _) = lock_hold(&mut tx, hold_id).await?;
        match hold.status {
            HoldStatus::Cancelled => {
                return Ok(Transition {
                    hold,
                    changed: false,
                });
            }
            HoldStatus::Held => {
                // Release its claim on `held`, unless a reclaim already did
                // (it expired at or before the slot's reclaim watermark).
                sqlx::query(
                    "UPDATE slots SET held = held - 1, updated_at = UTC_TIMESTAMP(6) \
                     WHERE id = ? AND held > 0 AND reclaimed_until < ?",
                )
                .bind(hold.slot_id.0)
                .bind(hold.expires_at)
                .execute(&mut *tx)
                .await?;
            }
            HoldStatus::Confirmed => {
                // Only a confirmation consumed a seat, so only its
                // cancellation returns one; the cap means no sequence of
                // cancels lifts remaining above capacity.
                sqlx::query(
                    "UPDATE slots SET remaining = remaining + 1, updated_at = UTC_TIMESTAMP(6) \
                     WHERE id = ? AND remaining < capacity",
                )
                .bind(hold.slot_id.0)
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query(
            "UPDATE holds SET status = 'cancelled', cancelled_at = UTC_TIMESTAMP(6), \
             updated_at = UTC_TIMESTAMP(6) WHERE id = ?",
        )
        .bind(hold_id.0)
        .execute(&mut *tx)
        .await?;
        let hold = find_by_id(&mut *tx, hold_id)
            .await?
            .ok_or(Error::HoldNotFound(hold_id))?;
        tx.commit().await?;
        Ok(Transition {
            hold,
            changed: true,
        })
    }

    /// The sweeper: gives back the seats of expired holds on up to
    /// `max_slots` slots, one short transaction per slot. Correctness never
    /// waits for it (expiry is exact without it); it keeps the per-slot
    /// count of "expired but still counted" holds small, which keeps the
    /// availability projection and the hold pre-check cheap.
    /// Returns how many holds were reclaimed.
    pub async fn reclaim_expired(&self, max_slots: u32) -> Result<u64, Error> {
        const DUE: &str = concat!(
            "SELECT DISTINCT slot_id FROM (",
            expired_but_counted_per_slot!(),
            ") e LIMIT ?"
        );
        let due: Vec<u64> = sqlx::query_scalar(DUE)
            .bind(max_slots)
            .fetch_all(&self.pool)
            .await?;
        let mut reclaimed = 0;
        for slot in due {
            reclaimed += retrying("reclaim", || async {
                let mut tx = self.pool.begin().await?;
                let counters = reclaim_locked(&mut tx, SlotId(slot)).await?;
                tx.commit().await?;
                Ok(counters.map_or(0, |c| c.reclaimed))
            })
            .await?;
        }
        Ok(reclaimed)
    }
}

/// A slot's counters after [`reclaim_locked`].
struct Counters {
    remaining: u32,
    held: u32,
    reclaimed: u64,
}

/// The reclaim's statements, in order: lock the slot and read its counter,
/// its watermark and the one `now`; count the holds that expired in
/// (watermark, now]; subtract them and move the watermark to now.
pub const RECLAIM_LOCK: &str =
    "SELECT remaining, held, reclaimed_until, UTC_TIMESTAMP(6) FROM slots WHERE id = ? FOR UPDATE";
pub const RECLAIM_COUNT: &str = "SELECT COUNT(*) FROM holds FORCE INDEX (holds_slot_id_status_expires_at_index) \
     WHERE slot_id = ? AND status = 'held' AND expires_at > ? AND expires_at <= ?";
pub const RECLAIM_APPLY: &str =
    "UPDATE slots SET held = held - LEAST(held, ?), reclaimed_until = ? WHERE id = ?";

/// Under the slot's row lock (taken here, first): subtracts from `held` the
/// holds that expired since the slot's reclaim watermark and moves the
/// watermark to now. Afterwards `held` is exactly the slot's active holds.
/// `None` when the slot does not exist.
async fn reclaim_locked(
    conn: &mut MySqlConnection,
    slot_id: SlotId,
) -> Result<Option<Counters>, Error> {
    let row: Option<(u32, u32, DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(RECLAIM_LOCK)
        .bind(slot_id.0)
        .fetch_optional(&mut *conn)
        .await?;
    let Some((remaining, held, watermark, now)) = row else {
        return Ok(None);
    };
    // Every hold of this slot is inserted, confirmed or cancelled under
    // this lock, so this count cannot miss or double one.
    let expired: i64 = sqlx::query_scalar(RECLAIM_COUNT)
        .bind(slot_id.0)
        .bind(watermark)
        .bind(now)
        .fetch_one(&mut *conn)
        .await?;
    let expired = u32::try_from(expired).unwrap_or(u32::MAX);
    // The watermark moves to now even when nothing expired: it bounds the
    // projection's scan window.
    sqlx::query(RECLAIM_APPLY)
        .bind(expired)
        .bind(now)
        .bind(slot_id.0)
        .execute(&mut *conn)
        .await?;
    Ok(Some(Counters {
        remaining,
        held: held.saturating_sub(expired),
        reclaimed: u64::from(expired),
    }))
}

/// The confirm decisions that need no write, in the required order:
/// confirmed → replay; cancelled → refused; expired → refused.
fn confirm_decided(hold: Hold, expired: bool) -> Result<Option<Transition>, Error> {
    match hold.status {
        HoldStatus::Confirmed => Ok(Some(Transition {
            hold,
            changed: false,
        })),
        HoldStatus::Cancelled => Err(Error::HoldCancelled(hold.id)),
        HoldStatus::Held if expired => Err(Error::HoldExpired(hold.id)),
        HoldStatus::Held => Ok(None),
    }
}

/// Every transaction that writes takes the slot's row lock first.
pub const LOCK_SLOT: &str = "SELECT id FROM slots WHERE id = ? FOR UPDATE";

async fn lock_slot(conn: &mut MySqlConnection, slot_id: SlotId) -> Result<(), Error> {
    sqlx::query(LOCK_SLOT)
        .bind(slot_id.0)
        .fetch_optional(conn)
        .await?
        .ok_or(Error::SlotNotFound(slot_id))?;
    Ok(())
}

/// `(id, capacity, bookable, starts_at, ends_at)`
type ProjectionRow = (u64, u32, u64, DateTime<Utc>, DateTime<Utc>);

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

pub const LOCK_HOLD: &str = concat!(
    "SELECT ",
    hold_columns!(),
    ", expires_at <= UTC_TIMESTAMP(6) AS expired FROM holds WHERE id = ? FOR UPDATE"
);

/// Locks a hold row and tells, by the database's clock, whether it expired.
async fn lock_hold(conn: &mut MySqlConnection, id: HoldId) -> Result<(Hold, bool), Error> {
    let row = sqlx::query_as::<_, HoldRowExpired>(LOCK_HOLD)
        .bind(id.0)
        .fetch_optional(conn)
        .await?;
    let row = row.ok_or(Error::HoldNotFound(id))?;
    Ok((row.row.into_hold()?, row.expired))
}

pub const FIND_WITH_EXPIRY: &str = concat!(
    "SELECT ",
    hold_columns!(),
    ", expires_at <= UTC_TIMESTAMP(6) AS expired FROM holds WHERE id = ?"
);

/// The same read without a lock.
async fn find_with_expiry(pool: &MySqlPool, id: HoldId) -> Result<(Hold, bool), Error> {
    let row = sqlx::query_as::<_, HoldRowExpired>(FIND_WITH_EXPIRY)
        .bind(id.0)
        .fetch_optional(pool)
        .await?;
    let row = row.ok_or(Error::HoldNotFound(id))?;
    Ok((row.row.into_hold()?, row.expired))
}

pub const FIND_BY_KEY: &str = concat!(
    "SELECT ",
    hold_columns!(),
    " FROM holds WHERE idempotency_key = ? LIMIT 1"
);

async fn find_by_key<'c, E>(conn: E, key: &IdempotencyKey) -> Result<Option<Hold>, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::MySql>,
{
    sqlx::query_as::<_, HoldRow>(FIND_BY_KEY)
        .bind(key.as_str())
        .fetch_optional(conn)
        .await?
        .map(HoldRow::into_hold)
        .transpose()
}

pub const FIND_BY_ID: &str = concat!("SELECT ", hold_columns!(), " FROM holds WHERE id = ?");

async fn find_by_id<'c, E>(conn: E, id: HoldId) -> Result<Option<Hold>, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::MySql>,
{
    sqlx::query_as::<_, HoldRow>(FIND_BY_ID)
        .bind(id.0)
        .fetch_optional(conn)
        .await?
        .map(HoldRow::into_hold)
        .transpose()
}

#[derive(sqlx::FromRow)]
struct HoldRow {
    id: u64,
    slot_id: u64,
    idempotency_key: String,
    status: String,
    expires_at: DateTime<Utc>,
    confirmed_at: Option<DateTime<Utc>>,
    cancelled_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct HoldRowExpired {
    #[sqlx(flatten)]
    row: HoldRow,
    expired: bool,
}

impl HoldRow {
    fn into_hold(self) -> Result<Hold, Error> {
        let status = HoldStatus::parse(&self.status).ok_or_else(|| {
            Error::Internal(sqlx::Error::Decode(
                format!("unknown hold status {:?}", self.status).into(),
            ))
        })?;
        Ok(Hold {
            id: HoldId(self.id),
            slot_id: SlotId(self.slot_id),
            status,
            idempotency_key: self.idempotency_key,
            expires_at: self.expires_at,
            confirmed_at: self.confirmed_at,
            cancelled_at: self.cancelled_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}
