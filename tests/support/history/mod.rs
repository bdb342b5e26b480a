//! Recorded histories and a linearizability checker for them.
//!
//! A [`Recorder`] keeps every call a workload makes: who made it, when it
//! was invoked and when it completed, what it asked and what came back.
//! [`check`] then decides whether some order of the calls, each placed at
//! one instant between its invocation and its completion, is a run of the
//! sequential model of SPEC §4, §9, §17 and §18 (holds, their moves, the
//! slots' waiting lines and their offers) that gives every answer that was
//! observed (Wing & Gong's search with Lowe's memoisation, one slot at a
//! time, as Porcupine does).
//!
//! Holds expire during a run, so the instants are read from the wall clock
//! the database reads too (the same machine's): a hold resource's
//! `expires_at` and `created_at` are put on the calls' time line, and a
//! call placed at instant `t` finds expired every hold whose `expires_at`
//! is at or before `t`.

#[cfg(test)]
mod brute;
mod calls;
pub mod capped;
mod caps;
mod check;
pub mod epilogues;
#[cfg(test)]
mod expiry_tests;
pub mod faults;
mod ids;
mod line;
#[cfg(test)]
mod line_tests;
mod model;
#[cfg(test)]
mod move_tests;
mod partition;
mod slot;
#[cfg(test)]
mod tests;
pub mod workload;

pub use caps::{Capped, check_caps};
pub use check::{Report, check};

use chrono::{DateTime, Utc};
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How far the database's reading of the clock may lie outside a call's
/// recorded interval: the two readings are of one clock, but each is
/// rounded (the database's to the microsecond) and taken a little before
/// or after the instant it stands for.
pub const CLOCK_MARGIN: u64 = 1_000_000;

/// The service's hold rules, in nanoseconds: `HOLD_TTL_SECONDS` and
/// `HOLD_MAX_LIFETIME_SECONDS` (SPEC §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    pub ttl: u64,
    pub max_lifetime: u64,
}

impl Rules {
    pub fn new(ttl: Duration, max_lifetime: Duration) -> Self {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Self {
            ttl: nanos(ttl),
            max_lifetime: nanos(max_lifetime),
        }
    }
}

/// What a caller asked. A hold or a join (SPEC §18, one seat) names its
/// slot; a confirm, cancel, extend, move or read names a hold, a leave or a read
/// of an entry names the entry, by the id some earlier answer gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Hold {
        slot: u64,
        key: String,
    },
    Confirm {
        hold: u64,
    },
    Cancel {
        hold: u64,
    },
    Extend {
        hold: u64,
    },
    Move {
        hold: u64,
        to: u64,
    },
    /// `GET /holds/{id}`.
    Read {
        hold: u64,
    },
    Join {
        slot: u64,
        key: String,
    },
    Leave {
        entry: u64,
    },
    Entry {
        entry: u64,
    },
}

impl Request {
    /// Whether its answer is a waiting-list entry rather than a hold.
    pub fn on_entry(&self) -> bool {
        matches!(
            self,
            Self::Join { .. } | Self::Leave { .. } | Self::Entry { .. }
        )
    }
}

/// The hold resource's fields the model needs; its times in nanoseconds
/// on the recorder's time line (`None`: the answer did not carry them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldFields {
    pub id: u64,
    pub slot: u64,
    pub key: String,
    pub status: String,
    pub created_at: Option<u64>,
    pub expires_at: Option<u64>,
}

/// The entry resource's fields the model needs (SPEC §18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFields {
    pub id: u64,
    pub slot: u64,
    pub key: String,
    pub status: String,
    pub position: Option<u32>,
    /// The hold offered to it.
    pub hold: Option<u64>,
}

/// What came back: the status code, the error's `reason` (errors), the
/// hold or entry resource's fields (successes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub reason: Option<String>,
    pub hold: Option<HoldFields>,
    pub entry: Option<EntryFields>,
}

impl Response {
    /// From a handler's status and JSON body, a hold's or (`entry`) a
    /// waiting-list entry's; its times put on the time line that starts
    /// at `origin`.
    pub fn from_json(status: u16, body: &Value, origin: DateTime<Utc>, entry: bool) -> Self {
        let at = |field: &str| {
            let time = DateTime::parse_from_rfc3339(body[field].as_str()?).ok()?;
            let nanos = (time.with_timezone(&Utc) - origin).num_nanoseconds()?;
            Some(u64::try_from(nanos).unwrap_or(0))
        };
        let reason = body["reason"].as_str().map(str::to_string);
        if entry {
            let entry = body["id"].as_u64().map(|id| EntryFields {
                id,
                slot: body["slot_id"].as_u64().unwrap_or(0),
                key: body["idempotency_key"].as_str().unwrap_or("").to_string(),
                status: body["status"].as_str().unwrap_or("").to_string(),
                position: body["position"]
                    .as_u64()
                    .map(|p| u32::try_from(p).unwrap_or(u32::MAX)),
                hold: body["hold_id"].as_u64(),
            });
            return Self {
                status,
                reason,
                hold: None,
                entry,
            };
        }
        let hold = body["id"].as_u64().map(|id| HoldFields {
            id,
            slot: body["slot_id"].as_u64().unwrap_or(0),
            key: body["idempotency_key"].as_str().unwrap_or("").to_string(),
            status: body["status"].as_str().unwrap_or("").to_string(),
            created_at: at("created_at"),
            expires_at: at("expires_at"),
        });
        Self {
            status,
            reason,
            hold,
            entry: None,
        }
    }

    /// A success carrying a hold without times (hand-made histories).
    pub fn hold(status: u16, id: u64, slot: u64, key: &str, hold_status: &str) -> Self {
        Self {
            status,
            reason: None,
            hold: Some(HoldFields {
                id,
                slot,
                key: key.to_string(),
                status: hold_status.to_string(),
                created_at: None,
                expires_at: None,
            }),
            entry: None,
        }
    }

    /// A success carrying an entry (hand-made histories).
    pub fn entry(status: u16, id: u64, slot: u64, key: &str, entry_status: &str) -> Self {
        Self {
            status,
            reason: None,
            hold: None,
            entry: Some(EntryFields {
                id,
                slot,
                key: key.to_string(),
                status: entry_status.to_string(),
                position: None,
                hold: None,
            }),
        }
    }

    /// The same entry answer, at `position` in its line.
    pub fn placed(mut self, position: u32) -> Self {
        if let Some(e) = &mut self.entry {
            e.position = Some(position);
        }
        self
    }

    /// The same entry answer, offered `hold`.
    pub fn offered(mut self, hold: u64) -> Self {
        if let Some(e) = &mut self.entry {
            e.hold = Some(hold);
        }
        self
    }

    /// The same answer, its hold created at `created` and expiring at
    /// `expires` (hand-made histories).
    pub fn at(mut self, created: u64, expires: u64) -> Self {
        if let Some(h) = &mut self.hold {
            (h.created_at, h.expires_at) = (Some(created), Some(expires));
        }
        self
    }

    /// An error answer (hand-made histories).
    pub fn error(status: u16, reason: &str) -> Self {
        Self {
            status,
            reason: Some(reason.to_string()),
            hold: None,
            entry: None,
        }
    }
}

/// One call: the caller, its interval in nanoseconds since the recorder's
/// origin (on the wall clock), the request and the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub client: usize,
    pub invoked: u64,
    pub completed: u64,
    pub request: Request,
    pub response: Response,
}

/// Collects calls from many tasks. The instants are taken just before the
/// request is handed to the service and just after its answer is back, so
/// the recorded interval contains the one in which the service acted. The
/// clock is the wall clock, the database's: a monotonic one would drift
/// from it by the clock's slewing.
#[derive(Clone)]
pub struct Recorder {
    origin: DateTime<Utc>,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Self {
            origin: Utc::now(),
            calls: Arc::default(),
        }
    }

    /// Runs `call`, recording it; returns its status and body.
    pub async fn record<F>(&self, client: usize, request: Request, call: F) -> (u16, Value)
    where
        F: Future<Output = (u16, Value)>,
    {
        let invoked = self.nanos();
        let (status, body) = call.await;
        let completed = self.nanos();
        let response = Response::from_json(status, &body, self.origin, request.on_entry());
        self.calls.lock().expect("recorder").push(Call {
            client,
            invoked,
            completed,
            request,
            response,
        });
        (status, body)
    }

    /// Every call recorded so far, in order of invocation.
    pub fn history(&self) -> Vec<Call> {
        let mut calls = self.calls.lock().expect("recorder").clone();
        calls.sort_by_key(|c| (c.invoked, c.completed));
        calls
    }

    fn nanos(&self) -> u64 {
        let elapsed = (Utc::now() - self.origin).num_nanoseconds().unwrap_or(0);
        u64::try_from(elapsed).unwrap_or(0)
    }
}

/// How many calls got each answer: `"<call> <status> <reason>"`.
pub fn outcomes(history: &[Call]) -> std::collections::BTreeMap<String, usize> {
    let mut outcomes = std::collections::BTreeMap::new();
    for c in history {
        let what = match c.request {
            Request::Hold { .. } => "hold",
            Request::Confirm { .. } => "confirm",
            Request::Cancel { .. } => "cancel",
            Request::Extend { .. } => "extend",
            Request::Move { .. } => "move",
            Request::Read { .. } => "read",
            Request::Join { .. } => "join",
            Request::Leave { .. } => "leave",
            Request::Entry { .. } => "entry",
        };
        let answer = c.response.reason.clone().unwrap_or_default();
        *outcomes
            .entry(format!("{what} {} {answer}", c.response.status))
            .or_default() += 1;
    }
    outcomes
}
