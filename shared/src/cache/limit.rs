//! Per-client rate limits in the cache (SPEC §8): GCRA, decided by one
//! script on the cache's own clock, so every execution environment shares
//! one bucket per client and one round trip decides.
//!
//! The bucket holds twice the client's rate and starts full: a client may
//! send `2 × rate` requests at once, then `rate` per second. The script
//! also reads the fresh availability copy when asked, so a limited cache
//! hit stays one round trip.
//!
//! **Leases.** A script costs the cache several times a GET, which a
//! client sending hundreds of reads a second would pay on every one. So
//! an environment takes several tokens at once and spends them locally
//! for at most [`LEASE_LIFETIME`]; only then does it ask again. Every
//! admitted request still spent a token taken from the one shared bucket,
//! so no client ever gets more than its limit. Tokens an environment does
//! not use in time are lost, so the size of a lease follows what the
//! environment spends ([`next_lease`]): it doubles while the environment
//! runs out within the lifetime, and falls to what was spent when tokens
//! were left over, never above [`Limit::max_lease`] (`rate / 20`, 1 to
//! 1,000). A quiet environment therefore takes one token per request (a
//! fixed lease would burn a whole lease per request, and a fleet of quiet
//! environments would exhaust a fast client's bucket at a fraction of its
//! rate), and a client loses at most one lease per environment when its
//! traffic drops.
//!
//! **Refusals are local.** A refused client is refused again by this
//! environment, without a round trip, until the wait the script gave has
//! passed (SPEC §16: a client hammering past its limit costs the cache
//! nothing more). The shared bucket could only have said the same: no
//! token comes back before then.
//!
//! The cache down means no limit (fail open, with a warning): the limit
//! protects capacity; the database's own guarantees never depend on it.

use super::AvailabilityCache;
use crate::domain::ClientId;
use redis::{AsyncCommands, Script};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// KEYS[1]: the client's bucket (its theoretical arrival time, µs);
/// KEYS[2], optional: a key to read when admitted. ARGV: the emission
/// interval (µs), the burst, the tokens wanted. Returns {tokens granted
/// (0: refused), retry after (µs), value}. Lua numbers are doubles: µs
/// since the epoch (~2^51) are exact.
const ADMIT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local room = math.floor((now + tonumber(ARGV[2]) * interval - tat) / interval)
if room < 1 then
  return {0, string.format('%.0f', tat + interval - tonumber(ARGV[2]) * interval - now), false}
end
local granted = math.min(room, tonumber(ARGV[3]))
local new_tat = tat + granted * interval
redis.call('SET', KEYS[1], string.format('%.0f', new_tat),
  'PX', math.ceil((new_tat - now) / 1000) + 1)
if KEYS[2] then
  return {granted, '0', redis.call('GET', KEYS[2])}
end
return {granted, '0', false}
"#;

/// Built (its SHA-1 computed) once per environment, not per request.
static ADMIT_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(ADMIT));

/// How long leased tokens may be spent: short, so that tokens taken now
/// are not spent as a burst much later.
pub const LEASE_LIFETIME: Duration = Duration::from_millis(250);

/// The tokens this environment holds, per client.
#[derive(Clone, Default)]
pub(super) struct Leases(Arc<Mutex<HashMap<ClientId, Lease>>>);

/// One grant: `granted` tokens, of which the request that asked spent one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lease {
    granted: u32,
    left: u32,
    until: Instant,
    /// Refused by the bucket: no token before this.
    refused_until: Option<Instant>,
}

/// What this environment decides alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Local {
    /// A held token spent.
    Spent,
    /// Refused by the bucket a moment ago: still this long to wait.
    Refused(Duration),
    /// Ask the bucket for this many tokens.
    Ask(u32),
}

impl Leases {
    /// Spends one held token of `client` if it has one still valid; if
    /// not, the wait left from a recent refusal, or how many to ask the
    /// bucket for ([`next_lease`]).
    fn spend(&self, client: ClientId, max: u32) -> Local {
        let mut leases = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let lease = leases.get_mut(&client);
        if let Some(wait) = lease
            .as_ref()
            .and_then(|lease| lease.refused_until?.checked_duration_since(now))
            .filter(|wait| !wait.is_zero())
        {
            return Local::Refused(wait);
        }
        match lease {
            Some(lease) if lease.left > 0 && now < lease.until => {
                lease.left -= 1;
                Local::Spent
            }
            lease => Local::Ask(next_lease(lease.map(|l| *l), now, max)),
        }
    }

    /// Remembers that the bucket refused `client` for `wait`.
    fn refuse(&self, client: ClientId, wait: Duration) {
        let mut leases = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        Self::bound(&mut leases, now);
        let lease = leases.entry(client).or_insert(Lease {
            granted: 1,
            left: 0,
            until: now,
            refused_until: None,
        });
        lease.left = 0;
        lease.refused_until = Some(now + wait);
    }

    /// At most a few thousand clients' entries: the stale go first.
    fn bound(leases: &mut HashMap<ClientId, Lease>, now: Instant) {
        if leases.len() > 4096 {
            leases.retain(|_, lease| {
                now < lease.until || lease.refused_until.is_some_and(|until| now < until)
            });
        }
    }

    /// Keeps a grant of `granted` tokens asked for at `asked` (one of them
    /// spent by that request).
    fn keep(&self, client: ClientId, granted: u32, asked: Instant) {
        let mut leases = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Self::bound(&mut leases, Instant::now());
        let lease = Lease {
            granted,
            left: granted.saturating_sub(1),
            until: asked + LEASE_LIFETIME,
            refused_until: None,
        };
        leases.insert(client, lease);
    }
}

/// The size of the next lease, from how the last one went: none (or
/// forgotten) → 1; spent before it expired → twice as many; expired with
/// tokens left → what was spent of it. Always 1 to `max`.
fn next_lease(last: Option<Lease>, now: Instant, max: u32) -> u32 {
    let wanted = match last {
        None => 1,
        Some(last) if now < last.until => last.granted.saturating_mul(2),
        Some(last) => last.granted - last.left,
    };
    wanted.clamp(1, max.max(1))
}

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

    /// The most tokens taken at once: a twentieth of a second's worth, 1
    /// to 1,000.
    pub fn max_lease(self) -> u32 {
        (self.rate / 20).clamp(1, 1000)
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
        let wanted = match self.leases.spend(limit.client, limit.max_lease()) {
            Local::Refused(wait) => return (Admission::Refused(wait), None),
            Local::Spent => {
                // A token already taken from the bucket: only the read is left.
                return match read {
                    None => (Admission::Admitted, None),
                    Some(key) => match self.exec("GET", async |c| c.get(key).await).await {
                        Some(value) => (Admission::Admitted, value),
                        None => (Admission::Unchecked, None),
                    },
                };
            }
            Local::Ask(wanted) => wanted,
        };
        let bucket = self.keys.rate(limit.client);
        let mut invocation = ADMIT_SCRIPT.key(&bucket);
        if let Some(read) = read {
            invocation.key(read);
        }
        invocation
            .arg(limit.interval_micros())
            .arg(limit.burst())
            .arg(wanted);
        let asked = Instant::now();
        let reply: Option<(u32, u64, Option<Vec<u8>>)> = self
            .exec("rate limit", async |c| invocation.invoke_async(c).await)
            .await;
        match reply {
            Some((granted, _, value)) if granted > 0 => {
                // Kept even when nothing is left: the next size follows it.
                self.leases.keep(limit.client, granted, asked);
                (Admission::Admitted, value)
            }
            Some((_, retry_micros, _)) => {
                let wait = Duration::from_micros(retry_micros);
                self.leases.refuse(limit.client, wait);
                (Admission::Refused(wait), None)
            }
            None => {
                // A lone failed command is a blip; a cache still failing is down.
                if self.link.failing() {
                    warn_unchecked();
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_at_most_a_twentieth_of_a_seconds_rate_from_1_to_1000() {
        let lease = |rate| {
            Limit {
                client: ClientId(1),
                rate,
            }
            .max_lease()
        };
        assert_eq!([lease(1), lease(5), lease(20), lease(39)], [1, 1, 1, 1]);
        assert_eq!([lease(40), lease(100), lease(2_000)], [2, 5, 100]);
        assert_eq!([lease(20_000), lease(1_000_000)], [1000, 1000]);
    }

    #[test]
    fn a_lease_doubles_while_spent_in_time_and_falls_to_what_was_spent() {
        let now = Instant::now();
        let lease = |granted, left, until| Lease {
            granted,
            left,
            until,
            refused_until: None,
        };
        let live = now + Duration::from_millis(100);
        let gone = now - Duration::from_millis(1);
        assert_eq!(next_lease(None, now, 50), 1);
        // Ran out in time: a busy environment, twice as many.
        assert_eq!(next_lease(Some(lease(1, 0, live)), now, 50), 2);
        assert_eq!(next_lease(Some(lease(16, 0, live)), now, 50), 32);
        assert_eq!(next_lease(Some(lease(32, 0, live)), now, 50), 50);
        // Expired: what was spent, at least one.
        assert_eq!(next_lease(Some(lease(32, 20, gone)), now, 50), 12);
        assert_eq!(next_lease(Some(lease(8, 7, gone)), now, 50), 1);
        assert_eq!(next_lease(Some(lease(1, 0, gone)), now, 50), 1);
        // Never above the client's most, never 0.
        assert_eq!(next_lease(Some(lease(40, 0, gone)), now, 5), 5);
        assert_eq!(next_lease(None, now, 0), 1);
    }

    #[test]
    fn a_refused_client_is_refused_here_until_its_wait_has_passed() {
        let leases = Leases::default();
        let (client, other) = (ClientId(7), ClientId(8));
        assert_eq!(leases.spend(client, 5), Local::Ask(1));
        leases.refuse(client, Duration::from_millis(80));
        let Local::Refused(wait) = leases.spend(client, 5) else {
            panic!("refused locally")
        };
        assert!(wait <= Duration::from_millis(80) && !wait.is_zero());
        assert_eq!(leases.spend(other, 5), Local::Ask(1), "only that client");
        std::thread::sleep(Duration::from_millis(90));
        assert_eq!(
            leases.spend(client, 5),
            Local::Ask(1),
            "then the bucket again"
        );
        leases.keep(client, 3, Instant::now());
        assert_eq!(leases.spend(client, 5), Local::Spent, "a grant clears it");
    }

    #[test]
    fn retry_after_is_whole_seconds_and_at_least_one() {
        assert_eq!(Admission::retry_after_secs(Duration::from_micros(1)), 1);
        assert_eq!(Admission::retry_after_secs(Duration::from_millis(1_000)), 1);
        assert_eq!(Admission::retry_after_secs(Duration::from_millis(1_001)), 2);
    }
}
