//! What the cache holds and how: key names, the scripts, the stored
//! value's format.

use super::{CacheStatus, Page, Served};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Key names are versioned (a format change needs no flush: v2 stores a
/// page with its ETag and next cursor, v1 stored the bare list), namespaced by
/// database (stages or tenants may share one cache), and share one hash
/// tag, so the multi-key scripts stay in one slot on a clustered or
/// serverless Valkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    pub fresh: String,
    pub stale: String,
    pub lock: String,
    pub generation: String,
    /// Prefix of the per-client rate-limit buckets: in the same hash slot,
    /// so the availability hit's limit check and GET are one script.
    rate: String,
}

impl Keys {
    pub fn new(namespace: &str) -> Self {
        let key = |name: &str| format!("slot-booking:v2:{{{namespace}:availability}}:{name}");
        Self {
            fresh: key("fresh"),
            stale: key("stale"),
            lock: key("lock"),
            generation: key("generation"),
            rate: key("rate:"),
        }
    }

    /// The bucket of one client.
    pub fn rate(&self, client: crate::domain::ClientId) -> String {
        format!("{}{client}", self.rate)
    }
}

/// The stale copy outlives the fresh one this many times.
pub(super) const STALE_FACTOR: u32 = 6;

/// Stores a recomputed value only if no invalidation happened since the
/// caller read the generation, then releases the lock if the caller still
/// owns it. KEYS: fresh, stale, lock, generation. ARGV: value, fresh ms,
/// stale ms, lock token, generation seen.
pub(super) const STORE_AND_RELEASE: &str = r#"
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
pub(super) const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// INCR generation and DEL both copies, in one MULTI.
pub(super) fn invalidation(keys: &Keys) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .incr(&keys.generation, 1)
        .ignore()
        .del(&[&keys.fresh, &keys.stale])
        .ignore();
    pipe
}

/// Lock taken (`OK`) or not, fresh copy, stale copy, generation.
pub(super) type MissReply = (
    Option<String>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<String>,
);

/// A stored value is `<unix ms>\n<etag>\n<next cursor or nothing>\n<json
/// array>`: the hit path splits it at three newlines (none can occur in
/// the first three fields) and serves the rest as it is.
pub(super) fn encode(page: &Page, stored_at: u64) -> Vec<u8> {
    let next = page.next.as_deref().unwrap_or("");
    let mut value = Vec::with_capacity(page.body.len() + page.etag.len() + next.len() + 24);
    value.extend_from_slice(stored_at.to_string().as_bytes());
    value.push(b'\n');
    value.extend_from_slice(page.etag.as_bytes());
    value.push(b'\n');
    value.extend_from_slice(next.as_bytes());
    value.push(b'\n');
    value.extend_from_slice(&page.body);
    value
}

/// A page read from the database because the cache could not be used.
pub(super) fn bypass(page: Page) -> Result<Served, crate::error::Error> {
    Ok(Served {
        page,
        status: CacheStatus::Bypass,
        age: Duration::ZERO,
    })
}

/// The page in a stored value, and its age; anything else is garbage and
/// counts as a miss.
pub(super) fn decode(value: Option<Vec<u8>>, status: CacheStatus) -> Option<Served> {
    let mut value = value?;
    let mut fields = [0usize; 3];
    let mut at = 0;
    for field in &mut fields {
        at += value.get(at..)?.iter().position(|b| *b == b'\n')?;
        *field = at;
        at += 1;
    }
    let [first, second, third] = fields;
    let stored_at: u64 = std::str::from_utf8(&value[..first]).ok()?.parse().ok()?;
    let etag = std::str::from_utf8(&value[first + 1..second]).ok()?;
    if etag.len() < 2 || !etag.starts_with('"') || !etag.ends_with('"') {
        return None;
    }
    let etag = etag.to_string();
    let next = std::str::from_utf8(&value[second + 1..third]).ok()?;
    let next = (!next.is_empty()).then(|| next.to_string());
    if value.get(third + 1) != Some(&b'[') || value.last() != Some(&b']') {
        return None;
    }
    let age = Duration::from_millis(now_ms().saturating_sub(stored_at));
    value.drain(..=third);
    Some(Served {
        page: Page {
            body: value,
            etag,
            next,
        },
        status,
        age,
    })
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_decode_to_their_page_and_age() {
        let page = Page {
            body: b"[{\"slot_id\":1}]".to_vec(),
            etag: "\"abc\"".into(),
            next: Some("cursor".into()),
        };
        let served = decode(Some(encode(&page, now_ms() - 1500)), CacheStatus::Hit).unwrap();
        assert_eq!(served.page, page);
        assert!(served.age >= Duration::from_millis(1500));
        let last = Page { next: None, ..page };
        let served = decode(Some(encode(&last, now_ms())), CacheStatus::Stale).unwrap();
        assert_eq!((served.page, served.status), (last, CacheStatus::Stale));
    }

    #[test]
    fn garbage_in_the_cache_counts_as_a_miss() {
        for garbage in [
            &b""[..],
            b"[]",
            b"abc\n[]",
            b"123\n{}",
            b"123\n[1",
            b"123\n[]",
            b"123\n\"e\"\n[]",
            b"123\ne\n\n[]",
            b"123\n\"e\"\n\n[1",
            b"\xff\xfe",
        ] {
            assert!(
                decode(Some(garbage.to_vec()), CacheStatus::Hit).is_none(),
                "{garbage:?}"
            );
        }
    }
}
