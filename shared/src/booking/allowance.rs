//! A capped client's allowance (SPEC §16; docs/DESIGN.md, "One client's
//! cap"): `client_allowances.held`, an upper bound of the seats in the
//! client's active holds and waiting entries and of the bookings it
//! cancelled within `CLIENT_CANCEL_WINDOW` (SPEC §23.8), so that a hold
//! the bound passes reads none of them. Such a cancellation adds its seats
//! ([`CANCELLED`]); confirms, other cancels, expiries and a cancellation's
//! window passing leave it alone (it only over-counts); a hold it would
//! refuse, or any hold while a count is due
//! (a cap changed, a deploy), counts the client's seats exactly under its
//! locks (`fair.rs`) and sets the bound to that count.

use super::fair::Counted;
use crate::domain::{ClientId, SlotId};
use crate::error::Error;
use crate::recent::Recent;
use sqlx::{Executor, MySqlConnection};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bound passes the hold and moves by it, then the slot's claim
/// (`Booking::HOLD_CLAIM`), in one CALL of the `hold_claim_floor`
/// procedure (migrations/…_hold_place_floor.sql): the client's lock, the
/// first of a capped hold, before the slot's. Every client has its row
/// (made with it, `clients/install.rs`); one missing is made there, with
/// the holds of the next [`NEW_ROW_WINDOW`] counted (an environment may
/// have held without it). Binds: client, window seconds, quantity, cap,
/// slot, TTL in microseconds (the claim's floor). Its row: the bound's new figure (0: it did not pass), the slot's
/// rows matched and its new `held`.
pub const CLAIM: &str = "CALL hold_claim_floor(?, ?, ?, ?, ?, ?)";

/// How long holds are counted after a row is made by a hold: the time an
/// environment keeps a client's cap with its key, and a request's.
pub const NEW_ROW_WINDOW: Duration = Duration::from_secs(60);

/// A claim the hold did not use (the slot was full, and its reclaim is
/// committed): the bound gives it back. Binds: quantity, client.
pub const GIVE_BACK: &str = "UPDATE client_allowances SET held = held - ? WHERE client_id = ?";

/// A booking its own client cancels counts against its cap from then on,
/// until `counts_until` (SPEC §23.8): the bound grows by its seats, the
/// cancel's first statement, so that the client's lock comes before the
/// slot's as in every transaction that takes both. A missing row is made
/// as a hold's claim makes it, with the holds of the next
/// [`NEW_ROW_WINDOW`] counted. `LEAST` keeps the column in range: a bound
/// above the largest cap passes no hold whatever its figure. Binds:
/// client, window seconds, quantity.
pub const CANCELLED: &str = "INSERT INTO client_allowances (client_id, held, counted_at, recount_after) \
     VALUES (?, 0, '1000-01-01', UTC_TIMESTAMP(6) + INTERVAL ? SECOND) \
     ON DUPLICATE KEY UPDATE held = LEAST(held + ?, 4294967295)";

/// The bound did not pass it, and the seats are counted under the locks:
/// first the client's `api_clients` row, which a capped hold of the
/// release before the allowances locks instead (in the other order, after
/// it the slot's: during a deploy the two may deadlock, which InnoDB
/// breaks and the retry runs again).
pub const LOCK_FOR_COUNT: &str = "SELECT id FROM api_clients WHERE id = ? FOR UPDATE";

/// After an exact count passed the hold: the bound is the count plus this
/// hold, as of the count's `now`. Binds: count, quantity, now, client.
pub const SET: &str =
    "UPDATE client_allowances SET held = ? + ?, counted_at = ? WHERE client_id = ?";

/// What the first CALL of a capped hold did.
pub(super) struct Claimed {
    /// The bound passed the hold.
    pub(super) passed: bool,
    /// The slot's claim: rows matched, and the counter's new figure (what
    /// the uncapped claim's rows affected and insert id say).
    pub(super) slot: (u64, u64),
}

/// [`CLAIM`]: its one row, and the CALL's end read here too
/// (`fetch_all`), so that an error the server reports after the row is
/// this claim's, not the next statement's.
pub(super) async fn claim(
    conn: &mut MySqlConnection,
    client: ClientId,
    cap: u32,
    quantity: u32,
    slot: SlotId,
    ttl_micros: i64,
) -> Result<Claimed, Error> {
    let rows: Vec<(i64, i64, i64)> = sqlx::query_as(CLAIM)
        .bind(client.0)
        .bind(NEW_ROW_WINDOW.as_secs())
        .bind(quantity)
        .bind(cap)
        .bind(slot.0)
        .bind(ttl_micros)
        .fetch_all(&mut *conn)
        .await?;
    let &[(bound, matched, held)] = &rows[..] else {
        return Err(Error::Unavailable(sqlx::Error::Protocol(format!(
            "the capped claim came back with {} rows, not 1",
            rows.len()
        ))));
    };
    Ok(Claimed {
        passed: bound > 0,
        slot: (
            u64::try_from(matched).unwrap_or(0),
            u64::try_from(held).unwrap_or(0),
        ),
    })
}

/// [`LOCK_FOR_COUNT`], before the count.
pub(super) async fn lock_for_count(
    conn: &mut MySqlConnection,
    client: ClientId,
) -> Result<(), Error> {
    conn.execute(sqlx::query(LOCK_FOR_COUNT).bind(client.0))
        .await?;
    Ok(())
}

/// [`CANCELLED`].
pub(super) async fn cancelled(
    conn: &mut MySqlConnection,
    client: ClientId,
    quantity: u32,
) -> Result<(), Error> {
    sqlx::query(CANCELLED)
        .bind(client.0)
        .bind(NEW_ROW_WINDOW.as_secs())
        .bind(quantity)
        .execute(conn)
        .await?;
    Ok(())
}

/// [`GIVE_BACK`].
pub(super) async fn give_back(
    conn: &mut MySqlConnection,
    client: ClientId,
    quantity: u32,
) -> Result<(), Error> {
    sqlx::query(GIVE_BACK)
        .bind(quantity)
        .bind(client.0)
        .execute(conn)
        .await?;
    Ok(())
}

/// [`SET`].
pub(super) async fn set(
    conn: &mut MySqlConnection,
    client: ClientId,
    counted: Counted,
    quantity: u32,
) -> Result<(), Error> {
    sqlx::query(SET)
        .bind(counted.held)
        .bind(quantity)
        .bind(counted.at)
        .bind(client.0)
        .execute(conn)
        .await?;
    Ok(())
}

/// The clients this environment refused at their cap under the locks, and
/// when: their next holds here read their seats in the pre-check
/// (`Booking::HOLD_PRECHECK_CAPPED`), so a hoarder over its cap is refused
/// without a lock, and it alone pays for that read. Any other capped hold
/// reads only the slot, as an uncapped one does. A hint, never a verdict:
/// the locked path decides every hold whatever it says.
#[derive(Clone)]
pub(super) struct AtCap(Arc<Mutex<Recent<ClientId, ()>>>);

impl Default for AtCap {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Recent::new(Self::LIFETIME, Self::MAX))))
    }
}

impl AtCap {
    /// How long a refusal is remembered: a client's holds that free seats
    /// meanwhile only cost it the read.
    const LIFETIME: Duration = Duration::from_secs(60);
    /// A bound on the map, as the key gate's (`clients/gate.rs`).
    const MAX: usize = 4096;

    pub(super) fn refused(&self, client: ClientId) {
        let mut refused = self.0.lock().unwrap_or_else(|e| e.into_inner());
        refused.insert(client, (), Instant::now());
    }

    pub(super) fn was_refused(&self, client: ClientId) -> bool {
        let refused = self.0.lock().unwrap_or_else(|e| e.into_inner());
        refused.get(&client).is_some()
    }
}

impl super::Booking {
    /// A refusal at the cap is remembered: this client's next holds here
    /// are refused by the pre-check, without a lock.
    pub(super) fn refusing(&self, client: ClientId, refused: Error) -> Error {
        if matches!(refused, Error::HoldLimitReached { .. }) {
            self.at_cap.refused(client);
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::AtCap;
    use crate::Booking;
    use crate::db::procedure::{procedure_sql, words};
    use crate::domain::ClientId;

    #[test]
    fn a_refusal_is_remembered_for_its_client_alone_in_bounded_memory() {
        let at_cap = AtCap::default();
        at_cap.refused(ClientId(7));
        assert!(at_cap.was_refused(ClientId(7)));
        assert!(!at_cap.was_refused(ClientId(8)));
        for n in 0..AtCap::MAX as u64 + 10 {
            at_cap.refused(ClientId(1_000 + n));
        }
        assert!(at_cap.0.lock().unwrap().len() <= AtCap::MAX);
    }

    /// The procedure's slot claim is the uncapped hold's, word for word.
    #[test]
    fn the_procedure_claims_the_slot_as_an_uncapped_hold_does() {
        let procedure = procedure_sql("hold_claim_floor");
        let claim = words(
            &Booking::HOLD_CLAIM
                .replacen('?', "p_ttl", 1)
                .replacen('?', "p_quantity", 1)
                .replacen('?', "p_slot", 1)
                .replacen('?', "p_quantity", 1),
        );
        assert!(procedure.contains(&format!("{claim};")), "{claim}");
    }
}
