//! slot-booking's library: everything the Lambda functions share.
//!
//! `functions/*` are thin: they build an [`App`] once per execution
//! environment and hand each request to one handler of [`http`].

pub mod aws;
pub mod booking;
pub mod cache;
pub mod clients;
pub mod config;
pub mod db;
pub mod domain;
pub mod error;
pub mod events;
pub mod http;
pub mod migrate;
pub mod recent;
pub mod secret;
pub mod slots;
pub mod telemetry;
pub mod webhooks;

pub use booking::Booking;
use cache::{AvailabilityCache, CacheSettings};
use clients::{ClientAdmin, Gate};
pub use config::{Config, Settings};
pub use error::Error;
use secret::Secret;
use slots::Slots;

/// What a function keeps between invocations: built once in `main`.
#[derive(Clone)]
pub struct App {
    pub config: Config,
    pub booking: Booking,
    /// Who a request is (key look-ups cached here) and its rate limit.
    pub gate: Gate,
    pub clients: ClientAdmin,
    /// Slots administered and listed (SPEC §10, §11).
    pub slots: Slots,
    /// The change feed (SPEC §12).
    pub feed: events::Feed,
    /// Nudges the publisher after a change (`EVENT_BUS_NAME` set); `None`:
    /// the schedule alone runs it.
    pub publish_trigger: Option<events::PublishTrigger>,
    /// Webhooks' subscriptions (SPEC §20); sealing a secret needs its key
    /// (`WEBHOOK_SECRET_KEY`, read by [`App::from_env`]).
    pub webhooks: webhooks::Webhooks,
    /// The AWS SDK configuration the cold start loaded (its look-ups, or
    /// the trigger's client), kept so that nothing loads it twice.
    sdk: Option<aws_config::SdkConfig>,
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
        Self::with_password(config, None)
    }

    /// [`App::new`] for a database whose password is kept out of the URL
    /// (RDS Proxy mode: read from Secrets Manager).
    pub fn with_password(config: Config, password: Option<&Secret>) -> Result<Self, StartupError> {
        Self::with_passwords(config, password, None)
    }

    /// [`App::with_password`], and the cache user's password
    /// ([`Config::cache_user`]), from [`Resolved`](config::Resolved).
    pub fn with_passwords(
        config: Config,
        database_password: Option<&Secret>,
        cache_password: Option<&Secret>,
    ) -> Result<Self, StartupError> {
        let options =
            db::options_with_password(&config.database_url, database_password).map_err(|err| {
                StartupError(format!(
                    "invalid database URL {}: {err}",
                    config::redact_url(&config.database_url)
                ))
            })?;
        let pool = db::connect_lazy_with(options, Self::CONNECTIONS_PER_ENVIRONMENT);
        let cache = match &config.redis_url {
            Some(url) => {
                let user = match (&config.cache_user, cache_password) {
                    (Some(name), Some(password)) => Some((name.as_str(), password)),
                    (None, _) => None,
                    (Some(name), None) => {
                        return Err(StartupError(format!(
                            "the cache user {name} has no password"
                        )));
                    }
                };
                let client = cache::client(url, user).map_err(|err| {
                    StartupError(format!(
                        "invalid cache URL {}: {err}",
                        config::redact_url(url)
                    ))
                })?;
                Some(AvailabilityCache::with_client(
                    client,
                    &config.cache_namespace,
                    CacheSettings::new(config.cache_ttl),
                ))
            }
            None => None,
        };
        let booking = Booking::new(pool, config.hold_ttl, cache).with_rules(config.holds);
        Ok(Self::assemble(config, booking))
    }

    /// The app around a booking service built by the caller (tests tune
    /// its cache): the gate and the client administration share its
    /// connection and cache.
    pub fn assemble(config: Config, booking: Booking) -> Self {
        let pool = booking.pool().clone();
        let gate = Gate::new(pool.clone(), config.access, booking.cache().cloned());
        Self {
            slots: Slots::new(pool.clone(), booking.cache().cloned())
                .with_scan(config.holds.availability_scan)
                .with_hold_ttl(config.hold_ttl),
            feed: events::Feed::new(pool.clone()),
            webhooks: webhooks::Webhooks::new(pool.clone(), config.webhooks),
            publish_trigger: None,
            sdk: None,
            clients: ClientAdmin::new(pool).with_booking(booking.cache().cloned(), config.hold_ttl),
            gate,
            config,
            booking,
        }
    }

    /// Reads and checks the environment, then does its AWS look-ups (the
    /// database secret, the cache endpoint by name) once.
    pub async fn from_env() -> Result<Self, StartupError> {
        let settings = Settings::from_env().map_err(|err| StartupError(err.to_string()))?;
        let resolved = settings.resolve().await?;
        let mut app = Self::with_passwords(
            resolved.config,
            resolved.database_password.as_ref(),
            resolved.cache_password.as_ref(),
        )?;
        app.sdk = resolved.sdk;
        let mut key = webhooks::SealKey::from_lookup(|key| std::env::var(key).ok())
            .map_err(|err| StartupError(err.to_string()))?;
        let arn = std::env::var(webhooks::secret::KEY_ARN_VARIABLE).unwrap_or_default();
        if key.is_none() && !arn.is_empty() {
            let text = aws::secret_string(&app.sdk_config().await, &arn)
                .await
                .map_err(|err| StartupError(err.to_string()))?;
            key = Some(
                webhooks::SealKey::from_base64(text.expose()).ok_or_else(|| {
                    StartupError(format!("the webhook key secret {arn} is not a 32-byte key"))
                })?,
            );
        }
        let timeout = webhooks::DeliverySettings::from_env()
            .map_err(|err| StartupError(err.to_string()))?
            .timeout;
        app.webhooks = app.webhooks.with_key(key).with_ping_timeout(timeout);
        if let Some(bus) = config::trigger_bus(|key| std::env::var(key).ok()) {
            let client = aws_sdk_eventbridge::Client::new(&app.sdk_config().await);
            app.publish_trigger = Some(events::PublishTrigger::new(client, &bus));
        }
        tracing::info!(
            database = %config::redact_url(&app.config.database_url),
            cache = app.config.redis_url.as_deref().map(config::redact_url).as_deref().unwrap_or("off"),
            cache_namespace = %app.config.cache_namespace,
            cache_user = app.config.cache_user.as_deref().unwrap_or("none"),
            cache_ttl_s = app.config.cache_ttl.as_secs(),
            hold_ttl_s = app.config.hold_ttl.as_secs(),
            hold_max_quantity = app.config.holds.max_quantity,
            hold_max_lifetime_s = app.config.holds.max_lifetime.as_secs(),
            hold_retention_days = app.config.holds.retention.as_secs() / 86_400,
            events_kept_until_published = app.config.holds.events_published,
            publish_trigger = ?app.publish_trigger,
            webhooks = ?app.config.webhooks,
            webhook_key = app.webhooks.has_key(),
            "configuration ready"
        );
        Ok(app)
    }

    /// The SDK configuration the cold start loaded, loading it (and
    /// keeping it) only when no look-up did: one HTTPS client and one
    /// credentials chain per cold start.
    pub async fn sdk_config(&mut self) -> aws_config::SdkConfig {
        match &self.sdk {
            Some(sdk) => sdk.clone(),
            None => self.sdk.insert(aws::load().await).clone(),
        }
    }

    /// The cold start of every function: logging, configuration, clients.
    /// A bad configuration (or an unreadable database secret) stops the
    /// process with one clear log line.
    pub async fn from_env_or_exit() -> Self {
        telemetry::init();
        match Self::from_env().await {
            Ok(app) => app,
            Err(err) => {
                tracing::error!("refusing to start: {err}");
                // Also on stderr (where a launcher looks first), as the
                // same JSON line: never a line of plain text.
                eprintln!(
                    "{}",
                    serde_json::json!({
                        "level": "ERROR",
                        "function": telemetry::function_name(),
                        "request_id": null,
                        "cold_start": true,
                        "message": format!("refusing to start: {err}"),
                    })
                );
                std::process::exit(1);
            }
        }
    }
}

/// Why a function refused to start: one line for the log.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartupError(pub String);
