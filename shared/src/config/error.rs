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

/// Hides the password of a URL before it reaches a log line, whatever
/// the password holds. A password the URL does not percent-encode may
/// contain `/`, `?`, `#`, `@` and `:`, so nothing but the last `@` of the
/// whole URL surely ends it: everything from the first `:` after the
/// scheme's `//` to that `@` is hidden. A URL with an `@` after its host
/// (in a query, say) and a `:` before it loses more than its password,
/// never less.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparseable>".into();
    };
    let Some(at) = rest.rfind('@') else {
        return url.to_string();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}
