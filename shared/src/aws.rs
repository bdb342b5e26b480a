//! The AWS look-ups of a cold start: passwords (and the first admin key)
//! from Secrets Manager, and the cache endpoint from the ElastiCache API.
//!
//! Each runs once per execution environment, from
//! [`Settings::resolve`](crate::config::Settings::resolve). The SDK's
//! configuration comes from the standard sources (the Lambda environment's
//! credentials and `AWS_REGION`); `AWS_ENDPOINT_URL` (or
//! `AWS_ENDPOINT_URL_ELASTICACHE`, `AWS_ENDPOINT_URL_SECRETS_MANAGER`)
//! points the clients at a local stand-in, as the tests do.

use crate::secret::Secret;
use aws_config::{BehaviorVersion, ConfigLoader, SdkConfig};
use aws_sdk_elasticache::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_elasticache::types::Endpoint;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use std::time::Duration;

/// Bounds on each AWS call of a cold start: Lambda allows 10 s of
/// initialisation, and a cache that cannot be found must not eat them all.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
const OPERATION_TIMEOUT: Duration = Duration::from_secs(6);

/// The SDK configuration loader with this project's HTTPS client (rustls
/// with ring, like the rest of the binary) and timeouts. Everything else
/// (region, credentials, endpoint URL, retries) comes from the environment
/// unless the caller overrides it.
pub fn loader() -> ConfigLoader {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(OPERATION_TIMEOUT)
        .build();
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .timeout_config(timeouts)
}

/// The SDK configuration from the environment.
pub async fn load() -> SdkConfig {
    loader().load().await
}

/// Why a secret could not be read. Never contains the secret.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the secret {secret_arn}: {reason}")]
pub struct SecretError {
    pub secret_arn: String,
    pub reason: String,
}

/// The `SecretString` of `secret_arn`, as it is (the first admin key is a
/// plain generated string).
pub async fn secret_string(sdk: &SdkConfig, secret_arn: &str) -> Result<Secret, SecretError> {
    let failed = |reason: String| SecretError {
        secret_arn: secret_arn.to_string(),
        reason,
    };
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    let output = client
        .get_secret_value()
        .secret_id(secret_arn)
        .send()
        .await
        .map_err(|err| failed(describe_sdk_error(&err)))?;
    output
        .secret_string()
        .map(Secret::new)
        .ok_or_else(|| failed("the secret has no SecretString".into()))
}

/// Reads a credentials secret (the database's `DB_SECRET_ARN`, the cache's
/// `CACHE_SECRET_ARN`): JSON with `password` and, optionally, `username`,
/// which, when present and different from `user`, only earns a warning:
/// the configuration names the user.
pub async fn password(
    sdk: &SdkConfig,
    secret_arn: &str,
    user: &str,
) -> Result<Secret, SecretError> {
    let text = secret_string(sdk, secret_arn).await?;
    let secret = parse_secret(text.expose()).map_err(|reason| SecretError {
        secret_arn: secret_arn.to_string(),
        reason: reason.into(),
    })?;
    if let Some(username) = &secret.username
        && username != user
    {
        tracing::warn!(
            secret = %secret_arn,
            secret_user = %username,
            user = %user,
            "the secret names another user than the configuration; connecting as the configured one"
        );
    }
    Ok(secret.password)
}

/// The fields of a credentials secret that matter here.
#[derive(Debug)]
pub struct DatabaseSecret {
    pub username: Option<String>,
    pub password: Secret,
}

/// Parses the secret's JSON. The error is a fixed text: serde's messages
/// may quote the input, which is the secret.
pub fn parse_secret(text: &str) -> Result<DatabaseSecret, &'static str> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|_| "the secret is not valid JSON")?;
    let password = value
        .get("password")
        .and_then(|p| p.as_str())
        .filter(|p| !p.is_empty())
        .ok_or("the secret has no non-empty string field \"password\"")?;
    Ok(DatabaseSecret {
        username: value
            .get("username")
            .and_then(|u| u.as_str())
            .map(str::to_string),
        password: Secret::new(password),
    })
}

/// Why no cache endpoint was found.
#[derive(Debug, thiserror::Error)]
#[error("cannot discover cache {name:?}: {reason}")]
pub struct DiscoveryError {
    pub name: String,
    pub reason: String,
}

/// Finds the endpoint of the cache called `name`: first as a serverless
/// cache (always TLS), then as a replication group (its configuration
/// endpoint, else the primary endpoint of its first node group), which must
/// have in-transit encryption on. The URL is always `rediss://`: discovery
/// never falls back to plaintext.
///
/// The replication-group look-up runs only when the serverless one got an
/// answer from the API (not found, access denied, …): when the API cannot
/// be reached at all, asking again would only double the wait.
pub async fn discover_cache(sdk: &SdkConfig, name: &str) -> Result<String, DiscoveryError> {
    let failed = |reason: String| DiscoveryError {
        name: name.to_string(),
        reason,
    };
    let client = aws_sdk_elasticache::Client::new(sdk);
    let serverless = match client
        .describe_serverless_caches()
        .serverless_cache_name(name)
        .send()
        .await
    {
        Ok(output) => match output.serverless_caches().first() {
            Some(cache) => {
                let status = cache.status().unwrap_or("unknown");
                return match cache.endpoint().and_then(url) {
                    Some(url) => Ok(url),
                    None => Err(failed(format!(
                        "serverless cache has no endpoint yet (status {status})"
                    ))),
                };
            }
            None => "DescribeServerlessCaches: no such serverless cache".to_string(),
        },
        Err(err) if unreachable(&err) => {
            return Err(failed(format!(
                "DescribeServerlessCaches: {}",
                describe_sdk_error(&err)
            )));
        }
        Err(err) => format!("DescribeServerlessCaches: {}", describe_sdk_error(&err)),
    };
    let output = client
        .describe_replication_groups()
        .replication_group_id(name)
        .send()
        .await
        .map_err(|err| {
            failed(format!(
                "{serverless}; DescribeReplicationGroups: {}",
                describe_sdk_error(&err)
            ))
        })?;
    let group = output.replication_groups().first().ok_or_else(|| {
        failed(format!(
            "{serverless}; DescribeReplicationGroups: no such replication group"
        ))
    })?;
    // Never plaintext: the cache user's password, and the figures, travel
    // on this connection.
    if group.transit_encryption_enabled() != Some(true) {
        return Err(failed(
            "replication group has in-transit encryption off: refusing a plaintext (redis://) \
             connection"
                .into(),
        ));
    }
    group
        .configuration_endpoint()
        .or_else(|| {
            group
                .node_groups()
                .first()
                .and_then(|node_group| node_group.primary_endpoint())
        })
        .and_then(url)
        .ok_or_else(|| {
            failed(format!(
                "replication group has no endpoint yet (status {})",
                group.status().unwrap_or("unknown")
            ))
        })
}

/// The only scheme discovery hands out.
fn url(endpoint: &Endpoint) -> Option<String> {
    let address = endpoint.address().filter(|a| !a.is_empty())?;
    let port = endpoint.port().unwrap_or(6379);
    Some(format!("rediss://{address}:{port}"))
}

/// Nobody answered: timeout or connection failure.
fn unreachable<E, R>(err: &SdkError<E, R>) -> bool {
    matches!(
        err,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_)
    )
}

/// One line: the service's error code and message when it answered, else
/// the whole chain of causes.
pub fn describe_sdk_error<E, R>(err: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let text = match (err.code(), err.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_string(),
        _ => DisplayErrorContext(err).to_string(),
    };
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_secret_parses() {
        let secret = parse_secret(
            r#"{"username":"slotadmin","password":"pw-123","host":"h","port":3306,
                "engine":"mysql","dbClusterIdentifier":"c"}"#,
        )
        .unwrap();
        assert_eq!(secret.username.as_deref(), Some("slotadmin"));
        assert_eq!(secret.password.expose(), "pw-123");
    }

    #[test]
    fn a_bad_secret_is_refused_without_quoting_it() {
        for text in [
            r#"{"username":"u","password":"s3cret"#, // truncated JSON
            r#"{"username":"u","password":["s3cret"]}"#,
            r#"{"username":"u","passwd":"s3cret"}"#,
            r#"{"password":""}"#,
            "s3cret",
        ] {
            let err = parse_secret(text).unwrap_err();
            assert!(!err.contains("s3cret"), "{err}");
            let line = SecretError {
                secret_arn: "arn:x".into(),
                reason: err.into(),
            }
            .to_string();
            assert!(!line.contains("s3cret"), "{line}");
        }
    }
}
