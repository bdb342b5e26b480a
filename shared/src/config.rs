//! Configuration from the environment, validated once at cold start.
//!
//! A bad value stops the function before it serves anything, with one line
//! that names the variable, the value and what is allowed.

use std::time::Duration;

pub const DEFAULT_DATABASE_URL: &str = "mysql://root@127.0.0.1:3306/slot_booking";
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub database_url: String,
    /// `None` when `REDIS_URL` is set to an empty string: the cache is off.
    pub redis_url: Option<String>,
    /// Freshness of the availability cache, 5–15 s.
    pub cache_ttl: Duration,
    /// How long a hold keeps its seat.
    pub hold_ttl: Duration,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {key}={value:?}: {expected}")]
pub struct ConfigError {
    pub key: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads configuration through `lookup`, so tests need not touch the
    /// process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let database_url = lookup("DATABASE_URL").unwrap_or_else(|| DEFAULT_DATABASE_URL.into());
        if !database_url.starts_with("mysql://") && !database_url.starts_with("mariadb://") {
            return Err(ConfigError {
                key: "DATABASE_URL",
                value: redact_url(&database_url),
                expected: "a mysql:// URL",
            });
        }
        let redis_url = match lookup("REDIS_URL") {
            None => Some(DEFAULT_REDIS_URL.to_string()),
            Some(url) if url.is_empty() => None,
            Some(url) if url.starts_with("redis://") || url.starts_with("rediss://") => Some(url),
            Some(url) => {
                return Err(ConfigError {
                    key: "REDIS_URL",
                    value: redact_url(&url),
                    expected: "a redis:// or rediss:// URL, or empty to disable the cache",
                });
            }
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
        Ok(Self {
            database_url,
            redis_url,
            cache_ttl,
            hold_ttl,
        })
    }
}

impl Config {
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
            value: raw,
            expected,
        }),
    }
}

/// Hides the password of a URL before it reaches a log line.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparseable>".into();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|key| vars.get(key).cloned())
    }

    #[test]
    fn defaults_match_the_local_services() {
        let config = config(&[]).unwrap();
        assert_eq!(config.database_url, DEFAULT_DATABASE_URL);
        assert_eq!(config.redis_url.as_deref(), Some(DEFAULT_REDIS_URL));
        assert_eq!(config.cache_ttl, Duration::from_secs(10));
        assert_eq!(config.hold_ttl, Duration::from_secs(300));
    }

    #[test]
    fn cache_ttl_outside_five_to_fifteen_seconds_is_refused() {
        for bad in ["4", "16", "abc", "", "-5", "10.5"] {
            let err = config(&[("SLOT_AVAILABILITY_CACHE_TTL", bad)]).unwrap_err();
            assert_eq!(err.key, "SLOT_AVAILABILITY_CACHE_TTL");
            assert!(err.to_string().contains("from 5 to 15"), "{err}");
        }
        for good in ["5", "15", " 12 "] {
            assert!(config(&[("SLOT_AVAILABILITY_CACHE_TTL", good)]).is_ok());
        }
    }

    #[test]
    fn a_zero_hold_ttl_is_refused() {
        assert!(config(&[("HOLD_TTL_SECONDS", "0")]).is_err());
        assert_eq!(
            config(&[("HOLD_TTL_SECONDS", "60")]).unwrap().hold_ttl,
            Duration::from_secs(60)
        );
    }

    #[test]
    fn an_empty_redis_url_turns_the_cache_off() {
        assert_eq!(config(&[("REDIS_URL", "")]).unwrap().redis_url, None);
        assert!(config(&[("REDIS_URL", "http://x")]).is_err());
    }

    #[test]
    fn a_database_password_never_reaches_the_error_line() {
        let err = config(&[("DATABASE_URL", "postgres://app:s3cret@db/x")]).unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert_eq!(
            redact_url("mysql://app:s3cret@db:3306/x"),
            "mysql://app:***@db:3306/x"
        );
    }
}
