//! The sequential model of one slot, from SPEC §4, with holds that never
//! expire during a run: what each call must answer in a given state, and
//! the state it leaves.
//!
//! A slot's state is the status of each idempotency key used on it
//! (unused, held, confirmed, cancelled); bookable is
//! `capacity − confirmed − held`. Hold ids are not part of the state: one
//! key has one hold, so the id ↔ key correspondence is a fact of the whole
//! history, checked once before the search (see `check.rs`).

use std::fmt;

/// The status of one key's hold; `Unused` until the key's first hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Unused,
    Held,
    Confirmed,
    Cancelled,
}

impl Status {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "held" => Some(Self::Held),
            "confirmed" => Some(Self::Confirmed),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unused => "unused",
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The operation of one call, on a key of the slot (by its index there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Hold,
    Confirm,
    Cancel,
}

/// What a call's answer said, reduced to what the model decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// 2xx with a hold resource in this status.
    Hold { code: u16, status: Status },
    /// An error: status code and reason.
    Error { code: u16, reason: String },
    /// 503: the service may or may not have acted (see `check.rs`).
    Unknown,
    /// Anything else (a 2xx without a hold, a hold in an unknown status).
    Malformed(String),
}

/// What the model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    Hold { code: u16, status: Status },
    Error { code: u16, reason: &'static str },
}

impl Expected {
    fn matches(self, observed: &Observed) -> bool {
        match (self, observed) {
            (Self::Hold { code, status }, Observed::Hold { code: c, status: s }) => {
                code == *c && status == *s
            }
            (Self::Error { code, reason }, Observed::Error { code: c, reason: r }) => {
                code == *c && reason == r
            }
            _ => false,
        }
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hold { code, status } => write!(f, "{code} {}", status.as_str()),
            Self::Error { code, reason } => write!(f, "{code} {reason}"),
        }
    }
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hold { code, status } => write!(f, "{code} {}", status.as_str()),
            Self::Error { code, reason } => write!(f, "{code} {reason}"),
            Self::Unknown => f.write_str("503 (outcome unknown)"),
            Self::Malformed(what) => write!(f, "malformed: {what}"),
        }
    }
}

/// The keys' statuses, by key index.
pub type State = Vec<Status>;

/// One slot of the model.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub capacity: u32,
}

impl Slot {
    pub fn initial(&self, keys: usize) -> State {
        vec![Status::Unused; keys]
    }

    pub fn bookable(&self, state: &State) -> i64 {
        let taken = state
            .iter()
            .filter(|s| matches!(s, Status::Held | Status::Confirmed))
            .count();
        i64::from(self.capacity) - i64::try_from(taken).unwrap_or(i64::MAX)
    }

    /// The model's answer to `kind` on `key` in `state`, and the state after.
    pub fn apply(&self, state: &State, kind: Kind, key: usize) -> (Expected, State) {
        use Status::*;
        let current = state[key];
        let mut next = state.clone();
        let ok = |status| Expected::Hold { code: 200, status };
        let expected = match (kind, current) {
            // Strict: a key's first use answers 201. (The service's retry
            // after a connection lost during COMMIT answers 200, a replay
            // of its own hold; a workload that injects such faults would
            // need to allow that here.)
            (Kind::Hold, Unused) if self.bookable(state) > 0 => {
                next[key] = Held;
                Expected::Hold {
                    code: 201,
                    status: Held,
                }
            }
            (Kind::Hold, Unused) => Expected::Error {
                code: 409,
                reason: "capacity_exhausted",
            },
            // A replay answers the key's hold whatever its state now.
            (Kind::Hold, status) => ok(status),
            // Callers only name ids some answer gave; "not yet" is a 404.
            (Kind::Confirm | Kind::Cancel, Unused) => Expected::Error {
                code: 404,
                reason: "not_found",
            },
            (Kind::Confirm, Held | Confirmed) => {
                // A held hold occupies a seat, so confirming it always
                // finds one: 409 capacity_exhausted here is an oversell.
                next[key] = Confirmed;
                ok(Confirmed)
            }
            (Kind::Confirm, Cancelled) => Expected::Error {
                code: 409,
                reason: "hold_cancelled",
            },
            (Kind::Cancel, _) => {
                next[key] = Cancelled;
                ok(Cancelled)
            }
        };
        (expected, next)
    }

    /// The state after a call that answered `observed`, if the model
    /// allows that answer in `state`. A call whose outcome is unknown may
    /// have acted: here it does; the search may also leave it out.
    pub fn step(
        &self,
        state: &State,
        kind: Kind,
        key: usize,
        observed: &Observed,
    ) -> Option<State> {
        let (expected, next) = self.apply(state, kind, key);
        match observed {
            Observed::Unknown => Some(next),
            observed if expected.matches(observed) => Some(next),
            _ => None,
        }
    }

    pub fn describe(state: &State) -> String {
        state
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != Status::Unused)
            .map(|(k, s)| format!("k{k}:{}", s.as_str()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}
