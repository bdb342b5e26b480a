//! The SQL the booking operations share: the one definition of an active
//! hold, the counter's fragments, the hold resource's columns and the
//! look-ups every operation makes.
//!
//! Expiry is decided by one clock, the database's (`UTC_TIMESTAMP(6)`).
//! A statement's `UTC_TIMESTAMP(6)` is fixed when the statement *starts*,
//! before any lock wait: every "now" that a decision or a watermark is
//! based on comes from a statement sent after the slot's lock was granted
//! (docs/DESIGN.md, "Every now, after the lock").

use crate::clients::Caller;
use crate::db::counter::active_hold;
use crate::domain::ClientId;
use crate::domain::{EntryId, Hold, HoldId, HoldStatus, IdempotencyKey, RequestId, SlotId};
use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::MySqlConnection;

pub const ACTIVE_HOLD: &str = active_hold!();

/// The expired-but-counted seats of every slot, per slot, with the expiry
/// of the oldest hold (the sweeper takes the oldest due first). The constant
/// lower bound (the oldest watermark of a slot that counts any hold) turns
/// the scan into a range over `(status, expires_at)` that covers the last
/// hold TTL or so, not the whole history of expired holds.
macro_rules! expired_but_counted_per_slot {
    () => {
        concat!(
            "SELECT s.id AS slot_id, CAST(SUM(x.quantity) AS SIGNED) AS n, MIN(x.expires_at) AS due ",
            "FROM holds x JOIN slots s ON s.id = x.slot_id ",
            "WHERE ",
            $crate::db::counter::expired_but_counted!(),
            " AND x.expires_at > (SELECT MIN(m.reclaimed_until) FROM slots m WHERE m.held > 0) ",
            "GROUP BY s.id"
        )
    };
}

/// The columns of the hold resource, in `HoldRow`'s order. `active` is
/// decided by the statement's own clock, so a resource read under the
/// slot's lock says what that lock's moment says.
macro_rules! hold_columns {
    () => {
        concat!(
            "id, slot_id, client_id, quantity, idempotency_key, status, expires_at, ",
            "confirmed_at, cancelled_at, created_at, updated_at, ",
            "(status = 'held' AND expires_at > UTC_TIMESTAMP(6)) AS active, entry_id, created_by, confirmed_by"
        )
    };
}

/// Every transaction that writes takes the slot's row lock first; it
/// reads the seats its waiting line asks for (SPEC §18), which a freeing
/// transaction must offer to.
pub const LOCK_SLOT: &str = "SELECT waiting FROM slots WHERE id = ? FOR UPDATE";

/// The slot's lock; the seats its waiting entries ask for.
pub(super) async fn lock_slot(conn: &mut MySqlConnection, slot_id: SlotId) -> Result<u32, Error> {
    sqlx::query_scalar(LOCK_SLOT)
        .bind(slot_id.0)
        .fetch_optional(conn)
        .await?
        .ok_or(Error::SlotNotFound(slot_id))
}

/// Sent after [`LOCK_SLOT`]: its `now` is later than the slot's lock, so
/// the expiry it decides is serialised with every other decision made
/// under that lock.
pub const LOCK_HOLD: &str = concat!(
    "SELECT ",
    hold_columns!(),
    ", expires_at <= UTC_TIMESTAMP(6) AS expired FROM holds WHERE id = ? FOR UPDATE"
);

/// Locks a hold row and tells, by the database's clock, whether it expired.
pub(super) async fn lock_hold(
    conn: &mut MySqlConnection,
    id: HoldId,
) -> Result<(Hold, bool), Error> {
    let row = sqlx::query_as::<_, HoldRowExpired>(LOCK_HOLD)
        .bind(id.0)
        .fetch_optional(conn)
        .await?;
    let row = row.ok_or(Error::HoldNotFound(id))?;
    Ok((row.row.into_hold()?, row.expired))
}

/// The first read of confirm, cancel and extend: the hold, by a plain
/// read, for its owner or an admin; for anyone else it does not exist. The
/// owner never changes, so this one check, before any lock, holds for the
/// whole operation. It reports no expiry: a plain read may answer only the
/// final states (confirmed, cancelled). "Held and expired" is not final
/// while a confirm or an extension that decided "active" under the slot's
/// lock may still commit; it is decided under that lock
/// (docs/DESIGN.md, "Every now, after the lock").
pub(super) async fn find_touchable(
    conn: &mut MySqlConnection,
    caller: &Caller,
    id: HoldId,
) -> Result<Hold, Error> {
    let hold = find_by_id(conn, id).await?.ok_or(Error::HoldNotFound(id))?;
    if !caller.may_touch(hold.client_id) {
        return Err(Error::HoldNotFound(id));
    }
    Ok(hold)
}

/// The guard of a hold's INSERT ([`crate::Booking::HOLD_GUARD`]), read
/// under the slot's lock: its `now`, whether the slot started, whether it
/// has a share.
#[derive(sqlx::FromRow)]
pub(super) struct Guard {
    pub(super) now: DateTime<Utc>,
    pub(super) closed: bool,
    pub(super) shared: bool,
}

/// [`crate::Booking::HOLD_GUARD`]; no row: the slot is gone.
pub(super) async fn guard(conn: &mut MySqlConnection, slot_id: SlotId) -> Result<Guard, Error> {
    sqlx::query_as(crate::Booking::HOLD_GUARD)
        .bind(slot_id.0)
        .fetch_optional(conn)
        .await?
        .ok_or(Error::SlotNotFound(slot_id))
}

pub const FIND_BY_KEY: &str = concat!(
    "SELECT ",
    hold_columns!(),
    " FROM holds WHERE client_id = ? AND idempotency_key = ?"
);

/// The caller's own hold with this key: keys are scoped to their client.
pub(super) async fn find_by_key<'c, E>(
    conn: E,
    client: ClientId,
    key: &IdempotencyKey,
) -> Result<Option<Hold>, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::MySql>,
{
    sqlx::query_as::<_, HoldRow>(FIND_BY_KEY)
        .bind(client.0)
        .bind(key.as_str())
        .fetch_optional(conn)
        .await?
        .map(HoldRow::into_hold)
        .transpose()
}

/// The hold of the same-key request that won, after this one's INSERT met
/// the unique key and was rolled back: the winner has committed (the index
/// waited for it), so its row is there; its absence is a fault.
pub(super) async fn key_winner(
    conn: &mut MySqlConnection,
    client: ClientId,
    key: &IdempotencyKey,
    violation: sqlx::Error,
) -> Result<Hold, Error> {
    find_by_key(conn, client, key)
        .await?
        .ok_or(Error::Internal(violation))
}

pub const FIND_BY_ID: &str = concat!("SELECT ", hold_columns!(), " FROM holds WHERE id = ?");

pub(super) async fn find_by_id<'c, E>(conn: E, id: HoldId) -> Result<Option<Hold>, Error>
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

/// A row of the hold resource's columns, as decoded from MySQL; public so
/// that the bench's raw sequences decode and convert exactly as the
/// service does.
#[derive(sqlx::FromRow)]
pub struct HoldRow {
    id: u64,
    slot_id: u64,
    client_id: u64,
    quantity: u32,
    idempotency_key: String,
    status: String,
    expires_at: DateTime<Utc>,
    confirmed_at: Option<DateTime<Utc>>,
    cancelled_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    active: bool,
    entry_id: Option<u64>,
    created_by: Option<u64>,
    confirmed_by: Option<u64>,
}

#[derive(sqlx::FromRow)]
struct HoldRowExpired {
    #[sqlx(flatten)]
    row: HoldRow,
    expired: bool,
}

impl HoldRow {
    pub fn into_hold(self) -> Result<Hold, Error> {
        let status = HoldStatus::parse(&self.status).ok_or_else(|| {
            Error::Internal(sqlx::Error::Decode(
                format!("unknown hold status {:?}", self.status).into(),
            ))
        })?;
        Ok(Hold {
            id: HoldId(self.id),
            slot_id: SlotId(self.slot_id),
            client_id: ClientId(self.client_id),
            status,
            quantity: self.quantity,
            active: self.active,
            idempotency_key: self.idempotency_key,
            expires_at: self.expires_at,
            confirmed_at: self.confirmed_at,
            cancelled_at: self.cancelled_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
            entry_id: self.entry_id.map(EntryId),
            created_by: self.created_by.map(RequestId),
            confirmed_by: self.confirmed_by.map(RequestId),
        })
    }
}
