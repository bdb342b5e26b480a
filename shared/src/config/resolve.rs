//! The AWS step of a cold start ([`Settings::resolve`]): the secrets and
//! the cache discovery, once per execution environment.

use super::settings::{CacheSource, DatabaseSource, Settings};
use super::{Config, Secret};
use crate::{StartupError, aws};
use aws_config::SdkConfig;

/// A [`Config`] and, in RDS Proxy mode, the database password read from
/// Secrets Manager.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub config: Config,
    pub database_password: Option<Secret>,
}

impl Settings {
    /// Does the AWS look-ups the settings call for, once per execution
    /// environment: the secret and the cache discovery run concurrently.
    ///
    /// A secret that cannot be read stops the start (nothing works without
    /// the database); a cache that cannot be found only logs a warning and
    /// leaves the cache off (availability is then read from the database).
    pub async fn resolve(self) -> Result<Resolved, StartupError> {
        if !self.needs_aws() {
            let config = self.local().map_err(|err| StartupError(err.to_string()))?;
            return Ok(Resolved {
                config,
                database_password: None,
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
                    let password =
                        aws::database_password(sdk, &proxy.secret_arn, &proxy.user).await?;
                    Ok::<_, aws::SecretError>((proxy.url(), Some(password)))
                }
            }
        };
        let cache = async {
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
        };
        let (database, redis_url) = tokio::join!(password, cache);
        let (database_url, database_password) =
            database.map_err(|err| StartupError(err.to_string()))?;
        Ok(Resolved {
            config: Config {
                database_url,
                redis_url,
                cache_ttl: self.cache_ttl,
                hold_ttl: self.hold_ttl,
                access: self.access,
                cache_namespace: self.cache_namespace,
            },
            database_password,
        })
    }
}
