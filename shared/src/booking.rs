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

    /// Every slot with what a client can still book: `remaining` minus the
    /// slot's active holds, never below 0, ordered by slot id. One query.
    pub async fn availability(&self) -> Result<Vec<SlotAvailability>, Error> {
        // The subtraction is done SIGNED and clamped: on the UNSIGNED
        // columns a negative intermediate is error 1690 and would fail the
        // whole list.
        const PROJECTION: &str = concat!(
            "SELECT s.id, s.capacity, ",
            "CAST(GREATEST(CAST(s.remaining AS SIGNED) - COALESCE(a.held, 0), 0) AS UNSIGNED) AS bookable, ",
            "s.starts_at, s.ends_at ",
            "FROM slots s LEFT JOIN (",
            "SELECT slot_id, COUNT(*) AS held FROM holds WHERE ",
            active_hold!(),
            " GROUP BY slot_id",
            ") a ON a.slot_id = s.id ORDER BY s.id"
        );
        self.projections.fetch_add(1, Ordering::Relaxed);
        let rows: Vec<ProjectionRow> = retrying("availability", || async {
            Ok(sqlx::query_as(PROJECTION).fetch_all(&self.pool).await?)
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
    /// Guarantees: never more active holds than `remaining` (the slot row is
    /// locked before anything is read), one hold per idempotency key (the
    /// UNIQUE index), and a replay of a key returns its original hold,
    /// whatever its state now. A key used for another slot is refused.
    pub async fn hold(&self, slot_id: SlotId, key: &IdempotencyKey) -> Result<HoldOutcome, Error> {
        retrying("hold", || self.hold_once(slot_id, key)).await
    }

    async fn hold_once(&self, slot_id: SlotId, key: &IdempotencyKey) -> Result<HoldOutcome, Error> {
        // 1. Ordinary retries are answered without taking the slot's lock.
        //    An optimisation only: the guarantee is the UNIQUE index.
        if let Some(hold) = find_by_key(&self.pool, key).await? {
            return replay(hold, slot_id);
        }

        let mut tx = self.pool.begin().await?;
        // 2. Lock the slot row FIRST. Under REPEATABLE READ the snapshot is
        //    taken by the first plain read; a plain read before this lock
        //    would freeze a snapshot that misses a competitor's hold
        //    committed while we waited, and the count below would oversell.
        let remaining: Option<u32> =
            sqlx::query_scalar("SELECT remaining FROM slots WHERE id = ? FOR UPDATE")
                .bind(slot_id.0)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(remaining) = remaining else {
            return Err(Error::SlotNotFound(slot_id));
        };
        // 3. Look the key up again: a request with the same key may have
        //    committed while we waited for the lock. Without this it would
        //    be counted below, and a full slot would answer 409 instead of
        //    replaying it.
        if let Some(hold) = find_by_key(&mut *tx, key).await? {
            return replay(hold, slot_id);
        }
        // 4. Count the active holds: every one of them was inserted under
        //    this same lock, so the snapshot taken after it sees them all.
        let active: i64 = sqlx::query_scalar(concat!(
            "SELECT COUNT(*) FROM holds WHERE slot_id = ? AND ",
            active_hold!()
        ))
        .bind(slot_id.0)
        .fetch_one(&mut *tx)
        .await?;
        if active >= i64::from(remaining) {
            return Err(Error::CapacityExhausted(slot_id));
        }
        // 5. Insert. A concurrent request with the same key for another
        //    slot is not serialised by this lock: the UNIQUE index decides.
        let ttl_micros = i64::try_from(self.hold_ttl.as_micros()).unwrap_or(i64::MAX);
        let inserted = sqlx::query(
            "INSERT INTO holds (slot_id, idempotency_key, status, expires_at, created_at, updated_at) \
             VALUES (?, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
        )
        .bind(slot_id.0)
        .bind(key.as_str())
        .bind(ttl_micros)
        .execute(&mut *tx)
        .await;
        let id = match inserted {
            Ok(done) => HoldId(done.last_insert_id()),
            Err(err) if db::is_unique_violation(&err) => {
                drop(tx);
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

    async fn confirm_once(&self, hold_id: HoldId) -> Result<Transition, Error> {
        let mut tx = self.pool.begin().await?;
        // Lock the hold: two confirms of one hold cannot both pass the checks.
        let (hold, expired) = lock_hold(&mut tx, hold_id).await?;
        // Order matters: "already confirmed" first, or a confirmed hold
        // would turn into hold_expired once its expires_at has passed.
        match hold.status {
            HoldStatus::Confirmed => {
                return Ok(Transition {
                    hold,
                    changed: false,
                });
            }
            HoldStatus::Cancelled => return Err(Error::HoldCancelled(hold_id)),
            HoldStatus::Held if expired => return Err(Error::HoldExpired(hold_id)),
            HoldStatus::Held => {}
        }
        // Consume the seat: check and write are one statement.
        let consumed = sqlx::query(
            "UPDATE slots SET remaining = remaining - 1, updated_at = UTC_TIMESTAMP(6) \
             WHERE id = ? AND remaining > 0",
        )
        .bind(hold.slot_id.0)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if consumed == 0 {
            return Err(Error::CapacityExhausted(hold.slot_id));
        }
        // The expiry boundary: hold creation decides "still active?" under
        // the slot's row lock, which the decrement above now holds. Decide
        // "expired?" again now, in the write itself, so the two decisions
        // are serialised by that lock: a hold created after the expiry that
        // did not count this one can never see it confirmed (bookable −1).
        let marked = sqlx::query(concat!(
            "UPDATE holds SET status = 'confirmed', confirmed_at = UTC_TIMESTAMP(6), ",
            "updated_at = UTC_TIMESTAMP(6) WHERE id = ? AND ",
            active_hold!()
        ))
        .bind(hold_id.0)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if marked == 0 {
            // Dropping the transaction rolls the decrement back.
            return Err(Error::HoldExpired(hold_id));
        }
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
        let mut tx = self.pool.begin().await?;
        let (hold, _expired) = lock_hold(&mut tx, hold_id).await?;
        match hold.status {
            HoldStatus::Cancelled => {
                return Ok(Transition {
                    hold,
                    changed: false,
                });
            }
            HoldStatus::Held => {}
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

/// Locks a hold row and tells, by the database's clock, whether it expired.
async fn lock_hold(conn: &mut MySqlConnection, id: HoldId) -> Result<(Hold, bool), Error> {
    const SQL: &str = concat!(
        "SELECT ",
        hold_columns!(),
        ", expires_at <= UTC_TIMESTAMP(6) AS expired FROM holds WHERE id = ? FOR UPDATE"
    );
    let row: Option<(HoldRow, bool)> = sqlx::query_as::<_, HoldRowExpired>(SQL)
        .bind(id.0)
        .fetch_optional(conn)
        .await?
        .map(|r| (r.row, r.expired));
    let (row, expired) = row.ok_or(Error::HoldNotFound(id))?;
    Ok((row.into_hold()?, expired))
}

async fn find_by_key<'c, E>(conn: E, key: &IdempotencyKey) -> Result<Option<Hold>, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::MySql>,
{
    const SQL: &str = concat!(
        "SELECT ",
        hold_columns!(),
        " FROM holds WHERE idempotency_key = ? LIMIT 1"
    );
    sqlx::query_as::<_, HoldRow>(SQL)
        .bind(key.as_str())
        .fetch_optional(conn)
        .await?
        .map(HoldRow::into_hold)
        .transpose()
}

async fn find_by_id<'c, E>(conn: E, id: HoldId) -> Result<Option<Hold>, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::MySql>,
{
    const SQL: &str = concat!("SELECT ", hold_columns!(), " FROM holds WHERE id = ?");
    sqlx::query_as::<_, HoldRow>(SQL)
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
