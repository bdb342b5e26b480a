//! The fair-use checks of a hold (SPEC §16), beside the claim they guard
//! (`hold.rs`): the slot's share per client, decided under the slot's lock,
//! and the client's cap over all slots, decided under its client row's
//! lock (docs/DESIGN.md, "One client's cap" and "One client's share of a
//! slot").

use super::HoldOutcome;
use super::sql::find_by_id;
use crate::db::counter::{client_held, slot_client_seats};
use crate::domain::{ClientId, Hold, HoldId, IdempotencyKey, SlotId};
use crate::error::Error;
use sqlx::MySqlConnection;

/// Under the slot's lock (and a capped client's row's), one statement with
/// one `now`: whether the slot started, its share and the client's seats
/// on it (counted only when it has a share: bounded by it), the client's
/// active seats when it has a cap (bounded by the cap), and the key's hold
/// (a row read: a replay is never refused). Binds: client, capped, client,
/// client, key, slot.
pub const LOCKED_CHECK: &str = concat!(
    "SELECT s.starts_at <= UTC_TIMESTAMP(6) AS closed, s.max_seats_per_client AS share, ",
    "IF(s.max_seats_per_client IS NULL, NULL, (",
    slot_client_seats!(),
    ")) AS seats, IF(?, (",
    client_held!(),
    "), NULL) AS held, UTC_TIMESTAMP(6) AS now, k.id AS key_hold FROM slots s ",
    "LEFT JOIN holds k ON k.client_id = ? AND k.idempotency_key = ? WHERE s.id = ?"
);

/// The pre-check's two columns of the share: the slot's share, and the
/// client's seats on it when it has one. Binds: slot, client, slot.
macro_rules! share_precheck {
    () => {
        concat!(
            "(SELECT s.max_seats_per_client FROM slots s WHERE s.id = ?) AS share, ",
            "(SELECT IF(s.max_seats_per_client IS NULL, NULL, (",
            $crate::db::counter::slot_client_seats!(),
            ")) FROM slots s WHERE s.id = ?) AS slot_seats"
        )
    };
}
pub(crate) use share_precheck;

/// The pre-check's row: the key's hold, the slot's bookable seats,
/// whether it started, its share with this client's seats on it, and a
/// capped client's active seats.
#[derive(sqlx::FromRow)]
pub(super) struct Precheck {
    pub(super) key_hold: Option<u64>,
    pub(super) bookable: Option<i64>,
    pub(super) closed: Option<bool>,
    pub(super) share: Option<u32>,
    pub(super) slot_seats: Option<i64>,
    pub(super) client_held: Option<i64>,
}

/// The answer to a verdict that ends the attempt, its claim rolled back:
/// the key's hold (a replay), or the refusal.
pub(super) async fn answer(
    conn: &mut MySqlConnection,
    verdict: Verdict,
    found: impl FnOnce(Hold) -> Result<HoldOutcome, Error>,
) -> Result<HoldOutcome, Error> {
    match verdict {
        Verdict::Replay(id) => found(find_by_id(conn, id).await?.ok_or(Error::HoldNotFound(id))?),
        Verdict::Refuse(refused) => Err(refused),
        Verdict::Pass => unreachable!("a pass does not end the attempt"),
    }
}

/// What a check under a lock decided.
pub(super) enum Verdict {
    Pass,
    /// The key's hold exists: answer it.
    Replay(HoldId),
    Refuse(Error),
}

#[derive(sqlx::FromRow)]
struct LockedRow {
    closed: Option<bool>,
    share: Option<u32>,
    seats: Option<i64>,
    held: Option<i64>,
    now: Option<chrono::NaiveDateTime>,
    key_hold: Option<u64>,
}

/// SPEC §19.1 under the locks, after the capacity: a replay first (§19.2),
/// then started, the share, the cap (`None`: none to check). A figure that
/// came back NULL (a scalar subquery cut short) decides nothing: 503.
pub(super) async fn locked_verdict(
    conn: &mut MySqlConnection,
    client: ClientId,
    cap: Option<u32>,
    key: &IdempotencyKey,
    slot: SlotId,
    quantity: u32,
) -> Result<(Verdict, Option<Counted>), Error> {
    let row: LockedRow = sqlx::query_as(LOCKED_CHECK)
        .bind(client.0)
        .bind(cap.is_some())
        .bind(client.0)
        .bind(client.0)
        .bind(key.as_str())
        .bind(slot.0)
        .fetch_optional(conn)
        .await?
        .ok_or(Error::SlotNotFound(slot))?;
    let counted = match (cap, row.held, row.now) {
        (Some(_), Some(held), Some(at)) => Some(Counted {
            held: u32::try_from(held).unwrap_or(u32::MAX),
            at,
        }),
        _ => None,
    };
    if let Some(id) = row.key_hold {
        return Ok((Verdict::Replay(HoldId(id)), counted));
    }
    if row.closed.ok_or_else(|| incomplete("slot"))? {
        return Ok((Verdict::Refuse(Error::SlotClosed(slot)), counted));
    }
    if (row.share.is_some() && row.seats.is_none()) || (cap.is_some() && counted.is_none()) {
        return Err(incomplete("fair use"));
    }
    let refused = over_share(slot, row.share, row.seats, quantity)
        .or_else(|| over_cap(cap, row.held, quantity));
    Ok((refused.map_or(Verdict::Pass, Verdict::Refuse), counted))
}

/// A capped client's seats in active holds, counted under its locks, and
/// the `now` they were counted at.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counted {
    pub(super) held: u32,
    pub(super) at: chrono::NaiveDateTime,
}

/// 409 `slot_client_limit_reached` when `quantity` more seats would take
/// the client over the slot's `share`, `seats` being what it has there.
pub(super) fn over_share(
    slot: SlotId,
    share: Option<u32>,
    seats: Option<i64>,
    quantity: u32,
) -> Option<Error> {
    let (share, seats) = (share?, u64::try_from(seats?).unwrap_or(0));
    (seats + u64::from(quantity) > u64::from(share)).then_some(Error::SlotClientLimitReached {
        slot,
        share,
        seats,
    })
}

/// 409 `hold_limit_reached` when `quantity` more seats would take a client
/// with `cap` over it, `held` being what it has in active holds.
pub(super) fn over_cap(cap: Option<u32>, held: Option<i64>, quantity: u32) -> Option<Error> {
    let (cap, held) = (cap?, u64::try_from(held?).unwrap_or(0));
    (held + u64::from(quantity) > u64::from(cap)).then_some(Error::HoldLimitReached { cap, held })
}

pub(super) fn incomplete(what: &str) -> Error {
    Error::Unavailable(sqlx::Error::Protocol(format!(
        "the {what} check came back incomplete"
    )))
}
