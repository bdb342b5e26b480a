//! A capped client's allowance (SPEC §16; docs/DESIGN.md, "One client's
//! cap"): `client_allowances.held`, an upper bound of the seats in the
//! client's active holds, so that a hold the bound passes reads none of
//! them. Confirms, cancels and expiries leave it alone (it only
//! over-counts); a hold it would refuse, or any hold while a count is due
//! (a cap changed, a deploy), counts the client's seats exactly under its
//! locks (`fair.rs`) and sets the bound to that count.

use super::fair::Counted;
use crate::domain::{ClientId, SlotId};
use crate::error::Error;
use sqlx::{Executor, MySqlConnection};

/// The bound passes the hold, and moves by it (its new figure comes back
/// as the insert id; 0: it did not pass). It locks the client's row: the
/// first lock of a capped hold, before the slot's. Every client has one
/// (made with it, `clients/admin.rs`); one missing is made here, with the holds of
/// the next [`NEW_ROW_WINDOW`] counted (an environment may have held
/// without it). Binds: client, window seconds, quantity, cap, quantity.
pub const CLAIM: &str = "INSERT INTO client_allowances (client_id, held, counted_at, recount_after) \
     VALUES (?, 0, '1000-01-01', UTC_TIMESTAMP(6) + INTERVAL ? SECOND) ON DUPLICATE KEY UPDATE \
     held = IF(held + ? <= ? AND counted_at >= recount_after, LAST_INSERT_ID(held + ?), held)";

/// How long holds are counted after a row is made by a hold: the time an
/// environment keeps a client's cap with its key, and a request's.
pub const NEW_ROW_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// A claim the hold did not use (the slot was full, and its reclaim is
/// committed): the bound gives it back. Binds: quantity, client.
pub const GIVE_BACK: &str = "UPDATE client_allowances SET held = held - ? WHERE client_id = ?";

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

/// What the first packet of a capped hold did.
pub(super) struct Claimed {
    /// The bound passed the hold.
    pub(super) passed: bool,
    /// The slot's claim: rows affected, and its insert id (the counter's
    /// new figure).
    pub(super) slot: (u64, u64),
}

/// [`CLAIM`] and the slot's `claim`, in this order, in one packet: one
/// round trip where two would wait on the network with the client's row
/// locked. Text: its values, integers only, are written into it.
pub(super) async fn claim(
    conn: &mut MySqlConnection,
    client: ClientId,
    cap: u32,
    quantity: u32,
    slot: SlotId,
    slot_claim: &str,
) -> Result<Claimed, Error> {
    use futures_util::TryStreamExt;
    let q = u64::from(quantity);
    let packet = format!(
        "{};\n{}",
        inline(
            CLAIM,
            &[client.0, NEW_ROW_WINDOW.as_secs(), q, u64::from(cap), q]
        ),
        inline(slot_claim, &[q, slot.0, q])
    );
    let mut done = Vec::with_capacity(2);
    let mut results = sqlx::raw_sql(sqlx::AssertSqlSafe(packet)).execute_many(&mut *conn);
    while let Some(result) = results.try_next().await? {
        done.push((result.rows_affected(), result.last_insert_id()));
    }
    match done[..] {
        [(_, bound), slot] => Ok(Claimed {
            passed: bound > 0,
            slot,
        }),
        _ => Err(Error::Unavailable(sqlx::Error::Protocol(format!(
            "a capped claim came back with {} results, not 2",
            done.len()
        )))),
    }
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

/// `sql` with its `?`s replaced by `values`, in order. The statements put
/// through here have no `?` in a literal, and as many as values.
fn inline(sql: &str, values: &[u64]) -> String {
    let mut out = String::with_capacity(sql.len() + 8 * values.len());
    let mut values = values.iter();
    for (i, part) in sql.split('?').enumerate() {
        if i > 0 {
            match values.next() {
                Some(value) => out.push_str(&value.to_string()),
                None => out.push('?'),
            }
        }
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Booking;

    #[test]
    fn the_packet_has_every_value_in_place_and_no_placeholder_left() {
        let claim = inline(CLAIM, &[7, 60, 2, 10, 2]);
        assert_eq!(
            claim,
            "INSERT INTO client_allowances (client_id, held, counted_at, recount_after) \
             VALUES (7, 0, '1000-01-01', UTC_TIMESTAMP(6) + INTERVAL 60 SECOND) ON DUPLICATE KEY \
             UPDATE held = IF(held + 2 <= 10 AND counted_at >= recount_after, \
             LAST_INSERT_ID(held + 2), held)"
        );
        let slot = inline(Booking::HOLD_CLAIM, &[2, 9, 2]);
        assert!(!slot.contains('?'), "{slot}");
        assert!(slot.contains("LAST_INSERT_ID(held + 2)"), "{slot}");
        assert!(
            slot.ends_with("WHERE id = 9 AND held + 2 <= remaining"),
            "{slot}"
        );
        assert_eq!(CLAIM.matches('?').count(), 5);
        assert_eq!(Booking::HOLD_CLAIM.matches('?').count(), 3);
    }
}
