//! The randomized concurrent workload whose history `tests/history.rs`
//! checks: callers, each its own environment, on a few small slots, with
//! holds that live well under a second. Confirms, extends and moves are
//! often timed to land around a hold's `expires_at`; repeated extensions
//! meet the lifetime cap. Holds and bookings move between the slots of a
//! pair (the first and second slot, the third and fourth…): the checker
//! takes the slots moves join together, so pairs keep its search small.
//! Full slots get waiting lines (SPEC §18): callers join them, leave, and
//! read entries, and treat the holds offered to entries as any other.
//! Some environments reach the database through a proxy
//! that, now and then, loses every answer in flight (the server finishes
//! what it was sent), so `db::transact!` retries after COMMITs it never
//! saw answered: their answers must still be exact.

pub use super::calls::{call, send};
use super::{Recorder, Request};
use crate::proxy::Proxy;
use crate::{TestDb, new_key};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use shared::App;
use shared::config::HoldRules;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A hold the callers know of: its slot and key, and, once an answer gave
/// them, its id, the status and the expiry that answer showed.
#[derive(Clone)]
struct Known {
    /// The slot its hold requests name.
    slot: u64,
    /// The slot its last answer showed it on (moves change it).
    at: u64,
    key: String,
    id: Option<u64>,
    status: String,
    expires_at: Option<DateTime<Utc>>,
}

/// A waiting-list entry the callers know of (SPEC §18): its slot and key,
/// and its id once an answer gave it.
#[derive(Clone)]
struct Waiting {
    slot: u64,
    key: String,
    id: Option<u64>,
}

/// What the callers share.
#[derive(Clone)]
pub struct Shared {
    pub slots: Arc<Vec<u64>>,
    known: Arc<Mutex<Vec<Known>>>,
    entries: Arc<Mutex<Vec<Waiting>>>,
    pub rec: Recorder,
    /// Requests of keys some call left in doubt (a 503), replayed at the
    /// end.
    doubtful: Arc<Mutex<Vec<Request>>>,
}

impl Shared {
    pub fn new(slots: Vec<u64>, rec: Recorder) -> Self {
        Self {
            slots: Arc::new(slots),
            known: Arc::default(),
            entries: Arc::default(),
            rec,
            doubtful: Arc::default(),
        }
    }
}

/// An environment with holds of `ttl` and `max_lifetime`, through `proxy`
/// if given.
pub fn app(db: &TestDb, proxy: Option<&Proxy>, ttl: Duration, max_lifetime: Duration) -> App {
    let mut config = db.config(ttl);
    if let Some(proxy) = proxy {
        config.database_url = proxy.url_for(&db.url);
    }
    config.holds = HoldRules {
        max_lifetime,
        ..HoldRules::default()
    };
    App::new(config).expect("app")
}

/// One of the known holds with an id, preferably one that `wanted` likes.
fn pick(known: &[Known], rng: &mut StdRng, wanted: impl Fn(&Known) -> bool) -> Option<Known> {
    let with_id: Vec<&Known> = known.iter().filter(|k| k.id.is_some()).collect();
    let fitting: Vec<&Known> = with_id.iter().copied().filter(|k| wanted(k)).collect();
    let from = if fitting.is_empty() { with_id } else { fitting };
    (!from.is_empty()).then(|| from[rng.random_range(0..from.len())].clone())
}

/// Most of the time, waits until 20 ms before to 40 ms after `k`'s
/// `expires_at` (when that is ahead), so that the call lands around it.
async fn around_expiry(k: &Known, rng: &mut StdRng) {
    let Some(expires) = k.expires_at else { return };
    if rng.random_bool(0.4) {
        return;
    }
    let target = expires + chrono::Duration::milliseconds(rng.random_range(-20..=40));
    if let Ok(wait) = (target - Utc::now()).to_std() {
        tokio::time::sleep(wait.min(Duration::from_secs(1))).await;
    }
}

/// One caller: `calls` calls of holds with fresh keys, replays of known
/// keys, confirms and extends of holds last seen active (often timed
/// around their expiry; an extension is often tried again at once, which
/// meets the lifetime cap), moves of holds last seen active or confirmed
/// to the other slot of their pair, cancels of holds not last seen
/// cancelled, reads of holds; joins of a slot's line (SPEC §18) with fresh
/// keys, their replays, leaves and reads of entries: its own and the
/// other callers' alike, the holds offered to entries as any other.
pub async fn caller(client: usize, app: App, calls: usize, shared: Shared) {
    let mut rng = StdRng::from_rng(&mut rand::rng());
    let mut again: Option<Request> = None;
    for _ in 0..calls {
        let request = match again.take() {
            Some(request) => request,
            None => next_request(&shared, &mut rng).await,
        };
        let (status, body) = call(&app, &shared.rec, client, &request).await;
        learn(&shared, &request, status, &body);
        if matches!(request, Request::Extend { .. }) && status == 200 && rng.random_bool(0.5) {
            again = Some(request);
        }
    }
}

async fn next_request(shared: &Shared, rng: &mut StdRng) -> Request {
    let roll = rng.random_range(0..120);
    if roll >= 100 {
        return line_request(shared, rng, roll - 100);
    }
    let now = Utc::now();
    // An offered hold's expiry is unknown until an answer shows it.
    let active = |k: &Known| k.status == "held" && k.expires_at.is_none_or(|e| e > now);
    let picked = {
        let known = shared.known.lock().unwrap();
        let keyed: Vec<&Known> = known.iter().filter(|k| !k.key.is_empty()).collect();
        match roll {
            25..35 if !keyed.is_empty() => Some(keyed[rng.random_range(0..keyed.len())].clone()),
            35..76 => pick(&known, rng, active),
            76..90 => pick(&known, rng, |k| active(k) || k.status == "confirmed"),
            90.. => pick(&known, rng, |k| k.status != "cancelled"),
            _ => None,
        }
    };
    match (roll, picked) {
        (25..35, Some(k)) => Request::Hold {
            slot: k.slot,
            key: k.key,
        },
        (35..90, Some(k)) => {
            around_expiry(&k, rng).await;
            let hold = k.id.expect("picked with an id");
            match roll {
                ..52 => Request::Confirm { hold },
                52..76 => Request::Extend { hold },
                _ => Request::Move {
                    hold,
                    to: partner(&shared.slots, k.at),
                },
            }
        }
        (90.., Some(k)) => Request::Cancel {
            hold: k.id.expect("picked with an id"),
        },
        _ => Request::Hold {
            slot: random_slot(shared, rng),
            key: new_key().to_string(),
        },
    }
}

fn random_slot(shared: &Shared, rng: &mut StdRng) -> u64 {
    shared.slots[rng.random_range(0..shared.slots.len())]
}

/// The waiting list's share of the calls (`roll` in 0..20), and reads of
/// holds.
fn line_request(shared: &Shared, rng: &mut StdRng, roll: u32) -> Request {
    let entries = shared.entries.lock().unwrap();
    let ids: Vec<u64> = entries.iter().filter_map(|e| e.id).collect();
    let hold = pick(&shared.known.lock().unwrap(), rng, |_| true).and_then(|k| k.id);
    match (roll, hold) {
        (9..11, _) if !entries.is_empty() => {
            let e = &entries[rng.random_range(0..entries.len())];
            Request::Join {
                slot: e.slot,
                key: e.key.clone(),
            }
        }
        (11..15, _) if !ids.is_empty() => Request::Leave {
            entry: ids[rng.random_range(0..ids.len())],
        },
        (15..18, _) if !ids.is_empty() => Request::Entry {
            entry: ids[rng.random_range(0..ids.len())],
        },
        (18.., Some(hold)) => Request::Read { hold },
        _ => Request::Join {
            slot: random_slot(shared, rng),
            key: new_key().to_string(),
        },
    }
}

/// The other slot of `slot`'s pair (itself when it has none).
fn partner(slots: &[u64], slot: u64) -> u64 {
    let at = slots.iter().position(|&s| s == slot).unwrap_or(0);
    slots.get(at ^ 1).copied().unwrap_or(slot)
}

/// What the answer taught the callers.
fn learn(shared: &Shared, request: &Request, status: u16, body: &Value) {
    if request.on_entry() {
        return learn_entry(shared, request, status, body);
    }
    let mut known = shared.known.lock().unwrap();
    let by_id = |hold: &u64| known.iter().position(|k| k.id == Some(*hold));
    let i = match request {
        Request::Hold { slot, key } => match known.iter().position(|k| k.key == *key) {
            Some(i) => i,
            None => {
                known.push(Known {
                    slot: *slot,
                    at: *slot,
                    key: key.clone(),
                    id: None,
                    status: String::new(),
                    expires_at: None,
                });
                known.len() - 1
            }
        },
        Request::Confirm { hold }
        | Request::Cancel { hold }
        | Request::Extend { hold }
        | Request::Move { hold, .. }
        | Request::Read { hold } => match by_id(hold) {
            Some(i) => i,
            None => return,
        },
        _ => unreachable!("an entry's request"),
    };
    if status == 503 {
        let k = &known[i];
        let settle = match k.id {
            Some(hold) => Request::Read { hold },
            None => Request::Hold {
                slot: k.slot,
                key: k.key.clone(),
            },
        };
        shared.doubtful.lock().unwrap().push(settle);
    }
    if let (Some(id), Some(status)) = (body["id"].as_u64(), body["status"].as_str()) {
        let expires_at = body["expires_at"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        let k = &mut known[i];
        (k.id, k.status, k.expires_at) = (Some(id), status.to_string(), expires_at);
        k.at = body["slot_id"].as_u64().unwrap_or(k.at);
        if k.key.is_empty() {
            // An offered hold's key, which the service made.
            k.key = body["idempotency_key"].as_str().unwrap_or("").to_string();
        }
    }
}

/// What an answer about an entry taught the callers: the entry, and the
/// hold offered to it.
fn learn_entry(shared: &Shared, request: &Request, status: u16, body: &Value) {
    let mut entries = shared.entries.lock().unwrap();
    let i = match request {
        Request::Join { slot, key } => match entries.iter().position(|e| e.key == *key) {
            Some(i) => i,
            None => {
                entries.push(Waiting {
                    slot: *slot,
                    key: key.clone(),
                    id: None,
                });
                entries.len() - 1
            }
        },
        Request::Leave { entry } | Request::Entry { entry } => {
            match entries.iter().position(|e| e.id == Some(*entry)) {
                Some(i) => i,
                None => return,
            }
        }
        _ => unreachable!("a hold's request"),
    };
    if status == 503 {
        let settle = match entries[i].id {
            Some(entry) => Request::Entry { entry },
            None => Request::Join {
                slot: entries[i].slot,
                key: entries[i].key.clone(),
            },
        };
        shared.doubtful.lock().unwrap().push(settle);
    }
    if let Some(id) = body["id"].as_u64() {
        entries[i].id = Some(id);
    }
    if let Some(hold) = body["hold_id"].as_u64() {
        let mut known = shared.known.lock().unwrap();
        if !known.iter().any(|k| k.id == Some(hold)) {
            let slot = entries[i].slot;
            known.push(Known {
                slot,
                at: slot,
                key: String::new(),
                id: Some(hold),
                status: "held".to_string(),
                expires_at: None,
            });
        }
    }
}

/// Settles, recorded as `client`, every request some call left in doubt
/// (a 503), so that every hold's `created_at` and last `expires_at`, and
/// every entry, are known: a hold or a join whose id no answer gave is
/// replayed, a known one read; then every entry is read, and every hold
/// offered to one that no answer showed.
pub async fn settle(app: &App, client: usize, shared: &Shared) {
    let doubtful = shared.doubtful.lock().unwrap().clone();
    for request in doubtful {
        let (status, body) = call(app, &shared.rec, client, &request).await;
        learn(shared, &request, status, &body);
    }
    let entries: Vec<u64> = shared
        .entries
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| e.id)
        .collect();
    for entry in entries {
        let request = Request::Entry { entry };
        let (status, body) = call(app, &shared.rec, client, &request).await;
        learn(shared, &request, status, &body);
    }
    let unseen: Vec<u64> = {
        let known = shared.known.lock().unwrap();
        known
            .iter()
            .filter(|k| k.key.is_empty())
            .filter_map(|k| k.id)
            .collect()
    };
    for hold in unseen {
        call(app, &shared.rec, client, &Request::Read { hold }).await;
    }
}
