//! The model's waiting line (SPEC §18), one seat per entry as per hold:
//! first fit in arrival order is then the earliest waiting entry.
//!
//! Offers are made at the instant of the call that makes them, and only
//! by the calls that must: a hold, a join or a move (its target) offers
//! the line what is free before it decides, a cancel or a move (its old
//! slot) after it frees its seats; what is free then includes every hold
//! expired by that instant, as the service reclaims them first. A
//! refusal that rolls back (a join's, a move's) keeps no offer; a hold's
//! refusal keeps them. An offered hold is the entry's key's hold: it
//! expires its TTL after the offer (its `created_at`, when an answer
//! showed it), is confirmed (the entry `fulfilled`) or cancelled (the
//! entry `expired`) like any other. An offer whose hold expired ends when
//! some reclaim gives its seats back, which the model does not follow
//! where the line's offers do not depend on it: a read of it may then say
//! `offered` or `expired`. An offer's hold is made during the call that
//! offers (its `created_at` inside that call's interval, widened as the
//! call's instant is): that tells which calls may have made it.

use super::model::{EntryStatus, Expected, Kind, Status};
use super::slot::{Key, Slot, State};

/// Why a call cannot take effect where it would offer.
pub const ELSEWHERE: &str = "an offer whose hold another call made";

impl Slot {
    /// Offers what slot `at` has free at `t` to its line, first come
    /// first served, while both last, in a call that may act during
    /// `window`. `false`: some offer's hold was made outside it (its
    /// `created_at`, when an answer showed it), so by another call: the
    /// call cannot be one that keeps these offers.
    #[must_use]
    pub(super) fn offer(
        &self,
        state: &mut State,
        at: u16,
        t: u64,
        window: (u64, u64),
        timed: bool,
    ) -> bool {
        let mut fits = true;
        while self.bookable(state, at, t) > 0 {
            let first = state
                .iter()
                .enumerate()
                .filter(|(_, k)| k.entry == EntryStatus::Waiting && k.entry_at == at)
                .min_by_key(|(_, k)| k.joined)
                .map(|(i, _)| i);
            let Some(i) = first else { break };
            fits &= self.created[i].is_none_or(|c| window.0 <= c && c <= window.1);
            state[i] = Key {
                status: Status::Held,
                expires: self.new_expiry(i, t, timed),
                at,
                entry: EntryStatus::Offered,
                ..state[i]
            };
        }
        fits
    }

    /// The model's answer to a join, a leave or a read of `key`'s entry
    /// at `t`, and the state after.
    pub(super) fn apply_line(
        &self,
        state: &State,
        kind: Kind,
        key: usize,
        (t, window): (u64, (u64, u64)),
        timed: bool,
    ) -> (Expected, State) {
        let current = state[key];
        let unchanged = |expected| (expected, state.clone());
        match (kind, current.entry) {
            // The line has what is free first; seats left over after it
            // are for a hold (409 `seats_available`, rolled back).
            (Kind::Join(on), EntryStatus::None) => {
                let mut next = state.clone();
                let fits = self.offer(&mut next, on, t, window, timed);
                if self.bookable(&next, on, t) > 0 {
                    return unchanged(Expected::Error {
                        code: 409,
                        reason: "seats_available",
                    });
                }
                if !fits {
                    return unchanged(Expected::Impossible(ELSEWHERE));
                }
                let joined = state
                    .iter()
                    .filter(|k| k.entry != EntryStatus::None)
                    .count();
                next[key] = Key {
                    entry: EntryStatus::Waiting,
                    entry_at: on,
                    joined: u16::try_from(joined).unwrap_or(u16::MAX),
                    ..current
                };
                (Self::entry_answer(&next, key, t, 201), next)
            }
            // A replay names the slot its entry is on, or is another
            // fingerprint.
            (Kind::Join(on), _) if current.entry_at != on => unchanged(Expected::Error {
                code: 422,
                reason: "idempotency_key_reuse",
            }),
            (_, EntryStatus::None) => unchanged(Expected::Error {
                code: 404,
                reason: "not_found",
            }),
            (Kind::Leave, EntryStatus::Waiting) => {
                let mut next = state.clone();
                next[key].entry = EntryStatus::Left;
                (Self::entry_answer(&next, key, t, 200), next)
            }
            // A replay, a read, a leave of an entry no longer waiting.
            _ => unchanged(Self::entry_answer(state, key, t, 200)),
        }
    }

    /// `key`'s entry as an answer of `code` shows it at `t`: a waiting
    /// one's position is 1 + the waiting entries ahead of it.
    fn entry_answer(state: &State, key: usize, t: u64, code: u16) -> Expected {
        let k = state[key];
        let position = (k.entry == EntryStatus::Waiting).then(|| {
            let ahead = state
                .iter()
                .filter(|o| {
                    o.entry == EntryStatus::Waiting
                        && o.entry_at == k.entry_at
                        && o.joined < k.joined
                })
                .count();
            u32::try_from(ahead + 1).unwrap_or(u32::MAX)
        });
        Expected::Entry {
            code,
            status: k.entry,
            position,
            at: k.entry_at,
            lapsed: k.entry == EntryStatus::Offered && k.status == Status::Held && k.expires <= t,
        }
    }
}
