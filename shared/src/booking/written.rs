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

    /// The earlier attempt's extension, if `found` is still as it left it:
    /// every change of a hold writes `updated_at` with a now from under the
    /// slot's lock, and the lock's intervals are disjoint, so no other
    /// change wrote this microsecond. (A hold changed again since is
    /// decided by its events: see `extend.rs`.)
    pub(super) fn extended(&self, found: &Hold) -> Option<Hold> {
        self.0
            .clone()
            .filter(|hold| hold.id == found.id && hold.updated_at == found.updated_at)
    }

    /// The recorded hold, whatever is found now.
    pub(super) fn hold(&self) -> Option<&Hold> {
        self.0.as_ref()
    }
}
