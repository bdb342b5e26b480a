//! The cache's tunables and its client: how long it waits, backs off and
//! locks, and how it authenticates.

use crate::secret::Secret;
use redis::{Client, IntoConnectionInfo, RedisResult};
use std::time::Duration;

/// Tunables; [`CacheSettings::new`] gives the SPEC's values for a TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    pub ttl: Duration,
    /// How long the single-flight lock lives if its owner dies.
    pub lock_ttl: Duration,
    /// How long a loser waits on a cold cache before reading the database.
    pub cold_wait: Duration,
    /// Bounds each connect and each command, with no retry: the most one
    /// request pays to find the cache dead.
    pub timeout: Duration,
    /// After a failure, skip the cache this long; doubled on every further
    /// failure up to `max_backoff`, reset by a request that succeeds.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

impl CacheSettings {
    /// For ElastiCache in the function's AZ, which answers in well under a
    /// millisecond: 100 ms covers a TLS connect and AUTH on a throttled
    /// Lambda CPU share many times over, and caps what a hanging cache
    /// costs one request. Requests never pay for the probe, so the window
    /// only sets how soon a recovered cache is used again (at most 8 s)
    /// and how often each environment probes a dead one.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            lock_ttl: Duration::from_secs(5),
            cold_wait: Duration::from_secs(3),
            timeout: Duration::from_millis(100),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(8),
        }
    }
}

/// The cache client for `url`, authenticating as `user` with its password
/// (`AUTH user password` on every connection) when one is given. The
/// password is set on the connection info, never put into a URL.
pub fn client(url: &str, user: Option<(&str, &Secret)>) -> RedisResult<Client> {
    let info = url.into_connection_info()?;
    let info = match user {
        Some((name, password)) => {
            let redis = info
                .redis_settings()
                .clone()
                .set_username(name)
                .set_password(password.expose());
            info.set_redis_settings(redis)
        }
        None => info,
    };
    Client::open(info)
}
