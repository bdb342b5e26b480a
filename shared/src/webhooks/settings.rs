//! The delivery engine's settings (SPEC §20): `WEBHOOK_TIMEOUT_MS`,
//! `WEBHOOK_CONCURRENCY`, `WEBHOOK_RETRY_SCHEDULE`, `WEBHOOK_DISABLE_AFTER`.
//! Read by `webhooks-deliver` only: the booking functions never see them.

use crate::config::ConfigError;
use std::time::Duration;

/// How deliveries are attempted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverySettings {
    /// A 2xx must come within this (`WEBHOOK_TIMEOUT_MS`, default 5,000).
    pub timeout: Duration,
    /// Attempts in flight per subscription (`WEBHOOK_CONCURRENCY`, 8).
    pub concurrency: u32,
    /// The wait after each failed attempt; after the last, `failed`
    /// (`WEBHOOK_RETRY_SCHEDULE`, "5s,30s,2m,10m,30m,1h,2h,4h,8h,8h").
    pub retries: Vec<Duration>,
    /// A subscription with a delivery failed for good and none delivered
    /// for this long is disabled, `failing` (`WEBHOOK_DISABLE_AFTER`, 24h).
    pub disable_after: Duration,
    /// A claim's lease is `timeout + lease_margin`: an attempt that has
    /// not been recorded by then is taken to have died, and another worker
    /// may try it again (same `webhook-id`). Not an environment key; the
    /// tests shorten it.
    pub lease_margin: Duration,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(5_000),
            concurrency: 8,
            retries: parse_schedule(DEFAULT_SCHEDULE).unwrap_or_default(),
            disable_after: Duration::from_secs(24 * 3600),
            lease_margin: Duration::from_secs(5),
        }
    }
}

const DEFAULT_SCHEDULE: &str = "5s,30s,2m,10m,30m,1h,2h,4h,8h,8h";

impl DeliverySettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let value = |key: &str| lookup(key).filter(|value| !value.is_empty());
        let mut settings = Self::default();
        if let Some(raw) = value("WEBHOOK_TIMEOUT_MS") {
            settings.timeout = raw
                .parse::<u64>()
                .ok()
                .filter(|ms| (1..=60_000).contains(ms))
                .map(Duration::from_millis)
                .ok_or_else(|| refused("WEBHOOK_TIMEOUT_MS", raw, "1 to 60000 (ms)"))?;
        }
        if let Some(raw) = value("WEBHOOK_CONCURRENCY") {
            settings.concurrency = raw
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| refused("WEBHOOK_CONCURRENCY", raw, "1 to 100"))?;
        }
        if let Some(raw) = value("WEBHOOK_RETRY_SCHEDULE") {
            settings.retries = parse_schedule(&raw).ok_or_else(|| {
                refused(
                    "WEBHOOK_RETRY_SCHEDULE",
                    raw,
                    "up to 20 waits like 500ms, 5s, 2m, 1h, comma-separated",
                )
            })?;
        }
        if let Some(raw) = value("WEBHOOK_DISABLE_AFTER") {
            settings.disable_after = parse_duration(&raw)
                .ok_or_else(|| refused("WEBHOOK_DISABLE_AFTER", raw, "a wait like 24h or 90m"))?;
        }
        Ok(settings)
    }

    /// How long a claimed attempt is its worker's.
    pub fn lease(&self) -> Duration {
        self.timeout + self.lease_margin
    }
}

fn refused(key: &'static str, value: String, expected: &'static str) -> ConfigError {
    ConfigError {
        key,
        value: Some(value),
        expected,
    }
}

/// "5s,30s,2m": each wait, in order; `None` if any is not one.
pub fn parse_schedule(raw: &str) -> Option<Vec<Duration>> {
    let waits = raw
        .split(',')
        .map(|part| parse_duration(part.trim()))
        .collect::<Option<Vec<_>>>()?;
    (waits.len() <= 20).then_some(waits)
}

/// `500ms`, `5s`, `2m`, `1h`: a number and its unit.
fn parse_duration(raw: &str) -> Option<Duration> {
    let split = raw.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = raw.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    // At most a week: a longer wait is a typo.
    let ms = number.checked_mul(unit_ms)?;
    (ms <= 7 * 24 * 3_600_000).then(|| Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_spec_s_and_every_key_is_checked() {
        let settings = DeliverySettings::from_lookup(|_| None).unwrap();
        assert_eq!(settings.timeout, Duration::from_secs(5));
        assert_eq!(settings.concurrency, 8);
        let secs: Vec<u64> = settings.retries.iter().map(Duration::as_secs).collect();
        assert_eq!(
            secs,
            vec![5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 28800]
        );
        assert_eq!(settings.disable_after, Duration::from_secs(86_400));
        let custom = DeliverySettings::from_lookup(|key| {
            Some(
                match key {
                    "WEBHOOK_TIMEOUT_MS" => "300",
                    "WEBHOOK_CONCURRENCY" => "2",
                    "WEBHOOK_RETRY_SCHEDULE" => "100ms, 1s",
                    "WEBHOOK_DISABLE_AFTER" => "90m",
                    _ => return None,
                }
                .to_string(),
            )
        })
        .unwrap();
        assert_eq!(custom.timeout, Duration::from_millis(300));
        assert_eq!(custom.concurrency, 2);
        assert_eq!(
            custom.retries,
            vec![Duration::from_millis(100), Duration::from_secs(1)]
        );
        assert_eq!(custom.disable_after, Duration::from_secs(5400));
        for (key, bad) in [
            ("WEBHOOK_TIMEOUT_MS", "0"),
            ("WEBHOOK_CONCURRENCY", "many"),
            ("WEBHOOK_RETRY_SCHEDULE", "5s,,2m"),
            ("WEBHOOK_RETRY_SCHEDULE", "5x"),
            ("WEBHOOK_DISABLE_AFTER", "1d"),
        ] {
            let err =
                DeliverySettings::from_lookup(|k| (k == key).then(|| bad.to_string())).unwrap_err();
            assert_eq!(err.key, key);
        }
    }
}
