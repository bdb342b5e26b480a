//! The raw statement sequences: what the service sends to MySQL for each
//! operation, the very strings `shared::booking` exports (so they cannot
//! drift, and the connection's prepared-statement cache treats both
//! alike), issued directly with sqlx on the environment's own pool (and,
//! for confirm's invalidation after commit, SPEC §4, a `DEL` of both cache
//! keys on the environment's own Redis connection). The service/raw ratio then measures
//! only what the service layer adds (retry wrapper, typed errors, row
//! conversion, the generation bump that rides with the invalidation).
//!
//! The order of the statements is this file's own; keep it in step with
//! `booking.rs` when that order changes.
//!
//! Also the seed's original count-based hold, as a reference row.

use crate::measure::Outcome;
use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;
use shared::booking::{
    Booking, FIND_BY_ID, FIND_BY_KEY, HoldRow, LOCK_HOLD, LOCK_SLOT, RECLAIM_APPLY, RECLAIM_COUNT,
    RECLAIM_LOCK,
};
use shared::cache::Keys;
use shared::db::Tx;
use shared::domain::RequestId;
use shared::events::{EventType, commit_with, hold_event};
use sqlx::{MySqlConnection, MySqlPool, Row};

type Result<T> = std::result::Result<T, sqlx::Error>;

/// Whether a sequence writes its change's event (the outbox, SPEC §12), as
/// the service does; `false` measures the same sequence without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outbox {
    On,
    Off,
}

/// Which statements a sequence sends: the service's, or the ones it sent
/// before issue 28 (the `revision` group's control arm: the claim and the
/// consume stamped `slots.updated_at` without `GREATEST`, and confirm's
/// plain read decided "expired" by its own now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statements {
    Current,
    Before,
    /// Before the waiting list (SPEC §18): the claim without its guard
    /// `waiting = 0` (and so without the primary key it names).
    BeforeLine,
}

/// Before the waiting list: [`Booking::HOLD_CLAIM`] without `waiting = 0`.
const BEFORE_LINE_HOLD_CLAIM: &str = "UPDATE slots SET held = LAST_INSERT_ID(held + ?), \
     updated_at = GREATEST(updated_at, UTC_TIMESTAMP(6)) WHERE id = ? AND held + ? <= remaining";

/// Before issue 28: [`Booking::HOLD_CLAIM`] without `GREATEST`.
const BEFORE_HOLD_CLAIM: &str = "UPDATE slots SET held = LAST_INSERT_ID(held + ?), \
     updated_at = UTC_TIMESTAMP(6) WHERE id = ? AND held + ? <= remaining";
/// Before issue 28: [`Booking::CONFIRM_CONSUME`] without `GREATEST`.
const BEFORE_CONFIRM_CONSUME: &str = "UPDATE slots SET remaining = remaining - ?, \
     held = held - LEAST(held, ?), updated_at = UTC_TIMESTAMP(6) WHERE id = ? AND remaining >= ?";
/// Before issue 28: confirm's plain read, with the expiry it answered from.
const BEFORE_FIND_WITH_EXPIRY: &str = "SELECT id, slot_id, client_id, quantity, idempotency_key, \
     status, expires_at, confirmed_at, cancelled_at, created_at, updated_at, \
     (status = 'held' AND expires_at > UTC_TIMESTAMP(6)) AS active, \
     expires_at <= UTC_TIMESTAMP(6) AS expired FROM holds WHERE id = ?";

/// COMMIT, with the event of the change to `row` as the service writes
/// it, by the service's own functions (`into_hold`: the row's resource;
/// `hold_event`: its JSON; `commit_with`: the `events_commit` CALL that
/// inserts it and commits) when `outbox` is on.
async fn commit(tx: Tx<'_>, outbox: Outbox, kind: EventType, row: HoldRow) -> Result<()> {
    if outbox == Outbox::Off {
        return tx.commit().await;
    }
    let service = |e: shared::error::Error| sqlx::Error::Protocol(e.to_string());
    let hold = row.into_hold().map_err(service)?;
    let event = hold_event(kind, &hold).map_err(service)?;
    commit_with(tx, &[event]).await.map_err(service)
}

/// The columns of [`HoldRow`], in its order (the offered hold's entry,
/// then the requests that created and confirmed it, last), and
/// `expires_at <= now`: the expiry checks read fields by
/// position, with no conversion.
type HoldRowExpired = (
    u64,
    u64,
    u64,
    u32,
    String,
    String,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
    DateTime<Utc>,
    bool,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    bool,
);

/// The service's hold, statement for statement: the pre-check, then in
/// one transaction the conditional claim (with the reclaim path when the
/// counter says full), the insert, the read of the new hold, COMMIT. The
/// hold is `client`'s, as the service's is its caller's (the key look-up
/// that names the caller is the service's alone: raw is the SQL only).
pub async fn hold(
    pool: &MySqlPool,
    client: u64,
    slot: u64,
    key: &str,
    quantity: u32,
    ttl_micros: i64,
    (outbox, statements): (Outbox, Statements),
) -> Result<Outcome> {
    let (key_hold, bookable, closed): (Option<u64>, Option<i64>, Option<bool>) =
        sqlx::query_as(Booking::HOLD_PRECHECK)
            .bind(client)
            .bind(key)
            .bind(slot)
            .bind(slot)
            // The slot's share per client (the bench's slots have none).
            .bind(slot)
            .bind(client)
            .bind(slot)
            .fetch_one(pool)
            .await?;
    if key_hold.is_some() {
        return Ok(Outcome::Done("200"));
    }
    match (bookable, closed) {
        (None, _) => return Ok(Outcome::Done("404")),
        (_, Some(true)) => return Ok(Outcome::Done("409")),
        (Some(b), _) if b < i64::from(quantity) => return Ok(Outcome::Done("409")),
        _ => {}
    }
    let mut conn = pool.acquire().await?;
    let mut tx = Tx::begin(&mut conn).await?;
    let claim_sql = match statements {
        Statements::Current => Booking::HOLD_CLAIM,
        Statements::Before => BEFORE_HOLD_CLAIM,
        Statements::BeforeLine => BEFORE_LINE_HOLD_CLAIM,
    };
    let claim = match statements {
        Statements::Current => sqlx::query(claim_sql).bind(ttl_micros),
        _ => sqlx::query(claim_sql),
    };
    let claim = claim
        .bind(quantity)
        .bind(slot)
        .bind(quantity)
        .execute(&mut *tx)
        .await?;
    let claimed = claim.rows_affected();
    if claimed == 1 && claim.last_insert_id() == u64::from(quantity) {
        sqlx::query(Booking::HOLD_WATERMARK)
            .bind(slot)
            .execute(&mut *tx)
            .await?;
    }
    if claimed == 0 {
        let (remaining, held) = reclaim_locked(&mut tx, slot).await?;
        let again: Option<HoldRow> = sqlx::query_as(FIND_BY_KEY)
            .bind(client)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
        if again.is_some() {
            tx.rollback().await?;
            return Ok(Outcome::Done("200"));
        }
        if u64::from(held) + u64::from(quantity) > u64::from(remaining) {
            tx.commit().await?;
            return Ok(Outcome::Done("409"));
        }
        sqlx::query(Booking::HOLD_CLAIM_RECLAIMED)
            .bind(ttl_micros)
            .bind(quantity)
            .bind(slot)
            .execute(&mut *tx)
            .await?;
    }
    let Some(id) = insert_hold(&mut tx, client, slot, quantity, key, ttl_micros).await? else {
        tx.rollback().await?;
        return Ok(Outcome::Done("409")); // the slot has started
    };
    let hold: HoldRow = sqlx::query_as(FIND_BY_ID)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
    commit(tx, outbox, EventType::HoldCreated, hold).await?;
    Ok(Outcome::Done("201"))
}

/// `GET /holds/{id}`'s one statement: the hold's row by primary key,
/// outside any transaction. (The service then compares the owner with its
/// caller, in memory.)
pub async fn hold_by_id(pool: &MySqlPool, hold: u64) -> Result<Outcome> {
    let row: Option<HoldRow> = sqlx::query_as(FIND_BY_ID)
        .bind(hold)
        .fetch_optional(pool)
        .await?;
    Ok(Outcome::Done(if row.is_some() { "200" } else { "404" }))
}

/// The service's reclaim under the slot's row lock: `(remaining, held)`
/// afterwards.
async fn reclaim_locked(conn: &mut MySqlConnection, slot: u64) -> Result<(u32, u32)> {
    let (remaining, held, watermark): (u32, u32, DateTime<Utc>) = sqlx::query_as(RECLAIM_LOCK)
        .bind(slot)
        .fetch_one(&mut *conn)
        .await?;
    let (now, expired, floor): (DateTime<Utc>, i64, Option<DateTime<Utc>>) =
        sqlx::query_as(RECLAIM_COUNT)
            .bind(slot)
            .bind(watermark)
            .bind(slot)
            .bind(watermark)
            .fetch_one(&mut *conn)
            .await?;
    let expired = u32::try_from(expired).unwrap_or(u32::MAX);
    sqlx::query(RECLAIM_APPLY)
        .bind(floor.map(|floor| floor.naive_utc()))
        .bind(expired)
        .bind(now)
        .bind(slot)
        .execute(&mut *conn)
        .await?;
    Ok((remaining, held.saturating_sub(expired)))
}

/// The service's confirm: the plain read, then in one transaction the
/// slot's lock, the hold's lock, the conditional decrement, the status
/// update, the read of the hold, COMMIT; then the SPEC's invalidation,
/// `DEL fresh stale`, in one round trip.
pub async fn confirm(
    pool: &MySqlPool,
    redis: &mut ConnectionManager,
    keys: &Keys,
    hold: u64,
    (outbox, statements): (Outbox, Statements),
) -> Result<Outcome> {
    // Final states only: "expired" is decided under the locks (before
    // issue 28 the plain read decided it too).
    let (plain, consume) = match statements {
        Statements::Current | Statements::BeforeLine => (FIND_BY_ID, Booking::CONFIRM_CONSUME),
        Statements::Before => (BEFORE_FIND_WITH_EXPIRY, BEFORE_CONFIRM_CONSUME),
    };
    let row = sqlx::query(plain).bind(hold).fetch_one(pool).await?;
    let status: String = row.try_get("status")?;
    let expired = statements == Statements::Before && row.try_get::<bool, _>("expired")?;
    if status != "held" || expired {
        return Ok(Outcome::Done("409"));
    }
    let slot: u64 = row.try_get("slot_id")?;
    let mut conn = pool.acquire().await?;
    let mut tx = Tx::begin(&mut conn).await?;
    sqlx::query(LOCK_SLOT)
        .bind(slot)
        .fetch_one(&mut *tx)
        .await?;
    let row: HoldRowExpired = sqlx::query_as(LOCK_HOLD)
        .bind(hold)
        .fetch_one(&mut *tx)
        .await?;
    if row.5 != "held" || row.15 {
        tx.rollback().await?;
        return Ok(Outcome::Done("409"));
    }
    let quantity = row.3;
    let consumed = sqlx::query(consume)
        .bind(quantity)
        .bind(quantity)
        .bind(slot)
        .bind(quantity)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if consumed == 0 {
        tx.rollback().await?;
        return Ok(Outcome::Done("409"));
    }
    sqlx::query(Booking::CONFIRM_MARK)
        .bind(RequestId::random().0) // the request's number
        .bind(hold)
        .execute(&mut *tx)
        .await?;
    let row: HoldRow = sqlx::query_as(FIND_BY_ID)
        .bind(hold)
        .fetch_one(&mut *tx)
        .await?;
    commit(tx, outbox, EventType::HoldConfirmed, row).await?;
    redis::cmd("DEL")
        .arg(&keys.fresh)
        .arg(&keys.stale)
        .query_async::<()>(redis)
        .await
        .map_err(|e| sqlx::Error::Protocol(format!("cache invalidation: {e}")))?;
    Ok(Outcome::Done("200"))
}

/// The seed's original hold (SPEC §4, before the held-seats counter): the
/// key look-up, then in one transaction the slot's lock, the key re-check,
/// the COUNT of the slot's active holds (its cost grows with them, under
/// the lock), the insert, COMMIT; the hold is `client`'s.
pub async fn seed_hold(
    pool: &MySqlPool,
    client: u64,
    slot: u64,
    key: &str,
    ttl_micros: i64,
) -> Result<Outcome> {
    let found: Option<HoldRow> = sqlx::query_as(FIND_BY_KEY)
        .bind(client)
        .bind(key)
        .fetch_optional(pool)
        .await?;
    if found.is_some() {
        return Ok(Outcome::Done("200"));
    }
    let mut tx = pool.begin().await?;
    type SlotRow = (
        u64,
        DateTime<Utc>,
        DateTime<Utc>,
        u32,
        u32,
        DateTime<Utc>,
        DateTime<Utc>,
    );
    let slot_row: Option<SlotRow> = sqlx::query_as(
        "SELECT id, starts_at, ends_at, capacity, remaining, created_at, updated_at \
         FROM slots WHERE id = ? LIMIT 1 FOR UPDATE",
    )
    .bind(slot)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(slot_row) = slot_row else {
        return Ok(Outcome::Done("404"));
    };
    let again: Option<HoldRow> = sqlx::query_as(FIND_BY_KEY)
        .bind(client)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?;
    if again.is_some() {
        return Ok(Outcome::Done("200"));
    }
    let active: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM holds WHERE slot_id = ? AND status = 'held' AND expires_at > UTC_TIMESTAMP(6)",
    )
    .bind(slot)
    .fetch_one(&mut *tx)
    .await?;
    if active >= i64::from(slot_row.4) {
        return Ok(Outcome::Done("409"));
    }
    if insert_hold(&mut tx, client, slot, 1, key, ttl_micros)
        .await?
        .is_none()
    {
        return Ok(Outcome::Done("409")); // the slot has started
    }
    tx.commit().await?;
    Ok(Outcome::Done("201"))
}

/// `(id, capacity, bookable, starts_at, ends_at, now)`
pub type ProjectionRow = (u64, u32, u64, DateTime<Utc>, DateTime<Utc>, DateTime<Utc>);

/// The availability projection, the service's one query: the first page
/// of the slots not ended (after id 0, among the first 10,000 ids, 1,000
/// and one more).
pub async fn projection(pool: &MySqlPool) -> Result<Vec<ProjectionRow>> {
    sqlx::query_as(Booking::PROJECTION)
        .bind(0_u64)
        .bind(10_000_u64)
        .bind(1001_u32)
        .fetch_all(pool)
        .await
}

/// The service's guard and insert (`Booking::HOLD_GUARD`, `HOLD_INSERT`),
/// under the slot's lock: the new hold's id, or `None` when the slot has
/// started or has a share (the bench's slots have none).
async fn insert_hold(
    conn: &mut MySqlConnection,
    client: u64,
    slot: u64,
    quantity: u32,
    key: &str,
    ttl_micros: i64,
) -> Result<Option<u64>> {
    let (now, closed, shared): (DateTime<Utc>, bool, bool) = sqlx::query_as(Booking::HOLD_GUARD)
        .bind(slot)
        .fetch_one(&mut *conn)
        .await?;
    if closed || shared {
        return Ok(None);
    }
    let inserted = sqlx::query(Booking::HOLD_INSERT)
        .bind(slot)
        .bind(client)
        .bind(quantity)
        .bind(key)
        .bind(now)
        .bind(ttl_micros)
        .bind(now)
        .bind(now)
        .bind(RequestId::random().0) // the request's number
        .execute(&mut *conn)
        .await?;
    Ok(Some(inserted.last_insert_id()))
}
