//! slot-booking's library: everything the Lambda functions share.
//!
//! `functions/*` are thin: they build an [`App`] once per execution
//! environment and hand each request to one handler of [`http`].

pub mod booking;
pub mod cache;
pub mod config;
pub mod db;
pub mod domain;
pub mod error;
pub mod http;
pub mod telemetry;

pub use booking::Booking;
use cache::{AvailabilityCache, CacheSettings};
pub use config::Config;
pub use error::Error;

/// What a function keeps between invocations: built once in `main`.
#[derive(Clone)]
pub struct App {
    pub config: Config,
    pub booking: Booking,
}

impl App {
    /// One or two connections per execution environment: Lambda sends it
    /// one request at a time.
    pub const CONNECTIONS_PER_ENVIRONMENT: u32 = 1;

    /// Builds the app from validated configuration. Connects lazily, so a
    /// database that is briefly away does not fail the cold start.
    /// Must be called inside a Tokio runtime (the cache client spawns its
    /// connection task there).
    pub fn new(config: Config) -> Result<Self, StartupError> {
        let pool = db::connect_lazy(&config.database_url, Self::CONNECTIONS_PER_ENVIRONMENT)
            .map_err(|err| StartupError(format!("invalid DATABASE_URL: {err}")))?;
        let cache = match &config.redis_url {
            Some(url) => Some(
                AvailabilityCache::new(
                    url,
                    &config.database_name(),
                    CacheSettings::new(config.cache_ttl),
                )
                .map_err(|err| StartupError(format!("invalid REDIS_URL: {err}")))?,
            ),
            None => None,
        };
        let booking = Booking::new(pool, config.hold_ttl, cache);
        Ok(Self { config, booking })
    }

    /// The cold start of every function: logging, configuration, clients.
    /// A bad configuration stops the process with one clear log line.
    pub fn from_env_or_exit() -> Self {
        telemetry::init();
        let built = Config::from_env()
            .map_err(|err| err.to_string())
            .and_then(|config| {
                Self::new(config).map_err(|err| format!("invalid DATABASE_URL: {err}"))
            });
        match built {
            Ok(app) => app,
            Err(message) => {
                tracing::error!("refusing to start: {message}");
                eprintln!("refusing to start: {message}");
                std::process::exit(1);
            }
        }
    }
}

/// Why a function refused to start: one line for the log.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartupError(pub String);
