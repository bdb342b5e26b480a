//! MySQL pool set-up, embedded migrations, and the classification of
//! database failures into "retry the transaction" and "unavailable".

use crate::error::Error;
use sqlx::migrate::Migrator;
use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError, MySqlPoolOptions};
use sqlx::{Executor, MySqlPool};
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

/// The schema, embedded in every binary that needs it.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// How long a request may wait for a connection (including connecting):
/// a database that is down answers 503 well inside the function timeout.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Run on every new connection. `innodb_lock_wait_timeout`: the server
/// default (50 s) outlives any Lambda timeout; a row lock held for 3 s means
/// something is wrong, and the client is better served by a prompt 503.
const SESSION_SETUP: &str = "SET SESSION innodb_lock_wait_timeout = 3";

/// Builds a pool that connects on first use, so a cold start never fails
/// because the database is briefly away.
///
/// A Lambda execution environment serves one request at a time: one or two
/// connections are enough, reused across invocations. Each connection is
/// pinged before it is handed out, so a connection that died while the
/// environment was frozen (or was killed by the server) is replaced instead
/// of failing the request.
pub fn connect_lazy(database_url: &str, max_connections: u32) -> Result<MySqlPool, sqlx::Error> {
    let options = MySqlConnectOptions::from_str(database_url)?
        // All times are UTC; sqlx sets this already, say it anyway.
        .timezone(Some(String::from("+00:00")));
    Ok(pool_options(max_connections).connect_lazy_with(options))
}

fn pool_options(max_connections: u32) -> MySqlPoolOptions {
    MySqlPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(0)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(true)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute(SESSION_SETUP).await?;
                Ok(())
            })
        })
}

/// What to do about a failed database call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Deadlock (1213) or, on MariaDB ≥ 11.6 with snapshot isolation,
    /// "record has changed since last read" (1020): InnoDB rolled the
    /// transaction back; running it again is the documented remedy.
    Conflict,
    /// The connection broke (killed, server gone, network): the transaction
    /// was rolled back by the server; run it again on a new connection.
    ConnectionLost,
    /// The database cannot serve us now (no connection within the acquire
    /// timeout, lock wait timeout 1205, too many connections…).
    Unavailable,
    /// A bug or a schema problem: not retried, logged, 500.
    Other,
}

pub fn classify(err: &sqlx::Error) -> Failure {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) => Failure::ConnectionLost,
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => {
            Failure::Unavailable
        }
        sqlx::Error::WorkerCrashed => Failure::ConnectionLost,
        sqlx::Error::Database(db) => match db.try_downcast_ref::<MySqlDatabaseError>() {
            Some(my) => match my.number() {
                1213 | 1020 => Failure::Conflict,
                // Killed (MariaDB 1927, MySQL 1317 "query interrupted"),
                // gone away, lost during query, shutting down.
                1927 | 1317 | 2006 | 2013 | 1053 | 4031 => Failure::ConnectionLost,
                // Lock wait timeout, too many connections, access denied,
                // server out of resources.
                1205 | 1040 | 1203 | 1045 | 1041 => Failure::Unavailable,
                _ => Failure::Other,
            },
            None => Failure::Other,
        },
        _ => Failure::Other,
    }
}

pub fn is_unavailable(err: &sqlx::Error) -> bool {
    classify(err) != Failure::Other
}

/// True when the statement failed on a UNIQUE index (MySQL 1062).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// How often a whole transaction is attempted when it conflicts.
const MAX_ATTEMPTS: u32 = 4;

/// Runs a whole transaction, again if InnoDB aborted it (deadlock) or the
/// connection died under it, a bounded number of times; then the failure
/// becomes [`Error::Unavailable`] (503, safe to retry).
///
/// Every operation of the service is idempotent (a hold by its key, a
/// confirm or cancel by the hold's state), so running one again after a
/// connection died during COMMIT cannot apply it twice.
pub async fn retrying<T, F, Fut>(operation: &'static str, mut attempt: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        let err = match attempt().await {
            Err(Error::Unavailable(err) | Error::Internal(err)) => err,
            other => return other,
        };
        let failure = classify(&err);
        let again = match failure {
            Failure::Conflict => tries < MAX_ATTEMPTS,
            Failure::ConnectionLost => tries < 2,
            Failure::Unavailable | Failure::Other => false,
        };
        if !again {
            return Err(Error::from(err));
        }
        tracing::warn!(operation, attempt = tries, ?failure, error = %err, "retrying transaction");
        // Spread competitors apart so they do not collide again in step.
        let jitter = rand::random_range(0..10u64);
        tokio::time::sleep(Duration::from_millis(5 * u64::from(tries) + jitter)).await;
    }
}
