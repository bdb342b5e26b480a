//! Revoking a client (SPEC §8, and §23.9 which changes it): its key stops
//! working within the look-up lifetime; in the revoking transaction its
//! active holds are cancelled and its waiting entries end `expired`, each
//! with its event, and the seats freed go to each slot's line at once.
//! Its bookings stay. docs/DESIGN.md, "Revoking a client", has the lock
//! order and the argument.

use super::admin::{FIND_CLIENT, LOCK_CLIENT, find};
use super::{ANONYMOUS, Client, ClientAdmin, ClientId, Role};
use crate::booking::{CLIENT_SLOTS, give_back, lock_slots};
use crate::db;
use crate::domain::SlotId;
use crate::error::Error;
use sqlx::{Connection, MySqlConnection};
use std::time::Duration;

/// The most slots one revoking transaction locks and gives back. A client
/// on more slots is revoked by the first transaction with the first
/// `BATCH` of them, and the rest follow in transactions of their own, in
/// the same request: no transaction's locks or work grow with the
/// client's holdings, and the client is revoked (no new look-up of its
/// key succeeds, none of its entries is offered) from the first commit.
pub const BATCH: usize = 100;

/// The most transactions one request runs. Each round gives back what the
/// client holds when it starts; another round follows while something is
/// found (what did not fit a batch; a hold or entry that committed while
/// the round ran, or made by a key an environment still trusted for up to
/// 30 s, SPEC §8). What is left after the last round expires by its TTL
/// and is never offered seats; a retry of the request gives it back.
pub const MAX_ROUNDS: usize = 20;

impl ClientAdmin {
    /// Revokes a client: its key stops working within the look-up
    /// lifetime; its active holds are cancelled and its waiting entries
    /// end `expired`, with their events, the seats freed offered to each
    /// slot's line; its bookings stay (SPEC §23.9). Idempotent: revoking
    /// again answers the client unchanged (giving back anything made
    /// since by a key still trusted somewhere). The last active admin
    /// cannot be revoked. The availability cache is invalidated after the
    /// commits when a seat was given back.
    pub async fn revoke(
        &self,
        id: ClientId,
        deadline: tokio::time::Instant,
    ) -> Result<Client, Error> {
        if id == ANONYMOUS {
            // It has no key to revoke; `open` mode is closed by AUTH_MODE.
            // Refused before its (many) holds are read.
            self.find(id, deadline).await?;
            return Err(Error::BuiltInClient(id));
        }
        let mut touched = false;
        let outcome = self.revoke_rounds(id, deadline, &mut touched).await;
        let may_have_changed = touched
            || matches!(
                outcome,
                Err(Error::Unavailable(_) | Error::Internal(_) | Error::OutcomeUnknown(_))
            );
        if let (true, Some(cache)) = (may_have_changed, &self.cache) {
            cache.invalidate().await;
        }
        outcome
    }

    async fn revoke_rounds(
        &self,
        id: ClientId,
        deadline: tokio::time::Instant,
        touched: &mut bool,
    ) -> Result<Client, Error> {
        let mut revoked = None;
        for _ in 0..MAX_ROUNDS {
            // Read before the transaction, autocommitted: its snapshot is
            // its own (see `CLIENT_SLOTS`).
            let mut slots = db::transact!(&self.pool, "client slots", deadline, |conn| {
                client_slots(&mut conn, id).await
            })?;
            if slots.is_empty()
                && let Some(client) = revoked
            {
                return Ok(client);
            }
            slots.truncate(BATCH);
            let ttl = self.hold_ttl;
            let client = db::transact!(&self.pool, "client revoke", deadline, |conn| {
                revoke_once(&mut conn, id, &slots, ttl).await
            })?;
            *touched |= !slots.is_empty();
            revoked = Some(client);
        }
        tracing::warn!(
            client = id.0,
            rounds = MAX_ROUNDS,
            "a revoked client still holds seats; they expire by their TTL"
        );
        revoked.ok_or(Error::ClientNotFound(id))
    }
}

/// [`CLIENT_SLOTS`]: at most one more than a batch (`BATCH + 1`), so
/// that a batch's worth is known to be all or not.
async fn client_slots(conn: &mut MySqlConnection, id: ClientId) -> Result<Vec<SlotId>, Error> {
    let slots: Vec<u64> = sqlx::query_scalar(CLIENT_SLOTS)
        .bind(id.0)
        .bind(id.0)
        .bind(BATCH as u64 + 1)
        .fetch_all(conn)
        .await?;
    Ok(slots.into_iter().map(SlotId).collect())
}

/// One revoking transaction over `slots` (ascending). Its lock order is
/// the booking transactions' own: slot rows first (ascending), then hold
/// and entry rows under them, then client rows, which every hold, join
/// and offer takes after its slot's (the foreign key's shared lock on the
/// owner's `api_clients` row; the offer's guard). Taking the client rows
/// first, as revocations did before they gave seats back, would deadlock
/// with the client's own hold in flight.
async fn revoke_once(
    conn: &mut MySqlConnection,
    id: ClientId,
    slots: &[SlotId],
    ttl: Duration,
) -> Result<Client, Error> {
    let mut tx = conn.begin().await?;
    // 1. Every slot's row lock, lowest id first, before any plain read: the
    //    first reclaim's count takes the snapshot, after all of them.
    lock_slots(&mut tx, slots).await?;
    // 2. Each slot: its reclaim, the client's holds cancelled and entries
    //    ended, the seats offered to the line.
    for slot in slots {
        give_back(&mut tx, *slot, id, ttl).await?;
    }
    // 3. The active admins, then the target, every revocation in the same
    //    order: two revocations of the last two admins are serialised,
    //    and the second counts what the first left (a locking read sees
    //    the latest commit). Through the (role, revoked_at) index: a scan
    //    would lock every client's row, which capped holds lock too
    //    (docs/DESIGN.md, "One client's cap").
    let admins: Vec<u64> = sqlx::query_scalar(
        "SELECT id FROM api_clients FORCE INDEX (api_clients_role_revoked_at_index) \
         WHERE role = 'admin' AND revoked_at IS NULL ORDER BY id FOR UPDATE",
    )
    .fetch_all(&mut *tx)
    .await?;
    let target = find(&mut tx, id, LOCK_CLIENT).await?;
    if target.revoked_at.is_some() {
        // Revoked before (this request's earlier round, or another): what
        // it still held is given back, the resource is unchanged.
        tx.commit().await?;
        return Ok(target);
    }
    if target.role == Role::Admin && admins.len() <= 1 {
        return Err(Error::LastAdmin(id)); // rolled back: nothing changed
    }
    sqlx::query("UPDATE api_clients SET revoked_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    let revoked = find(&mut tx, id, FIND_CLIENT).await?;
    tx.commit().await?;
    Ok(revoked)
}
