//! Clients, their keys and what they may do (SPEC §8).
//!
//! - [`key`]: what a key is, its hash, a new key.
//! - [`gate`]: who a request is (the key look-up, cached per execution
//!   environment) and whether it may use a route.
//! - [`admin`]: creating clients, and the bootstrap admin of a deploy;
//!   [`revoke`]: revoking them, their seats given back; [`page`]: listing them a page at a time; [`patch`]: changing
//!   their limits.
//!
//! Knows nothing of HTTP: the HTTP layer hands it the `Authorization`
//! header's value and maps its errors.

pub mod admin;
pub mod gate;
pub mod install;
pub mod key;
pub mod page;
pub mod patch;
pub mod revoke;

pub use admin::{ClientAdmin, NewClient};
pub use gate::{Gate, Needs};
pub use install::install_bootstrap_admin;
pub use key::{ApiKey, KeyHash};
pub use page::{ClientCursor, ClientPage};
pub use patch::ClientPatch;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// An id is a domain value, beside the hold's and the slot's.
pub use crate::domain::ClientId;

/// The built-in client that a request without a key is in `open` mode; it
/// owns the holds made before clients existed. Its id is fixed by the
/// migration that creates it, which is also `holds.client_id`'s default.
pub const ANONYMOUS: ClientId = ClientId(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Booker,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Booker => "booker",
            Self::Admin => "admin",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "booker" => Some(Self::Booker),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }
}

/// Who made a request: what the service needs to scope and limit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub id: ClientId,
    pub role: Role,
    /// Sustained requests per second (burst twice that); `None`: not
    /// limited (`rate_limit_per_second = 0`, or `open` mode's anonymous).
    pub rate: Option<u32>,
    /// The most seats it may have in active holds (SPEC §16); `None`:
    /// unlimited (`max_held_seats = 0`, or [`Caller::anonymous`]).
    pub held_cap: Option<u32>,
}

impl Caller {
    /// Whether this caller may read or change something `owner` owns: its
    /// owner, or any admin.
    pub fn may_touch(&self, owner: ClientId) -> bool {
        self.role == Role::Admin || self.id == owner
    }

    /// The caller's rate limit, for the cache; `None`: unlimited.
    pub fn limit(&self) -> Option<crate::cache::Limit> {
        self.rate.map(|rate| crate::cache::Limit {
            client: self.id,
            rate,
        })
    }

    /// The seed's anonymous API, unlimited: the tools and tests that drive
    /// the service directly. `open` mode's requests without a key are this
    /// client with its cap on held seats (`Gate`, SPEC §16).
    pub const fn anonymous() -> Self {
        Self {
            id: ANONYMOUS,
            role: Role::Booker,
            rate: None,
            held_cap: None,
        }
    }
}

/// The client resource. `key` is only ever set in the answer that
/// created the client; no answer ever carries the hash. Its `Debug`
/// leaves the key out.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct Client {
    pub id: ClientId,
    pub name: String,
    pub role: Role,
    pub rate_limit_per_second: Option<u32>,
    pub max_held_seats: Option<u32>,
    #[serde(serialize_with = "crate::domain::utc_micros")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::domain::utc_micros_opt")]
    pub revoked_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("role", &self.role)
            .field("rate_limit_per_second", &self.rate_limit_per_second)
            .field("max_held_seats", &self.max_held_seats)
            .field("created_at", &self.created_at)
            .field("revoked_at", &self.revoked_at)
            .field("key", &self.key.as_ref().map(|_| "***"))
            .finish()
    }
}
