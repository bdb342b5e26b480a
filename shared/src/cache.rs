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
//! The cache never fails a read or a write: every Redis error or timeout
//! falls back to the database and is logged as a warning, and after a
//! failure the cache is skipped for a short while so a dead cache costs
//! nothing per request.
//!
//! Invalidation also bumps a generation counter, and a recompute stores its
//! result only if the generation it saw before reading the database is
//! still current: a recompute that raced a confirm cannot put the
//! pre-confirm figures back into the cache for a whole TTL.

use crate::error::Error;
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, RedisResult, Script};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod link;
use link::Link;

/// Key names are versioned (a format change needs no flush), namespaced by
/// database (stages or tenants may share one cache), and share one hash
/// tag, so the multi-key scripts stay in one slot on a clustered or
/// serverless Valkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    pub fresh: String,
    pub stale: String,
    pub lock: String,
    pub generation: String,
}

impl Keys {
    pub fn new(namespace: &str) -> Self {
        let key = |name: &str| format!("slot-booking:v1:{{{namespace}:availability}}:{name}");
        Self {
            fresh: key("fresh"),
            stale: key("stale"),
            lock: key("lock"),
            generation: key("generation"),
        }
    }
}

/// The stale copy outlives the fresh one this many times.
const STALE_FACTOR: u32 = 6;

/// Stores a recomputed value only if no invalidation happened since the
/// caller read the generation, then releases the lock if the caller still
/// owns it. KEYS: fresh, stale, lock, generation. ARGV: value, fresh ms,
/// stale ms, lock token, generation seen.
const STORE_AND_RELEASE: &str = r#"
local stored = 0
if (redis.call('GET', KEYS[4]) or '') == ARGV[5] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  stored = 1
end
if redis.call('GET', KEYS[3]) == ARGV[4] then
  redis.call('DEL', KEYS[3])
end
return stored
"#;

/// Compare-and-delete: a lock is released only by its owner.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

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

/// An encoded availability list and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The JSON body, served as it is.
    pub body: Vec<u8>,
    pub status: CacheStatus,
    /// How old the figures are.
    pub age: Duration,
}

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

#[derive(Clone)]
pub struct AvailabilityCache {
    link: Link,
    keys: Arc<Keys>,
    settings: CacheSettings,
}

impl AvailabilityCache {
    /// Connects lazily: a cache that is down never fails a cold start.
    /// Must be called inside a Tokio runtime.
    pub fn new(url: &str, namespace: &str, settings: CacheSettings) -> RedisResult<Self> {
        let client = redis::Client::open(url)?;
        let keys = Arc::new(Keys::new(namespace));
        let link = Link::new(
            client,
            settings.timeout,
            settings.backoff,
            settings.max_backoff,
            invalidation(&keys),
        );
        Ok(Self {
            link,
            keys,
            settings,
        })
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

    /// The availability list from the cache, or from `compute` (the one
    /// projection query, already encoded) under the single-flight lock.
    pub async fn get_or_compute<F, Fut>(&self, compute: F) -> Result<Served, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Vec<u8>, Error>>,
    {
        // The hot path: one GET, the stored bytes served as they are.
        let fresh = self
            .exec("GET", async |c| c.get(&self.keys.fresh).await)
            .await;
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
            let body = match compute().await {
                Ok(body) => body,
                Err(err) => {
                    self.release(&token).await;
                    return Err(err);
                }
            };
            self.store_and_release(&body, &token, generation.unwrap_or_default())
                .await;
            return Ok(Served {
                body,
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
        Fut: Future<Output = Result<Vec<u8>, Error>>,
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
        tracing::warn!("availability cache: owner did not deliver in time, reading the database");
        Ok(Served {
            body: compute().await?,
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

    async fn store_and_release(&self, body: &[u8], token: &str, generation: String) {
        let mut value = Vec::with_capacity(body.len() + 16);
        value.extend_from_slice(now_ms().to_string().as_bytes());
        value.push(b'\n');
        value.extend_from_slice(body);
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

/// INCR generation and DEL both copies, in one MULTI.
fn invalidation(keys: &Keys) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .incr(&keys.generation, 1)
        .ignore()
        .del(&[&keys.fresh, &keys.stale])
        .ignore();
    pipe
}

/// Lock taken (`OK`) or not, fresh copy, stale copy, generation.
type MissReply = (
    Option<String>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<String>,
);

fn bypass(body: Vec<u8>) -> Result<Served, Error> {
    Ok(Served {
        body,
        status: CacheStatus::Bypass,
        age: Duration::ZERO,
    })
}

/// A stored value is `<unix ms>\n<json array>`; anything else is garbage
/// and counts as a miss.
fn decode(value: Option<Vec<u8>>, status: CacheStatus) -> Option<Served> {
    let mut value = value?;
    let newline = value.iter().position(|b| *b == b'\n')?;
    let stored_at: u64 = std::str::from_utf8(&value[..newline]).ok()?.parse().ok()?;
    if value.get(newline + 1) != Some(&b'[') || value.last() != Some(&b']') {
        return None;
    }
    let age = Duration::from_millis(now_ms().saturating_sub(stored_at));
    value.drain(..=newline);
    Some(Served {
        body: value,
        status,
        age,
    })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_decode_to_their_json_and_age() {
        let stored = format!("{}\n[{{\"slot_id\":1}}]", now_ms() - 1500).into_bytes();
        let served = decode(Some(stored), CacheStatus::Hit).unwrap();
        assert_eq!(served.body, b"[{\"slot_id\":1}]");
        assert!(served.age >= Duration::from_millis(1500));
    }

    #[test]
    fn garbage_in_the_cache_counts_as_a_miss() {
        for garbage in [
            &b""[..],
            b"[]",
            b"abc\n[]",
            b"123\n{}",
            b"123\n[1",
            b"\xff\xfe",
        ] {
            assert!(
                decode(Some(garbage.to_vec()), CacheStatus::Hit).is_none(),
                "{garbage:?}"
            );
        }
    }
}
