//! The arms a write scenario compares: the service as a request reaches
//! it, and the raw statement sequences it is measured against.

use crate::measure::Outcome;
use crate::raw;
use crate::setup::Env;
use shared::domain::{HoldId, IdempotencyKey, SlotId};

pub(crate) const HOLD_TTL_MICROS: i64 = 300_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// The gate, then the service: a request with auth on.
    Service,
    /// [`Self::Service`] by clients at the default cap of held seats
    /// (SPEC §16), taking turns (none reaches it).
    ServiceCapped,
    /// [`Self::ServiceCapped`] by as many clients with no cap, taking turns
    /// the same way: its reference, which differs from it in the cap alone.
    ServiceUncapped,
    /// The gate, then the service on the same connection with no cache
    /// (confirm only).
    ServiceNoCache,
    /// The SQL only (no key look-up, no rate limit), the change's event
    /// included.
    Raw,
    /// The same SQL without the event: what the outbox costs (SPEC §12).
    RawNoOutbox,
    /// [`Self::RawNoOutbox`] again, as a third arm of the same rounds:
    /// its ratio to the first is what the measurement itself scatters by.
    RawNoOutboxAgain,
    /// The seed's count-based sequence (reference).
    SeedCount,
    /// [`Self::Raw`] with the statements of before issue 28 (the
    /// `revision` group): what that change costs, in one run.
    RawBefore,
}

impl Variant {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::ServiceCapped => "service_capped",
            Self::ServiceUncapped => "service_uncapped",
            Self::ServiceNoCache => "service_no_cache",
            Self::Raw => "raw",
            Self::RawNoOutbox => "raw_no_outbox",
            Self::RawNoOutboxAgain => "raw_no_outbox_again",
            Self::SeedCount => "seed_count",
            Self::RawBefore => "raw_before",
        }
    }

    pub(super) fn outbox(self) -> raw::Outbox {
        if matches!(self, Self::RawNoOutbox | Self::RawNoOutboxAgain) {
            raw::Outbox::Off
        } else {
            raw::Outbox::On
        }
    }

    pub(super) fn statements(self) -> (raw::Outbox, raw::Statements) {
        let statements = if self == Self::RawBefore {
            raw::Statements::Before
        } else {
            raw::Statements::Current
        };
        (self.outbox(), statements)
    }

    /// A hold of `quantity` seats (the seed's sequence holds one).
    pub(super) async fn hold(self, env: &Env, slot: u64, quantity: u32) -> Result<Outcome, String> {
        let key = uuid::Uuid::new_v4().to_string();
        match self {
            Self::Service | Self::ServiceNoCache | Self::ServiceCapped | Self::ServiceUncapped => {
                let caller = match self {
                    Self::ServiceCapped => env.admit_capped().await,
                    Self::ServiceUncapped => env.admit_uncapped().await,
                    _ => env.admit().await,
                };
                let caller = caller.map_err(|e| e.to_string())?;
                let key = IdempotencyKey::parse(&key).ok_or("bad key")?;
                match env
                    .app
                    .booking
                    .hold(&caller, SlotId(slot), quantity, &key)
                    .await
                {
                    Ok(done) => Ok(Outcome::Done(if done.created { "201" } else { "200" })),
                    Err(err) => refused(&err),
                }
            }
            Self::Raw | Self::RawNoOutbox | Self::RawNoOutboxAgain | Self::RawBefore => raw::hold(
                &env.pool,
                env.client.0,
                slot,
                &key,
                quantity,
                HOLD_TTL_MICROS,
                self.statements(),
            )
            .await
            .map_err(|e| e.to_string()),
            Self::SeedCount => raw::seed_hold(&env.pool, env.client.0, slot, &key, HOLD_TTL_MICROS)
                .await
                .map_err(|e| e.to_string()),
        }
    }

    pub(super) async fn confirm(self, env: &Env, hold: u64) -> Result<Outcome, String> {
        let booking = match self {
            Self::Service | Self::ServiceCapped | Self::ServiceUncapped => &env.app.booking,
            Self::ServiceNoCache => &env.uncached,
            Self::Raw
            | Self::RawNoOutbox
            | Self::RawNoOutboxAgain
            | Self::SeedCount
            | Self::RawBefore => {
                let keys = env.app.booking.cache().ok_or("no cache")?.keys();
                let statements = self.statements();
                return raw::confirm(&env.pool, &mut env.redis.clone(), keys, hold, statements)
                    .await
                    .map_err(|e| e.to_string());
            }
        };
        let caller = env.admit().await.map_err(|e| e.to_string())?;
        match booking.confirm(&caller, HoldId(hold)).await {
            Ok(_) => Ok(Outcome::Done("200")),
            Err(err) => refused(&err),
        }
    }
}

/// A refusal the API answers with a 4xx is an outcome; a 5xx is an error.
pub fn refused(err: &shared::Error) -> Result<Outcome, String> {
    match err.status() {
        404 => Ok(Outcome::Done("404")),
        409 => Ok(Outcome::Done("409")),
        422 => Ok(Outcome::Done("422")),
        _ => Err(err.to_string()),
    }
}
