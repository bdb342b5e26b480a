//! A server-side time limit on every statement (SPEC §16, bounded work), so
//! that a request that gives up leaves nothing running on the database:
//! closing a connection does not stop its statement, which MariaDB runs to
//! its end (a lock wait to `innodb_lock_wait_timeout`, a scan to its last
//! row).
//!
//! Each pooled connection starts with [`CEILING`], far above what any of
//! our statements takes and well under every request's budget. An attempt
//! that starts with less than `CEILING` left before its deadline lowers its
//! connection's limit to what is left (less [`MARGIN`], the time for the
//! refusal to come back), and that connection is closed after the attempt,
//! never pooled with a lowered limit. A statement stopped by the limit is
//! 503 `service_unavailable` (`db::classify`).
//!
//! MariaDB's `max_statement_time` covers every statement; MySQL's
//! `max_execution_time` only read-only `SELECT`s, its writes being bounded
//! by the lock wait timeout (3 s) and by their indexes. Which one the
//! server has is learnt from the first connection.

use sqlx::mysql::MySqlDatabaseError;
use sqlx::{Executor, MySqlConnection};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::time::Instant;

/// The limit of a connection that no attempt lowered.
pub const CEILING: Duration = Duration::from_secs(3);
/// Kept back from the time left: the stopped statement's error must reach
/// the function, which must still answer before its deadline.
pub const MARGIN: Duration = Duration::from_millis(100);

/// MySQL's "unknown system variable".
const UNKNOWN_VARIABLE: u16 = 1193;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    MariaDb,
    MySql,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();

/// `SET` of the limit, in the server's own variable.
fn statement(engine: Engine, limit: Duration) -> String {
    match engine {
        // Seconds, to the microsecond.
        Engine::MariaDb => format!(
            "SET SESSION max_statement_time = {}.{:06}",
            limit.as_secs(),
            limit.subsec_micros()
        ),
        // Milliseconds; 0 would mean none.
        Engine::MySql => format!(
            "SET SESSION max_execution_time = {}",
            limit.as_millis().max(1)
        ),
    }
}

/// Gives a new connection [`CEILING`] (the pool's `after_connect`).
pub async fn start(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    if let Some(engine) = ENGINE.get() {
        return set(conn, *engine, CEILING).await;
    }
    let engine = match set(conn, Engine::MariaDb, CEILING).await {
        Ok(()) => Engine::MariaDb,
        Err(err) if unknown_variable(&err) => {
            set(conn, Engine::MySql, CEILING).await?;
            Engine::MySql
        }
        Err(err) => return Err(err),
    };
    let _ = ENGINE.set(engine);
    Ok(())
}

/// The time a statement started now may take: what is left before
/// `deadline` less [`MARGIN`]; `None` when nothing is (no statement may
/// start: the operation is out of time).
pub fn left(deadline: Instant) -> Option<Duration> {
    Some(
        deadline
            .checked_duration_since(Instant::now())?
            .checked_sub(MARGIN)?,
    )
    .filter(|left| !left.is_zero())
}

/// Lowers the connection's limit to `left` (from [`left`]) when that is
/// under [`CEILING`]. `true`: lowered, so the connection must not go back
/// to the pool.
pub async fn fit(conn: &mut MySqlConnection, left: Duration) -> Result<bool, sqlx::Error> {
    if left >= CEILING {
        return Ok(false);
    }
    let engine = ENGINE.get().copied().unwrap_or(Engine::MariaDb);
    set(conn, engine, left).await?;
    Ok(true)
}

async fn set(
    conn: &mut MySqlConnection,
    engine: Engine,
    limit: Duration,
) -> Result<(), sqlx::Error> {
    conn.execute(sqlx::AssertSqlSafe(statement(engine, limit)))
        .await
        .map(drop)
}

fn unknown_variable(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db)
        if db.try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|my| my.number() == UNKNOWN_VARIABLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_gets_its_own_variable_and_unit() {
        let limit = Duration::from_micros(2_500_123);
        assert_eq!(
            statement(Engine::MariaDb, limit),
            "SET SESSION max_statement_time = 2.500123"
        );
        assert_eq!(
            statement(Engine::MySql, limit),
            "SET SESSION max_execution_time = 2500"
        );
        assert_eq!(
            statement(Engine::MySql, Duration::from_micros(10)),
            "SET SESSION max_execution_time = 1",
            "never 0, which is no limit"
        );
    }
}
