//! The AWS step of a cold start ([`Settings::resolve`]): the secrets and
//! the cache discovery, once per execution environment.

use super::settings::{CacheSource, DatabaseSource, Settings};
use super::{Config, Secret};
use crate::{StartupError, aws};
use aws_config::SdkConfig;

/// A [`Config`] and the passwords read from Secrets Manager: the
/// database's in RDS Proxy mode, the cache user's when there is one.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub config: Config,
    pub database_password: Option<Secret>,
    pub cache_password: Option<Secret>,
    /// The SDK configuration the look-ups used, for the start's other AWS
    /// clients (the publisher's trigger): loaded once. `None` when the
    /// settings needed no look-up.
    pub sdk: Option<SdkConfig>,
}

impl Settings {
    /// Does the AWS look-ups the settings call for, once per execution
    /// environment: the secrets and the cache discovery run concurrently.
    ///
    /// A database secret that cannot be read stops the start (nothing works
    /// without the database); a cache that cannot be found, or whose user's
    /// secret cannot be read, only logs a warning and leaves the cache off
    /// (availability is then read from the database).
    pub async fn resolve(self) -> Result<Resolved, StartupError> {
        if !self.needs_aws() {
            let config = self.local().map_err(|err| StartupError(err.to_string()))?;
            return Ok(Resolved {
                config,
                database_password: None,
                cache_password: None,
                sdk: None,
            });
        }
        // Boxed: the SDK's futures are deep, and a caller's future that
        // embeds them overflows rustc's layout query depth.
        let sdk = Box::pin(aws::load()).await;
        Box::pin(self.resolve_with(&sdk)).await
    }

    /// [`Settings::resolve`] with a given SDK configuration (tests point it
    /// at a local stand-in).
    pub async fn resolve_with(self, sdk: &SdkConfig) -> Result<Resolved, StartupError> {
        let password = async {
            match &self.database {
                DatabaseSource::Url(url) => Ok((url.clone(), None)),
                DatabaseSource::Proxy(proxy) => {
                    let password = aws::password(sdk, &proxy.secret_arn, &proxy.user).await?;
                    Ok::<_, aws::SecretError>((proxy.url(), Some(password)))
                }
            }
        };
        let cache = async {
            let (url, password) = tokio::join!(self.cache_url(sdk), self.cache_password(sdk));
            match (url, &self.cache_user, password) {
                (Some(url), None, _) => (Some(url), None, None),
                (Some(url), Some(user), Some(password)) => {
                    (Some(url), Some(user.name.clone()), Some(password))
                }
                // No endpoint, or a user without its password.
                _ => (None, None, None),
            }
        };
        let (database, (redis_url, cache_user, cache_password)) = tokio::join!(password, cache);
        let (database_url, database_password) =
            database.map_err(|err| StartupError(err.to_string()))?;
        Ok(Resolved {
            config: self.into_config(database_url, redis_url, cache_user),
            database_password,
            cache_password,
            sdk: Some(sdk.clone()),
        })
    }

    /// The cache's URL, discovered if need be; `None`: no cache.
    async fn cache_url(&self, sdk: &SdkConfig) -> Option<String> {
        match &self.cache {
            CacheSource::Url(url) => Some(url.clone()),
            CacheSource::Off => None,
            CacheSource::Discover(name) => match aws::discover_cache(sdk, name).await {
                Ok(url) => {
                    tracing::info!(cache = %name, url = %url, "discovered the cache endpoint");
                    Some(url)
                }
                Err(err) => {
                    tracing::warn!(
                        error = %err,
                        "running without the availability cache: reads go to the database"
                    );
                    None
                }
            },
        }
    }

    /// The cache user's password; `None` without a user, with the cache
    /// off, or when the secret cannot be read (logged).
    async fn cache_password(&self, sdk: &SdkConfig) -> Option<Secret> {
        let user = self.cache_user.as_ref()?;
        if self.cache == CacheSource::Off {
            return None;
        }
        match aws::password(sdk, &user.secret_arn, &user.name).await {
            Ok(password) => Some(password),
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "running without the availability cache: its user's password is unreadable"
                );
                None
            }
        }
    }
}
