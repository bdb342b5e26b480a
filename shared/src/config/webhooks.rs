//! SPEC §20's rules for webhooks' endpoints and counts. The key that seals
//! their secrets (`WEBHOOK_SECRET_KEY`) is not here: a [`Config`] holds no
//! secret, so `webhooks::SealKey::from_lookup` reads it apart.
//!
//! [`Config`]: super::Config

use super::error::ConfigError;
use super::settings::integer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookRules {
    /// `WEBHOOK_ALLOW_HTTP`: `http://` endpoints too (`make dev`); else
    /// `https://` only.
    pub allow_http: bool,
    /// `WEBHOOK_ALLOW_PRIVATE`: endpoints on loopback, private, link-local
    /// and the other non-public addresses (`make dev`); else refused.
    pub allow_private: bool,
    /// `WEBHOOK_MAX_PER_CLIENT`: the most subscriptions one client has.
    pub max_per_client: u32,
}

pub const DEFAULT_WEBHOOK_MAX_PER_CLIENT: u32 = 10;

impl Default for WebhookRules {
    fn default() -> Self {
        Self {
            allow_http: false,
            allow_private: false,
            max_per_client: DEFAULT_WEBHOOK_MAX_PER_CLIENT,
        }
    }
}

impl WebhookRules {
    pub(super) fn from_lookup(
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            allow_http: flag(lookup, "WEBHOOK_ALLOW_HTTP")?,
            allow_private: flag(lookup, "WEBHOOK_ALLOW_PRIVATE")?,
            max_per_client: integer(
                lookup,
                "WEBHOOK_MAX_PER_CLIENT",
                u64::from(DEFAULT_WEBHOOK_MAX_PER_CLIENT),
                1..=1000,
                "an integer from 1 to 1000",
            )? as u32,
        })
    }
}

/// `true` or `false` (unset or empty: false); anything else stops the
/// start rather than guess which way a safety switch was meant.
fn flag(lookup: &impl Fn(&str) -> Option<String>, key: &'static str) -> Result<bool, ConfigError> {
    match lookup(key).as_deref().map(str::trim) {
        None | Some("") | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ConfigError {
            key,
            value: Some(other.to_string()),
            expected: "true or false (the default)",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn rules(pairs: &[(&str, &str)]) -> Result<WebhookRules, ConfigError> {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        WebhookRules::from_lookup(&|key: &str| env.get(key).cloned())
    }

    #[test]
    fn both_switches_are_off_and_ten_per_client_unless_set() {
        assert_eq!(rules(&[]).unwrap(), WebhookRules::default());
        let dev = rules(&[
            ("WEBHOOK_ALLOW_HTTP", "true"),
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
            ("WEBHOOK_MAX_PER_CLIENT", "3"),
        ])
        .unwrap();
        assert_eq!(
            dev,
            WebhookRules {
                allow_http: true,
                allow_private: true,
                max_per_client: 3
            }
        );
        for (key, bad) in [
            ("WEBHOOK_ALLOW_HTTP", "yes"),
            ("WEBHOOK_ALLOW_PRIVATE", "1"),
            ("WEBHOOK_MAX_PER_CLIENT", "0"),
            ("WEBHOOK_MAX_PER_CLIENT", "ten"),
        ] {
            assert_eq!(rules(&[(key, bad)]).unwrap_err().key, key);
        }
    }
}
