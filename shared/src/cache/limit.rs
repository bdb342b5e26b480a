//! Per-client rate limits in the cache (SPEC §8): GCRA, decided by one
//! script on the cache's own clock, so every execution environment shares
//! one bucket per client and one round trip decides.
//!
//! The bucket holds twice the client's rate and starts full: a client may
//! send `2 × rate` requests at once, then `rate` per second. The script
//! also reads the fresh availability copy when asked, so a limited cache
//! hit stays one round trip.
//!
//! The cache down means no limit (fail open, with a warning): the limit
//! protects capacity; the database's own guarantees never depend on it.

use super::AvailabilityCache;
use crate::clients::ClientId;
use redis::Script;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// KEYS[1]: the client's bucket (its theoretical arrival time, µs);
/// KEYS[2], optional: a key to read when admitted. ARGV: the emission
/// interval (µs), the burst. Returns {admitted, retry after (µs), value}.
/// Lua numbers are doubles: µs since the epoch (~2^51) are exact.
const ADMIT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - tonumber(ARGV[2]) * interval
if allow_at > now then
  return {0, string.format('%.0f', allow_at - now), false}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat),
  'PX', math.ceil((new_tat - now) / 1000) + 1)
if KEYS[2] then
  return {1, '0', redis.call('GET', KEYS[2])}
end
return {1, '0', false}
"#;

/// What the limiter decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// Over the limit: retry after this long.
    Refused(Duration),
    /// The cache could not be asked: admitted (fail open).
    Unchecked,
}

/// A client's limit, as the availability read passes it down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub client: ClientId,
    /// Sustained requests per second, > 0.
    pub rate: u32,
}

impl Limit {
    fn interval_micros(self) -> u64 {
        1_000_000 / u64::from(self.rate.max(1))
    }

    fn burst(self) -> u64 {
        2 * u64::from(self.rate)
    }
}

impl AvailabilityCache {
    /// One request of `limit.client` against its bucket: one round trip.
    pub async fn admit(&self, limit: Limit) -> Admission {
        self.admit_and_read(limit, None).await.0
    }

    /// [`AvailabilityCache::admit`], and, when admitted, the value at
    /// `read`, in the same round trip.
    pub(super) async fn admit_and_read(
        &self,
        limit: Limit,
        read: Option<&str>,
    ) -> (Admission, Option<Vec<u8>>) {
        let bucket = self.keys.rate(limit.client);
        let script = Script::new(ADMIT);
        let mut invocation = script.key(&bucket);
        if let Some(read) = read {
            invocation.key(read);
        }
        invocation.arg(limit.interval_micros()).arg(limit.burst());
        let reply: Option<(i64, u64, Option<Vec<u8>>)> = self
            .exec("rate limit", async |c| invocation.invoke_async(c).await)
            .await;
        match reply {
            Some((1, _, value)) => (Admission::Admitted, value),
            Some((_, retry_micros, _)) => (
                Admission::Refused(Duration::from_micros(retry_micros)),
                None,
            ),
            None => {
                warn_unchecked();
                (Admission::Unchecked, None)
            }
        }
    }
}

/// With the cache down every request would warn: once a minute per
/// environment says it as well.
fn warn_unchecked() {
    static LAST_WARNED: AtomicU64 = AtomicU64::new(0);
    let now = super::stored::now_ms();
    let last = LAST_WARNED.load(Ordering::Relaxed);
    if now.saturating_sub(last) >= 60_000
        && LAST_WARNED
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!("rate limits not enforced: the cache is unreachable (failing open)");
    }
}

impl Admission {
    /// `Retry-After`: whole seconds, at least 1.
    pub fn retry_after_secs(wait: Duration) -> u64 {
        wait.as_micros().div_ceil(1_000_000).max(1) as u64
    }
}
