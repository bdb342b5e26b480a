//! A transaction that can end with a statement that commits it, in one
//! round trip.
//!
//! Why not sqlx's `Transaction`: it has no way to end with anything but
//! its own `COMMIT`, and a COMMIT sent any other way leaves it believing
//! the transaction open (it would then send a `ROLLBACK` of its own, one
//! more round trip on the connection). A booking's event (SPEC §12) is its
//! transaction's last write; the `events_commit` procedure inserts it and
//! commits, so it costs the booking no round trip and no longer time under
//! the slot's lock than the INSERT itself takes (docs/DESIGN.md, "F1 costs
//! a booking one INSERT").
//!
//! A `Tx` dropped while open (an error left it by `?`) closes its
//! connection instead of returning it to the pool: the server rolls the
//! transaction back, and no pooled connection is ever left inside one.
//! The expected endings (a refusal decided under the locks) call
//! [`Tx::rollback`], which keeps the connection. No sqlx transaction may be
//! begun inside a `Tx` (its `BEGIN` would commit this one).

use sqlx::mysql::MySqlArguments;
use sqlx::pool::PoolConnection;
use sqlx::query::Query;
use sqlx::{Executor, MySql, MySqlConnection};
use std::ops::{Deref, DerefMut};

pub struct Tx<'c> {
    conn: &'c mut PoolConnection<MySql>,
    open: bool,
}

impl<'c> Tx<'c> {
    /// `BEGIN` on `conn`. Open from before it is sent: a BEGIN that fails
    /// unseen may still have begun, and the connection is then closed.
    pub async fn begin(conn: &'c mut PoolConnection<MySql>) -> Result<Self, sqlx::Error> {
        let tx = Self { conn, open: true };
        (&mut **tx.conn).execute("BEGIN").await?;
        Ok(tx)
    }

    /// A transaction that the next statement sent on `conn` begins itself
    /// (a CALL of a procedure whose first statement is START TRANSACTION):
    /// nothing is sent here, a round trip fewer. Open from now, as
    /// [`Tx::begin`]'s: until that statement answers, it may have begun.
    pub fn begun_by(conn: &'c mut PoolConnection<MySql>) -> Self {
        Self { conn, open: true }
    }

    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        (&mut **self.conn).execute("COMMIT").await?;
        self.open = false;
        Ok(())
    }

    pub async fn rollback(mut self) -> Result<(), sqlx::Error> {
        (&mut **self.conn).execute("ROLLBACK").await?;
        self.open = false;
        Ok(())
    }

    /// The transaction was ended by a statement that answered without an
    /// error: a CALL of a procedure that ends each path that answers with
    /// COMMIT or ROLLBACK (`booking/hold_call.rs`).
    pub fn ended(mut self) {
        self.open = false;
    }

    /// Runs `last`, a statement that commits the transaction as its own
    /// last act (a `CALL` of a procedure that ends with `COMMIT`): one
    /// round trip, one answer. A `last` that fails before its COMMIT
    /// leaves the transaction open, and it is dropped as such.
    pub async fn commit_by(
        mut self,
        last: Query<'_, MySql, MySqlArguments>,
    ) -> Result<(), sqlx::Error> {
        last.execute(&mut **self.conn).await?;
        self.open = false;
        Ok(())
    }
}

impl Deref for Tx<'_> {
    type Target = MySqlConnection;

    fn deref(&self) -> &MySqlConnection {
        self.conn
    }
}

impl DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut MySqlConnection {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            self.conn.close_on_drop();
        }
    }
}
