//! The seed's concurrency table (SPEC §5), driven over HTTP against a
//! served API: 20 callers, each on its own connection, released together.
//! Used by the end-to-end test (open mode, no key) and by `make scenarios`
//! against `make dev` (the dev booker's key, SPEC §8).

use futures::future::join_all;
use sqlx::MySqlPool;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::Barrier;

pub const CALLERS: usize = 20;

/// Where the table is played, and as whom: `key` is sent as `Authorization:
/// Bearer` (none: the anonymous client of `open` mode).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub base: &'a str,
    pub key: Option<&'a str>,
}

impl Target<'_> {
    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let request = client().post(format!("{}{path}", self.base));
        match self.key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// The client the key names (the built-in anonymous client without
    /// one): the owner of the holds written for the confirm scenario.
    async fn owner(&self, admin: &MySqlPool) -> u64 {
        let Some(key) = self.key else {
            return shared::clients::ANONYMOUS.0;
        };
        let hash = shared::clients::key::KeyHash::of(key);
        sqlx::query_scalar("SELECT id FROM api_clients WHERE key_hash = ? AND revoked_at IS NULL")
            .bind(hash.as_str())
            .fetch_optional(admin)
            .await
            .expect("client look-up")
            .unwrap_or_else(|| panic!("the key names no active client in this database"))
    }
}

/// What one scenario produced: status → count, and the rows it left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub name: &'static str,
    pub statuses: BTreeMap<u16, usize>,
    pub rows: i64,
    pub remaining: u32,
    pub expected: BTreeMap<u16, usize>,
    pub expected_rows: i64,
    pub expected_remaining: u32,
}

impl Outcome {
    pub fn holds(&self) -> bool {
        self.statuses == self.expected
            && self.rows == self.expected_rows
            && self.remaining == self.expected_remaining
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: statuses {:?} (expected {:?}), rows {} (expected {}), remaining {} (expected {}) → {}",
            self.name,
            self.statuses,
            self.expected,
            self.rows,
            self.expected_rows,
            self.remaining,
            self.expected_remaining,
            if self.holds() { "OK" } else { "FAILED" }
        )
    }
}

pub async fn insert_slot(admin: &MySqlPool, capacity: u32) -> u64 {
    sqlx::query(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining) \
         VALUES (UTC_TIMESTAMP() + INTERVAL 1 DAY, UTC_TIMESTAMP() + INTERVAL 25 HOUR, ?, ?)",
    )
    .bind(capacity)
    .bind(capacity)
    .execute(admin)
    .await
    .expect("insert slot")
    .last_insert_id()
}

async fn slot_state(admin: &MySqlPool, slot: u64) -> (i64, u32) {
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM holds WHERE slot_id = ?")
        .bind(slot)
        .fetch_one(admin)
        .await
        .expect("count");
    let remaining: u32 = sqlx::query_scalar("SELECT remaining FROM slots WHERE id = ?")
        .bind(slot)
        .fetch_one(admin)
        .await
        .expect("slot");
    (rows, remaining)
}

/// Sends one request per caller, each from its own client (its own
/// connection), all released together; returns the statuses.
async fn burst(requests: Vec<reqwest::RequestBuilder>) -> BTreeMap<u16, usize> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    let tasks = requests.into_iter().map(|request| {
        let barrier = barrier.clone();
        tokio::spawn(async move {
            barrier.wait().await;
            request
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        })
    });
    let mut statuses = BTreeMap::new();
    for status in join_all(tasks).await {
        *statuses.entry(status.expect("caller")).or_default() += 1;
    }
    statuses
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("http client")
}

fn hold(target: &Target<'_>, slot: u64, key: &str) -> reqwest::RequestBuilder {
    target
        .post(&format!("/slots/{slot}/hold"))
        .header("Idempotency-Key", key)
}

/// 20 holds on a slot with one seat → one 201, nineteen 409, one row.
pub async fn holds_on_one_seat(target: &Target<'_>, admin: &MySqlPool) -> Outcome {
    let slot = insert_slot(admin, 1).await;
    let requests = (0..CALLERS)
        .map(|_| hold(target, slot, &uuid::Uuid::new_v4().to_string()))
        .collect();
    let statuses = burst(requests).await;
    let (rows, remaining) = slot_state(admin, slot).await;
    Outcome {
        name: "20 holds on a slot with one seat",
        statuses,
        rows,
        remaining,
        expected: BTreeMap::from([(201, 1), (409, CALLERS - 1)]),
        expected_rows: 1,
        expected_remaining: 1,
    }
}

/// 20 confirms competing for one seat → one 200, nineteen 409,
/// remaining = 0. Twenty held holds on one seat can only exist out of band
/// (the hold path refuses them), so they are written directly, counter
/// included, owned by the target's client.
pub async fn confirms_for_one_seat(target: &Target<'_>, admin: &MySqlPool) -> Outcome {
    let slot = insert_slot(admin, 1).await;
    let owner = target.owner(admin).await;
    let mut ids = Vec::new();
    for _ in 0..CALLERS {
        let id = sqlx::query(
            "INSERT INTO holds (slot_id, client_id, idempotency_key, status, expires_at) \
             VALUES (?, ?, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE)",
        )
        .bind(slot)
        .bind(owner)
        .bind(uuid::Uuid::new_v4().to_string())
        .execute(admin)
        .await
        .expect("insert hold")
        .last_insert_id();
        ids.push(id);
    }
    sqlx::query("UPDATE slots SET held = ? WHERE id = ?")
        .bind(CALLERS as u32)
        .bind(slot)
        .execute(admin)
        .await
        .expect("counter");
    let requests = ids
        .iter()
        .map(|id| target.post(&format!("/holds/{id}/confirm")))
        .collect();
    let statuses = burst(requests).await;
    let (rows, remaining) = slot_state(admin, slot).await;
    Outcome {
        name: "20 confirms competing for one seat",
        statuses,
        rows,
        remaining,
        expected: BTreeMap::from([(200, 1), (409, CALLERS - 1)]),
        expected_rows: CALLERS as i64,
        expected_remaining: 0,
    }
}

/// 20 holds with the same key → one 201, nineteen 200, one row; on any
/// capacity, one seat included.
pub async fn holds_with_one_key(target: &Target<'_>, admin: &MySqlPool, capacity: u32) -> Outcome {
    let slot = insert_slot(admin, capacity).await;
    let key = uuid::Uuid::new_v4().to_string();
    let requests = (0..CALLERS).map(|_| hold(target, slot, &key)).collect();
    let statuses = burst(requests).await;
    let (rows, remaining) = slot_state(admin, slot).await;
    Outcome {
        name: if capacity == 1 {
            "20 holds with the same key, one seat"
        } else {
            "20 holds with the same key"
        },
        statuses,
        rows,
        remaining,
        expected: BTreeMap::from([(200, CALLERS - 1), (201, 1)]),
        expected_rows: 1,
        expected_remaining: capacity,
    }
}

/// All of the seed's table, in order.
pub async fn seed_table(target: &Target<'_>, admin: &MySqlPool) -> Vec<Outcome> {
    vec![
        holds_on_one_seat(target, admin).await,
        confirms_for_one_seat(target, admin).await,
        holds_with_one_key(target, admin, 5).await,
        holds_with_one_key(target, admin, 1).await,
    ]
}
