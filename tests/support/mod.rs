//! Test support: a fresh database per test on the real MariaDB/MySQL, apps
//! that behave like Lambda execution environments (one connection each),
//! API Gateway v2 events, and the count-based oracle of the invariants.

pub mod answers;
pub mod caps;
pub mod counters;
pub mod db_users;
pub mod delivery;
pub mod dev;
pub mod events;
pub mod history;
pub mod invoke_api;
pub mod keys;
pub mod line;
pub mod locks;
pub mod logs;
pub mod moto;
pub mod planted;
pub mod private_mariadb;
pub mod private_redis;
pub mod private_server;
pub mod proxy;
pub mod receiver;
pub mod runtime_api;
pub mod scenarios;
pub mod seats;
pub mod slots;
pub mod smoke;
pub mod smoke_webhooks;
pub mod told;
pub mod traffic;
pub mod watch;
pub mod webhooks;

use lambda_http::{Body, Request, Response};
use serde_json::Value;
use shared::cache::{AvailabilityCache, CacheSettings, Keys};
use shared::config::{Access, AuthMode};
use shared::domain::{IdempotencyKey, SlotId};
use shared::{App, Config};
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, MySqlPool};
use std::str::FromStr;
use std::time::Duration;

/// The Redis the cache tests use; each test's keys are namespaced by its
/// database name, so tests never see each other's entries.
pub fn redis_url() -> String {
    std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The server the tests use; each test gets its own database on it.
pub fn server_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
}

pub struct TestDb {
    pub name: String,
    /// The server it lives on (`mysql://user@host:port`, no database).
    pub server: String,
    pub url: String,
    /// For setting up rows and reading them back; never used as "a client".
    pub admin: MySqlPool,
}

impl TestDb {
    /// Creates `sb_test_<random>` and runs the migrations in it.
    pub async fn new() -> Self {
        Self::on(&server_url()).await
    }

    /// [`TestDb::new`] on the server at `server_url` (e.g. a private one).
    pub async fn on(server_url: &str) -> Self {
        let name = format!("sb_test_{}", uuid::Uuid::new_v4().simple());
        let server = MySqlConnectOptions::from_str(server_url).expect("server url");
        let mut conn = server
            .connect()
            .await
            .expect("connect to the test database server");
        conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .await
            .expect("create test database");
        conn.close().await.ok();
        let server = server_url.trim_end_matches('/').to_string();
        let url = format!("{server}/{name}");
        let admin = MySqlPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .expect("connect to test database");
        shared::db::MIGRATOR.run(&admin).await.expect("migrations");
        Self {
            name,
            server,
            url,
            admin,
        }
    }

    /// One Lambda execution environment: its own one-connection pool.
    pub fn app(&self) -> App {
        self.app_with_hold_ttl(Duration::from_secs(300))
    }

    pub fn app_with_hold_ttl(&self, hold_ttl: Duration) -> App {
        App::new(self.config(hold_ttl)).expect("app")
    }

    /// An environment with the availability cache on, `settings` tuned by
    /// the test, pointing at `redis_url` (which may be a dead address).
    pub fn cached_app(&self, redis_url: &str, settings: CacheSettings) -> App {
        let config = Config {
            redis_url: Some(redis_url.to_string()),
            cache_ttl: settings.ttl,
            ..self.config(Duration::from_secs(300))
        };
        let pool = shared::db::connect_lazy(&self.url, 1).expect("pool");
        let cache = AvailabilityCache::new(redis_url, &self.name, settings).expect("cache client");
        let booking = shared::Booking::new(pool, config.hold_ttl, Some(cache));
        App::assemble(config, booking)
    }

    pub fn cache_keys(&self) -> Keys {
        Keys::new(&self.name)
    }

    pub fn config(&self, hold_ttl: Duration) -> Config {
        Config {
            database_url: self.url.clone(),
            redis_url: None,
            cache_ttl: Duration::from_secs(10),
            hold_ttl,
            holds: shared::config::HoldRules::default(),
            // Part I's anonymous API: the seed's tests run in `open` mode
            // (tests/auth.rs covers `api-key`).
            access: Access {
                mode: AuthMode::Open,
                ..Access::default()
            },
            // What Settings gives without CACHE_NAMESPACE: cache_keys().
            cache_namespace: self.name.clone(),
            cache_user: None,
            webhooks: shared::config::WebhookRules::default(),
        }
    }

    pub async fn insert_slot(&self, capacity: u32) -> SlotId {
        let done = sqlx::query(
            // Tomorrow: a slot that has started takes no holds (SPEC §9).
            "INSERT INTO slots (starts_at, ends_at, capacity, remaining) \
             VALUES (UTC_TIMESTAMP() + INTERVAL 1 DAY, UTC_TIMESTAMP() + INTERVAL 25 HOUR, ?, ?)",
        )
        .bind(capacity)
        .bind(capacity)
        .execute(&self.admin)
        .await
        .expect("insert slot");
        SlotId(done.last_insert_id())
    }

    /// `(capacity, remaining)` as stored.
    pub async fn slot(&self, slot: SlotId) -> (u32, u32) {
        sqlx::query_as("SELECT capacity, remaining FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&self.admin)
            .await
            .expect("slot row")
    }

    /// How many hold rows match: rows, not seats (see [`TestDb::seats`]).
    pub async fn count_holds(&self, slot: SlotId, condition: &'static str) -> i64 {
        // `condition` comes from the tests themselves, never from input.
        let sql = format!("SELECT COUNT(*) FROM holds WHERE slot_id = ? AND ({condition})");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(slot.0)
            .fetch_one(&self.admin)
            .await
            .expect("count holds")
    }

    /// The seats of the matching holds: each counts its `quantity`
    /// (SPEC §9), which is what every invariant is stated in.
    pub async fn seats(&self, slot: SlotId, condition: &'static str) -> i64 {
        // `condition` comes from the tests themselves, never from input.
        let sql = format!(
            "SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM holds \
             WHERE slot_id = ? AND ({condition})"
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(slot.0)
            .fetch_one(&self.admin)
            .await
            .expect("sum seats")
    }

    /// How many holds are active (rows) by the one definition of the
    /// service; the oracle is [`TestDb::active_seats`].
    pub async fn active_holds(&self, slot: SlotId) -> i64 {
        self.count_holds(slot, shared::booking::ACTIVE_HOLD).await
    }

    /// The oracle: the seats of the active holds, by the one definition of
    /// the service.
    pub async fn active_seats(&self, slot: SlotId) -> i64 {
        self.seats(slot, shared::booking::ACTIVE_HOLD).await
    }

    /// Checks every invariant of SPEC §2 on every slot, from the rows, in
    /// seats (SPEC §9).
    pub async fn assert_invariants(&self) {
        let slots: Vec<(u64, u32, u32)> =
            sqlx::query_as("SELECT id, capacity, remaining FROM slots ORDER BY id")
                .fetch_all(&self.admin)
                .await
                .expect("slots");
        for (id, capacity, remaining) in slots {
            let slot = SlotId(id);
            let confirmed = self.seats(slot, "status = 'confirmed'").await;
            let active = self.active_seats(slot).await;
            assert!(
                remaining <= capacity,
                "slot {id}: remaining {remaining} > capacity {capacity}"
            );
            assert_eq!(
                i64::from(remaining),
                i64::from(capacity) - confirmed,
                "slot {id}: remaining must be capacity − confirmed seats"
            );
            assert!(
                active <= i64::from(remaining),
                "slot {id}: {active} seats in active holds but only {remaining} remaining (oversold)"
            );
        }
    }

    /// The definition D of the held-seats counter (docs/DESIGN.md), on
    /// every slot: `held` = the seats of the slot's `held` holds that
    /// expire after its watermark `reclaimed_until`; and none of those
    /// expires before the slot's floor `held_expires_min` (DESIGN, "The
    /// projection's floor"). Read in one snapshot.
    pub async fn assert_held_counter(&self) {
        let drift: Vec<(u64, u32, i64, i64)> = sqlx::query_as(
            "SELECT s.id, s.held, (SELECT CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) \
             FROM holds h WHERE h.slot_id = s.id \
             AND h.status = 'held' AND h.expires_at > s.reclaimed_until) AS counted, \
             (SELECT COUNT(*) FROM holds h WHERE h.slot_id = s.id AND h.status = 'held' \
             AND h.expires_at > s.reclaimed_until AND h.expires_at < s.held_expires_min) AS below \
             FROM slots s ORDER BY s.id",
        )
        .fetch_all(&self.admin)
        .await
        .expect("held counters");
        for (id, held, counted, below) in drift {
            assert_eq!(
                i64::from(held),
                counted,
                "slot {id}: held {held}, but the held holds that expire after its watermark have {counted} seats"
            );
            assert_eq!(
                below, 0,
                "slot {id}: {below} counted holds expire before held_expires_min"
            );
        }
    }

    /// After a test moved a hold's expiry earlier by hand (the service
    /// never does): its slot's floor follows it down, as a claim's would
    /// have, so the counters stay as the service keeps them
    /// (docs/DESIGN.md, "The projection's floor").
    pub async fn lower_floor_to(&self, hold: u64) {
        sqlx::query(
            "UPDATE slots s JOIN holds h ON h.slot_id = s.id \
             SET s.held_expires_min = LEAST(s.held_expires_min, h.expires_at) WHERE h.id = ?",
        )
        .bind(hold)
        .execute(&self.admin)
        .await
        .expect("the floor");
    }

    /// Drops the database; call at the end of a test.
    pub async fn drop(self) {
        let name = self.name.clone();
        self.admin.close().await;
        let server = MySqlConnectOptions::from_str(&self.server).expect("url");
        if let Ok(mut conn) = server.connect().await {
            let _ = conn
                .execute(sqlx::AssertSqlSafe(format!("DROP DATABASE `{name}`")))
                .await;
        }
    }
}

impl TestDb {
    /// `n` environments with holds of `hold_ttl` and an open connection
    /// each, like warm Lambdas.
    pub async fn warm_apps(&self, n: usize, hold_ttl: Duration) -> Vec<App> {
        let apps: Vec<App> = (0..n).map(|_| self.app_with_hold_ttl(hold_ttl)).collect();
        for app in &apps {
            warm(app).await;
        }
        apps
    }
}

/// Runs `call(i, app)` on every app at once, each on its own task (its own
/// execution environment), released together behind a barrier; returns
/// the results in caller order.
pub async fn together<T, F, Fut>(apps: Vec<App>, call: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize, App) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send,
{
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(apps.len()));
    let call = std::sync::Arc::new(call);
    let tasks = apps.into_iter().enumerate().map(|(i, app)| {
        let (barrier, call) = (barrier.clone(), call.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            call(i, app).await
        })
    });
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.expect("caller task"))
        .collect()
}

/// Opens the app's connection, as a warm Lambda environment has it.
pub async fn warm(app: &App) {
    sqlx::query("SELECT 1")
        .execute(app.booking.pool())
        .await
        .expect("warm up");
}

/// A new hold on `slot` (201), confirmed (200), through the handlers: the
/// hold resource as confirmed.
pub async fn hold_and_confirm(app: &App, slot: SlotId) -> Value {
    let request = hold_request(&slot.0.to_string(), Some(new_key().as_str()));
    let (status, held) = read(shared::http::hold(app, request).await.unwrap());
    assert_eq!(status, 201, "{held}");
    let hold_id = held["id"].as_u64().expect("id").to_string();
    let (status, confirmed) = read(
        shared::http::confirm(app, confirm_request(&hold_id))
            .await
            .unwrap(),
    );
    assert_eq!(status, 200, "{confirmed}");
    confirmed
}

pub fn new_key() -> IdempotencyKey {
    IdempotencyKey::parse(&uuid::Uuid::new_v4().to_string()).expect("uuid")
}

/// An API Gateway HTTP API (payload v2) event from `tests/fixtures`, with
/// the path, path parameter and headers of this request.
/// A header given as `None` is removed from the fixture.
pub fn event(
    fixture: &str,
    path: &str,
    id: Option<&str>,
    headers: &[(&str, Option<&str>)],
) -> Request {
    let event = event_json(fixture, path, id, headers);
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

/// The JSON of [`event`], as Lambda hands it to a function process.
pub fn event_json(
    fixture: &str,
    path: &str,
    id: Option<&str>,
    headers: &[(&str, Option<&str>)],
) -> Value {
    let file = format!("{}/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut event: Value = serde_json::from_str(&text).expect("fixture json");
    event["rawPath"] = path.into();
    event["requestContext"]["http"]["path"] = path.into();
    match id {
        Some(id) => event["pathParameters"] = serde_json::json!({ "id": id }),
        None => {
            event
                .as_object_mut()
                .expect("object")
                .remove("pathParameters");
        }
    }
    let fixture_headers = event["headers"].as_object_mut().expect("headers");
    for (name, value) in headers {
        // Header names are case-insensitive: replace the fixture's spelling.
        fixture_headers.retain(|existing, _| !existing.eq_ignore_ascii_case(name));
        if let Some(value) = value {
            fixture_headers.insert((*name).to_string(), (*value).into());
        }
    }
    event
}

pub fn hold_request(slot: &str, key: Option<&str>) -> Request {
    let path = format!("/slots/{slot}/hold");
    event(
        "apigw_v2_hold.json",
        &path,
        Some(slot),
        &[("idempotency-key", key)],
    )
}

pub fn confirm_request(hold: &str) -> Request {
    event(
        "apigw_v2_confirm.json",
        &format!("/holds/{hold}/confirm"),
        Some(hold),
        &[],
    )
}

pub fn cancel_request(hold: &str) -> Request {
    event(
        "apigw_v2_cancel.json",
        &format!("/holds/{hold}"),
        Some(hold),
        &[],
    )
}

pub fn availability_request() -> Request {
    event(
        "apigw_v2_availability.json",
        "/slots/availability",
        None,
        &[],
    )
}

/// `method` on `path`, under API Gateway's `route` key, with `id` as the
/// path parameter (the confirm fixture with another route).
fn route_request(method: &str, route: &str, path: &str, id: Option<&str>) -> Value {
    let mut event = event_json("apigw_v2_confirm.json", path, id, &[]);
    event["routeKey"] = format!("{method} {route}").into();
    event["requestContext"]["routeKey"] = event["routeKey"].clone();
    event["requestContext"]["http"]["method"] = method.into();
    event
}

fn parsed(event: &Value) -> Request {
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

/// `GET /holds/{id}`
pub fn get_hold_request(hold: &str) -> Request {
    parsed(&route_request(
        "GET",
        "/holds/{id}",
        &format!("/holds/{hold}"),
        Some(hold),
    ))
}

/// `POST /holds/{id}/extend`
pub fn extend_request(hold: &str) -> Request {
    parsed(&route_request(
        "POST",
        "/holds/{id}/extend",
        &format!("/holds/{hold}/extend"),
        Some(hold),
    ))
}

/// `POST /holds/{id}/move` with `body` (SPEC §17).
pub fn move_request(hold: &str, body: &str) -> Request {
    let event = route_request(
        "POST",
        "/holds/{id}/move",
        &format!("/holds/{hold}/move"),
        Some(hold),
    );
    with_body(parsed(&event), body)
}

/// `POST /slots/{id}/waitlist` with this key and body (SPEC §18).
pub fn join_request(slot: &str, key: &str, body: &str) -> Request {
    let mut event = route_request(
        "POST",
        "/slots/{id}/waitlist",
        &format!("/slots/{slot}/waitlist"),
        Some(slot),
    );
    event["headers"]["idempotency-key"] = key.into();
    with_body(parsed(&event), body)
}

/// `GET` or `DELETE /waitlist/{id}`.
pub fn entry_request(method: &str, entry: &str) -> Request {
    parsed(&route_request(
        method,
        "/waitlist/{id}",
        &format!("/waitlist/{entry}"),
        Some(entry),
    ))
}

/// `GET /holds?<raw_query>`, the query as a client sent it (API Gateway
/// passes it raw; lambda_http decodes its parameters).
pub fn find_hold_request(raw_query: &str) -> Request {
    let mut event = route_request("GET", "/holds", "/holds", None);
    event["rawQueryString"] = raw_query.into();
    parsed(&event)
}

/// `GET /holds?idempotency_key=<key>` (a key that needs no escaping).
pub fn find_by_key_request(key: &str) -> Request {
    find_hold_request(&format!("idempotency_key={key}"))
}

/// The request with this body (as API Gateway passes a text body).
pub fn with_body(mut request: Request, body: &str) -> Request {
    *request.body_mut() = Body::Text(body.to_string());
    request
}

/// Status and parsed JSON body of a handler's response, after checking that
/// it is JSON and leaks nothing internal.
pub fn read(response: Response<Body>) -> (u16, Value) {
    let status = response.status().as_u16();
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json"),
        "every response is JSON"
    );
    let bytes = response.body().to_vec();
    let text = String::from_utf8(bytes).expect("utf-8 body");
    assert_no_leak(&text);
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

/// No SQL, stack trace or connection string in anything a client sees.
pub fn assert_no_leak(text: &str) {
    let lower = text.to_ascii_lowercase();
    for needle in [
        "select ",
        "insert ",
        "update ",
        "mysql://",
        "redis://",
        "sqlx",
        "panicked",
        "backtrace",
        "src/",
        ".rs:",
        "error 1",
        "sqlstate",
    ] {
        assert!(!lower.contains(needle), "response leaks {needle:?}: {text}");
    }
}

/// Hold id of a hold resource in a response body.
pub fn id_of(body: &Value) -> String {
    body["id"].as_u64().expect("hold id").to_string()
}
