//! A transaction whose last statement can travel with its COMMIT, in one
//! round trip.
//!
//! Why not sqlx's `Transaction`: it has no way to end with anything but
//! its own `COMMIT`, and a COMMIT sent any other way leaves it believing
//! the transaction open (it would then send a `ROLLBACK` of its own, one
//! more round trip on the connection). A booking's event (SPEC §12) is its
//! transaction's last statement; sent with the COMMIT it costs the booking
//! no round trip and no longer time under the slot's lock than the INSERT
//! itself takes (docs/BENCHMARKS.md, "outbox").
//!
//! A `Tx` dropped while open (an error left it by `?`) closes its
//! connection instead of returning it to the pool: the server rolls the
//! transaction back, and no pooled connection is ever left inside one.
//! The expected endings (a refusal decided under the locks) call
//! [`Tx::rollback`], which keeps the connection. No sqlx transaction may be
//! begun inside a `Tx` (its `BEGIN` would commit this one).

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Executor, MySql, MySqlConnection};
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

    /// `last`, then COMMIT, as one text packet (the server runs them in
    /// order and stops at the first error, so a failed `last` never
    /// commits: the transaction is then still open, and dropped as such).
    ///
    /// `last` is sent as text, outside any prepared statement: it must be
    /// built from literals that cannot be read as SQL, as
    /// [`crate::events::insert_sql`] builds them (integers, formatted
    /// times, hexadecimal strings).
    pub async fn commit_after(mut self, last: String) -> Result<(), sqlx::Error> {
        let mut packet = last;
        packet.push_str("; COMMIT");
        sqlx::raw_sql(AssertSqlSafe(packet))
            .execute(&mut **self.conn)
            .await?;
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
