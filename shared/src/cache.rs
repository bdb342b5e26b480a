//! The availability cache on Valkey/Redis, with stampede protection.
//!
//! Three layers (SPEC §4 "Availability cache"):
//! 1. **Single-flight**: only the caller that wins `SET lock token NX PX`
//!    recomputes; it re-reads the cache inside the lock (the previous owner
//!    may have filled it) and releases the lock only if it still owns it.
//! 2. **Stale copy**, kept 6 × TTL: callers that lose the lock race return it
//!    at once, without touching the database.
//! 3. **Bounded wait**: with no stale copy (cold cache, or right after an
//!    invalidation) a loser waits up to 3 s for the owner's result, then
//!    reads the database itself.
//!
//! The cache never fails a read or a write, and a cache that is down costs
//! a request at most one bounded contact (the `link` module has the
//! rules): every connect and command is bounded by `timeout` (100 ms, for
//! ElastiCache in the same AZ, sub-millisecond when healthy) with no retry;
//! a failure marks the cache down for a skip window that doubles while the
//! cache keeps failing (1 s up to 8 s) and resets once a request succeeds;
//! while down, requests read the database without contacting the cache,
//! and the probe that decides when to use it again runs in the background,
//! started by the first request after the window, which does not wait for
//! it. So each environment pays one timed-out contact per outage, not one
//! per window, however large the fleet. An invalidation that cannot be
//! sent is owed, and the probe sends it before the cache is used again.
//!
//! Invalidation also bumps a generation counter, and a recompute stores its
//! result only if the generation it saw before reading the database is
//! still current: a recompute that raced a confirm cannot put the
//! pre-confirm figures back into the cache for a whole TTL.

use crate::error::Error;
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Client, RedisResult, Script};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

mod limit;
mod link;
mod settings;
mod stored;
pub use limit::{Admission, Limit};
use link::Link;
pub use settings::{CacheSettings, client};
pub use stored::Keys;
use stored::{
    MissReply, RELEASE, STALE_FACTOR, STORE_AND_RELEASE, bypass, decode, encode, invalidation,
    millis, now_ms,
};

/// How a response was served, for the `X-Cache` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    /// The fresh copy.
    Hit,
    /// The stale copy, while another caller recomputes.
    Stale,
    /// Recomputed from the database by this caller.
    Miss,
    /// The cache was unreachable or off: read from the database.
    Bypass,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Stale => "stale",
            Self::Miss => "miss",
            Self::Bypass => "bypass",
        }
    }
}

/// One encoded page of the availability list, as the cache stores it:
/// its validator and its continuation are computed once, when the page
/// is built, never per hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The JSON array, served as it is.
    pub body: Vec<u8>,
    /// A strong entity tag over the body and whether a next page exists,
    /// quotes included (`"…"`).
    pub etag: String,
    /// The cursor of the next page, when more slots may match.
    pub next: Option<String>,
}

/// A page and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub page: Page,
    pub status: CacheStatus,
    /// How old the figures are.
    pub age: Duration,
}

#[derive(Clone)]
pub struct AvailabilityCache {
    link: Link,
    keys: Arc<Keys>,
    settings: CacheSettings,
    /// Rate-limit tokens this environment holds (see `limit`).
    leases: limit::Leases,
}

impl AvailabilityCache {
    /// Connects lazily: a cache that is down never fails a cold start.
    /// Must be called inside a Tokio runtime.
    pub fn new(url: &str, namespace: &str, settings: CacheSettings) -> RedisResult<Self> {
        Ok(Self::with_client(client(url, None)?, namespace, settings))
    }

    /// [`AvailabilityCache::new`] with a client already built (see
    /// [`client`]: a user and its password).
    pub fn with_client(client: Client, namespace: &str, settings: CacheSettings) -> Self {
        let keys = Arc::new(Keys::new(namespace));
        let link = Link::new(
            client,
            settings.timeout,
            settings.backoff,
            settings.max_backoff,
            invalidation(&keys),
        );
        Self {
            link,
            keys,
            settings,
            leases: limit::Leases::default(),
        }
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Opens the connection now rather than on the first read.
    pub async fn ping(&self) -> bool {
        self.exec("PING", async |c| {
            redis::cmd("PING").query_async::<String>(c).await
        })
        .await
        .is_some()
    }

    /// How many connections this environment has tried to open to the
    /// cache (the first, then one per probe).
    pub fn connects(&self) -> u64 {
        self.link.connects()
    }

    pub fn settings(&self) -> CacheSettings {
        self.settings
    }

    /// How long a copy stored now may still be served (the stale copy's
    /// lifetime).
    pub fn stale_lifetime(&self) -> Duration {
        self.settings.ttl * STALE_FACTOR
    }

    /// Runs one command on the environment's connection; `None` if the
    /// cache is down (nothing sent) or the command failed (now down).
    async fn exec<T>(
        &self,
        what: &str,
        command: impl AsyncFnOnce(&mut MultiplexedConnection) -> RedisResult<T>,
    ) -> Option<T> {
        let lease = self.link.lease().await?;
        let mut conn = lease.conn.clone();
        match command(&mut conn).await {
            Ok(value) => {
                self.link.succeeded(&lease);
                Some(value)
            }
            Err(err) => {
                self.link.failed(&lease, what, &err);
                None
            }
        }
    }

    /// The first page of the availability list from the cache, or from
    /// `compute` (the one page query, already encoded) under the
    /// single-flight lock.
    /// With a `limit`, the caller's rate limit is checked first, in the
    /// same round trip as the read (429 `rate_limited` when over it).
    pub async fn get_or_compute<F, Fut>(
        &self,
        limit: Option<Limit>,
        compute: F,
    ) -> Result<Served, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Page, Error>>,
    {
        // The hot path: one round trip (a GET, or the limit script that
        // also reads), the stored bytes served as they are.
        let fresh = match limit {
            None => {
                self.exec("GET", async |c| c.get(&self.keys.fresh).await)
                    .await
            }
            Some(limit) => match self.admit_and_read(limit, Some(&self.keys.fresh)).await {
                (Admission::Admitted, fresh) => Some(fresh),
                (Admission::Refused(wait), _) => {
                    return Err(Error::RateLimited {
                        retry_after: Admission::retry_after_secs(wait),
                    });
                }
                (Admission::Unchecked, _) => None,
            },
        };
        let Some(fresh) = fresh else {
            return bypass(compute().await?);
        };
        if let Some(served) = decode(fresh, CacheStatus::Hit) {
            return Ok(served);
        }

        // A miss. In one round trip: try to become the recomputing owner,
        // re-read the fresh copy (a previous owner may have just filled it),
        // and fetch the stale copy and the generation.
        let token = format!("{:032x}", rand::random::<u128>());
        let lock_ms = millis(self.settings.lock_ttl);
        let reply: Option<MissReply> = self
            .exec("lock", async |c| {
                redis::pipe()
                    .cmd("SET")
                    .arg(&self.keys.lock)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(lock_ms)
                    .get(&self.keys.fresh)
                    .get(&self.keys.stale)
                    .get(&self.keys.generation)
                    .query_async(c)
                    .await
            })
            .await;
        let Some((set, fresh, stale, generation)) = reply else {
            return bypass(compute().await?);
        };
        let won = set.is_some();
        if let Some(served) = decode(fresh, CacheStatus::Hit) {
            if won {
                self.release(&token).await;
            }
            return Ok(served);
        }

        if won {
            let page = match compute().await {
                Ok(page) => page,
                Err(err) => {
                    self.release(&token).await;
                    return Err(err);
                }
            };
            self.store_and_release(&page, &token, generation.unwrap_or_default())
                .await;
            return Ok(Served {
                page,
                status: CacheStatus::Miss,
                age: Duration::ZERO,
            });
        }

        // Lost the race: the stale copy, with no database query at all.
        if let Some(served) = decode(stale, CacheStatus::Stale) {
            return Ok(served);
        }
        // Cold: wait a bounded time for the owner's result.
        self.wait_for_owner(compute).await
    }

    async fn wait_for_owner<F, Fut>(&self, compute: F) -> Result<Served, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Page, Error>>,
    {
        let deadline = tokio::time::Instant::now() + self.settings.cold_wait;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let fresh = self
                .exec("GET", async |c| c.get(&self.keys.fresh).await)
                .await;
            match fresh {
                Some(fresh) => {
                    if let Some(served) = decode(fresh, CacheStatus::Hit) {
                        return Ok(served);
                    }
                }
                None => return bypass(compute().await?),
            }
        }
        // Routine under a burst (the owner is slow, not gone) and answered
        // from the database: a count, not a warning.
        crate::telemetry::count(crate::telemetry::Metric::CacheOwnerLate, 1);
        tracing::info!("availability cache: owner did not deliver in time, reading the database");
        Ok(Served {
            page: compute().await?,
            status: CacheStatus::Miss,
            age: Duration::ZERO,
        })
    }

    /// Drops both copies and bumps the generation, atomically. Call after
    /// the transaction committed: inside it, a reader could recompute from
    /// the pre-commit rows and cache them for a whole TTL.
    ///
    /// With the cache down nothing is sent and the invalidation is owed:
    /// the probe sends it before this environment uses the cache again.
    /// Other environments may serve the old figures until then, for at most
    /// the TTL; the hold path re-checks capacity under a lock, so nothing
    /// oversells.
    pub async fn invalidate(&self) {
        let pipe = invalidation(&self.keys);
        let sent = self
            .exec("invalidation", async |c| pipe.exec_async(c).await)
            .await;
        if sent.is_none() {
            self.link.owe_invalidation();
        }
    }

    async fn store_and_release(&self, page: &Page, token: &str, generation: String) {
        let value = encode(page, now_ms());
        let script = Script::new(STORE_AND_RELEASE);
        let mut invocation = script.key(&self.keys.fresh);
        invocation
            .key(&self.keys.stale)
            .key(&self.keys.lock)
            .key(&self.keys.generation)
            .arg(value)
            .arg(millis(self.settings.ttl))
            .arg(millis(self.settings.ttl * STALE_FACTOR))
            .arg(token)
            .arg(generation);
        let stored: Option<i64> = self
            .exec("store", async |c| invocation.invoke_async(c).await)
            .await;
        if stored == Some(0) {
            tracing::info!("availability cache: invalidated during recompute, not stored");
        }
    }

    /// With the cache down the lock is left to expire on its own.
    async fn release(&self, token: &str) {
        let script = Script::new(RELEASE);
        let mut invocation = script.key(&self.keys.lock);
        invocation.arg(token);
        let _: Option<i64> = self
            .exec("lock release", async |c| invocation.invoke_async(c).await)
            .await;
    }
}
