//! The sequential model of one slot, from SPEC §4 and §9 — or of a few,
//! when moves (§17) join them — what each call must answer when it takes
//! effect at instant `t`, and the state it leaves.
//!
//! The state is each idempotency key's hold: its status (unused, held,
//! confirmed, cancelled), its `expires_at` and the slot it is on. A held
//! hold is active at `t` while `t < expires_at`; a slot's bookable at `t`
//! is its `capacity − confirmed − active`, counting the holds on it. A
//! join's key also has its waiting-list entry (§18), and the hold offered
//! to it (`line.rs`). Hold ids are not part of the state: one key has one hold, so
//! the id ↔ key correspondence is a fact of the whole history, checked
//! once before the search, and so is each hold's `created_at` (see
//! `partition.rs`). The state holds no clock: the instant is the search's
//! choice, inside the call's interval (see `check.rs`).

use super::Rules;
use super::line::ELSEWHERE;
use super::model::{EntryStatus, Expected, Kind, NEVER, Observed, Status, ms};

/// One key's hold in the model, and its waiting-list entry (SPEC §18):
/// a join's key holds the hold offered to its entry, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub status: Status,
    /// `NEVER` while unused, or when no answer gave a time.
    pub expires: u64,
    /// The slot it is on, by its index in [`Slot::capacities`] (0 while
    /// unused).
    pub at: u16,
    pub entry: EntryStatus,
    /// The slot of its entry's line (0 while it has none).
    pub entry_at: u16,
    /// Its entry's arrival: how many of the partition's joins came first.
    pub joined: u16,
}

/// The keys' holds, by key index.
pub type State = Vec<Key>;

/// The slots of one partition of the model: one, unless moves join some.
#[derive(Debug, Clone)]
pub struct Slot {
    /// Each slot's capacity, by its index in the partition.
    pub capacities: Vec<u32>,
    pub rules: Rules,
    /// Each key's `created_at`, when some answer showed it.
    pub created: Vec<Option<u64>>,
}

impl Slot {
    /// One slot of `capacity`, with a key per entry of `created`.
    #[cfg(test)]
    pub fn single(capacity: u32, rules: Rules, created: Vec<Option<u64>>) -> Self {
        Self {
            capacities: vec![capacity],
            rules,
            created,
        }
    }

    pub fn initial(&self) -> State {
        let unused = Key {
            status: Status::Unused,
            expires: NEVER,
            at: 0,
            entry: EntryStatus::None,
            entry_at: 0,
            joined: 0,
        };
        vec![unused; self.created.len()]
    }

    pub fn active(key: Key, t: u64) -> bool {
        key.status == Status::Held && t < key.expires
    }

    /// What slot `at` has bookable at `t`.
    pub fn bookable(&self, state: &State, at: u16, t: u64) -> i64 {
        let taken = state
            .iter()
            .filter(|k| k.at == at && (k.status == Status::Confirmed || Self::active(**k, t)))
            .count();
        i64::from(self.capacities[usize::from(at)]) - i64::try_from(taken).unwrap_or(i64::MAX)
    }

    /// Where a hold of `key` made at `t` expires: `created_at + HOLD_TTL`
    /// (one now in the service's INSERT), `t + HOLD_TTL` when no answer
    /// showed `created_at`, never when the answers carry no times.
    pub(super) fn new_expiry(&self, key: usize, t: u64, timed: bool) -> u64 {
        match self.created[key] {
            Some(created) => created.saturating_add(self.rules.ttl),
            None if timed => t.saturating_add(self.rules.ttl),
            None => NEVER,
        }
    }

    /// The latest `expires_at` an extension may set (SPEC §9).
    fn cap(&self, key: usize) -> u64 {
        self.created[key].map_or(NEVER, |c| c.saturating_add(self.rules.max_lifetime))
    }

    /// The model's answer to `kind` on `key` in `state` at instant `t`
    /// of a call that may act during `window`, and the state after.
    /// `timed`: the history's answers carry times.
    pub fn apply(
        &self,
        state: &State,
        kind: Kind,
        key: usize,
        (t, window): (u64, (u64, u64)),
        timed: bool,
    ) -> (Expected, State) {
        use Status::*;
        if matches!(kind, Kind::Join(_) | Kind::Leave | Kind::Entry) {
            return self.apply_line(state, kind, key, (t, window), timed);
        }
        let current = state[key];
        let mut next = state.clone();
        let answer = |status, expires| Expected::Hold {
            code: 200,
            status,
            expires,
            at: current.at,
        };
        let refused = |reason| Expected::Error { code: 409, reason };
        let expired = current.status == Held && current.expires <= t;
        let expected = match (kind, current.status) {
            // Strict: a key's first use answers 201, also when the service
            // retried it after a lost COMMIT answer (it finds its own hold
            // and answers as the lost answer would have). Nobody jumps the
            // line (SPEC §18): what is free goes to it first, and a
            // refusal keeps those offers.
            (Kind::Hold(on), Unused) if !self.offer(&mut next, on, t, window, timed) => {
                next = state.clone();
                Expected::Impossible(ELSEWHERE)
            }
            (Kind::Hold(on), Unused) => {
                if self.bookable(&next, on, t) > 0 {
                    next[key] = Key {
                        status: Held,
                        expires: self.new_expiry(key, t, timed),
                        at: on,
                        ..current
                    };
                    Expected::Hold {
                        code: 201,
                        status: Held,
                        expires: next[key].expires,
                        at: on,
                    }
                } else {
                    refused("capacity_exhausted")
                }
            }
            // A replay answers the key's hold whatever its state now, if it
            // names the slot the hold is on; any other slot is another
            // fingerprint (SPEC §9), also after a move took it away.
            (Kind::Hold(on), _) if current.at != on => Expected::Error {
                code: 422,
                reason: "idempotency_key_reuse",
            },
            (Kind::Hold(_), status) => answer(status, current.expires),
            // Callers only name ids some answer gave; "not yet" is a 404.
            (_, Unused) => Expected::Error {
                code: 404,
                reason: "not_found",
            },
            // SPEC §17's order: cancelled, expired, (missing, started: no
            // slot of a run is either), the slot it is on (unchanged), the
            // target's seats, after the target's line had what fits it; the
            // hold keeps its status and expiry, and the old slot's line gets
            // what is free there. A refusal changes nothing.
            (Kind::Move(_), Cancelled) => refused("hold_cancelled"),
            (Kind::Move(_), Held) if expired => refused("hold_expired"),
            (Kind::Move(to), status) if to == current.at => answer(status, current.expires),
            (Kind::Move(to), status) => {
                let fits = self.offer(&mut next, to, t, window, timed);
                if self.bookable(&next, to, t) > 0 {
                    next[key].at = to;
                    if fits & self.offer(&mut next, current.at, t, window, timed) {
                        Expected::Hold {
                            code: 200,
                            status,
                            expires: current.expires,
                            at: to,
                        }
                    } else {
                        next = state.clone();
                        Expected::Impossible(ELSEWHERE)
                    }
                } else {
                    next = state.clone();
                    refused("capacity_exhausted")
                }
            }
            (Kind::Confirm, Held) if expired => refused("hold_expired"),
            (Kind::Confirm, Held | Confirmed) => {
                // An active hold occupies a seat, so confirming it always
                // finds one: 409 capacity_exhausted here is an oversell.
                // An offer confirmed fulfils its entry.
                next[key].status = Confirmed;
                if current.entry == EntryStatus::Offered {
                    next[key].entry = EntryStatus::Fulfilled;
                }
                answer(Confirmed, current.expires)
            }
            (Kind::Confirm | Kind::Extend, Cancelled) => refused("hold_cancelled"),
            (Kind::Cancel, Cancelled) => answer(Cancelled, current.expires),
            (Kind::Cancel, _) => {
                // An offer cancelled ends its entry; what is free goes to
                // the slot's line in the same transaction.
                next[key].status = Cancelled;
                if current.entry == EntryStatus::Offered {
                    next[key].entry = EntryStatus::Expired;
                }
                if self.offer(&mut next, current.at, t, window, timed) {
                    answer(Cancelled, current.expires)
                } else {
                    next = state.clone();
                    Expected::Impossible(ELSEWHERE)
                }
            }
            // SPEC §15.8's order: confirmed, cancelled, expired, (started:
            // no slot of a run starts), then the lifetime cap.
            (Kind::Extend, Confirmed) => refused("hold_confirmed"),
            (Kind::Extend, Held) if expired => refused("hold_expired"),
            (Kind::Read, status) => answer(status, current.expires),
            (Kind::Join(_) | Kind::Leave | Kind::Entry, _) => unreachable!("the line's own"),
            (Kind::Extend, Held) => {
                let to = t.saturating_add(self.rules.ttl).min(self.cap(key));
                if to <= current.expires {
                    refused("extension_limit_reached")
                } else {
                    next[key].expires = to;
                    answer(Held, to)
                }
            }
        };
        (expected, next)
    }

    /// The state after a call that answered `observed` at `t` (of its
    /// `window`), if the model allows that answer then. A call whose
    /// outcome is unknown may have acted: here it does; the search may
    /// also leave it out.
    pub fn step(
        &self,
        state: &State,
        kind: Kind,
        key: usize,
        at: (u64, (u64, u64)),
        observed: &Observed,
    ) -> Option<State> {
        let timed = !matches!(observed, Observed::Hold { expires: None, .. });
        let (expected, next) = self.apply(state, kind, key, at, timed);
        match observed {
            // SPEC §16: the client's cap, decided after the slot's own
            // checks (§19.1), so only where the slot would have granted
            // the hold (its offers rolled back with it, wherever their
            // holds came from); it changes nothing here. Whether the
            // client was over its cap is `caps.rs`'s to check.
            Observed::Error { code: 409, reason } if reason == "hold_limit_reached" => {
                let (granted, _) = self.apply(state, kind, key, (at.0, (0, u64::MAX)), timed);
                matches!(granted, Expected::Hold { code: 201, .. }).then(|| state.clone())
            }
            _ if matches!(expected, Expected::Impossible(_)) => None,
            Observed::Unknown => Some(next),
            observed if expected.matches(observed) => Some(next),
            _ => None,
        }
    }

    /// Instants at which `kind` on `key` may start to answer otherwise or
    /// leave another state: every expiry in `state` (a hold stops counting
    /// there), and for an extension, where its limit stops biting, where
    /// the cap starts to, and where it lands on each expiry in `shown` (the
    /// ones the key's answers show). Between two of them, and after the
    /// last, the answer and the state after are the same.
    pub fn turning_points(&self, state: &State, kind: Kind, key: usize, shown: &[u64]) -> Vec<u64> {
        let mut points: Vec<u64> = state.iter().map(|k| k.expires).collect();
        if kind == Kind::Extend {
            let ttl = self.rules.ttl;
            points.push(state[key].expires.saturating_sub(ttl).saturating_add(1));
            points.push(self.cap(key).saturating_sub(ttl));
            points.extend(shown.iter().map(|e| e.saturating_sub(ttl)));
        }
        points
    }

    pub fn describe(state: &State) -> String {
        state
            .iter()
            .enumerate()
            .filter(|(_, k)| k.status != Status::Unused || k.entry != EntryStatus::None)
            .map(|(i, k)| {
                let entry = match k.entry {
                    EntryStatus::None => String::new(),
                    status => format!("[entry@{} {} #{}] ", k.entry_at, status.as_str(), k.joined),
                };
                let hold = match k.status {
                    Status::Unused => String::new(),
                    Status::Held if k.expires != NEVER => {
                        format!("@{}:held until {}", k.at, ms(k.expires))
                    }
                    status => format!("@{}:{}", k.at, status.as_str()),
                };
                format!("k{i}{entry}{hold}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}
