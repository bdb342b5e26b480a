//! The one-line refusal of a bad setting, and the URL redaction that keeps
//! passwords out of it (and out of every log line).

use std::fmt;

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
