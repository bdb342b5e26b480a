//! The self-check's rotations besides the slots' own visit: a slot whose
//! check failed moves down its rotation all the same; and the clients'
//! allowances.
//!
//! The sweeper's self-check of the clients' allowances (SPEC §8, §9;
//! docs/DESIGN.md, "Counters that heal"): `client_allowances.held` must
//! be at least the seats of the client's active holds and waiting entries
//! (B, "One client's cap"). Every service path keeps that; a hold or an
//! entry written by hand with the contract's columns (SPEC §8) moves no
//! bound, and the client's next holds would pass a bound that does not
//! count it. Each run re-counts a rotation of clients, least recently
//! checked first, and raises a bound found below its count.

use super::Booking;
use crate::db;
use crate::db::counter::client_held;
use crate::domain::SlotId;
use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::{Connection, MySqlConnection};
use tokio::time::Instant;

/// A slot whose check failed (its time limit, an error) still moves down
/// the rotation: one slot that cannot be checked does not come first in
/// every run while the others wait. Its counters are left as they were.
/// Its lock first, without waiting: a slot whose lock another holds is
/// busy, not jammed, and the run does not wait for it twice.
pub const SKIPPED_LOCK: &str = "SELECT id FROM slots WHERE id = ? FOR UPDATE SKIP LOCKED";
pub const CHECK_SKIPPED: &str =
    "UPDATE slots SET checked_at = GREATEST(checked_at, UTC_TIMESTAMP(6)) WHERE id = ?";
/// The clients' rotation: those a cap may bind. A client whose own cap is
/// 0, and the keyless `anonymous` of `open` mode, are never capped: their
/// holds move no bound, and a bound below their count is no drift.
pub const SWEEP_CLIENTS: &str = "SELECT a.client_id FROM client_allowances a \
     JOIN api_clients c ON c.id = a.client_id \
     WHERE COALESCE(c.max_held_seats, 1) > 0 AND c.name <> 'anonymous' \
     ORDER BY a.checked_at, a.client_id LIMIT ?";
/// The client's lock, first (the lock order of "One client's cap":
/// allowance row, then slots; this check takes no other). A capped hold
/// that moves the bound holds it until its commit, so the count below
/// sees every such hold that committed and none is in flight.
pub const ALLOWANCE_LOCK: &str =
    "SELECT held FROM client_allowances WHERE client_id = ? FOR UPDATE";
/// After the lock, the transaction's first plain read (its snapshot
/// follows the lock), with its now: the client's seats in active holds
/// and waiting entries, the cap's own count (`client_held!`: two ranges
/// of the client's indexes, never its history).
pub const ALLOWANCE_COUNT: &str = concat!("SELECT UTC_TIMESTAMP(6), (", client_held!(), ")");
/// The bound raised to the count if below it, never lowered (an
/// over-count is the bound's design: a hold it refuses counts exactly);
/// the rotation moves on.
pub const ALLOWANCE_APPLY: &str = "UPDATE client_allowances SET held = GREATEST(held, ?), \
     checked_at = ? WHERE client_id = ?";

impl Booking {
    /// [`CHECK_SKIPPED`], after a slot's check failed; its own failure is
    /// logged and changes nothing else.
    pub(super) async fn skipped(&self, slot: SlotId, usable: Instant) {
        if Instant::now() >= usable {
            return;
        }
        let marked = db::transact!(&self.pool, "sweep", usable, |conn| {
            let mut tx = conn.begin().await?;
            let free: Option<u64> = sqlx::query_scalar(SKIPPED_LOCK)
                .bind(slot.0)
                .fetch_optional(&mut *tx)
                .await?;
            if free.is_some() {
                sqlx::query(CHECK_SKIPPED)
                    .bind(slot.0)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await.map_err(Error::from)
        });
        if let Err(err) = marked {
            tracing::warn!(slot_id = slot.0, error = %err, "a skipped slot kept its place in the rotation");
        }
    }

    /// Checks up to `sample` clients' allowances, each in its own short
    /// transaction, until `usable`. Returns (visited, repaired, failed).
    pub(super) async fn sweep_clients(&self, sample: u32, usable: Instant) -> (u64, u64, u64) {
        let clients = db::transact!(&self.pool, "sweep", usable, |conn| {
            sqlx::query_scalar::<_, u64>(SWEEP_CLIENTS)
                .bind(sample)
                .fetch_all(&mut *conn)
                .await
                .map_err(Error::from)
        });
        let clients = match clients {
            Ok(clients) => clients,
            Err(err) => {
                tracing::warn!(error = %err, "sweep skipped the allowances");
                return (0, 0, 1);
            }
        };
        let (mut visited, mut repaired, mut failed) = (0, 0, 0);
        for client in clients {
            if Instant::now() >= usable {
                break;
            }
            let checked = db::transact!(&self.pool, "sweep", usable, |conn| {
                check_allowance(&mut conn, client).await
            });
            match checked {
                Ok(fixed) => {
                    visited += 1;
                    repaired += u64::from(fixed);
                }
                Err(err) => {
                    failed += 1;
                    tracing::warn!(client_id = client, error = %err, "sweep skipped an allowance");
                }
            }
        }
        (visited, repaired, failed)
    }
}

/// One client's check; whether its bound was raised.
async fn check_allowance(conn: &mut MySqlConnection, client: u64) -> Result<bool, Error> {
    let mut tx = conn.begin().await?;
    let Some(held): Option<u32> = sqlx::query_scalar(ALLOWANCE_LOCK)
        .bind(client)
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(false);
    };
    let (now, counted): (DateTime<Utc>, Option<i64>) = sqlx::query_as(ALLOWANCE_COUNT)
        .bind(client)
        .fetch_one(&mut *tx)
        .await?;
    let counted = counted.unwrap_or(0);
    let raised = counted > i64::from(held);
    if raised {
        tracing::error!(
            client_id = client,
            counter = "client_allowances.held",
            stored = held,
            truth = counted,
            "an allowance was below its client's active seats (a row written by hand?); raised"
        );
    }
    sqlx::query(ALLOWANCE_APPLY)
        .bind(u32::try_from(counted.max(0)).unwrap_or(u32::MAX))
        .bind(now)
        .bind(client)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(raised)
}
