//! Webhooks (SPEC §20, §23.1–3, §23.11): a client's endpoints, which
//! receive its feed's events signed as Standard Webhooks specifies.
//!
//! - [`secret`]: a subscription's signing secret, sealed at rest, and the
//!   signature of a request.
//! - [`address`]: what an endpoint's URL may be, and the addresses its
//!   host may resolve to.
//! - [`event_types`]: which events a subscription asks for.
//! - [`subscription`]: the resource and its row; [`input`]: the bodies
//!   that make and change one; [`store`]: the transactions that do;
//!   [`page`]: listing them; [`remove`]: deleting one in bounded steps;
//!   [`deliveries`]: a subscription's deliveries; [`ping`]: a
//!   `webhook.ping` sent now.
//! - The delivery engine (docs/DESIGN.md, "Webhooks: the delivery
//!   protocol"): [`dispatch`] turns the feed into deliveries, [`claim`]
//!   leases due heads, [`prepare`] signs a request, [`send`] sends it (on AWS [`invoke`]
//!   hands it to the sender function outside the VPC),
//!   [`record`] records the answer ([`heads`]: an ended head's successor); [`deliver`] runs them in rounds, by
//!   [`settings`]; [`subject`] says what an event is about; [`prune`]
//!   deletes ended deliveries whose events the feed no longer keeps.
//!
//! Knows nothing of HTTP, like `clients`.

pub mod address;
pub mod claim;
pub mod deliver;
pub mod deliveries;
pub mod dispatch;
pub mod event_types;
pub mod heads;
pub mod input;
pub mod invoke;
pub mod page;
pub mod ping;
pub mod prepare;
pub mod prune;
pub mod record;
pub mod remove;
pub mod secret;
pub mod send;
pub mod settings;
pub mod store;
pub mod subject;
pub mod subscription;

pub use address::{AddressError, Rules, UrlError, check_url, resolve_checked};
pub use deliver::{Deliverer, RunReport, Sender};
pub use deliveries::{Delivery, DeliveryCursor, DeliveryPage};
pub use event_types::EventTypes;
pub use input::{NewSubscription, SubscriptionPatch};
pub use page::{WebhookCursor, WebhookPage};
pub use secret::{SealKey, SecretError, WebhookSecret, signature_header};
pub use settings::DeliverySettings;
pub use subscription::{DisabledReason, Status, Subscription, WebhookId};

use crate::error::Error;
use sqlx::MySqlPool;

/// The subscriptions service: the routes of `/webhooks`.
#[derive(Clone, Debug)]
pub struct Webhooks {
    pub(crate) pool: MySqlPool,
    pub(crate) rules: Rules,
    /// `WEBHOOK_SECRET_KEY`; `None` in a function that was given none: it
    /// may list and change subscriptions, not make or rotate a secret.
    pub(crate) key: Option<SealKey>,
    /// How long a ping waits for the receiver: `WEBHOOK_TIMEOUT_MS`, as
    /// every delivery.
    pub(crate) ping_timeout: std::time::Duration,
}

impl Webhooks {
    pub fn new(pool: MySqlPool, rules: Rules) -> Self {
        Self {
            pool,
            rules,
            key: None,
            ping_timeout: DeliverySettings::default().timeout,
        }
    }

    /// A ping waits `timeout` for the receiver (the cold start sets
    /// `WEBHOOK_TIMEOUT_MS`'s).
    pub fn with_ping_timeout(self, timeout: std::time::Duration) -> Self {
        Self {
            ping_timeout: timeout,
            ..self
        }
    }

    pub fn with_key(self, key: Option<SealKey>) -> Self {
        Self { key, ..self }
    }

    /// Whether it can seal a new secret (for the start-up line).
    pub fn has_key(&self) -> bool {
        self.key.is_some()
    }

    /// The key as the cold start read it (`WEBHOOK_SECRET_KEY`, or the
    /// secret `WEBHOOK_SECRET_KEY_ARN` names): the delivery engine's, which
    /// opens secrets to sign with them.
    pub fn seal_key(&self) -> Option<&SealKey> {
        self.key.as_ref()
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The key that seals a new secret; its absence is the deploy's fault,
    /// a 500 whose log line names the variable.
    pub(crate) fn key(&self) -> Result<&SealKey, Error> {
        self.key.as_ref().ok_or_else(|| {
            Error::Internal(sqlx::Error::Configuration(
                format!(
                    "{} is not set: no webhook secret can be sealed",
                    secret::KEY_VARIABLE
                )
                .into(),
            ))
        })
    }
}

impl From<SecretError> for Error {
    fn from(err: SecretError) -> Self {
        Error::Internal(sqlx::Error::Protocol(err.to_string()))
    }
}
