//! The bench database and the simulated Lambda execution environments.
//!
//! The database (`slot_booking_bench` by default) is dropped and created
//! again at every run and migrated with the service's own migrations. Each
//! environment is a `shared::App` built exactly as a function builds it:
//! its own pool of one connection and its own cache connection, and
//! authenticates as a real request does (SPEC §8): by the bench client's
//! key, through `app.gate`, its rate limit checked in the cache.

use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;
use shared::booking::DEFAULT_BUDGET;
use shared::cache::Keys;
use shared::clients::{ApiKey, Caller, ClientAdmin, ClientId, Needs, NewClient, Role};
use shared::{App, Booking, Config};
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, MySqlPool};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Slots are made with this capacity unless a scenario needs a full one:
/// the measured holds never run out of seats.
pub const ROOMY: u32 = 10_000_000;

/// Rows per multi-row INSERT when seeding.
pub(crate) const BATCH: usize = 1_000;

/// The bench client's rate: the highest a client may have, so that its
/// limit is checked on every call (the script really runs) and never
/// refuses one.
const RATE: u32 = shared::config::MAX_RATE_LIMIT_PER_SECOND;

pub struct Bench {
    pub name: String,
    pub url: String,
    pub redis_url: String,
    /// For seeding and reading back; never one of the measured clients.
    pub admin: MySqlPool,
    /// The booker every measured call is made by, and the owner of the
    /// pre-made holds.
    pub client: ClientId,
    /// Its `Authorization` header value.
    pub bearer: String,
    /// Bookers at the default cap (`CLIENT_MAX_HELD_SEATS`), the
    /// `Authorization` header values: a capped hold is made by the next.
    pub capped: Arc<Vec<String>>,
    /// As many bookers with no cap, taking turns the same way: the
    /// reference the cap's cost is measured against.
    pub uncapped: Arc<Vec<String>>,
}

/// One Lambda execution environment, plus a raw Redis connection of its
/// own for the reference `GET`.
#[derive(Clone)]
pub struct Env {
    pub app: App,
    /// The very pool (the one connection) the service uses: the raw
    /// sequences run on it, so the ratio measures only the service layer.
    pub pool: MySqlPool,
    /// The same service on the same pool without the cache: what confirm
    /// costs without its invalidation after commit.
    pub uncached: Booking,
    pub redis: ConnectionManager,
    pub client: ClientId,
    pub bearer: String,
    pub capped: Arc<Vec<String>>,
    pub uncapped: Arc<Vec<String>>,
    /// Shared by every environment: consecutive capped holds are made by
    /// different clients.
    pub turn: Arc<AtomicUsize>,
}

impl Env {
    /// What a booking route does first: the caller by its key (a warm
    /// look-up is this environment's own cache), then its rate limit, one
    /// cache round trip.
    pub async fn admit(&self) -> Result<Caller, shared::Error> {
        let deadline = tokio::time::Instant::now() + DEFAULT_BUDGET;
        let bearer = Some(self.bearer.as_str());
        self.app.gate.admit(bearer, Needs::Booker, deadline).await
    }

    /// [`Env::admit`] as the next of the capped clients.
    pub async fn admit_capped(&self) -> Result<Caller, shared::Error> {
        self.admit_next(&self.capped).await
    }

    /// [`Env::admit`] as the next of the uncapped clients.
    pub async fn admit_uncapped(&self) -> Result<Caller, shared::Error> {
        self.admit_next(&self.uncapped).await
    }

    async fn admit_next(&self, bearers: &[String]) -> Result<Caller, shared::Error> {
        let n = self.turn.fetch_add(1, Ordering::Relaxed);
        let bearer = &bearers[n % bearers.len()];
        let deadline = tokio::time::Instant::now() + DEFAULT_BUDGET;
        self.app
            .gate
            .admit(Some(bearer.as_str()), Needs::Booker, deadline)
            .await
    }

    /// What `GET /slots/availability` does first: the caller only; its
    /// limit is checked in the cache read's own round trip.
    pub async fn identify(&self) -> Result<Caller, shared::Error> {
        let deadline = tokio::time::Instant::now() + DEFAULT_BUDGET;
        let bearer = Some(self.bearer.as_str());
        self.app
            .gate
            .identify(bearer, Needs::Booker, deadline)
            .await
    }
}

impl Bench {
    /// Drops and creates the bench database, then migrates it.
    pub async fn create(server: &str, name: &str, redis_url: &str) -> Result<Self, String> {
        let options =
            MySqlConnectOptions::from_str(server).map_err(|e| format!("{server}: {e}"))?;
        let mut conn = options
            .connect()
            .await
            .map_err(|e| format!("cannot connect to {server}: {e}"))?;
        for sql in [
            format!("DROP DATABASE IF EXISTS `{name}`"),
            format!("CREATE DATABASE `{name}`"),
        ] {
            conn.execute(sqlx::AssertSqlSafe(sql))
                .await
                .map_err(|e| e.to_string())?;
        }
        conn.close().await.ok();
        let url = format!("{}/{name}", server.trim_end_matches('/'));
        let admin = MySqlPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .map_err(|e| e.to_string())?;
        shared::db::MIGRATOR
            .run(&admin)
            .await
            .map_err(|e| format!("migrations: {e}"))?;
        // The bench's own table (not the service's schema): one row to
        // time bare commits on.
        for sql in [
            "CREATE TABLE bench_probe (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE = InnoDB",
            "INSERT INTO bench_probe VALUES (1, 0)",
        ] {
            sqlx::query(sql)
                .execute(&admin)
                .await
                .map_err(|e| e.to_string())?;
        }
        // Made as `POST /clients` makes one: its key shown once, here.
        let new = NewClient {
            name: "bench".into(),
            role: Role::Booker,
            rate_limit_per_second: Some(RATE),
            max_held_seats: Some(0), // the benches measure no cap
        };
        let (client, bearer) = make_client(&admin, new).await?;
        let (mut capped, mut uncapped) = (Vec::new(), Vec::new());
        for n in 0..CAPPED_CLIENTS {
            for (name, cap, bearers) in [
                ("capped", None, &mut capped), // CLIENT_MAX_HELD_SEATS, the default
                ("uncapped", Some(0), &mut uncapped),
            ] {
                let new = NewClient {
                    name: format!("bench-{name}-{n}"),
                    role: Role::Booker,
                    rate_limit_per_second: Some(RATE),
                    max_held_seats: cap,
                };
                bearers.push(make_client(&admin, new).await?.1);
            }
        }
        Ok(Self {
            name: name.to_string(),
            url,
            redis_url: redis_url.to_string(),
            admin,
            client,
            bearer,
            capped: Arc::new(capped),
            uncapped: Arc::new(uncapped),
        })
    }

    /// A client made as `POST /clients` makes one, its bearer shown once.
    pub async fn client(&self, new: NewClient) -> Result<(ClientId, String), String> {
        make_client(&self.admin, new).await
    }

    pub async fn drop_database(self) {
        let name = self.name.clone();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE `{name}`")))
            .execute(&self.admin)
            .await;
        self.admin.close().await;
    }

    /// Empties both tables and the cache entries, between scenario groups
    /// (the projection reads every slot, so groups must not see each
    /// other's rows).
    pub async fn reset(&self) -> Result<(), String> {
        let mut conn = self.admin.acquire().await.map_err(|e| e.to_string())?;
        for sql in [
            "SET FOREIGN_KEY_CHECKS = 0",
            "TRUNCATE TABLE holds",
            "TRUNCATE TABLE slots",
            "SET FOREIGN_KEY_CHECKS = 1",
            // No holds: every bound is exact at 0.
            "UPDATE client_allowances SET held = 0",
        ] {
            conn.execute(sql).await.map_err(|e| e.to_string())?;
        }
        drop(conn);
        let keys = self.cache_keys();
        let mut redis = self.redis().await?;
        redis::cmd("DEL")
            .arg(&keys.fresh)
            .arg(&keys.stale)
            .arg(&keys.lock)
            .arg(keys.rate(self.client))
            .query_async::<()>(&mut redis)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    pub fn cache_keys(&self) -> Keys {
        Keys::new(&self.name)
    }

    pub async fn redis(&self) -> Result<ConnectionManager, String> {
        let client = redis::Client::open(self.redis_url.as_str()).map_err(|e| e.to_string())?;
        client
            .get_connection_manager()
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.redis_url))
    }

    /// `count` environments, connected (database and cache) and ready.
    pub async fn envs(&self, count: usize) -> Result<Vec<Env>, String> {
        self.envs_at(count, &self.url).await
    }

    /// [`Bench::envs`] reaching the bench database at `url` (through a
    /// delay line, `delay.rs`).
    pub async fn envs_at(&self, count: usize, url: &str) -> Result<Vec<Env>, String> {
        let mut envs = Vec::with_capacity(count);
        let turn = Arc::new(AtomicUsize::new(0));
        for _ in 0..count {
            let config = Config {
                database_url: url.to_string(),
                redis_url: Some(self.redis_url.clone()),
                // The longest allowed: a measured run of cache hits stays
                // inside one freshness window.
                cache_ttl: Duration::from_secs(15),
                hold_ttl: Duration::from_secs(300),
                holds: shared::config::HoldRules::default(),
                access: Default::default(),
                cache_namespace: self.name.clone(),
                cache_user: None,
                webhooks: shared::config::WebhookRules::default(),
            };
            let app = App::new(config).map_err(|e| e.to_string())?;
            let pool = app.booking.pool().clone();
            sqlx::query("SELECT 1")
                .execute(&pool)
                .await
                .map_err(|e| format!("environment cannot reach the database: {e}"))?;
            if let Some(cache) = app.booking.cache()
                && !cache.ping().await
            {
                return Err("environment cannot reach Redis".into());
            }
            let redis = self.redis().await?;
            let uncached = Booking::new(pool.clone(), app.config.hold_ttl, None);
            let env = Env {
                app,
                pool,
                uncached,
                redis,
                client: self.client,
                bearer: self.bearer.clone(),
                capped: self.capped.clone(),
                uncapped: self.uncapped.clone(),
                turn: turn.clone(),
            };
            // Its keys looked up once, as a warm environment has.
            env.admit()
                .await
                .map_err(|e| format!("environment cannot authenticate: {e}"))?;
            let deadline = tokio::time::Instant::now() + DEFAULT_BUDGET;
            for bearer in self.capped.iter().chain(self.uncapped.iter()) {
                env.app
                    .gate
                    .admit(Some(bearer.as_str()), Needs::Booker, deadline)
                    .await
                    .map_err(|e| format!("environment cannot authenticate: {e}"))?;
            }
            envs.push(env);
        }
        Ok(envs)
    }

    /// InnoDB's server-wide count of row lock waits so far.
    pub async fn row_lock_waits(&self) -> Result<u64, String> {
        let (_, value): (String, String) =
            sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'")
                .fetch_one(&self.admin)
                .await
                .map_err(|e| e.to_string())?;
        value
            .parse()
            .map_err(|_| format!("Innodb_row_lock_waits = {value}: not a number"))
    }

    /// p50 and p99 (ms) of 200 one-row autocommit UPDATEs: what a bare
    /// commit (its redo-log fsync) costs on this machine right now. A
    /// lone environment pays it on every hold and confirm.
    pub async fn commit_latency(&self) -> Result<(f64, f64), String> {
        let mut conn = self.admin.acquire().await.map_err(|e| e.to_string())?;
        let mut took = Vec::with_capacity(200);
        for _ in 0..200 {
            let started = std::time::Instant::now();
            sqlx::query("UPDATE bench_probe SET n = n + 1 WHERE id = 1")
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
            took.push(started.elapsed());
        }
        took.sort_unstable();
        Ok((
            crate::measure::percentile_ms(&took, 0.5),
            crate::measure::percentile_ms(&took, 0.99),
        ))
    }

    /// The database's clock `offset` from now: the one clock of expiry.
    pub async fn db_now_plus(&self, offset: Duration) -> Result<DateTime<Utc>, String> {
        sqlx::query_scalar("SELECT UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND")
            .bind(offset.as_micros() as i64)
            .fetch_one(&self.admin)
            .await
            .map_err(|e| e.to_string())
    }

    /// The oracle: the seats of the slot's active holds by the service's
    /// one definition.
    pub async fn active_holds(&self, slot: u64) -> Result<i64, String> {
        let sql = format!(
            "SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM holds WHERE slot_id = ? AND {}",
            shared::booking::ACTIVE_HOLD
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(slot)
            .fetch_one(&self.admin)
            .await
            .map_err(|e| e.to_string())
    }

    /// Slots that break an invariant of SPEC §2 and §9, from the rows, in
    /// seats: remaining must be capacity − confirmed, and active ≤ remaining.
    pub async fn oversold_slots(&self) -> Result<Vec<u64>, String> {
        let sql = format!(
            "SELECT s.id FROM slots s WHERE \
             CAST(s.remaining AS SIGNED) <> CAST(s.capacity AS SIGNED) - (SELECT COALESCE(SUM(h.quantity), 0) FROM holds h \
             WHERE h.slot_id = s.id AND h.status = 'confirmed') \
             OR (SELECT COALESCE(SUM(h.quantity), 0) FROM holds h WHERE h.slot_id = s.id AND {}) > s.remaining",
            shared::booking::ACTIVE_HOLD
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.admin)
            .await
            .map_err(|e| e.to_string())
    }
}

/// A dataset's size from the environment variable `name` (at least `min`,
/// for a quick look), else `default`.
pub fn count_from_env(name: &str, min: u64, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= min)
        .unwrap_or(default)
}

/// How many capped clients take turns at capped holds (and uncapped ones
/// at the reference's): enough that none reaches the default cap (500
/// seats) in a case of the `fair_use` group.
pub const CAPPED_CLIENTS: usize = 256;

/// Made as `POST /clients` makes one: its id and `Authorization` value.
async fn make_client(admin: &MySqlPool, new: NewClient) -> Result<(ClientId, String), String> {
    let deadline = tokio::time::Instant::now() + DEFAULT_BUDGET;
    let made = ClientAdmin::new(admin.clone())
        .create(&new, deadline)
        .await
        .map_err(|e| format!("client {}: {e}", new.name))?;
    let key = made.key.as_deref().and_then(ApiKey::parse);
    let key = key.ok_or_else(|| format!("client {}: no key in the answer", new.name))?;
    Ok((made.id, format!("Bearer {}", key.expose())))
}
