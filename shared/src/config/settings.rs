//! Reading and checking the environment ([`Settings::from_lookup`]): pure
//! and synchronous, it never calls AWS.

use super::error::{ConfigError, redact_url};
use super::{
    Access, AuthMode, Config, DEFAULT_CLIENT_MAX_HELD_SEATS, DEFAULT_DATABASE_URL, DEFAULT_DB_PORT,
    DEFAULT_RATE_LIMIT_PER_SECOND, DEFAULT_REDIS_URL, HoldRules, MAX_HELD_SEATS,
    MAX_RATE_LIMIT_PER_SECOND, WebhookRules, database_in_url,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use std::time::Duration;

/// The environment, checked but not yet resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub database: DatabaseSource,
    pub cache: CacheSource,
    pub cache_ttl: Duration,
    pub hold_ttl: Duration,
    pub holds: HoldRules,
    pub access: Access,
    /// See [`Config::cache_namespace`].
    pub cache_namespace: String,
    /// `CACHE_USER` and `CACHE_SECRET_ARN`: the access-controlled user the
    /// cache is reached as; `None`: no `AUTH` (local Redis).
    pub cache_user: Option<CacheUser>,
    pub webhooks: WebhookRules,
}

/// The cache's user; its password is in Secrets Manager (JSON with
/// `password`), read at cold start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUser {
    pub name: String,
    pub secret_arn: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseSource {
    /// `DATABASE_URL`, or the local default.
    Url(String),
    /// `DB_*`: RDS Proxy, password from Secrets Manager.
    Proxy(ProxyDatabase),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyDatabase {
    pub host: String,
    pub port: u16,
    pub name: String,
    pub user: String,
    pub secret_arn: String,
}

impl ProxyDatabase {
    /// The URL of the database behind RDS Proxy, without the password
    /// (which comes from Secrets Manager and is added to the connect
    /// options, never to a URL).
    ///
    /// The proxy requires TLS; its certificate chains to a public Amazon
    /// root that the bundled webpki roots include, so the connection
    /// verifies both the chain and the host name (`VERIFY_IDENTITY`).
    pub fn url(&self) -> String {
        /// RFC 3986's unreserved characters stay as they are.
        const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'_')
            .remove(b'.')
            .remove(b'~');
        format!(
            "mysql://{}@{}:{}/{}?ssl-mode=VERIFY_IDENTITY",
            utf8_percent_encode(&self.user, COMPONENT),
            self.host,
            self.port,
            utf8_percent_encode(&self.name, COMPONENT)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheSource {
    /// `REDIS_URL`, or the local default.
    Url(String),
    /// `CACHE_NAME`: look the endpoint up with the ElastiCache API.
    Discover(String),
    /// `REDIS_URL=""` and no `CACHE_NAME`.
    Off,
}

impl Settings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads configuration through `lookup`, so tests need not touch the
    /// process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        // Empty counts as unset (the template declares DATABASE_URL empty).
        let non_empty = |key: &str| lookup(key).filter(|value| !value.is_empty());
        let database = match non_empty("DATABASE_URL") {
            Some(url) => DatabaseSource::Url(check_database_url(url)?),
            None => match non_empty("DB_HOST") {
                Some(host) => DatabaseSource::Proxy(proxy_database(host, &non_empty)?),
                None => DatabaseSource::Url(DEFAULT_DATABASE_URL.into()),
            },
        };
        let cache_namespace = cache_namespace(non_empty("CACHE_NAMESPACE"), &database)?;
        let cache = match lookup("REDIS_URL") {
            Some(url) if !url.is_empty() => CacheSource::Url(check_redis_url(url)?),
            set_empty => match non_empty("CACHE_NAME") {
                Some(name) => CacheSource::Discover(name),
                None if set_empty.is_some() => CacheSource::Off,
                None => CacheSource::Url(DEFAULT_REDIS_URL.into()),
            },
        };
        let cache_user = cache_user(&non_empty, &cache)?;
        let cache_ttl = seconds(
            &lookup,
            "SLOT_AVAILABILITY_CACHE_TTL",
            10,
            5..=15,
            "an integer number of seconds from 5 to 15",
        )?;
        let hold_ttl = seconds(
            &lookup,
            "HOLD_TTL_SECONDS",
            300,
            1..=86_400,
            "an integer number of seconds from 1 to 86400",
        )?;
        let holds = HoldRules::from_lookup(&lookup, hold_ttl)?;
        let mode = match lookup("AUTH_MODE").as_deref().map(str::trim) {
            None | Some("") | Some("api-key") => AuthMode::ApiKey,
            Some("open") => AuthMode::Open,
            Some(other) => {
                return Err(ConfigError {
                    key: "AUTH_MODE",
                    value: Some(other.to_string()),
                    expected: "api-key (the default) or open",
                });
            }
        };
        let rate_limit_per_second = match non_empty("RATE_LIMIT_PER_SECOND") {
            None => DEFAULT_RATE_LIMIT_PER_SECOND,
            Some(raw) => match raw.trim().parse::<u32>() {
                Ok(rate) if rate <= MAX_RATE_LIMIT_PER_SECOND => rate,
                _ => {
                    return Err(ConfigError {
                        key: "RATE_LIMIT_PER_SECOND",
                        value: Some(raw),
                        expected: "an integer from 0 (unlimited) to 1000000",
                    });
                }
            },
        };
        let client_max_held_seats = match non_empty("CLIENT_MAX_HELD_SEATS") {
            None => DEFAULT_CLIENT_MAX_HELD_SEATS,
            Some(raw) => match raw.trim().parse::<u32>() {
                Ok(cap) if cap <= MAX_HELD_SEATS => cap,
                _ => {
                    return Err(ConfigError {
                        key: "CLIENT_MAX_HELD_SEATS",
                        value: Some(raw),
                        expected: "an integer from 0 (unlimited) to 1000000000",
                    });
                }
            },
        };
        Ok(Self {
            database,
            cache,
            cache_ttl,
            hold_ttl,
            holds,
            access: Access {
                mode,
                rate_limit_per_second,
                client_max_held_seats,
            },
            cache_namespace,
            cache_user,
            webhooks: WebhookRules::from_lookup(&lookup)?,
        })
    }

    /// The configuration without any AWS call: RDS Proxy mode is refused
    /// (its password is in Secrets Manager), and a cache known only by name,
    /// or reached as a user (its password is there too), counts as off.
    pub fn local(self) -> Result<Config, ConfigError> {
        let database_url = match &self.database {
            DatabaseSource::Url(url) => url.clone(),
            DatabaseSource::Proxy(_) => {
                return Err(ConfigError {
                    key: "DATABASE_URL",
                    value: None,
                    expected: "required here (DB_HOST mode needs Secrets Manager)",
                });
            }
        };
        let redis_url = match &self.cache {
            CacheSource::Url(url) if self.cache_user.is_none() => Some(url.clone()),
            CacheSource::Url(_) | CacheSource::Discover(_) | CacheSource::Off => None,
        };
        Ok(self.into_config(database_url, redis_url, None))
    }

    /// The configuration, once where the database and the cache are is
    /// known (locally, or after the AWS look-ups).
    pub(super) fn into_config(
        self,
        database_url: String,
        redis_url: Option<String>,
        cache_user: Option<String>,
    ) -> Config {
        Config {
            database_url,
            redis_url,
            cache_ttl: self.cache_ttl,
            hold_ttl: self.hold_ttl,
            holds: self.holds,
            access: self.access,
            cache_namespace: self.cache_namespace,
            cache_user,
            webhooks: self.webhooks,
        }
    }

    /// True when resolving needs an AWS API (a secret or cache discovery).
    pub fn needs_aws(&self) -> bool {
        matches!(self.database, DatabaseSource::Proxy(_))
            || matches!(self.cache, CacheSource::Discover(_))
            || (self.cache_user.is_some() && self.cache != CacheSource::Off)
    }
}

fn check_database_url(url: String) -> Result<String, ConfigError> {
    if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        Ok(url)
    } else {
        Err(ConfigError {
            key: "DATABASE_URL",
            value: Some(redact_url(&url)),
            expected: "a mysql:// URL",
        })
    }
}

fn check_redis_url(url: String) -> Result<String, ConfigError> {
    if url.starts_with("redis://") || url.starts_with("rediss://") {
        Ok(url)
    } else {
        Err(ConfigError {
            key: "REDIS_URL",
            value: Some(redact_url(&url)),
            expected: "a redis:// or rediss:// URL, or empty to disable the cache",
        })
    }
}

/// `CACHE_USER` and `CACHE_SECRET_ARN`, both or neither. A user's password
/// never travels in plaintext: with one, an explicit `REDIS_URL` must be
/// `rediss://` (discovery only ever yields `rediss://`).
fn cache_user(
    non_empty: &impl Fn(&str) -> Option<String>,
    cache: &CacheSource,
) -> Result<Option<CacheUser>, ConfigError> {
    let user = match (non_empty("CACHE_USER"), non_empty("CACHE_SECRET_ARN")) {
        (None, None) => return Ok(None),
        (Some(name), Some(secret_arn)) => CacheUser { name, secret_arn },
        (None, Some(_)) => {
            return Err(ConfigError {
                key: "CACHE_USER",
                value: None,
                expected: "required when CACHE_SECRET_ARN is set",
            });
        }
        (Some(_), None) => {
            return Err(ConfigError {
                key: "CACHE_SECRET_ARN",
                value: None,
                expected: "required when CACHE_USER is set",
            });
        }
    };
    if let CacheSource::Url(url) = cache
        && !url.starts_with("rediss://")
    {
        return Err(ConfigError {
            key: "REDIS_URL",
            value: Some(redact_url(url)),
            expected: "a rediss:// (TLS) URL when CACHE_USER is set: a password never travels in plaintext",
        });
    }
    Ok(Some(user))
}

/// `<CACHE_NAMESPACE>:<database>`, or the database's name alone. The
/// prefix is a CloudFormation stack name or alike: letters, digits and
/// `-_.`, nothing that could break a key's `{hash tag}` or its `:` fields.
fn cache_namespace(
    prefix: Option<String>,
    database: &DatabaseSource,
) -> Result<String, ConfigError> {
    let database = match database {
        DatabaseSource::Url(url) => database_in_url(url),
        DatabaseSource::Proxy(proxy) => proxy.name.clone(),
    };
    let Some(prefix) = prefix else {
        return Ok(database);
    };
    let valid = prefix.len() <= 128
        && prefix.starts_with(|c: char| c.is_ascii_alphanumeric())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        return Err(ConfigError {
            key: "CACHE_NAMESPACE",
            value: Some(prefix),
            expected: "1 to 128 letters, digits, '-', '_' or '.', starting with a letter or digit",
        });
    }
    Ok(format!("{prefix}:{database}"))
}

fn proxy_database(
    host: String,
    non_empty: &impl Fn(&str) -> Option<String>,
) -> Result<ProxyDatabase, ConfigError> {
    let required = |key: &'static str| {
        non_empty(key).ok_or(ConfigError {
            key,
            value: None,
            expected: "required when DB_HOST is set and DATABASE_URL is not",
        })
    };
    let port = match non_empty("DB_PORT") {
        None => DEFAULT_DB_PORT,
        Some(raw) => match raw.trim().parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => {
                return Err(ConfigError {
                    key: "DB_PORT",
                    value: Some(raw),
                    expected: "a TCP port from 1 to 65535",
                });
            }
        },
    };
    Ok(ProxyDatabase {
        host,
        port,
        name: required("DB_NAME")?,
        user: required("DB_USER")?,
        secret_arn: required("DB_SECRET_ARN")?,
    })
}

impl Config {
    /// Local configuration only (`DATABASE_URL` or the defaults), for tools
    /// like `devdb` that never run on AWS: see [`Settings::local`].
    pub fn from_env() -> Result<Self, ConfigError> {
        Settings::from_env()?.local()
    }
}

fn seconds(
    lookup: &impl Fn(&str) -> Option<String>,
    key: &'static str,
    default: u64,
    allowed: std::ops::RangeInclusive<u64>,
    expected: &'static str,
) -> Result<Duration, ConfigError> {
    integer(lookup, key, default, allowed, expected).map(Duration::from_secs)
}

/// An unset variable is its default; anything but a decimal integer in
/// `allowed` is refused, an empty value included.
pub(super) fn integer(
    lookup: &impl Fn(&str) -> Option<String>,
    key: &'static str,
    default: u64,
    allowed: std::ops::RangeInclusive<u64>,
    expected: &'static str,
) -> Result<u64, ConfigError> {
    let Some(raw) = lookup(key) else {
        return Ok(default);
    };
    match raw.trim().parse::<u64>() {
        Ok(value) if allowed.contains(&value) => Ok(value),
        _ => Err(ConfigError {
            key,
            value: Some(raw),
            expected,
        }),
    }
}
