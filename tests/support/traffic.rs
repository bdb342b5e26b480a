//! Mixed API traffic for the soak (`make soak`): every request of a burst
//! is one of the API's calls, a replay, an unknown route or bad input, and
//! each answer is checked for what the API documents (README "The API").

use futures::StreamExt;
use rand::Rng;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a request may wait for its answer before it counts as
/// unanswered. Every function answers well within this (its own deadline
/// is below the Lambda timeout of template.yaml).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// What the bursts found, summed over the run.
#[derive(Default, Debug)]
pub struct Tally {
    pub requests: u64,
    pub by_status: BTreeMap<u16, u64>,
    /// No answer within [`ANSWER_WITHIN`], or the connection failed.
    pub unanswered: u64,
    /// Answered, but not as the API documents (a non-JSON body, a route
    /// that should be 404 or 405, a 5xx other than 503
    /// `service_unavailable`).
    pub wrong: u64,
    /// The first few wrong or unanswered requests, for the report.
    pub examples: Vec<String>,
}

impl Tally {
    fn note(&mut self, problem: String) {
        if self.examples.len() < 10 {
            self.examples.push(problem);
        }
    }

    pub fn statuses(&self) -> String {
        let parts: Vec<String> = self
            .by_status
            .iter()
            .map(|(status, n)| format!("{status}: {n}"))
            .collect();
        parts.join(", ")
    }
}

/// The state the traffic builds on: the slots it books and the holds and
/// keys it made, so confirms, cancels and replays have real targets.
pub struct Traffic {
    http: reqwest::Client,
    base: String,
    slots: Vec<u64>,
    holds: Mutex<Vec<String>>,
    keys: Mutex<Vec<(u64, String)>>,
    pub tally: Mutex<Tally>,
}

/// One request of a burst, and what its answer must be.
enum Call {
    Availability,
    Hold,
    Replay,
    Confirm,
    Cancel,
    UnknownRoute,
    BadInput,
}

impl Call {
    fn pick(rng: &mut impl Rng) -> Self {
        match rng.random_range(0..100) {
            0..30 => Call::Availability,
            30..55 => Call::Hold,
            55..60 => Call::Replay,
            60..70 => Call::Confirm,
            70..80 => Call::Cancel,
            80..88 => Call::UnknownRoute,
            _ => Call::BadInput,
        }
    }
}

impl Traffic {
    /// Traffic to `base`, every request with `authorization` (a booker's
    /// `Bearer` key) unless it tests a bad one.
    pub fn new(base: &str, slots: Vec<u64>, authorization: &str) -> Self {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            authorization.parse().expect("header value"),
        );
        let http = reqwest::Client::builder()
            .timeout(ANSWER_WITHIN)
            .default_headers(headers)
            .build()
            .expect("HTTP client");
        Self {
            http,
            base: base.to_string(),
            slots,
            holds: Mutex::new(Vec::new()),
            keys: Mutex::new(Vec::new()),
            tally: Mutex::new(Tally::default()),
        }
    }

    /// `requests` calls, `parallel` at a time (each on its own connection
    /// when the pool has none idle, as independent clients would be).
    pub async fn burst(self: &Arc<Self>, requests: usize, parallel: usize) {
        futures::stream::iter(0..requests)
            .map(|_| {
                let traffic = Arc::clone(self);
                async move { traffic.one().await }
            })
            .buffer_unordered(parallel)
            .collect::<Vec<()>>()
            .await;
    }

    async fn one(&self) {
        let (call, slot, pick) = {
            let mut rng = rand::rng();
            let call = Call::pick(&mut rng);
            let slot = self.slots[rng.random_range(0..self.slots.len())];
            (call, slot, rng.random_range(0..1_000_000usize))
        };
        let base = &self.base;
        let http = &self.http;
        let (label, request, routed) = match call {
            Call::Availability => (
                "availability".to_string(),
                http.get(format!("{base}/slots/availability")),
                None,
            ),
            Call::Hold => {
                let key = uuid::Uuid::new_v4().to_string();
                self.keys.lock().unwrap().push((slot, key.clone()));
                (
                    format!("hold {slot}"),
                    http.post(format!("{base}/slots/{slot}/hold"))
                        .header("idempotency-key", key),
                    None,
                )
            }
            Call::Replay => {
                let known = self.known(&self.keys, pick);
                let (slot, key) = known.unwrap_or((slot, uuid::Uuid::new_v4().to_string()));
                (
                    format!("replay {slot}"),
                    http.post(format!("{base}/slots/{slot}/hold"))
                        .header("idempotency-key", key),
                    None,
                )
            }
            Call::Confirm | Call::Cancel => {
                let hold = self
                    .known(&self.holds, pick)
                    .unwrap_or_else(|| "424242".into());
                if matches!(call, Call::Confirm) {
                    let url = format!("{base}/holds/{hold}/confirm");
                    (format!("confirm {hold}"), http.post(url), None)
                } else {
                    let url = format!("{base}/holds/{hold}");
                    (format!("cancel {hold}"), http.delete(url), None)
                }
            }
            Call::UnknownRoute => {
                // An unknown path is the API's 404; a known path with a
                // method it does not serve a 405 (SPEC §19.8).
                const NOT_FOUND: (u16, &str) = (404, "not_found");
                const NOT_ALLOWED: (u16, &str) = (405, "method_not_allowed");
                let (method, path, answer) = [
                    (
                        reqwest::Method::GET,
                        format!("/no/such/route/{pick}"),
                        NOT_FOUND,
                    ),
                    (reqwest::Method::GET, "/".to_string(), NOT_FOUND),
                    (
                        reqwest::Method::POST,
                        "/slots/availability".to_string(),
                        NOT_ALLOWED,
                    ),
                    (
                        reqwest::Method::GET,
                        format!("/slots/{slot}/hold"),
                        NOT_ALLOWED,
                    ),
                    (reqwest::Method::PUT, format!("/holds/{pick}"), NOT_ALLOWED),
                ][pick % 5]
                    .clone();
                let request = http.request(method.clone(), format!("{base}{path}"));
                (format!("{method} {path}"), request, Some(answer))
            }
            Call::BadInput => {
                let (label, request) = match pick % 6 {
                    0 => (
                        "hold without key",
                        http.post(format!("{base}/slots/{slot}/hold")),
                    ),
                    1 => (
                        "hold with a bad key",
                        http.post(format!("{base}/slots/{slot}/hold"))
                            .header("idempotency-key", "not-a-uuid"),
                    ),
                    2 => (
                        "confirm abc",
                        http.post(format!("{base}/holds/abc/confirm")),
                    ),
                    4 => (
                        "hold with an unknown API key",
                        http.post(format!("{base}/slots/{slot}/hold"))
                            .header("authorization", format!("Bearer {}", "u".repeat(40)))
                            .header("idempotency-key", uuid::Uuid::new_v4().to_string()),
                    ),
                    3 => (
                        "hold on a missing slot",
                        http.post(format!("{base}/slots/999999999/hold"))
                            .header("idempotency-key", uuid::Uuid::new_v4().to_string()),
                    ),
                    // Binary bytes: the emulator passes them base64-encoded,
                    // as API Gateway does (docs/LOCAL.md); hold ignores them.
                    _ => (
                        "hold with a binary body",
                        http.post(format!("{base}/slots/{slot}/hold"))
                            .header("idempotency-key", uuid::Uuid::new_v4().to_string())
                            .header("content-type", "application/octet-stream")
                            .body(vec![0xff, 0xfe, 0x00, 0x80]),
                    ),
                };
                (label.to_string(), request, None)
            }
        };
        let response = match request.send().await {
            Ok(response) => response,
            // Debug form: reqwest's Display hides the cause (reset, refused…).
            Err(e) => return self.unanswered(&label, &format!("{e:?}")),
        };
        let status = response.status().as_u16();
        let json = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes() == b"application/json");
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(e) => return self.unanswered(&label, &e.to_string()),
        };
        let body: Option<Value> = serde_json::from_slice(&body).ok();
        let reason = body
            .as_ref()
            .and_then(|b| b["reason"].as_str())
            .map(str::to_string);
        if status == 201
            && let Some(id) = body.as_ref().and_then(|b| b["id"].as_u64())
        {
            self.holds.lock().unwrap().push(id.to_string());
        }
        let mut tally = self.tally.lock().unwrap();
        tally.requests += 1;
        *tally.by_status.entry(status).or_default() += 1;
        let problem = if !json || body.is_none() {
            Some("a body that is not JSON")
        } else if let Some((expected, why)) = routed
            && (status, reason.as_deref()) != (expected, Some(why))
        {
            Some("not the API's 404 or 405")
        } else if (status == 401) != (label == "hold with an unknown API key") {
            // The booker's key works everywhere; a key nobody has nowhere.
            Some("the wrong answer to the key sent")
        } else if status >= 500 && (status, reason.as_deref()) != (503, Some("service_unavailable"))
        {
            Some("an undocumented 5xx")
        } else {
            None
        };
        if let Some(problem) = problem {
            tally.wrong += 1;
            tally.note(format!("{label}: {status} {reason:?}: {problem}"));
        }
    }

    fn unanswered(&self, label: &str, error: &str) {
        let at = chrono::Utc::now().format("%H:%M:%S");
        let error = format!("at {at}: {error}");
        let mut tally = self.tally.lock().unwrap();
        tally.requests += 1;
        tally.unanswered += 1;
        tally.note(format!("{label}: no answer: {error}"));
    }

    fn known<T: Clone>(&self, list: &Mutex<Vec<T>>, pick: usize) -> Option<T> {
        let list = list.lock().unwrap();
        (!list.is_empty()).then(|| list[pick % list.len()].clone())
    }
}
