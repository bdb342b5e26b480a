//! A confirm's common path in one CALL (docs/DESIGN.md, "One CALL under
//! the lock"): the `hold_confirm` procedure (migrations/…_hold_confirm.sql)
//! locks, decides, consumes, marks, writes the event and commits inside the
//! server, so the slot's row lock is held for no round trip to this
//! function. Its writes are the locked path's own (`confirm.rs`), which a
//! unit test compares; a hold it cannot plainly confirm is rolled back by
//! the procedure and decided by the locked path.

use super::written::{Written, call};
use crate::db::Tx;
use crate::domain::{Hold, HoldStatus};
use crate::error::Error;
use chrono::{DateTime, Utc};
use sqlx::MySql;
use sqlx::pool::PoolConnection;

/// Binds: hold, the slot the plain read saw it on, the request's number.
pub const HOLD_CONFIRM: &str = "CALL hold_confirm(?, ?, ?)";

/// The procedure's one row: where it ended, and on 'confirmed' what the
/// confirmation wrote (and an extension may have changed since the plain
/// read).
#[derive(sqlx::FromRow)]
struct Ended {
    ended: String,
    #[sqlx(default)]
    expires_at: Option<DateTime<Utc>>,
    #[sqlx(default)]
    confirmed_at: Option<DateTime<Utc>>,
    #[sqlx(default)]
    updated_at: Option<DateTime<Utc>>,
}

/// [`HOLD_CONFIRM`] for `read`, the hold as the plain read found it (held,
/// offered to no entry), in its own transaction: the hold confirmed with
/// its event, or `None` when the procedure declined and rolled back. Its
/// row and the CALL's end are read together (`written::call`).
pub(super) async fn confirm(
    conn: &mut PoolConnection<MySql>,
    read: &Hold,
    written: &Written,
) -> Result<Option<Hold>, Error> {
    let request = written.request();
    // The procedure begins its transaction: no BEGIN before it.
    let mut tx = Tx::begun_by(conn);
    let confirm = sqlx::query_as::<_, Ended>(HOLD_CONFIRM)
        .bind(read.id.0)
        .bind(read.slot_id.0)
        .bind(request.0);
    let rows = call(&mut tx, confirm, written).await?;
    // Every path of the procedure that answers ends the transaction.
    tx.ended();
    let [row] = &rows[..] else {
        return Err(unexpected(format!("{} rows", rows.len())));
    };
    match row {
        Ended {
            ended,
            expires_at: Some(expires_at),
            confirmed_at: Some(confirmed_at),
            updated_at: Some(updated_at),
        } if ended == "confirmed" => Ok(Some(Hold {
            status: HoldStatus::Confirmed,
            active: false,
            expires_at: *expires_at,
            confirmed_at: Some(*confirmed_at),
            updated_at: *updated_at,
            confirmed_by: Some(request),
            ..read.clone()
        })),
        Ended { ended, .. } if ended == "declined" => Ok(None),
        Ended { ended, .. } => Err(unexpected(format!("the end {ended:?}"))),
    }
}

fn unexpected(what: String) -> Error {
    Error::Unavailable(sqlx::Error::Protocol(format!(
        "hold_confirm came back with {what}"
    )))
}

#[cfg(test)]
mod tests {
    use crate::Booking;
    use crate::db::procedure::{procedure_sql, words};

    /// The procedure's writes are the locked path's, word for word.
    #[test]
    fn the_procedure_writes_as_the_locked_path_does() {
        let procedure = procedure_sql("hold_confirm");
        for (sql, binds) in [
            (
                Booking::CONFIRM_CONSUME,
                &["v_quantity", "v_quantity", "p_slot", "v_quantity"][..],
            ),
            (Booking::CONFIRM_MARK, &["p_request", "p_hold"][..]),
        ] {
            let sql = binds
                .iter()
                .fold(sql.to_owned(), |sql, b| sql.replacen('?', b, 1));
            let statement = format!("{};", words(&sql));
            assert!(procedure.contains(&statement), "{statement}");
        }
    }
}
