//! What an attempt wrote, known before its COMMIT was sent.
//!
//! `db::transact!` runs an attempt again when its connection died, and a
//! connection can die after the COMMIT was sent (its answer lost, or a
//! `KILL` landing just after the procedure's COMMIT). The attempt that
//! runs again must then find the change done and answer as the lost
//! answer would have: never a second change, never a refusal. Each
//! booking operation records here the hold as it read it inside its
//! transaction after its change, just before committing; the next attempt
//! compares what it finds with that record (docs/DESIGN.md, "Retried after
//! an unseen COMMIT"). Nothing is recorded, and nothing compared, on an
//! attempt that is not a retry.

use crate::domain::{Hold, HoldStatus, RequestId};
use crate::error::Error;
use crate::events::EventType;
use futures_util::TryStreamExt;
use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::query::QueryAs;
use sqlx::{MySql, MySqlConnection};
// Atomic only to be shared by reference across an await (Sync).
use std::sync::atomic::{AtomicBool, Ordering};

/// The hold as read after this request's change, before its COMMIT, and
/// the request's number, which a change made by one CALL writes instead
/// (its row is known only from the CALL's answer).
#[derive(Debug)]
pub(super) struct Written {
    hold: Option<Hold>,
    /// The hold as the plain read found it, before a CALL that may confirm
    /// it: that CALL's row is known only from its answer.
    confirming: Option<Hold>,
    request: RequestId,
    called: AtomicBool,
    unanswered: AtomicBool,
}

impl Default for Written {
    fn default() -> Self {
        Self {
            hold: None,
            confirming: None,
            request: RequestId::random(),
            called: AtomicBool::new(false),
            unanswered: AtomicBool::new(false),
        }
    }
}

impl Written {
    pub(super) fn record(&mut self, hold: &Hold) {
        self.hold = Some(hold.clone());
    }

    /// A CALL that may confirm `read` is about to be sent: a retry that
    /// finds the confirmation answers it from this read ([`Self::confirmed`]).
    pub(super) fn confirming(&mut self, read: &Hold) {
        self.confirming = Some(read.clone());
    }

    /// This request's number, written by its change (`holds.created_by`,
    /// `holds.confirmed_by`).
    pub(super) fn request(&self) -> RequestId {
        self.request
    }

    /// A CALL that may commit this request's change is about to be sent.
    /// One sent by an earlier attempt and never answered may have
    /// committed: that stays so whatever this one's answer.
    pub(super) fn calling(&self) {
        if self.called.swap(true, Ordering::Relaxed) {
            self.unanswered.store(true, Ordering::Relaxed);
        }
    }

    /// The server answered this attempt's CALL: whether it committed is
    /// known (committed, its answer is the outcome).
    pub(super) fn answered(&self) {
        self.called.store(false, Ordering::Relaxed);
    }

    /// The earlier attempt's new hold, if `found` is it: that attempt's
    /// INSERT wrote this request's number into it (and made the row with
    /// its id: ids are never reused), so finding it means that COMMIT
    /// happened. The recorded row, if the attempt read it.
    pub(super) fn created(&self, found: &Hold) -> Option<Hold> {
        if found.created_by != Some(self.request) {
            return None;
        }
        let recorded = self.hold.clone().filter(|hold| hold.id == found.id);
        Some(recorded.unwrap_or_else(|| found.clone()))
    }

    /// The earlier attempt's confirmation, if `found` carries it: a hold
    /// is confirmed at most once, and `confirmed_by` tells whose
    /// confirmation it was. The recorded row, if the attempt read it;
    /// else the hold as that confirmation left it ([`Self::confirmation`]).
    pub(super) fn confirmed(&self, found: &Hold) -> Option<Hold> {
        if found.confirmed_by != Some(self.request) {
            return None;
        }
        let recorded = self.hold.clone().filter(|hold| hold.id == found.id);
        Some(recorded.unwrap_or_else(|| self.confirmation(found)))
    }

    /// The hold as this request's confirmation left it, never as `found`
    /// is now: the booking may have been cancelled or moved since, each
    /// another request's change, not this one's answer. The confirmation
    /// wrote `confirmed_at` and `updated_at` with one `now`, and nothing
    /// changes `expires_at` after it; the slot is the one the CALL
    /// confirmed it on, the plain read's.
    fn confirmation(&self, found: &Hold) -> Hold {
        let read = self.confirming.clone().filter(|read| read.id == found.id);
        Hold {
            status: HoldStatus::Confirmed,
            active: false,
            expires_at: found.expires_at,
            confirmed_at: found.confirmed_at,
            cancelled_at: None,
            updated_at: found.confirmed_at.unwrap_or(found.updated_at),
            confirmed_by: found.confirmed_by,
            ..read.unwrap_or_else(|| found.clone())
        }
    }

    /// The earlier attempt's cancellation, if `found` carries it: a hold
    /// is cancelled at most once, and `cancelled_at` (a now from under the
    /// slot's lock, to the microsecond) tells whose cancellation it was.
    pub(super) fn cancelled(&self, found: &Hold) -> Option<Hold> {
        self.hold.clone().filter(|hold| {
            hold.id == found.id
                && hold.cancelled_at.is_some()
                && hold.cancelled_at == found.cancelled_at
        })
    }

    /// The earlier attempt's change, if `found` is still as it left it:
    /// every change of a hold writes `updated_at` with a now from under the
    /// slot's lock, and the lock's intervals are disjoint, so no other
    /// change wrote this microsecond. A hold changed again since, or gone,
    /// is decided by [`Self::announced`].
    pub(super) fn unchanged(&self, found: &Hold) -> Option<Hold> {
        self.hold
            .clone()
            .filter(|hold| hold.id == found.id && hold.updated_at == found.updated_at)
    }

    /// The earlier attempt's change, if its event of `kind` committed: its
    /// `occurred_at` is the `updated_at` the change wrote. For a hold that
    /// changed again since the recorded one, or vanished with its slot;
    /// its answer is final once the earlier attempt's fate is settled
    /// (under the slot's lock it held, or after a later change that took
    /// that lock after it). Only a retry after a lost connection asks: by
    /// the owner's index, every event of the owner kept by retention is a
    /// candidate (docs/DESIGN.md, "Retried after an unseen COMMIT").
    pub(super) async fn announced(
        &self,
        conn: &mut MySqlConnection,
        kind: EventType,
    ) -> Result<Option<Hold>, Error> {
        let Some(mine) = &self.hold else {
            return Ok(None);
        };
        let seen: Option<i64> = sqlx::query_scalar(ANNOUNCED)
            .bind(mine.client_id.0)
            .bind(mine.id.0)
            .bind(kind.as_str())
            .bind(mine.updated_at)
            .fetch_optional(conn)
            .await?;
        Ok(seen.map(|_| mine.clone()))
    }

    /// The recorded hold, if an attempt got as far as its COMMIT.
    pub(super) fn hold(&self) -> Option<&Hold> {
        self.hold.as_ref()
    }

    /// The final error of an operation whose COMMIT may have been sent (an
    /// attempt recorded its change, and no later attempt could tell): not
    /// "nothing was written" but [`Error::OutcomeUnknown`]. The deadline
    /// cut it, the pool had no connection for the retry, or the retries
    /// ran out.
    pub(super) fn unknown_if_sent(&self, err: Error) -> Error {
        crate::db::unknown_if(
            self.called.load(Ordering::Relaxed)
                || self.unanswered.load(Ordering::Relaxed)
                || self.hold.is_some(),
            err,
        )
    }
}

/// The change's event, by its owner's index (events have none by hold).
const ANNOUNCED: &str = "SELECT 1 FROM events WHERE client_id = ? AND hold_id = ? \
     AND type = ? AND occurred_at = ? LIMIT 1";

/// `call`, a CALL of a procedure that answers one row and then commits as
/// its last statement (`hold_place`, `hold_confirm`), its rows read as
/// they come: a server's error before any row was answered means the
/// COMMIT never ran, and so does a complete answer; anything else (the
/// connection lost, an error after the row: a time limit or a kill landing
/// on the COMMIT) leaves this request's change possibly committed, for its
/// retry to recognise by the request's number.
pub(super) async fn call<'q, T>(
    conn: &mut MySqlConnection,
    call: QueryAs<'q, MySql, T, MySqlArguments>,
    written: &Written,
) -> Result<Vec<T>, sqlx::Error>
where
    T: Send + Unpin + for<'r> sqlx::FromRow<'r, MySqlRow> + 'q,
{
    written.calling();
    let mut rows = Vec::new();
    let mut stream = call.fetch(conn);
    let failed = loop {
        match stream.try_next().await {
            Ok(Some(row)) => rows.push(row),
            Ok(None) => break None,
            Err(err) => break Some(err),
        }
    };
    drop(stream);
    match failed {
        None => {
            written.answered();
            Ok(rows)
        }
        Some(err @ sqlx::Error::Database(_)) if rows.is_empty() => {
            written.answered();
            Err(err)
        }
        Some(err) => Err(err),
    }
}
