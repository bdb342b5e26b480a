//! The randomized concurrent workload whose history `tests/history.rs`
//! checks: callers, each its own environment, on a few small slots, with
//! holds that live well under a second. Confirms, extends and moves are
//! often timed to land around a hold's `expires_at`; repeated extensions
//! meet the lifetime cap. Holds and bookings move between the slots of a
//! pair (the first and second slot, the third and fourth…): the checker
//! takes the slots moves join together, so pairs keep its search small. Some environments reach the database through a proxy
//! that, now and then, loses every answer in flight (the server finishes
//! what it was sent), so `db::transact!` retries after COMMITs it never
//! saw answered: their answers must still be exact.

use super::{Recorder, Request};
use crate::proxy::Proxy;
use crate::{TestDb, cancel_request, confirm_request, extend_request, hold_request, new_key};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use shared::App;
use shared::config::HoldRules;
use shared::http;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

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

/// What the callers share.
#[derive(Clone)]
pub struct Shared {
    pub slots: Arc<Vec<u64>>,
    known: Arc<Mutex<Vec<Known>>>,
    pub rec: Recorder,
    /// Keys some call left in doubt (a 503), replayed at the end.
    doubtful: Arc<Mutex<Vec<(u64, String)>>>,
}

impl Shared {
    pub fn new(slots: Vec<u64>, rec: Recorder) -> Self {
        Self {
            slots: Arc::new(slots),
            known: Arc::default(),
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
/// cancelled; its own and the other callers' alike.
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
    let roll = rng.random_range(0..100);
    let now = Utc::now();
    let active = |k: &Known| k.status == "held" && k.expires_at.is_some_and(|e| e > now);
    let picked = {
        let known = shared.known.lock().unwrap();
        match roll {
            25..35 if !known.is_empty() => Some(known[rng.random_range(0..known.len())].clone()),
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
            slot: shared.slots[rng.random_range(0..shared.slots.len())],
            key: new_key().to_string(),
        },
    }
}

/// The other slot of `slot`'s pair (itself when it has none).
fn partner(slots: &[u64], slot: u64) -> u64 {
    let at = slots.iter().position(|&s| s == slot).unwrap_or(0);
    slots.get(at ^ 1).copied().unwrap_or(slot)
}

/// Makes `request` through the handlers, recorded.
pub async fn call(app: &App, rec: &Recorder, client: usize, request: &Request) -> (u16, Value) {
    let answer = async {
        let response = match request {
            Request::Hold { slot, key } => {
                http::hold(app, hold_request(&slot.to_string(), Some(key))).await
            }
            Request::Confirm { hold } => {
                http::confirm(app, confirm_request(&hold.to_string())).await
            }
            Request::Cancel { hold } => http::cancel(app, cancel_request(&hold.to_string())).await,
            Request::Extend { hold } => {
                http::extend_hold(app, extend_request(&hold.to_string())).await
            }
            Request::Move { hold, to } => {
                let body = format!(r#"{{"slot_id": {to}}}"#);
                http::move_hold(app, crate::move_request(&hold.to_string(), &body)).await
            }
        };
        crate::read(response.expect("handlers answer inside Ok"))
    };
    rec.record(client, request.clone(), answer).await
}

/// What the answer taught the callers.
fn learn(shared: &Shared, request: &Request, status: u16, body: &Value) {
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
        | Request::Move { hold, .. } => match by_id(hold) {
            Some(i) => i,
            None => return,
        },
    };
    if status == 503 {
        shared
            .doubtful
            .lock()
            .unwrap()
            .push((known[i].slot, known[i].key.clone()));
    }
    if let (Some(id), Some(status)) = (body["id"].as_u64(), body["status"].as_str()) {
        let expires_at = body["expires_at"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        let k = &mut known[i];
        (k.id, k.status, k.expires_at) = (Some(id), status.to_string(), expires_at);
        k.at = body["slot_id"].as_u64().unwrap_or(k.at);
    }
}

/// Replays, recorded as `client`, every key some call left in doubt, so
/// that every hold's `created_at` and last `expires_at` are known: on the
/// slot it was last seen on, and, if a move took it to the other slot of
/// the pair (a replay elsewhere is another fingerprint: 422), there.
pub async fn replay_doubtful(app: &App, client: usize, shared: &Shared) {
    let doubtful = shared.doubtful.lock().unwrap().clone();
    for (slot, key) in doubtful {
        let at = {
            let known = shared.known.lock().unwrap();
            known.iter().find(|k| k.key == key).map_or(slot, |k| k.at)
        };
        let replay = |slot| Request::Hold {
            slot,
            key: key.clone(),
        };
        let (status, _) = call(app, &shared.rec, client, &replay(at)).await;
        if status == 422 {
            let other = partner(&shared.slots, at);
            call(app, &shared.rec, client, &replay(other)).await;
        }
    }
}

/// Until `stop` turns true: loses the proxy's answers in flight at
/// random moments, at most `cuts` times; returns how many.
pub async fn lose_answers(
    proxy: Arc<Proxy>,
    cuts: usize,
    mut stop: watch::Receiver<bool>,
) -> usize {
    let mut rng = StdRng::from_rng(&mut rand::rng());
    for done in 0..cuts {
        let pause = Duration::from_millis(rng.random_range(50..400));
        tokio::select! {
            _ = tokio::time::sleep(pause) => proxy.lose_answers(),
            _ = stop.wait_for(|stop| *stop) => return done,
        }
    }
    cuts
}

/// Sessions of `db` idle inside a transaction this long are ones whose
/// client is gone: a lost answer's server end, which waits for a next
/// statement that will never come (a real server notices the dead peer
/// by its timeouts). Ended here, their locks go with them.
const ABANDONED: &str = "SELECT CAST(p.ID AS UNSIGNED) FROM information_schema.PROCESSLIST p \
     JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID \
     WHERE p.DB = ? AND p.COMMAND = 'Sleep' AND p.TIME_MS > 500";

/// Until `stop` turns true, ends the abandoned sessions (above) every
/// 100 ms; returns how many.
pub async fn end_abandoned(db: &TestDb, mut stop: watch::Receiver<bool>) -> usize {
    let mut ended = 0;
    loop {
        let ids: Vec<u64> = sqlx::query_scalar(ABANDONED)
            .bind(&db.name)
            .fetch_all(&db.admin)
            .await
            .expect("abandoned sessions");
        for id in ids {
            // It may have ended meanwhile.
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
                .execute(&db.admin)
                .await;
            ended += 1;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.wait_for(|stop| *stop) => return ended,
        }
    }
}
