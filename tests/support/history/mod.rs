//! Recorded histories and a linearizability checker for them.
//!
//! A [`Recorder`] keeps every call a workload makes: who made it, when it
//! was invoked and when it completed (on one monotonic clock), what it asked
//! and what came back. [`check`] then decides whether some order of the
//! calls, each placed at one instant between its invocation and its
//! completion, is a run of the sequential model of SPEC §4 that gives every
//! answer that was observed (Wing & Gong's search with Lowe's memoisation,
//! one slot at a time, as Porcupine does).

#[cfg(test)]
mod brute;
mod check;
mod model;
#[cfg(test)]
mod tests;

pub use check::{Report, check};

use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What a caller asked. A hold names its slot; a confirm or cancel names a
/// hold by the id some earlier answer gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Hold { slot: u64, key: String },
    Confirm { hold: u64 },
    Cancel { hold: u64 },
}

/// The hold resource's fields the model needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldFields {
    pub id: u64,
    pub slot: u64,
    pub key: String,
    pub status: String,
}

/// What came back: the status code, the error's `reason` (errors), the
/// hold resource's fields (successes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub reason: Option<String>,
    pub hold: Option<HoldFields>,
}

impl Response {
    /// From a handler's status and JSON body.
    pub fn from_json(status: u16, body: &Value) -> Self {
        let hold = body["id"].as_u64().map(|id| HoldFields {
            id,
            slot: body["slot_id"].as_u64().unwrap_or(0),
            key: body["idempotency_key"].as_str().unwrap_or("").to_string(),
            status: body["status"].as_str().unwrap_or("").to_string(),
        });
        Self {
            status,
            reason: body["reason"].as_str().map(str::to_string),
            hold,
        }
    }

    /// A success carrying a hold (hand-made histories).
    pub fn hold(status: u16, id: u64, slot: u64, key: &str, hold_status: &str) -> Self {
        Self {
            status,
            reason: None,
            hold: Some(HoldFields {
                id,
                slot,
                key: key.to_string(),
                status: hold_status.to_string(),
            }),
        }
    }

    /// An error answer (hand-made histories).
    pub fn error(status: u16, reason: &str) -> Self {
        Self {
            status,
            reason: Some(reason.to_string()),
            hold: None,
        }
    }
}

/// One call: the caller, its interval in nanoseconds since the recorder's
/// origin, the request and the response.
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
/// the recorded interval contains the one in which the service acted.
#[derive(Clone)]
pub struct Recorder {
    origin: Instant,
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
            origin: Instant::now(),
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
        let response = Response::from_json(status, &body);
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
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
