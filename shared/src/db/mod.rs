//! MySQL pool set-up, embedded migrations, and the classification of
//! database failures into "retry the transaction" and "unavailable".

use crate::error::Error;
use crate::secret::Secret;
use sqlx::migrate::Migrator;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlDatabaseError, MySqlPoolOptions};
use sqlx::{ConnectOptions, Executor, MySqlPool};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// The schema, embedded in every binary that needs it.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// How long a request may wait for a connection (including connecting):
/// a database that is down answers 503 well inside the function timeout.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Run on every new connection.
/// - `innodb_lock_wait_timeout`: the server default (50 s) outlives any
///   Lambda timeout; a row lock held for 3 s means something is wrong, and
///   the client is better served by a prompt 503.
/// - REPEATABLE READ, whatever the server's default: the proof
///   (docs/DESIGN.md) relies on it. Under READ COMMITTED a conditional
///   UPDATE that matches no row releases its row lock at once, and a plain
///   read sees rows committed after the transaction's first read.
const SESSION_SETUP: [&str; 2] = [
    "SET SESSION innodb_lock_wait_timeout = 3",
    "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
];

/// Builds a pool that connects on first use, so a cold start never fails
/// because the database is briefly away.
///
/// A Lambda execution environment serves one request at a time: one or two
/// connections are enough, reused across invocations. Each connection is
/// pinged before it is handed out, so a connection that died while the
/// environment was frozen (or was killed by the server) is replaced instead
/// of failing the request.
pub fn connect_lazy(database_url: &str, max_connections: u32) -> Result<MySqlPool, sqlx::Error> {
    Ok(connect_lazy_with(
        url_options(database_url)?,
        max_connections,
    ))
}

/// [`connect_lazy`] with options already built (e.g. with a password from
/// Secrets Manager added).
pub fn connect_lazy_with(options: MySqlConnectOptions, max_connections: u32) -> MySqlPool {
    pool_options(max_connections).connect_lazy_with(options)
}

/// Connect options from a `mysql://` URL.
pub fn url_options(database_url: &str) -> Result<MySqlConnectOptions, sqlx::Error> {
    Ok(MySqlConnectOptions::from_str(database_url)?
        // All times are UTC; sqlx sets this already, say it anyway.
        .timezone(Some(String::from("+00:00"))))
}

/// Options for `database_url` with `password` (if any) added.
pub fn options_with_password(
    database_url: &str,
    password: Option<&Secret>,
) -> Result<MySqlConnectOptions, sqlx::Error> {
    let options = url_options(database_url)?;
    Ok(match password {
        Some(password) => options.password(password.expose()),
        None => options,
    })
}

/// Connects one connection, trying again with back-off until `budget` has
/// passed: a new RDS Proxy target, or an Aurora Serverless writer that is
/// resuming, can refuse connections for minutes. Errors that waiting cannot
/// fix (wrong password, unknown database, bad certificate) end it at once.
///
/// The returned error is the last one; it carries no password (sqlx never
/// prints the options).
pub async fn connect_with_retry(
    options: &MySqlConnectOptions,
    budget: Duration,
) -> Result<MySqlConnection, sqlx::Error> {
    let deadline = Instant::now() + budget;
    let mut delay = Duration::from_millis(250);
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let limit = CONNECT_ATTEMPT_TIMEOUT.min(remaining.max(Duration::from_secs(2)));
        let err = match tokio::time::timeout(limit, options.connect()).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(err)) => err,
            Err(_) => sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {} s", limit.as_secs()),
            )),
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        if !worth_waiting_for(&err) || remaining.is_zero() {
            return Err(err);
        }
        let pause = delay.min(remaining);
        tracing::warn!(
            attempt,
            error = %err,
            retry_in_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
            "database not reachable yet, retrying"
        );
        tokio::time::sleep(pause).await;
        delay = (delay * 2).min(Duration::from_secs(15));
    }
}

/// One connection attempt may take this long (TLS handshake included).
const CONNECT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// True for failures that may go away by themselves: the network, and the
/// server (or RDS Proxy, whose own errors are 9xxx) not ready yet. Wrong
/// credentials, an unknown database, a bad certificate or a bad setting
/// will not, and end the retries at once.
fn worth_waiting_for(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => match db.try_downcast_ref::<MySqlDatabaseError>() {
            // Access denied (user, database), unknown database, auth
            // plugin refused or unsupported.
            Some(my) => !matches!(my.number(), 1044 | 1045 | 1049 | 1251 | 1698),
            None => true,
        },
        _ => false,
    }
}

fn pool_options(max_connections: u32) -> MySqlPoolOptions {
    MySqlPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(0)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(true)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                for statement in SESSION_SETUP {
                    conn.execute(statement).await?;
                }
                limit::start(conn).await
            })
        })
}

/// What to do about a failed database call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Deadlock (1213) or, on MariaDB ≥ 11.6 with snapshot isolation,
    /// "record has changed since last read" (1020): InnoDB rolled the
    /// transaction back; running it again is the documented remedy. Also
    /// "failed to read auto-increment value" (1467): a wait for a table's
    /// AUTO-INC lock that ended in a deadlock (or its timeout). No
    /// statement of ours takes that lock (docs/DESIGN.md, "The implicit
    /// locks"); an operator's `INSERT … SELECT` still can.
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
                1213 | 1020 | 1467 => Failure::Conflict,
                // Killed (MariaDB 1927, MySQL 1317 "query interrupted"),
                // gone away, lost during query, shutting down.
                1927 | 1317 | 2006 | 2013 | 1053 | 4031 => Failure::ConnectionLost,
                // Lock wait timeout, too many connections, access denied,
                // server out of resources; a statement stopped by its time
                // limit (MariaDB 1969, MySQL 3024: `limit.rs`).
                1205 | 1040 | 1203 | 1045 | 1041 | 1969 | 3024 => Failure::Unavailable,
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

/// A failure the database may recover from is a 503; anything else is a
/// bug or a schema problem (500).
impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        if is_unavailable(&err) {
            Self::Unavailable(err)
        } else {
            Self::Internal(err)
        }
    }
}

/// The error of a statement that may have committed (a COMMIT, or an
/// autocommitted write) and that its operation cannot recognise as done
/// when run again: a lost connection is [`Error::OutcomeUnknown`], which
/// `transact!` never retries (docs/DESIGN.md, "Retried after an unseen
/// COMMIT").
pub fn unknown_if_lost(err: sqlx::Error) -> Error {
    if classify(&err) == Failure::ConnectionLost {
        Error::OutcomeUnknown(err)
    } else {
        Error::from(err)
    }
}

/// The final error of an operation, given whether a statement that may
/// have committed was sent (`sent`): then "unavailable, nothing written"
/// is not known, and the answer is [`Error::OutcomeUnknown`].
pub fn unknown_if(sent: bool, err: Error) -> Error {
    match err {
        Error::Unavailable(cause) if sent => Error::OutcomeUnknown(cause),
        other => other,
    }
}

/// True when the statement failed on a UNIQUE index (MySQL 1062).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

pub(crate) mod counter;
#[macro_use]
mod deadline;
mod limit;
#[cfg(test)]
pub(crate) mod procedure;
mod run;
mod tx;
pub use deadline::{DEFAULT_BUDGET, Deadline};
pub use limit::{CEILING as STATEMENT_CEILING, MARGIN as STATEMENT_MARGIN, fit, left};
pub(crate) use run::transact;
pub use run::{OPERATION_DEADLINE, Run, within};
pub use tx::Tx;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_goes_into_the_options_and_the_proxys_tls_mode_is_kept() {
        let url = "mysql://slot%20admin@sb.proxy-abc.eu-west-1.rds.amazonaws.com:3306/slot_booking\
             ?ssl-mode=VERIFY_IDENTITY";
        let options = options_with_password(url, Some(&Secret::new("p@ss:w/rd"))).unwrap();
        assert_eq!(options.get_username(), "slot admin");
        assert!(matches!(
            options.get_ssl_mode(),
            sqlx::mysql::MySqlSslMode::VerifyIdentity
        ));
    }

    #[test]
    fn only_passing_failures_are_waited_for() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(worth_waiting_for(&sqlx::Error::Io(refused)));
        assert!(worth_waiting_for(&sqlx::Error::PoolTimedOut));
        assert!(!worth_waiting_for(&sqlx::Error::Tls(
            "bad certificate".into()
        )));
        assert!(!worth_waiting_for(&sqlx::Error::Configuration(
            "bad url".into()
        )));
    }
}
