//! A hold's common path in one CALL (docs/DESIGN.md, "One CALL under the
//! lock"): the `hold_place_floor` procedure
//! (migrations/…_hold_place_floor.sql) claims, guards,
//! inserts, writes the event and commits inside the server, so the slot's
//! row lock is held for no round trip to this function. Its statements are
//! the locked path's own (`hold.rs`), which a unit test compares; any other
//! path (a full counter, a line, a cap's bound that does not pass, a share,
//! a slot that started) is rolled back by the procedure and taken by the
//! locked path.

use super::allowance::NEW_ROW_WINDOW;
use super::sql::key_winner;
use super::written::{Written, call};
use crate::db::{self, Tx};
use crate::domain::{ClientId, Hold, HoldId, HoldStatus, IdempotencyKey, SlotId};
use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::MySql;
use sqlx::pool::PoolConnection;

/// Binds: client, cap (NULL: none), the allowance's new-row window in
/// seconds, quantity, slot, key, TTL in microseconds, the request's number.
pub const HOLD_PLACE: &str = "CALL hold_place_floor(?, ?, ?, ?, ?, ?, ?, ?)";

/// What the procedure did.
pub(super) enum Placed {
    /// The hold, committed with its event.
    Made(Hold),
    /// The key's UNIQUE index refused the INSERT, after waiting for the
    /// holder to commit: the key's hold (answered as a replay, or as this
    /// request's own), rolled back here.
    KeyTaken(Hold),
    /// Rolled back by the procedure: the locked path decides.
    Declined,
}

/// The procedure's one row: where it ended, and on 'placed' what only the
/// server knew of the new hold.
#[derive(sqlx::FromRow)]
struct Ended {
    ended: String,
    #[sqlx(default)]
    id: Option<u64>,
    #[sqlx(default)]
    active: Option<bool>,
    #[sqlx(default)]
    expires_at: Option<DateTime<Utc>>,
    #[sqlx(default)]
    created_at: Option<DateTime<Utc>>,
    #[sqlx(default)]
    updated_at: Option<DateTime<Utc>>,
}

/// What one hold asks of the procedure.
pub(super) struct Asked<'a> {
    pub(super) client: ClientId,
    pub(super) cap: Option<u32>,
    pub(super) slot_id: SlotId,
    pub(super) quantity: u32,
    pub(super) key: &'a IdempotencyKey,
    pub(super) ttl_micros: i64,
}

/// [`HOLD_PLACE`] in its own transaction. Its row and the CALL's end are
/// read together (`written::call`), so that an error the server reports
/// after the row (its COMMIT's) is this CALL's.
pub(super) async fn place(
    conn: &mut PoolConnection<MySql>,
    asked: &Asked<'_>,
    written: &Written,
) -> Result<Placed, Error> {
    // The procedure begins its transaction: no BEGIN before it.
    let mut tx = Tx::begun_by(conn);
    let place = sqlx::query_as::<_, Ended>(HOLD_PLACE)
        .bind(asked.client.0)
        .bind(asked.cap)
        .bind(NEW_ROW_WINDOW.as_secs())
        .bind(asked.quantity)
        .bind(asked.slot_id.0)
        .bind(asked.key.as_str())
        .bind(asked.ttl_micros)
        .bind(written.request().0);
    let rows = match call(&mut tx, place, written).await {
        Ok(rows) => rows,
        Err(err) if db::is_unique_violation(&err) => {
            tx.rollback().await?; // the claim
            let winner = key_winner(conn, asked.client, asked.key, err).await?;
            return Ok(Placed::KeyTaken(winner));
        }
        Err(err) => return Err(err.into()),
    };
    // Every path of the procedure that answers ends the transaction.
    tx.ended();
    let [row] = &rows[..] else {
        return Err(unexpected(format!("{} rows", rows.len())));
    };
    match (row.ended.as_str(), row) {
        (
            "placed",
            &Ended {
                id: Some(id),
                active: Some(active),
                expires_at: Some(expires_at),
                created_at: Some(created_at),
                updated_at: Some(updated_at),
                ..
            },
        ) => Ok(Placed::Made(Hold {
            id: HoldId(id),
            slot_id: asked.slot_id,
            client_id: asked.client,
            status: HoldStatus::Held,
            quantity: asked.quantity,
            active,
            idempotency_key: asked.key.as_str().to_owned(),
            expires_at,
            confirmed_at: None,
            cancelled_at: None,
            created_at,
            updated_at,
            entry_id: None,
            created_by: Some(written.request()),
            confirmed_by: None,
        })),
        ("allowance" | "claim" | "guard", _) => Ok(Placed::Declined),
        (other, _) => Err(unexpected(format!("the end {other:?}"))),
    }
}

fn unexpected(what: String) -> Error {
    Error::Unavailable(sqlx::Error::Protocol(format!(
        "hold_place_floor came back with {what}"
    )))
}

#[cfg(test)]
mod tests {
    use crate::Booking;
    use crate::db::procedure::{procedure_sql, words};

    /// `migrations/…_hold_place_floor.sql`, the last that defines it.
    fn procedure() -> String {
        procedure_sql("hold_place_floor")
    }

    fn bound(sql: &str, binds: &[&str]) -> String {
        let sql = binds
            .iter()
            .fold(sql.to_owned(), |sql, bind| sql.replacen('?', bind, 1));
        assert!(!sql.contains('?'), "a bind left: {sql}");
        format!("{};", words(&sql))
    }

    /// The allowance's statement is the capped claim's (`allowance::CLAIM`'s
    /// procedure), word for word.
    #[test]
    fn the_procedure_moves_the_allowance_as_the_capped_claim_does() {
        let statement = |sql: &str| {
            let start = sql
                .find("INSERT INTO client_allowances")
                .expect("the allowance");
            words(&sql[start..start + sql[start..].find(';').expect("its end")])
        };
        assert_eq!(
            statement(&procedure()),
            statement(&procedure_sql("hold_claim_floor"))
        );
    }

    /// The procedure's claim, watermark, guard and INSERT are the locked
    /// path's, word for word, the guard's row read into variables.
    #[test]
    fn the_procedure_sends_the_locked_paths_statements() {
        let procedure = procedure();
        for statement in [
            bound(
                Booking::HOLD_CLAIM,
                &["p_ttl", "p_quantity", "p_slot", "p_quantity"],
            ),
            bound(Booking::HOLD_WATERMARK, &["p_slot"]),
            bound(
                &Booking::HOLD_GUARD
                    .replace(" FROM slots", " INTO v_now, v_closed, v_shared FROM slots"),
                &["p_slot"],
            ),
            bound(
                Booking::HOLD_INSERT,
                &[
                    "p_slot",
                    "p_client",
                    "p_quantity",
                    "p_key",
                    "v_now",
                    "p_ttl",
                    "v_now",
                    "v_now",
                    "p_request",
                ],
            ),
        ] {
            assert!(procedure.contains(&statement), "{statement}");
        }
    }
}
