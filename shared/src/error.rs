//! The one error type of the service and the one place where it becomes HTTP.
//!
//! The booking service returns [`Error`] with a machine-readable
//! [`Error::reason`]; [`Error::status`] and [`Error::to_body`] are the only
//! mapping to HTTP. Internal causes (SQL, connection strings) are logged by
//! the HTTP layer and never put in a body.

use crate::domain::ClientId;
use crate::domain::{EntryId, HoldId, SlotId};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Field name → messages, Laravel's `errors` shape. A name is ours
/// (`capacity`), built from ours (`3.capacity`: the fourth element of a
/// batch), or, for a field or parameter the route does not take, the name
/// the client sent (SPEC §19.6: see [`sent_name`]). `body` and `query` name
/// only what concerns the whole body or query.
pub type FieldErrors = BTreeMap<Cow<'static, str>, Vec<String>>;

/// A name the client sent, as an `errors` key and in its message: at most
/// 64 characters, since a body is not a log.
pub fn sent_name(name: &str) -> String {
    name.chars().take(64).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("slot {0} does not exist")]
    SlotNotFound(SlotId),
    #[error("hold {0} does not exist")]
    HoldNotFound(HoldId),
    #[error("waiting-list entry {0} does not exist")]
    EntryNotFound(EntryId),
    /// Joining the line of a slot with the seats bookable now, which no
    /// waiting entry could use: hold instead (SPEC §18).
    #[error("slot {slot} has {quantity} seats bookable")]
    SeatsAvailable { slot: SlotId, quantity: u32 },
    /// An unknown route, or a path id that cannot name a row (`0`, `-1`,
    /// `abc`, > 2^64−1).
    #[error("no {0} matches the request")]
    NotFound(&'static str),
    /// A path the API serves, with another method; `allow` is what it
    /// serves (the `Allow` header, SPEC §19.8).
    #[error("{method} is not a method of this path")]
    MethodNotAllowed {
        method: String,
        allow: &'static [&'static str],
    },
    #[error("slot {0} has no remaining capacity")]
    CapacityExhausted(SlotId),
    /// The hold would take the client over the slot's share per client
    /// (SPEC §16): `seats` is what it has on the slot now.
    #[error("the client has {seats} of slot {slot}'s {share} seats per client")]
    SlotClientLimitReached {
        slot: SlotId,
        share: u32,
        seats: u64,
    },
    /// The hold would take the client over its cap on seats in active
    /// holds (SPEC §16): `held` is what it holds now.
    #[error("the client holds {held} of its {cap} seats")]
    HoldLimitReached { cap: u32, held: u64 },
    #[error("hold {0} is cancelled")]
    HoldCancelled(HoldId),
    #[error("hold {0} has expired")]
    HoldExpired(HoldId),
    /// Extending a hold that is already a booking.
    #[error("hold {0} is confirmed")]
    HoldConfirmed(HoldId),
    /// The extension would not move `expires_at` later (the lifetime cap).
    #[error("hold {0} reached its longest lifetime")]
    ExtensionLimitReached(HoldId),
    /// Holding, or extending a hold, on a slot that has started.
    #[error("slot {0} has started")]
    SlotClosed(SlotId),
    /// A capacity cut below what is confirmed and held (SPEC §10).
    #[error("slot {slot} has {confirmed} confirmed and {held} held seats, more than {capacity}")]
    CapacityBelowCommitted {
        slot: SlotId,
        capacity: u32,
        confirmed: u32,
        held: u32,
    },
    /// Deleting a slot with confirmed seats or active holds.
    #[error("slot {slot} has {confirmed} confirmed and {held} held seats")]
    SlotHasBookings {
        slot: SlotId,
        confirmed: u32,
        held: u32,
    },
    #[error("idempotency key was already used: {0}")]
    IdempotencyKeyReuse(KeyReuse),
    #[error("validation failed: {0:?}")]
    Validation(FieldErrors),
    /// No key, a malformed one, or one that names no active client.
    #[error("unauthenticated: {0}")]
    Unauthenticated(Unauthenticated),
    /// A booker on an admin route.
    #[error("forbidden: the route needs an admin key")]
    Forbidden,
    /// Over the client's rate; `retry_after` in whole seconds, ≥ 1.
    #[error("rate limited, retry after {retry_after} s")]
    RateLimited { retry_after: u64 },
    #[error("client {0} does not exist")]
    ClientNotFound(ClientId),
    #[error("a client named {0:?} exists")]
    NameTaken(String),
    #[error("client {0} is the last active admin")]
    LastAdmin(ClientId),
    /// `anonymous` is part of `open` mode, not a client with a key.
    #[error("client {0} is built in")]
    BuiltInClient(ClientId),
    /// A body heavier than its route takes (SPEC §16), refused unread.
    #[error("a body of {size} bytes, over {limit}")]
    PayloadTooLarge { size: usize, limit: usize },
    /// Changing a revoked client's limits (SPEC §16).
    #[error("client {0} is revoked")]
    ClientRevoked(ClientId),
    /// The client has `WEBHOOK_MAX_PER_CLIENT` subscriptions (SPEC §20).
    #[error("the client has its {limit} webhooks")]
    WebhookLimitReached { limit: u32 },
    /// A feed cursor older than the event retention: events after it are
    /// gone (SPEC §12).
    #[error("the cursor is older than the event retention")]
    CursorExpired,
    /// The database cannot be reached, or a lock wait / deadlock outlived
    /// the retries, before any statement that may have committed was sent
    /// (else [`Self::OutcomeUnknown`]): nothing was written; the request is
    /// safe to retry.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// The connection died after the COMMIT of a change that its retry
    /// could not recognise as done (docs/DESIGN.md, "Retried after an
    /// unseen COMMIT"): the change may have been made. Never retried by
    /// the service; 503, and the message says to look before retrying.
    #[error("outcome unknown, the connection died after COMMIT was sent: {0}")]
    OutcomeUnknown(#[source] sqlx::Error),
    #[error("unexpected database error: {0}")]
    Internal(#[source] sqlx::Error),
}

impl Error {
    /// A validation failure on one field.
    pub fn invalid(field: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::Validation(BTreeMap::from([(field.into(), vec![message.into()])]))
    }

    /// The stable code a program branches on.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::SlotNotFound(_)
            | Self::HoldNotFound(_)
            | Self::EntryNotFound(_)
            | Self::ClientNotFound(_)
            | Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::CapacityExhausted(_) => "capacity_exhausted",
            Self::SeatsAvailable { .. } => "seats_available",
            Self::HoldLimitReached { .. } => "hold_limit_reached",
            Self::SlotClientLimitReached { .. } => "slot_client_limit_reached",
            Self::HoldCancelled(_) => "hold_cancelled",
            Self::HoldExpired(_) => "hold_expired",
            Self::HoldConfirmed(_) => "hold_confirmed",
            Self::ExtensionLimitReached(_) => "extension_limit_reached",
            Self::SlotClosed(_) => "slot_closed",
            Self::CapacityBelowCommitted { .. } => "capacity_below_committed",
            Self::SlotHasBookings { .. } => "slot_has_bookings",
            Self::IdempotencyKeyReuse(_) => "idempotency_key_reuse",
            Self::Validation(_) => "validation_failed",
            Self::Unauthenticated(_) => "unauthenticated",
            Self::Forbidden | Self::BuiltInClient(_) => "forbidden",
            Self::RateLimited { .. } => "rate_limited",
            Self::NameTaken(_) => "name_taken",
            Self::LastAdmin(_) => "last_admin",
            Self::ClientRevoked(_) => "client_revoked",
            Self::WebhookLimitReached { .. } => "webhook_limit_reached",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::CursorExpired => "cursor_expired",
            Self::Unavailable(_) | Self::OutcomeUnknown(_) => "service_unavailable",
            Self::Internal(_) => "internal_error",
        }
    }

    /// The HTTP status: the single error → status mapping of the service.
    pub fn status(&self) -> u16 {
        match self {
            Self::SlotNotFound(_)
            | Self::HoldNotFound(_)
            | Self::EntryNotFound(_)
            | Self::ClientNotFound(_)
            | Self::NotFound(_) => 404,
            Self::MethodNotAllowed { .. } => 405,
            Self::CapacityExhausted(_)
            | Self::SeatsAvailable { .. }
            | Self::HoldLimitReached { .. }
            | Self::SlotClientLimitReached { .. }
            | Self::HoldCancelled(_)
            | Self::HoldExpired(_)
            | Self::HoldConfirmed(_)
            | Self::ExtensionLimitReached(_)
            | Self::SlotClosed(_)
            | Self::CapacityBelowCommitted { .. }
            | Self::SlotHasBookings { .. }
            | Self::NameTaken(_)
            | Self::LastAdmin(_)
            | Self::ClientRevoked(_)
            | Self::WebhookLimitReached { .. } => 409,
            Self::Unauthenticated(_) => 401,
            Self::Forbidden | Self::BuiltInClient(_) => 403,
            Self::RateLimited { .. } => 429,
            Self::CursorExpired => 410,
            Self::PayloadTooLarge { .. } => 413,
            Self::IdempotencyKeyReuse(_) | Self::Validation(_) => 422,
            Self::Unavailable(_) | Self::OutcomeUnknown(_) => 503,
            Self::Internal(_) => 500,
        }
    }

    /// A sentence for a person; never carries an internal cause.
    pub fn message(&self) -> String {
        match self {
            Self::SlotNotFound(id) => format!("Slot {id} does not exist."),
            Self::HoldNotFound(id) => format!("Hold {id} does not exist."),
            Self::EntryNotFound(id) => format!("Waiting-list entry {id} does not exist."),
            Self::SeatsAvailable { slot, quantity } => format!(
                "Slot {slot} has {quantity} seats bookable now that no waiting entry can use: \
                 hold them instead."
            ),
            Self::NotFound(what) => format!("No {what} matches this request."),
            Self::MethodNotAllowed { method, allow } => format!(
                "This path does not take {method}; it takes {}.",
                allow.join(", ")
            ),
            Self::CapacityExhausted(id) => format!("Slot {id} has no remaining capacity."),
            Self::SlotClientLimitReached { slot, share, seats } => format!(
                "Slot {slot} allows at most {share} seats per client, held or booked; this \
                 client has {seats} there."
            ),
            Self::HoldLimitReached { cap, held } => format!(
                "This client may have at most {cap} seats in active holds and has {held}; \
                 confirm, cancel or let some expire first."
            ),
            Self::HoldCancelled(id) => format!("Hold {id} has been cancelled."),
            Self::HoldExpired(id) => format!("Hold {id} has expired."),
            Self::HoldConfirmed(id) => format!("Hold {id} is confirmed; a booking has no expiry."),
            Self::ExtensionLimitReached(id) => {
                format!("Hold {id} cannot be extended: it has reached its longest lifetime.")
            }
            Self::SlotClosed(id) => format!("Slot {id} has started; it takes no more holds."),
            Self::CapacityBelowCommitted {
                slot,
                capacity,
                confirmed,
                held,
            } => format!(
                "Slot {slot} cannot have a capacity of {capacity}: {confirmed} seats are \
                 confirmed and {held} held, {} in all.",
                u64::from(*confirmed) + u64::from(*held)
            ),
            Self::SlotHasBookings {
                slot,
                confirmed,
                held,
            } => format!(
                "Slot {slot} cannot be deleted: {confirmed} seats are confirmed and {held} held."
            ),
            Self::IdempotencyKeyReuse(KeyReuse::Slot { used_for }) => {
                format!("This idempotency key was already used for slot {used_for}.")
            }
            Self::IdempotencyKeyReuse(KeyReuse::Quantity { used_for, asked }) => format!(
                "This idempotency key was already used for a quantity of {used_for}, not {asked}."
            ),
            Self::Validation(errors) => validation_summary(errors),
            Self::Unauthenticated(why) => why.message().into(),
            Self::Forbidden => "This route needs an admin key.".into(),
            Self::RateLimited { retry_after } => {
                format!("Too many requests for this client; retry after {retry_after} s.")
            }
            Self::ClientNotFound(id) => format!("Client {id} does not exist."),
            Self::BuiltInClient(id) => format!(
                "Client {id} is the built-in anonymous client of open mode, without a key or \
                 limits; it cannot be changed or revoked. AUTH_MODE=api-key turns open mode off."
            ),
            Self::PayloadTooLarge { size, limit } => {
                format!("The body is {size} bytes; this route takes at most {limit}.")
            }
            Self::ClientRevoked(id) => {
                format!("Client {id} is revoked; its limits can no longer be changed.")
            }
            Self::WebhookLimitReached { limit } => {
                format!("This client has {limit} webhooks, the most it may have; delete one first.")
            }
            Self::NameTaken(name) => format!("A client named {name:?} already exists."),
            Self::LastAdmin(id) => format!(
                "Client {id} is the last active admin; create another admin before revoking it."
            ),
            Self::CursorExpired => {
                "This cursor is older than the event retention: events after it \
                                    have been deleted. Start again without `after` (the oldest \
                                    event kept) and reconcile from the resources themselves."
                    .into()
            }
            Self::Unavailable(_) => {
                "The service is temporarily unavailable; the request can be retried.".into()
            }
            Self::OutcomeUnknown(_) => "The service lost the database's answer to this change: \
                 it may have been made. Read the resource before sending it again."
                .into(),
            Self::Internal(_) => "An unexpected error occurred.".into(),
        }
    }

    /// `{"message": …, "reason": …}`, plus `errors` for validation failures.
    pub fn to_body(&self) -> Value {
        let mut body = json!({"message": self.message(), "reason": self.reason()});
        if let Self::Validation(errors) = self {
            body["errors"] = json!(errors);
        }
        body
    }

    /// Errors a client caused are part of normal traffic; the rest are ours.
    pub fn is_server_side(&self) -> bool {
        self.status() >= 500
    }
}

/// What differs between a replayed idempotency key's hold and the request
/// (SPEC §9's fingerprint: slot, then quantity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyReuse {
    Slot { used_for: SlotId },
    Quantity { used_for: u32, asked: u32 },
}

impl std::fmt::Display for KeyReuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Slot { used_for } => write!(f, "for slot {used_for}"),
            Self::Quantity { used_for, asked } => {
                write!(f, "for quantity {used_for}, asked {asked}")
            }
        }
    }
}

/// Why a request is unauthenticated. All answer 401 `unauthenticated`;
/// the message only tells a missing key from one that does not work, so a
/// caller learns nothing about which keys exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unauthenticated {
    Missing,
    /// Not `Bearer <24–128 characters of [A-Za-z0-9_-]>`.
    Malformed,
    /// Well-formed, but it names no client, or a revoked one.
    Rejected,
}

impl Unauthenticated {
    pub fn message(self) -> &'static str {
        match self {
            Self::Missing => "An API key is required: send Authorization: Bearer <key>.",
            Self::Malformed | Self::Rejected => "The API key is not valid.",
        }
    }

    /// The `WWW-Authenticate` challenge (RFC 6750 §3).
    pub fn challenge(self) -> &'static str {
        match self {
            Self::Missing => r#"Bearer realm="slot-booking""#,
            Self::Malformed | Self::Rejected => {
                r#"Bearer realm="slot-booking", error="invalid_token""#
            }
        }
    }
}

impl std::fmt::Display for Unauthenticated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Missing => "no key",
            Self::Malformed => "malformed key",
            Self::Rejected => "unknown or revoked key",
        })
    }
}

/// Laravel's summary: the first message, and how many more there are.
fn validation_summary(errors: &FieldErrors) -> String {
    let mut messages = errors.values().flatten();
    let first = messages
        .next()
        .cloned()
        .unwrap_or_else(|| "The given data was invalid.".into());
    match messages.count() {
        0 => first,
        1 => format!("{first} (and 1 more error)"),
        more => format!("{first} (and {more} more errors)"),
    }
}

#[cfg(test)]
mod tests;
