//! Webhooks (SPEC §20, §23.1–3, §23.11): a client's endpoints, which
//! receive its feed's events signed as Standard Webhooks specifies.
//!
//! - [`secret`]: a subscription's signing secret, sealed at rest, and the
//!   signature of a request.
//! - [`address`]: what an endpoint's URL may be, and the addresses its
//!   host may resolve to.

pub mod address;
pub mod secret;

pub use address::{AddressError, Rules, UrlError, check_url, resolve_checked};
pub use secret::{SealKey, SecretError, WebhookSecret, signature_header};
