//! A randomized workload of capped clients (SPEC §16) whose history
//! `tests/history_caps.rs` checks: a few clients with small caps, each
//! with callers of its own (each its own environment, its key), on a few
//! small slots; each caller holds, replays, confirms, extends and cancels
//! its client's holds only (another's would be a 404). Holds live well
//! under a second and the callers pause between calls, so clients keep
//! reaching their cap and coming back under it as holds expire.

use super::{Recorder, Request};
use crate::keys::{TestClient, authorized};
use crate::new_key;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use shared::App;
use std::sync::{Arc, Mutex};

/// A hold a client's callers know of: slot, key, and id once an answer
/// gave it.
type Known = (u64, String, Option<u64>);

/// The holds one client's callers know of.
#[derive(Clone, Default)]
pub struct Holds(Arc<Mutex<Vec<Known>>>);

/// One caller of `client`: `calls` calls on `slots`, recorded as `caller`.
pub async fn caller(
    caller: usize,
    client: TestClient,
    app: App,
    slots: Arc<Vec<u64>>,
    holds: Holds,
    rec: Recorder,
    calls: usize,
) {
    let mut rng = StdRng::from_rng(&mut rand::rng());
    for _ in 0..calls {
        // Paced, so that a run outlives its holds: clients come back
        // under their caps as holds expire.
        let pause = rng.random_range(0..40);
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        let request = next(&slots, &holds, &mut rng);
        let (_, body) = call(&app, &rec, caller, &client, &request).await;
        if let Request::Hold { slot, key } = &request {
            let mut known = holds.0.lock().unwrap();
            let id = body["id"].as_u64();
            match known.iter_mut().find(|(_, k, _)| k == key) {
                Some(entry) => entry.2 = entry.2.or(id),
                None => known.push((*slot, key.clone(), id)),
            }
        }
    }
}

fn next(slots: &[u64], holds: &Holds, rng: &mut StdRng) -> Request {
    let known = holds.0.lock().unwrap();
    // Every third hold is left alone to expire during the run: its
    // client's allowance comes back by expiry, not only by a cancel.
    let with_id: Vec<u64> = known
        .iter()
        .filter_map(|(_, _, id)| *id)
        .filter(|id| id % 3 != 0)
        .collect();
    let roll = rng.random_range(0..100);
    match roll {
        50..60 if !known.is_empty() => {
            let (slot, key, _) = known[rng.random_range(0..known.len())].clone();
            Request::Hold { slot, key }
        }
        60.. if !with_id.is_empty() => {
            let hold = with_id[rng.random_range(0..with_id.len())];
            match roll {
                60..70 => Request::Confirm { hold },
                70..90 => Request::Extend { hold },
                _ => Request::Cancel { hold },
            }
        }
        _ => Request::Hold {
            slot: slots[rng.random_range(0..slots.len())],
            key: new_key().to_string(),
        },
    }
}

/// `request` as `client`, through the handlers, recorded as `caller`.
pub async fn call(
    app: &App,
    rec: &Recorder,
    caller: usize,
    client: &TestClient,
    request: &Request,
) -> (u16, Value) {
    let bearer = client.bearer();
    let answer = super::calls::send(app, request, |r| authorized(r, Some(&bearer)));
    rec.record(caller, request.clone(), answer).await
}
