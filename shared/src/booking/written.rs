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

use crate::domain::Hold;
use crate::error::Error;
use crate::events::EventType;
use sqlx::MySqlConnection;

/// The hold as read after this request's change, before its COMMIT.
#[derive(Debug, Default)]
pub(super) struct Written(Option<Hold>);

impl Written {
    pub(super) fn record(&mut self, hold: &Hold) {
        self.0 = Some(hold.clone());
    }

    /// The earlier attempt's new hold, if `found` is it: only that
    /// attempt's INSERT made the row with its id (ids are never reused),
    /// so finding it means that COMMIT happened.
    pub(super) fn created(&self, found: &Hold) -> Option<Hold> {
        self.0.clone().filter(|hold| hold.id == found.id)
    }

    /// The earlier attempt's confirmation, if `found` carries it: a hold
    /// is confirmed at most once, and `confirmed_at` (a now from under the
    /// slot's lock, to the microsecond) tells whose confirmation it was.
    pub(super) fn confirmed(&self, found: &Hold) -> Option<Hold> {
        self.0.clone().filter(|hold| {
            hold.id == found.id
                && hold.confirmed_at.is_some()
                && hold.confirmed_at == found.confirmed_at
        })
    }

    /// The earlier attempt's cancellation, if `found` carries it: as for
    /// [`Self::confirmed`], by `cancelled_at`.
    pub(super) fn cancelled(&self, found: &Hold) -> Option<Hold> {
        self.0.clone().filter(|hold| {
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
        self.0
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
        let Some(mine) = &self.0 else {
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
        self.0.as_ref()
    }

    /// The final error of an operation whose COMMIT may have been sent (an
    /// attempt recorded its change, and no later attempt could tell): not
    /// "nothing was written" but [`Error::OutcomeUnknown`]. The deadline
    /// cut it, the pool had no connection for the retry, or the retries
    /// ran out.
    pub(super) fn unknown_if_sent(&self, err: Error) -> Error {
        crate::db::unknown_if(self.0.is_some(), err)
    }
}

/// The change's event, by its owner's index (events have none by hold).
const ANNOUNCED: &str = "SELECT 1 FROM events WHERE client_id = ? AND hold_id = ? \
     AND type = ? AND occurred_at = ? LIMIT 1";
