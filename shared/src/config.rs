//! Configuration from the environment, validated once at cold start.
//!
//! A bad value stops the function before it serves anything, with one line
//! that names the variable, the value and what is allowed.
//!
//! Two steps:
//! 1. [`Settings::from_env`] reads and checks every variable. Pure and
//!    synchronous: it never calls AWS.
//! 2. [`Settings::resolve`] does what needs the network, once per execution
//!    environment: it reads the database secret (`DB_SECRET_ARN`) and
//!    discovers the cache endpoint (`CACHE_NAME`), giving a [`Config`] plus
//!    the database password, kept apart so `Config` is always safe to log.
//!
//! Where the database is (first match wins):
//! - `DATABASE_URL` non-empty: that URL (local, `sam local`, tests);
//! - `DB_HOST` non-empty: RDS Proxy mode, with `DB_PORT` (default 3306),
//!   `DB_NAME`, `DB_USER` and `DB_SECRET_ARN` (JSON with `username` and
//!   `password`), over TLS with full certificate verification;
//! - otherwise [`DEFAULT_DATABASE_URL`].
//!
//! Where the cache is:
//! - `REDIS_URL` non-empty: that URL;
//! - else `CACHE_NAME` non-empty: discovered by name through the ElastiCache
//!   API (a failure logs a warning and runs without the cache);
//! - else `REDIS_URL` set but empty: no cache;
//! - else (neither set) [`DEFAULT_REDIS_URL`].
//!
//! An empty variable counts as unset everywhere except `REDIS_URL`, where
//! empty explicitly turns the cache off (unless `CACHE_NAME` names one).

pub use crate::secret::Secret;
use crate::{StartupError, aws};
use aws_config::SdkConfig;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use std::fmt;
use std::time::Duration;

pub const DEFAULT_DATABASE_URL: &str = "mysql://root@127.0.0.1:3306/slot_booking";
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
pub const DEFAULT_DB_PORT: u16 = 3306;

/// The resolved configuration an [`App`](crate::App) is built from. Holds
/// no secret: in RDS Proxy mode `database_url` names user, host, port,
/// database and TLS mode, and the password travels separately.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub database_url: String,
    /// `None`: the cache is off (`REDIS_URL` empty, or discovery failed).
    pub redis_url: Option<String>,
    /// Freshness of the availability cache, 5–15 s.
    pub cache_ttl: Duration,
    /// How long a hold keeps its seat.
    pub hold_ttl: Duration,
    pub access: Access,
}

/// Who may call the API and how fast (SPEC §8): `AUTH_MODE` and
/// `RATE_LIMIT_PER_SECOND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub mode: AuthMode,
    /// A client's sustained rate when its own is NULL; 0: unlimited.
    pub rate_limit_per_second: u32,
}

impl Default for Access {
    fn default() -> Self {
        Self {
            mode: AuthMode::ApiKey,
            rate_limit_per_second: DEFAULT_RATE_LIMIT_PER_SECOND,
        }
    }
}

/// `AUTH_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Every route needs a key (the default everywhere).
    ApiKey,
    /// The booking routes take requests without a key as the built-in
    /// `anonymous` client; admin routes still need an admin key.
    Open,
}

pub const DEFAULT_RATE_LIMIT_PER_SECOND: u32 = 20;
/// The same bound as a client's own `rate_limit_per_second`.
pub const MAX_RATE_LIMIT_PER_SECOND: u32 = 1_000_000;

/// The environment, checked but not yet resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub database: DatabaseSource,
    pub cache: CacheSource,
    pub cache_ttl: Duration,
    pub hold_ttl: Duration,
    pub access: Access,
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

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub key: &'static str,
    /// `None`: the variable is missing (or empty).
    pub value: Option<String>,
    pub expected: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(
                f,
                "invalid configuration: {}={value:?}: {}",
                self.key, self.expected
            ),
            None => write!(
                f,
                "invalid configuration: {} is not set: {}",
                self.key, self.expected
            ),
        }
    }
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
        let cache = match lookup("REDIS_URL") {
            Some(url) if !url.is_empty() => CacheSource::Url(check_redis_url(url)?),
            set_empty => match non_empty("CACHE_NAME") {
                Some(name) => CacheSource::Discover(name),
                None if set_empty.is_some() => CacheSource::Off,
                None => CacheSource::Url(DEFAULT_REDIS_URL.into()),
            },
        };
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
        Ok(Self {
            database,
            cache,
            cache_ttl,
            hold_ttl,
            access: Access {
                mode,
                rate_limit_per_second,
            },
        })
    }

    /// The configuration without any AWS call: RDS Proxy mode is refused
    /// (its password is in Secrets Manager), and a cache known only by name
    /// counts as off.
    pub fn local(self) -> Result<Config, ConfigError> {
        let database_url = match self.database {
            DatabaseSource::Url(url) => url,
            DatabaseSource::Proxy(_) => {
                return Err(ConfigError {
                    key: "DATABASE_URL",
                    value: None,
                    expected: "required here (DB_HOST mode needs Secrets Manager)",
                });
            }
        };
        let redis_url = match self.cache {
            CacheSource::Url(url) => Some(url),
            CacheSource::Discover(_) | CacheSource::Off => None,
        };
        Ok(Config {
            database_url,
            redis_url,
            cache_ttl: self.cache_ttl,
            hold_ttl: self.hold_ttl,
            access: self.access,
        })
    }

    /// True when resolving needs an AWS API (secret or cache discovery).
    pub fn needs_aws(&self) -> bool {
        matches!(self.database, DatabaseSource::Proxy(_))
            || matches!(self.cache, CacheSource::Discover(_))
    }
}

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
            },
            database_password,
        })
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

    /// The database's name: the cache's namespace, so that stages sharing
    /// one cache never read each other's figures.
    pub fn database_name(&self) -> String {
        let path = self
            .database_url
            .rsplit_once('/')
            .map(|(_, tail)| tail)
            .unwrap_or_default();
        path.split('?').next().unwrap_or_default().to_string()
    }
}

fn seconds(
    lookup: &impl Fn(&str) -> Option<String>,
    key: &'static str,
    default: u64,
    allowed: std::ops::RangeInclusive<u64>,
    expected: &'static str,
) -> Result<Duration, ConfigError> {
    let Some(raw) = lookup(key) else {
        return Ok(Duration::from_secs(default));
    };
    match raw.trim().parse::<u64>() {
        Ok(value) if allowed.contains(&value) => Ok(Duration::from_secs(value)),
        _ => Err(ConfigError {
            key,
            value: Some(raw),
            expected,
        }),
    }
}

/// Hides the password of a URL before it reaches a log line.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparseable>".into();
    };
    // The userinfo ends at the last '@' before the path: a password may
    // itself contain '@'.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => match rest[..at].split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{}", &rest[at + 1..]),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_url_carries_no_password_and_verifies_the_certificate() {
        let url = ProxyDatabase {
            host: "sb.proxy-abc.eu-west-1.rds.amazonaws.com".into(),
            port: 3306,
            name: "slot_booking".into(),
            user: "slot admin".into(),
            secret_arn: "arn:aws:secretsmanager:eu-west-1:1:secret:x".into(),
        }
        .url();
        assert_eq!(
            url,
            "mysql://slot%20admin@sb.proxy-abc.eu-west-1.rds.amazonaws.com:3306/slot_booking\
             ?ssl-mode=VERIFY_IDENTITY"
        );
    }
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|key| vars.get(key).cloned())
    }

    /// What the template's Globals give every function.
    const AWS: &[(&str, &str)] = &[
        ("DB_HOST", "sb.proxy-abc.eu-west-1.rds.amazonaws.com"),
        ("DB_PORT", "3306"),
        ("DB_NAME", "slot_booking"),
        ("DB_USER", "slotadmin"),
        (
            "DB_SECRET_ARN",
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sb-db-AbCdEf",
        ),
        ("DATABASE_URL", ""),
        ("REDIS_URL", ""),
        ("CACHE_NAME", "sb-cache"),
        ("SLOT_AVAILABILITY_CACHE_TTL", "10"),
        ("HOLD_TTL_SECONDS", "300"),
    ];

    fn aws_without(key: &str) -> Vec<(&'static str, &'static str)> {
        AWS.iter().copied().filter(|(k, _)| *k != key).collect()
    }

    fn aws_with(key: &'static str, value: &'static str) -> Vec<(&'static str, &'static str)> {
        let mut vars = aws_without(key);
        vars.push((key, value));
        vars
    }

    #[test]
    fn defaults_match_the_local_services() {
        let settings = settings(&[]).unwrap();
        assert_eq!(
            settings.database,
            DatabaseSource::Url(DEFAULT_DATABASE_URL.into())
        );
        assert_eq!(settings.cache, CacheSource::Url(DEFAULT_REDIS_URL.into()));
        assert_eq!(settings.cache_ttl, Duration::from_secs(10));
        assert_eq!(settings.hold_ttl, Duration::from_secs(300));
        assert!(!settings.needs_aws());
    }

    #[test]
    fn keys_are_required_unless_open_mode_is_asked_for_by_name() {
        let access = |vars: &[(&str, &str)]| settings(vars).map(|s| s.access);
        assert_eq!(access(&[]).unwrap(), Access::default());
        assert_eq!(Access::default().mode, AuthMode::ApiKey);
        assert_eq!(Access::default().rate_limit_per_second, 20);
        assert_eq!(
            access(&[("AUTH_MODE", "open")]).unwrap().mode,
            AuthMode::Open
        );
        assert_eq!(
            access(&[("AUTH_MODE", "api-key")]).unwrap().mode,
            AuthMode::ApiKey
        );
        for bad in ["Open", "none", "apikey", "off"] {
            assert_eq!(access(&[("AUTH_MODE", bad)]).unwrap_err().key, "AUTH_MODE");
        }
        let rate = |raw| access(&[("RATE_LIMIT_PER_SECOND", raw)]);
        assert_eq!(rate("0").unwrap().rate_limit_per_second, 0);
        assert_eq!(rate("5").unwrap().rate_limit_per_second, 5);
        for bad in ["-1", "2.5", "x", "1000001"] {
            assert_eq!(rate(bad).unwrap_err().key, "RATE_LIMIT_PER_SECOND");
        }
    }

    #[test]
    fn cache_ttl_outside_five_to_fifteen_seconds_is_refused() {
        for bad in ["4", "16", "abc", "", "-5", "10.5"] {
            let err = settings(&[("SLOT_AVAILABILITY_CACHE_TTL", bad)]).unwrap_err();
            assert_eq!(err.key, "SLOT_AVAILABILITY_CACHE_TTL");
            assert!(err.to_string().contains("from 5 to 15"), "{err}");
            assert!(!err.to_string().contains('\n'), "one line: {err}");
        }
        for good in ["5", "15", " 12 "] {
            assert!(settings(&[("SLOT_AVAILABILITY_CACHE_TTL", good)]).is_ok());
        }
    }

    #[test]
    fn a_zero_hold_ttl_is_refused() {
        assert!(settings(&[("HOLD_TTL_SECONDS", "0")]).is_err());
        assert_eq!(
            settings(&[("HOLD_TTL_SECONDS", "60")]).unwrap().hold_ttl,
            Duration::from_secs(60)
        );
    }

    #[test]
    fn an_empty_redis_url_turns_the_cache_off() {
        assert_eq!(
            settings(&[("REDIS_URL", "")]).unwrap().cache,
            CacheSource::Off
        );
        assert_eq!(
            settings(&[("REDIS_URL", ""), ("CACHE_NAME", "")])
                .unwrap()
                .cache,
            CacheSource::Off
        );
        assert!(settings(&[("REDIS_URL", "http://x")]).is_err());
    }

    #[test]
    fn the_template_environment_selects_rds_proxy_mode_and_discovery() {
        let settings = settings(AWS).unwrap();
        assert_eq!(
            settings.database,
            DatabaseSource::Proxy(ProxyDatabase {
                host: "sb.proxy-abc.eu-west-1.rds.amazonaws.com".into(),
                port: 3306,
                name: "slot_booking".into(),
                user: "slotadmin".into(),
                secret_arn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sb-db-AbCdEf"
                    .into(),
            })
        );
        assert_eq!(settings.cache, CacheSource::Discover("sb-cache".into()));
        assert!(settings.needs_aws());
    }

    #[test]
    fn an_empty_database_url_counts_as_unset() {
        // Empty DATABASE_URL and no DB_HOST: the local default, not an error.
        assert_eq!(
            settings(&[("DATABASE_URL", "")]).unwrap().database,
            DatabaseSource::Url(DEFAULT_DATABASE_URL.into())
        );
        // Empty DATABASE_URL with DB_HOST: RDS Proxy mode.
        assert!(matches!(
            settings(AWS).unwrap().database,
            DatabaseSource::Proxy(_)
        ));
        // A non-empty DATABASE_URL wins over DB_* (sam local, tests).
        let url = "mysql://app@127.0.0.1:3306/local";
        assert_eq!(
            settings(&aws_with("DATABASE_URL", url)).unwrap().database,
            DatabaseSource::Url(url.into())
        );
        // An empty DB_HOST is no DB_HOST.
        assert_eq!(
            settings(&aws_with("DB_HOST", "")).unwrap().database,
            DatabaseSource::Url(DEFAULT_DATABASE_URL.into())
        );
    }

    #[test]
    fn rds_proxy_mode_requires_its_variables() {
        for key in ["DB_NAME", "DB_USER", "DB_SECRET_ARN"] {
            for vars in [aws_without(key), aws_with(key, "")] {
                let err = settings(&vars).unwrap_err();
                assert_eq!(err.key, key);
                assert_eq!(
                    err.to_string(),
                    format!(
                        "invalid configuration: {key} is not set: \
                         required when DB_HOST is set and DATABASE_URL is not"
                    )
                );
            }
        }
        // DB_PORT defaults to 3306, and must be a port when given.
        let Ok(Settings {
            database: DatabaseSource::Proxy(proxy),
            ..
        }) = settings(&aws_without("DB_PORT"))
        else {
            panic!("proxy mode without DB_PORT")
        };
        assert_eq!(proxy.port, 3306);
        for bad in ["0", "65536", "x", "-1"] {
            let err = settings(&aws_with("DB_PORT", bad)).unwrap_err();
            assert_eq!(err.key, "DB_PORT", "{bad}");
        }
        // Without DB_HOST, the other DB_* variables are not needed.
        assert!(settings(&[("DB_NAME", "x")]).is_ok());
    }

    #[test]
    fn cache_name_is_used_only_when_redis_url_is_empty() {
        // REDIS_URL non-empty wins.
        let url = "rediss://cache.example:6379";
        assert_eq!(
            settings(&aws_with("REDIS_URL", url)).unwrap().cache,
            CacheSource::Url(url.into())
        );
        // REDIS_URL empty or unset: discovery.
        assert_eq!(
            settings(&aws_without("REDIS_URL")).unwrap().cache,
            CacheSource::Discover("sb-cache".into())
        );
        assert_eq!(
            settings(&[("CACHE_NAME", "c")]).unwrap().cache,
            CacheSource::Discover("c".into())
        );
        // REDIS_URL empty, CACHE_NAME empty: off (MigrateFunction).
        assert_eq!(
            settings(&aws_with("CACHE_NAME", "")).unwrap().cache,
            CacheSource::Off
        );
        // Discovery alone needs AWS.
        assert!(settings(&[("CACHE_NAME", "c")]).unwrap().needs_aws());
    }

    #[test]
    fn a_database_password_never_reaches_the_error_line() {
        let err = settings(&[("DATABASE_URL", "postgres://app:s3cret@db/x")]).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        let err = settings(&[("REDIS_URL", "http://u:s3cret@cache:6379")]).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert_eq!(
            redact_url("mysql://app:s3cret@db:3306/x"),
            "mysql://app:***@db:3306/x"
        );
        assert_eq!(
            redact_url("mysql://app:s3@cr@t@db:3306/x"),
            "mysql://app:***@db:3306/x"
        );
        assert_eq!(
            redact_url("mysql://app@db:3306/x?ssl-mode=VERIFY_IDENTITY"),
            "mysql://app@db:3306/x?ssl-mode=VERIFY_IDENTITY"
        );
        assert_eq!(format!("{:?}", Secret::new("s3cret")), "Secret(***)");
    }

    #[test]
    fn local_tools_refuse_rds_proxy_mode() {
        let err = settings(AWS).unwrap().local().unwrap_err();
        assert_eq!(err.key, "DATABASE_URL");
        let local = settings(&[("DATABASE_URL", "mysql://root@h:3306/db")])
            .unwrap()
            .local()
            .unwrap();
        assert_eq!(local.database_url, "mysql://root@h:3306/db");
        assert_eq!(local.database_name(), "db");
        assert_eq!(local.redis_url.as_deref(), Some(DEFAULT_REDIS_URL));
    }
}
