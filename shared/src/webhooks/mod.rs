//! Webhooks (SPEC §20, §23.1–3, §23.11): a client's endpoints, which
//! receive its feed's events signed as Standard Webhooks specifies.
//!
//! - [`secret`]: a subscription's signing secret, sealed at rest, and the
//!   signature of a request.
//! - [`address`]: what an endpoint's URL may be, and the addresses its
//!   host may resolve to.
//! - The delivery engine (docs/DESIGN.md, "Webhooks: the delivery
//!   protocol"): [`dispatch`] turns the feed into deliveries, [`claim`]
//!   leases due heads, [`prepare`] signs a request, [`send`] sends it,
//!   [`record`] records the answer; [`deliver`] runs them in rounds, by
//!   [`settings`]; [`subject`] says what an event is about.

pub mod address;
pub mod claim;
pub mod deliver;
pub mod dispatch;
pub mod prepare;
pub mod record;
pub mod secret;
pub mod send;
pub mod settings;
pub mod subject;

pub use address::{AddressError, Rules, UrlError, check_url, resolve_checked};
pub use deliver::{Deliverer, RunReport};
pub use secret::{SealKey, SecretError, WebhookSecret, signature_header};
pub use settings::DeliverySettings;
