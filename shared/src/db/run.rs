//! Running one operation of the service: on a connection of its own,
//! again when InnoDB aborted it or its connection died, and never past the
//! request's deadline.

use super::{Failure, classify};
use crate::error::Error;
use sqlx::pool::PoolConnection;
use sqlx::{MySql, MySqlPool};
use std::future::Future;
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// How often a whole transaction is attempted when it conflicts.
const MAX_ATTEMPTS: u32 = 4;

/// How long one operation, all its attempts included, may take when its
/// caller gave no deadline of its own. Every wait the server bounds
/// (acquire 3 s, lock wait 3 s) ends well before; it stays under the
/// function timeout (`template.yaml`, 10 s).
pub const OPERATION_DEADLINE: Duration = Duration::from_secs(8);

/// Runs `attempt` (a whole transaction, or a read, written with the
/// connection `conn`) on a connection of `pool`, again if InnoDB aborted
/// it (deadlock) or the connection died under it, a bounded number of
/// times; then the failure becomes [`Error::Unavailable`] (503, safe to
/// retry). An attempt whose connection died may have committed unseen:
/// running it again must not apply it twice, nor refuse what it did. Each
/// operation either recognises its own committed change when run again
/// (the booking operations) or is never run again once a statement that
/// may commit was sent (slot and client administration), and answers
/// `Error::OutcomeUnknown` when its final failure came after such a
/// statement (docs/DESIGN.md, "Retried after an unseen COMMIT").
///
/// Nothing runs past `deadline` (the request's: the function must answer
/// before Lambda's timeout kills it, or API Gateway answers with its own
/// bare error). This bounds the waits nothing else does: a network gone
/// silent mid-statement never errors (no read timeout; TCP gives up after
/// minutes). An attempt cut short is abandoned (its transaction never
/// commits unless COMMIT had already been sent) and its connection is
/// **discarded, not returned to the pool**: sqlx would test it with a ping
/// on its way back, and a connection abandoned mid-statement can leave
/// that ping waiting for ever, holding the environment's only connection
/// (every later request then waited 3 s for it and answered 503).
///
/// A macro rather than a function taking a closure: the attempt borrows
/// the connection, and a closure over a borrowed connection cannot be
/// proven `Send` for every lifetime (which spawned tasks need).
///
/// ```ignore
/// let rows = db::transact!(&self.pool, "availability", deadline, |conn| {
///     sqlx::query_as(SQL).fetch_all(&mut **conn).await
/// })?;
/// ```
macro_rules! transact {
    ($pool:expr, $operation:expr, $deadline:expr, |$conn:ident| $attempt:expr) => {
        async {
            let mut run = $crate::db::Run::new($operation, $deadline);
            loop {
                let mut $conn = run.connect($pool).await?;
                let outcome = run.bounded(async { $attempt }).await;
                if let Some(done) = run.settle($conn, outcome).await? {
                    break Ok::<_, $crate::error::Error>(done);
                }
            }
        }
        .await
    };
}
pub(crate) use transact;

/// The state of one [`transact!`]: its deadline and attempts so far.
pub struct Run {
    operation: &'static str,
    deadline: Instant,
    tries: u32,
    /// This attempt's connection had its statement time limit lowered to
    /// fit the deadline (`limit.rs`): it is closed after the attempt.
    lowered: bool,
}

impl Run {
    pub fn new(operation: &'static str, deadline: Instant) -> Self {
        Self {
            operation,
            deadline,
            tries: 0,
            lowered: false,
        }
    }

    /// A connection for the next attempt, whose statements the server
    /// stops before the deadline (`limit.rs`). sqlx's acquire is safe to
    /// abandon: a connection it was opening or testing is closed.
    pub async fn connect(&mut self, pool: &MySqlPool) -> Result<PoolConnection<MySql>, Error> {
        self.tries += 1;
        let fitted = async {
            let mut conn = pool.acquire().await?;
            // Measured once connected: the acquire may have taken a while.
            let Some(left) = super::limit::left(self.deadline) else {
                return Ok(None);
            };
            self.lowered = super::limit::fit(&mut conn, left).await?;
            Ok::<_, sqlx::Error>(Some(conn))
        };
        match timeout_at(self.deadline, fitted).await {
            Ok(Ok(Some(conn))) => Ok(conn),
            Ok(Err(err)) => Err(Error::from(err)),
            Ok(Ok(None)) | Err(_) => Err(out_of_time(self.operation)),
        }
    }

    /// The attempt, cut at the deadline (`None`).
    pub async fn bounded<T>(
        &self,
        attempt: impl Future<Output = Result<T, Error>>,
    ) -> Option<Result<T, Error>> {
        timeout_at(self.deadline, attempt).await.ok()
    }

    /// What the attempt's outcome means: done (`Some`), or try again
    /// (`None`, after a pause), or the final error. The connection of an
    /// attempt that was cut short or lost is discarded.
    pub async fn settle<T>(
        &mut self,
        conn: PoolConnection<MySql>,
        outcome: Option<Result<T, Error>>,
    ) -> Result<Option<T>, Error> {
        let mut conn = Some(conn);
        if self.lowered {
            // Never pooled with a limit that fits this request only.
            discard(conn.take());
        }
        let err = match outcome {
            None => {
                discard(conn);
                return Err(out_of_time(self.operation));
            }
            Some(Err(Error::Unavailable(err) | Error::Internal(err))) => err,
            Some(other) => return other.map(Some),
        };
        let failure = classify(&err);
        if failure == Failure::ConnectionLost {
            discard(conn);
        }
        let again = match failure {
            Failure::Conflict => self.tries < MAX_ATTEMPTS,
            Failure::ConnectionLost => self.tries < 2,
            Failure::Unavailable | Failure::Other => false,
        };
        if !again {
            return Err(Error::from(err));
        }
        // Deadlocks and lock waits are routine under contention and handled
        // here: counted (`Retries`, its alarm) and told at INFO. The 503 once
        // retries run out is the ERROR.
        tracing::info!(operation = self.operation, attempt = self.tries, ?failure, error = %err, "retrying transaction");
        crate::telemetry::count(crate::telemetry::Metric::Retries, 1);
        // Spread competitors apart so they do not collide again in step.
        let jitter = rand::random_range(0..10u64);
        let pause = Duration::from_millis(5 * u64::from(self.tries) + jitter);
        if Instant::now() + pause >= self.deadline {
            return Err(out_of_time(self.operation));
        }
        tokio::time::sleep(pause).await;
        Ok(None)
    }
}

/// `work` by `deadline`, else [`Error::Unavailable`]. For work that holds
/// no database connection of its own (e.g. the cache's waits around
/// [`transact`]).
pub async fn within<T>(
    operation: &'static str,
    deadline: Instant,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    timeout_at(deadline, work)
        .await
        .unwrap_or_else(|_| Err(out_of_time(operation)))
}

/// Closes the socket at once: the server rolls back whatever was open.
fn discard(conn: Option<PoolConnection<MySql>>) {
    if let Some(conn) = conn {
        drop(conn.detach());
    }
}

fn out_of_time(operation: &'static str) -> Error {
    tracing::error!(operation, "no answer before the request's deadline");
    Error::Unavailable(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer before the request's deadline",
    )))
}
