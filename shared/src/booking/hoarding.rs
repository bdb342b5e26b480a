//! Watching for hoarding (SPEC §16, OWASP OAT-021's "monitoring of holds
//! never converted"): the holds that ended unconfirmed at their expiry,
//! and the bookings their own clients cancelled (SPEC §23.8: hold, confirm
//! and cancel in a loop), counted once each and reported by the sweeper,
//! per client.
//!
//! A report covers `(reported_until, now − SETTLED]` and moves
//! `sweep_reports.reported_until` to its end, under that row's lock: two
//! sweeps that overlap take turns, and every expiry falls in exactly one
//! window, and every cancellation too (by its `cancelled_at`, which a
//! cancel reads after its locks and commits within its deadline). The
//! window trails now by [`SETTLED`]: a confirm or an extension that
//! decided "still active" just before an expiry may commit after it (a
//! plain read of that hold is not final meanwhile), but never later than
//! its deadline.

use super::Booking;
use crate::db;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Connection, MySqlConnection};

/// Longer than any transaction may run (`db::OPERATION_DEADLINE`).
pub const SETTLED_SECS: u32 = 30;
/// How far back one report looks at most (a first run, or after a pause):
/// a bound on its cost; older expiries go unreported.
pub const LONGEST_WINDOW_SECS: u32 = 3600;
/// The clients named in the report's line.
pub const TOP: usize = 10;

/// What a report found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Hoarding {
    pub holds: u64,
    pub seats: u64,
    /// The clients with the most seats expired unconfirmed, most first.
    pub top: Vec<ClientExpired>,
    /// Bookings cancelled by their own clients (SPEC §23.8), and their
    /// seats (`SeatsCancelledAfterConfirm`).
    pub cancelled: u64,
    pub cancelled_seats: u64,
    /// The clients with the most seats in such cancellations, most first.
    pub top_cancelled: Vec<ClientExpired>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ClientExpired {
    pub client_id: u64,
    pub holds: i64,
    pub seats: i64,
}

/// The lock first, reading no clock.
const LOCK: &str = "SELECT reported_until FROM sweep_reports WHERE id = 1 FOR UPDATE";
/// After the lock: the window's end, and its start, no older than the
/// longest window.
const WINDOW: &str = "SELECT UTC_TIMESTAMP(6) - INTERVAL ? SECOND, \
     GREATEST(?, UTC_TIMESTAMP(6) - INTERVAL ? SECOND)";
/// Holds whose expiry falls in the window and that were never confirmed:
/// still `held`, or cancelled after they had expired (a cancel of an
/// expired hold must not hide it). Two ranges of `(status, expires_at)`.
const EXPIRED: &str = "SELECT client_id, COUNT(*) AS holds, CAST(SUM(quantity) AS SIGNED) AS seats \
     FROM holds FORCE INDEX (holds_status_expires_at_index) \
     WHERE status IN ('held', 'cancelled') AND expires_at > ? AND expires_at <= ? \
     AND (status = 'held' OR cancelled_at > expires_at) \
     GROUP BY client_id ORDER BY seats DESC, client_id";
/// Bookings their own clients cancelled in the window: `counts_until` is
/// set for those alone (`cancel.rs`). One range of `cancelled_at`.
const CANCELLED: &str = "SELECT client_id, COUNT(*) AS holds, CAST(SUM(quantity) AS SIGNED) AS seats \
     FROM holds FORCE INDEX (holds_cancelled_at_index) \
     WHERE cancelled_at > ? AND cancelled_at <= ? AND counts_until IS NOT NULL \
     GROUP BY client_id ORDER BY seats DESC, client_id";
const MOVE: &str = "UPDATE sweep_reports SET reported_until = ? WHERE id = 1";

impl Booking {
    /// The holds that expired unconfirmed since the last report, and moves
    /// the report on. Run by the sweeper, after its slots.
    pub async fn hoarding_report(&self) -> Result<Hoarding, Error> {
        db::transact!(&self.pool, "hoarding report", self.deadline(), |conn| {
            report_once(&mut conn).await
        })
    }
}

async fn report_once(conn: &mut MySqlConnection) -> Result<Hoarding, Error> {
    let mut tx = conn.begin().await?;
    let Some(reported_until) = sqlx::query_scalar::<_, DateTime<Utc>>(LOCK)
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(Hoarding::default());
    };
    let (until, after): (DateTime<Utc>, DateTime<Utc>) = sqlx::query_as(WINDOW)
        .bind(SETTLED_SECS)
        .bind(reported_until)
        .bind(LONGEST_WINDOW_SECS + SETTLED_SECS)
        .fetch_one(&mut *tx)
        .await?;
    if until <= after {
        return Ok(Hoarding::default());
    }
    let clients: Vec<ClientExpired> = sqlx::query_as(EXPIRED)
        .bind(after)
        .bind(until)
        .fetch_all(&mut *tx)
        .await?;
    let cancelled: Vec<ClientExpired> = sqlx::query_as(CANCELLED)
        .bind(after)
        .bind(until)
        .fetch_all(&mut *tx)
        .await?;
    sqlx::query(MOVE).bind(until).execute(&mut *tx).await?;
    tx.commit().await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(Hoarding {
        holds: clients.iter().map(|c| count(c.holds)).sum(),
        seats: clients.iter().map(|c| count(c.seats)).sum(),
        top: clients.into_iter().take(TOP).collect(),
        cancelled: cancelled.iter().map(|c| count(c.holds)).sum(),
        cancelled_seats: cancelled.iter().map(|c| count(c.seats)).sum(),
        top_cancelled: cancelled.into_iter().take(TOP).collect(),
    })
}
