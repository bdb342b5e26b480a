//! Who a request is, and whether it may use its route (SPEC §8).
//!
//! A key look-up is cached per execution environment for at most
//! [`Gate::LOOKUP_LIFETIME`], so a warm request pays no database round
//! trip for it and a revocation takes effect within that time. Only a
//! successful look-up is cached: a key just created works at once. Counted
//! from before the query was sent, so an entry never outlives a revocation
//! by more than that.
//!
//! A key refused as unknown (or revoked) is refused again without a round
//! trip for [`Gate::UNKNOWN_LIFETIME`] (SPEC §16), in a set of at most
//! [`Gate::MAX_UNKNOWN`] keys: a flood of random keys costs the database
//! one look-up per key and ten seconds, and the environment bounded
//! memory. A key created after it was first tried may wait those 10 s.

use super::key::{ApiKey, KeyHash};
use super::{ANONYMOUS, Caller, ClientId, Role};
use crate::cache::{Admission, AvailabilityCache};
use crate::config::{Access, AuthMode};
use crate::db;
use crate::error::{Error, Unauthenticated};
use crate::recent::Recent;
use crate::telemetry;
use sqlx::MySqlPool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a route asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Any client. In `open` mode a request without a key is `anonymous`,
    /// whose cap on held seats it does not need (a read, a confirm): no
    /// look-up, no round trip, as before clients.
    Booker,
    /// Any client, for an operation that counts its seats against its cap
    /// (a hold, a join, a cancel: SPEC §16, §23.8). In `open` mode a
    /// request without a key is `anonymous` with its own cap, looked up and
    /// cached like a key's client.
    Holder,
    /// An admin key, in both modes.
    Admin,
}

#[derive(Clone)]
pub struct Gate {
    pool: MySqlPool,
    access: Access,
    /// Where the rate limits live; `None`: no limits (fail open).
    cache: Option<AvailabilityCache>,
    known: Arc<Mutex<Known>>,
}

/// The cached look-ups of one environment.
struct Known {
    entries: Recent<KeyHash, Caller>,
    /// Keys refused, as of when their look-up was sent.
    unknown: Recent<KeyHash, ()>,
    /// `open` mode's anonymous caller, as of its last look-up.
    anonymous: Recent<(), Caller>,
}

/// The anonymous client's own cap (SPEC §16: every client has one), by its
/// fixed id.
const FIND_ANONYMOUS_CAP: &str = "SELECT max_held_seats FROM api_clients WHERE id = ?";

const FIND_BY_KEY_HASH: &str = "SELECT id, role, rate_limit_per_second, max_held_seats, \
     revoked_at IS NOT NULL FROM api_clients WHERE key_hash = ?";

type ClientRow = (u64, String, Option<u32>, Option<u32>, bool);

impl Gate {
    /// The longest a look-up is trusted (SPEC §8: a revocation takes effect
    /// within 30 s).
    pub const LOOKUP_LIFETIME: Duration = Duration::from_secs(30);
    /// Environments see few distinct keys; a bound keeps a flood of valid
    /// keys from growing the map without end.
    const MAX_ENTRIES: usize = 4096;
    /// How long a refused key is refused without a look-up.
    pub const UNKNOWN_LIFETIME: Duration = Duration::from_secs(10);
    /// 64-character hashes: about 1 MB at most.
    pub const MAX_UNKNOWN: usize = 8192;

    pub fn new(pool: MySqlPool, access: Access, cache: Option<AvailabilityCache>) -> Self {
        Self {
            pool,
            access,
            cache,
            known: Arc::new(Mutex::new(Known {
                entries: Recent::new(Self::LOOKUP_LIFETIME, Self::MAX_ENTRIES),
                unknown: Recent::new(Self::UNKNOWN_LIFETIME, Self::MAX_UNKNOWN),
                anonymous: Recent::new(Self::LOOKUP_LIFETIME, 1),
            })),
        }
    }

    /// [`Gate::identify`], then the caller's rate limit (one cache round
    /// trip; 429 `rate_limited` over it). A refused request counts against
    /// nobody, since it is refused before the limit is asked.
    pub async fn admit(
        &self,
        authorization: Option<&str>,
        needs: Needs,
        deadline: tokio::time::Instant,
    ) -> Result<Caller, Error> {
        let caller = self.identify(authorization, needs, deadline).await?;
        if let (Some(limit), Some(cache)) = (caller.limit(), &self.cache)
            && let Admission::Refused(wait) = cache.admit(limit).await
        {
            return Err(Error::RateLimited {
                retry_after: Admission::retry_after_secs(wait),
            });
        }
        Ok(caller)
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// The caller of a request with this `Authorization` header value, if
    /// it may use a route that `needs` this: 401 `unauthenticated` (no key,
    /// a malformed, unknown or revoked one), 403 `forbidden` (a booker on
    /// an admin route). Done by `deadline`.
    pub async fn identify(
        &self,
        authorization: Option<&str>,
        needs: Needs,
        deadline: tokio::time::Instant,
    ) -> Result<Caller, Error> {
        let hash = match bearer(authorization)? {
            Some(key) => key.hash(),
            // The seed's anonymous API: not rate-limited (SPEC §8), but
            // held to its cap on held seats like every client (SPEC §16).
            None if needs != Needs::Admin && self.access.mode == AuthMode::Open => {
                telemetry::client(ANONYMOUS.0);
                return match needs {
                    Needs::Holder => self.anonymous(deadline).await,
                    _ => Ok(Caller::anonymous()),
                };
            }
            None => return Err(Error::Unauthenticated(Unauthenticated::Missing)),
        };
        let caller = match self.cached(&hash)? {
            Some(caller) => caller,
            None => self.look_up(hash, deadline).await?,
        };
        // Known from here on, also when refused (403, 429): the summary
        // line says who.
        telemetry::client(caller.id.0);
        if needs == Needs::Admin && caller.role != Role::Admin {
            return Err(Error::Forbidden);
        }
        Ok(caller)
    }

    /// What this environment still knows of the key: its caller, or that
    /// it was refused (401 again, no round trip).
    fn cached(&self, hash: &KeyHash) -> Result<Option<Caller>, Error> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.unknown.get(hash).is_some() {
            return Err(Error::Unauthenticated(Unauthenticated::Rejected));
        }
        Ok(known.entries.get(hash).copied())
    }

    fn remember_unknown(&self, hash: KeyHash, asked_at: Instant) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.unknown.insert(hash, (), asked_at);
    }

    async fn look_up(
        &self,
        hash: KeyHash,
        deadline: tokio::time::Instant,
    ) -> Result<Caller, Error> {
        let asked_at = Instant::now();
        let row: Option<ClientRow> = db::transact!(&self.pool, "key look-up", deadline, |conn| {
            Ok(sqlx::query_as(FIND_BY_KEY_HASH)
                .bind(hash.as_str())
                .fetch_optional(&mut *conn)
                .await?)
        })?;
        // Unknown and revoked answer alike.
        let Some((id, role, rate, held_cap, _)) = row.filter(|(.., revoked)| !revoked) else {
            self.remember_unknown(hash, asked_at);
            return Err(Error::Unauthenticated(Unauthenticated::Rejected));
        };
        let role = Role::parse(&role).ok_or_else(|| {
            Error::Internal(sqlx::Error::Decode(format!("unknown role {role:?}").into()))
        })?;
        let caller = Caller {
            id: ClientId(id),
            role,
            rate: self.effective_rate(rate),
            held_cap: self.effective_cap(held_cap),
        };
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.entries.insert(hash, caller, asked_at);
        Ok(caller)
    }

    /// `open` mode's caller without a key: the built-in `anonymous` client,
    /// unlimited in rate, with its own cap on held seats (NULL: the
    /// default), looked up and cached like a key's client, so a change to
    /// it applies within [`Gate::LOOKUP_LIFETIME`] and a warm request pays
    /// no round trip. A database without its row (the migrations make it)
    /// gives the default cap.
    async fn anonymous(&self, deadline: tokio::time::Instant) -> Result<Caller, Error> {
        if let Some(caller) = self.known().anonymous.get(&()) {
            return Ok(*caller);
        }
        let asked_at = Instant::now();
        let own: Option<Option<u32>> =
            db::transact!(&self.pool, "anonymous look-up", deadline, |conn| {
                Ok(sqlx::query_scalar(FIND_ANONYMOUS_CAP)
                    .bind(ANONYMOUS.0)
                    .fetch_optional(&mut *conn)
                    .await?)
            })?;
        let caller = Caller {
            held_cap: self.effective_cap(own.flatten()),
            ..Caller::anonymous()
        };
        self.known().anonymous.insert((), caller, asked_at);
        Ok(caller)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client's own rate, else the default; 0 is unlimited, and `open`
    /// mode limits nobody.
    fn effective_rate(&self, own: Option<u32>) -> Option<u32> {
        if self.access.mode == AuthMode::Open {
            return None;
        }
        Some(own.unwrap_or(self.access.rate_limit_per_second)).filter(|rate| *rate > 0)
    }

    /// A client's own cap on held seats, else the default; 0 is unlimited.
    /// Unlike the rate, it holds in `open` mode too, the keyless anonymous
    /// caller's included: it guards the inventory, which every client
    /// shares (SPEC §16).
    fn effective_cap(&self, own: Option<u32>) -> Option<u32> {
        Some(own.unwrap_or(self.access.client_max_held_seats)).filter(|cap| *cap > 0)
    }
}

/// The key of an `Authorization: Bearer <key>` header (scheme in any case,
/// RFC 7235); `None` for no header. Any other value is malformed.
fn bearer(authorization: Option<&str>) -> Result<Option<ApiKey>, Error> {
    let Some(value) = authorization else {
        return Ok(None);
    };
    let malformed = Error::Unauthenticated(Unauthenticated::Malformed);
    let (scheme, key) = value.trim().split_once(' ').ok_or(malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Error::Unauthenticated(Unauthenticated::Malformed));
    }
    ApiKey::parse(key.trim_start())
        .map(Some)
        .ok_or(Error::Unauthenticated(Unauthenticated::Malformed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refused_keys_are_remembered_ten_seconds_in_bounded_memory() {
        let pool = sqlx::MySqlPool::connect_lazy("mysql://nobody@127.0.0.1:1/none").unwrap();
        let gate = Gate::new(pool, Access::default(), None);
        let now = Instant::now();
        let refused = |gate: &Gate, key: &str| {
            matches!(
                gate.cached(&KeyHash::of(key)),
                Err(Error::Unauthenticated(Unauthenticated::Rejected))
            )
        };
        gate.remember_unknown(KeyHash::of("a"), now);
        assert!(refused(&gate, "a"));
        assert!(!refused(&gate, "b"), "only the key refused");
        let old = now - Gate::UNKNOWN_LIFETIME;
        gate.remember_unknown(KeyHash::of("c"), old);
        assert!(!refused(&gate, "c"), "forgotten after 10 s");
        for i in 0..3 * Gate::MAX_UNKNOWN {
            gate.remember_unknown(KeyHash::of(&i.to_string()), now);
            let known = gate.known.lock().unwrap();
            assert!(known.unknown.len() <= Gate::MAX_UNKNOWN);
        }
    }

    #[test]
    fn only_a_bearer_key_of_the_right_shape_is_read() {
        let key = "k".repeat(30);
        assert!(bearer(None).unwrap().is_none());
        for good in [
            format!("Bearer {key}"),
            format!("bearer {key}"),
            format!("BEARER   {key}"),
        ] {
            assert_eq!(
                bearer(Some(&good)).unwrap().unwrap().expose(),
                key,
                "{good:?}"
            );
        }
        for bad in [
            String::new(),
            "Bearer".into(),
            format!("Basic {key}"),
            format!("Bearer{key}"),
            format!("Bearer {key} extra"),
            "Bearer short".into(),
            format!("Token {key}"),
        ] {
            assert!(
                matches!(
                    bearer(Some(&bad)),
                    Err(Error::Unauthenticated(Unauthenticated::Malformed))
                ),
                "{bad:?}"
            );
        }
    }
}
