//! Configuration from the environment, validated once at cold start.
//!
//! A bad value stops the function before it serves anything, with one line
//! that names the variable, the value and what is allowed.
//!
//! Two steps:
//! 1. [`Settings::from_env`] reads and checks every variable. Pure and
//!    synchronous: it never calls AWS.
//! 2. [`Settings::resolve`] does what needs the network, once per execution
//!    environment: it reads the database secret (`DB_SECRET_ARN`) and
//!    discovers the cache endpoint (`CACHE_NAME`), giving a [`Config`] plus
//!    the database password, kept apart so `Config` is always safe to log.
//!
//! This file holds the resolved types; `settings` is step 1, `resolve`
//! step 2, `error` the refusal line and the URL redaction.
//!
//! Where the database is (first match wins):
//! - `DATABASE_URL` non-empty: that URL (local, `sam local`, tests);
//! - `DB_HOST` non-empty: RDS Proxy mode, with `DB_PORT` (default 3306),
//!   `DB_NAME`, `DB_USER` and `DB_SECRET_ARN` (JSON with `username` and
//!   `password`), over TLS with full certificate verification;
//! - otherwise [`DEFAULT_DATABASE_URL`].
//!
//! Where the cache is:
//! - `REDIS_URL` non-empty: that URL;
//! - else `CACHE_NAME` non-empty: discovered by name through the ElastiCache
//!   API (a failure logs a warning and runs without the cache);
//! - else `REDIS_URL` set but empty: no cache;
//! - else (neither set) [`DEFAULT_REDIS_URL`].
//!
//! An empty variable counts as unset everywhere except `REDIS_URL`, where
//! empty explicitly turns the cache off (unless `CACHE_NAME` names one).
//!
//! The cache's user: `CACHE_USER` with `CACHE_SECRET_ARN` (JSON with
//! `password`), both or neither; with them, `AUTH` as that user over TLS
//! only (an explicit `REDIS_URL` must then be `rediss://`). A secret that
//! cannot be read leaves the cache off, with a warning.
//!
//! `CACHE_NAMESPACE` (the template: the stack's name) goes in front of the
//! database's name in every cache key: `<namespace>:<database>`; unset, the
//! database's name alone.
//!
//! `WEBHOOK_ALLOW_HTTP`, `WEBHOOK_ALLOW_PRIVATE` and
//! `WEBHOOK_MAX_PER_CLIENT` are [`WebhookRules`]; `WEBHOOK_SECRET_KEY` is
//! read apart (`webhooks::SealKey`), since a `Config` holds no secret.
//!
//! `EVENT_BUS_NAME` is the feed's bus ([`PublisherSettings`], read by
//! `events-publish` beside these, and by the functions that change holds
//! or slots for their trigger after a change: [`trigger_bus`]). Set for
//! the sweeper, it keeps every event the publisher has not sent past its
//! retention ([`HoldRules::events_published`]).

mod error;
mod holds;
mod publisher;
#[cfg(test)]
mod redact_tests;
mod resolve;
mod settings;
#[cfg(test)]
mod tests;
mod webhooks;

pub use crate::secret::Secret;
pub use error::{ConfigError, redact_url};
pub use holds::HoldRules;
pub use publisher::{PublisherSettings, trigger_bus};
pub use resolve::Resolved;
pub use settings::{CacheSource, CacheUser, DatabaseSource, ProxyDatabase, Settings};
use std::time::Duration;
pub use webhooks::{DEFAULT_WEBHOOK_MAX_PER_CLIENT, WebhookRules};

pub const DEFAULT_DATABASE_URL: &str = "mysql://root@127.0.0.1:3306/slot_booking";
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
pub const DEFAULT_DB_PORT: u16 = 3306;

/// The resolved configuration an [`App`](crate::App) is built from. Holds
/// no secret: in RDS Proxy mode `database_url` names user, host, port,
/// database and TLS mode, and the password travels separately.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub database_url: String,
    /// `None`: the cache is off (`REDIS_URL` empty, or discovery failed).
    pub redis_url: Option<String>,
    /// Freshness of the availability cache, 5–15 s.
    pub cache_ttl: Duration,
    /// How long a hold keeps its seats.
    pub hold_ttl: Duration,
    /// Quantity, lifetime and retention of holds.
    pub holds: HoldRules,
    pub access: Access,
    /// What the cache's keys are namespaced by, so that stacks and stages
    /// sharing one cache never read each other's figures:
    /// `<CACHE_NAMESPACE>:<database>`, or the database's name alone.
    pub cache_namespace: String,
    /// The cache user (`CACHE_USER`) when the cache is reached as one; its
    /// password travels separately, like the database's.
    pub cache_user: Option<String>,
    /// What a webhook's endpoint may be, and how many a client has (SPEC
    /// §20).
    pub webhooks: WebhookRules,
}

/// Who may call the API, how fast and how much it may hold (SPEC §8,
/// §16): `AUTH_MODE`, `RATE_LIMIT_PER_SECOND` and `CLIENT_MAX_HELD_SEATS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub mode: AuthMode,
    /// A client's sustained rate when its own is NULL; 0: unlimited.
    pub rate_limit_per_second: u32,
    /// A client's cap on seats in active holds when its own is NULL; 0:
    /// unlimited.
    pub client_max_held_seats: u32,
}

impl Default for Access {
    fn default() -> Self {
        Self {
            mode: AuthMode::ApiKey,
            rate_limit_per_second: DEFAULT_RATE_LIMIT_PER_SECOND,
            client_max_held_seats: DEFAULT_CLIENT_MAX_HELD_SEATS,
        }
    }
}

/// `AUTH_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Every route needs a key (the default everywhere).
    ApiKey,
    /// The booking routes take requests without a key as the built-in
    /// `anonymous` client; admin routes still need an admin key.
    Open,
}

pub const DEFAULT_RATE_LIMIT_PER_SECOND: u32 = 20;
/// The same bound as a client's own `rate_limit_per_second`.
pub const MAX_RATE_LIMIT_PER_SECOND: u32 = 1_000_000;
pub const DEFAULT_CLIENT_MAX_HELD_SEATS: u32 = 500;
/// The same bound as a client's own `max_held_seats` (and a slot's
/// capacity).
pub const MAX_HELD_SEATS: u32 = 1_000_000_000;

impl Config {
    /// The database's name (the last path segment of `database_url`).
    pub fn database_name(&self) -> String {
        database_in_url(&self.database_url)
    }
}

/// The last path segment of a `mysql://` URL, without its query.
pub(crate) fn database_in_url(url: &str) -> String {
    let path = url
        .rsplit_once('/')
        .map(|(_, tail)| tail)
        .unwrap_or_default();
    path.split('?').next().unwrap_or_default().to_string()
}
