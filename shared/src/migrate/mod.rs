//! The `migrate` function: a CloudFormation custom resource
//! (`Custom::Migrations`) that runs the embedded sqlx migrations on every
//! deploy that changes them, before any API function is updated.
//!
//! - `Create` / `Update`: connect as the DDL user (retrying with back-off
//!   for a bounded time: a new RDS Proxy target or a resuming Aurora writer
//!   may refuse connections for minutes), run
//!   [`MIGRATOR`](crate::db::MIGRATOR) with [`runner`] (a bounded lock wait;
//!   a half-applied migration is resumed, or left alone by an older release
//!   a rollback brings back, which also ignores newer applied migrations),
//!   keep the application's users ([`users`]), install the first admin key,
//!   answer `SUCCESS`; on any failure answer `FAILED` with one readable line
//!   and no secret.
//! - `Delete`: touch nothing, answer `SUCCESS` (a stack operation never
//!   drops data).
//!
//! The answer is always `PUT` to the request's pre-signed `ResponseURL`
//! (S3), with an empty `Content-Type` as the signature requires.

use crate::db;
use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::migrate::Migrator;
use sqlx::{ConnectOptions, Connection};
use std::future::Future;
use std::time::{Duration, SystemTime};

pub mod duty;
mod grants;
pub mod runner;
mod statements;
pub mod target;
pub mod users;
pub use target::{Target, target_from_env};

/// One resource, one constant id: CloudFormation never sees a
/// replacement, so it never sends a Delete for an "old" resource.
pub const PHYSICAL_RESOURCE_ID: &str = "slot-booking-migrations";

/// Stop retrying the connection this long before Lambda's deadline, to
/// leave time for the migrations themselves and the response.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(60);

/// How long to keep trying to connect, given the invocation's deadline.
pub fn retry_budget(deadline: SystemTime) -> Duration {
    deadline
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .saturating_sub(DEADLINE_MARGIN)
}

/// The parts of a CloudFormation custom resource request used here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub request_type: String,
    pub response_url: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
}

impl Request {
    /// Reads the event leniently: whatever is missing becomes an empty
    /// string, so that a request with a `ResponseURL` always gets an answer.
    pub fn from_event(event: &Value) -> Self {
        let field = |name: &str| {
            event
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Self {
            request_type: field("RequestType"),
            response_url: field("ResponseURL"),
            stack_id: field("StackId"),
            request_id: field("RequestId"),
            logical_resource_id: field("LogicalResourceId"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Success,
    Failed,
}

/// The body `PUT` to the `ResponseURL`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Response {
    pub status: Status,
    pub reason: String,
    pub physical_resource_id: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    pub data: Map<String, Value>,
}

/// CloudFormation rejects responses over 4 KiB; a reason this long is
/// plenty.
const MAX_REASON: usize = 1000;

impl Response {
    fn new(request: &Request, status: Status, reason: &str, data: Map<String, Value>) -> Self {
        let mut reason = reason.replace(['\n', '\r'], " ");
        if reason.len() > MAX_REASON {
            let mut cut = MAX_REASON;
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
            reason.push('…');
        }
        Self {
            status,
            reason,
            physical_resource_id: PHYSICAL_RESOURCE_ID.to_string(),
            stack_id: request.stack_id.clone(),
            request_id: request.request_id.clone(),
            logical_resource_id: request.logical_resource_id.clone(),
            data,
        }
    }
}

/// Why a response could not be delivered: only the log will know.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("the request has no ResponseURL")]
    NoResponseUrl,
    #[error("PUT to the ResponseURL failed: {0}")]
    Put(String),
}

/// The HTTPS client for the response: rustls, bounded.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a TLS client with the bundled roots always builds")
}

/// Handles one custom resource event end to end: decides, then delivers
/// the response. `database` yields the [`Target`] (or just connect
/// options); it is awaited only for Create and Update, so a Delete touches
/// nothing (not even Secrets Manager). `retry_budget` bounds the connection
/// retries.
pub async fn handle<F, T>(
    event: &Value,
    database: F,
    retry_budget: Duration,
    http: &reqwest::Client,
) -> Result<Response, DeliveryError>
where
    F: Future<Output = Result<T, String>>,
    T: Into<Target>,
{
    let request = Request::from_event(event);
    let response = decide(&request, database, retry_budget).await;
    match response.status {
        Status::Success => tracing::info!(
            request_type = %request.request_type,
            reason = %response.reason,
            "custom resource: SUCCESS"
        ),
        Status::Failed => tracing::error!(
            request_type = %request.request_type,
            reason = %response.reason,
            "custom resource: FAILED"
        ),
    }
    deliver(http, &request.response_url, &response).await?;
    Ok(response)
}

/// The response to `request`, without sending it.
pub async fn decide<F, T>(request: &Request, database: F, retry_budget: Duration) -> Response
where
    F: Future<Output = Result<T, String>>,
    T: Into<Target>,
{
    match request.request_type.as_str() {
        "Delete" => Response::new(
            request,
            Status::Success,
            "nothing to do: a stack operation never drops data",
            Map::new(),
        ),
        "Create" | "Update" => match migrate(database, retry_budget).await {
            Ok((outcome, version, kept)) => {
                let mut data = Map::new();
                data.insert("SchemaVersion".into(), version.to_string().into());
                data.insert("Applied".into(), outcome.applied.to_string().into());
                let mut reason = format!(
                    "applied {} migration(s); schema at version {version}",
                    outcome.applied
                );
                if !outcome.completed.is_empty() {
                    reason.push_str(&format!("; completed interrupted {:?}", outcome.completed));
                }
                if !outcome.left_dirty.is_empty() {
                    reason.push_str(&format!(
                        "; newer incomplete {:?} left for the release that has them",
                        outcome.left_dirty
                    ));
                }
                reason.push_str(&kept);
                Response::new(request, Status::Success, &reason, data)
            }
            Err(reason) => Response::new(request, Status::Failed, &reason, Map::new()),
        },
        other => Response::new(
            request,
            Status::Failed,
            &format!("unknown RequestType {other:?}"),
            Map::new(),
        ),
    }
}

/// The embedded migrations, with `ignore_missing`: migrations applied by a
/// newer binary are not an error for an older one (rollback).
pub fn migrator() -> Migrator {
    let mut migrator = Migrator::with_migrations(db::MIGRATOR.iter().cloned().collect());
    migrator.set_ignore_missing(true);
    migrator
}

/// Connects and migrates, waiting for the migration lock no longer than
/// what is left of `retry_budget` (so the answer still goes out before
/// Lambda's deadline), then keeps the application's users and the first admin
/// key. `Ok(what it did, latest version, what it kept)`, or one line saying
/// what failed.
async fn migrate<F, T>(
    database: F,
    retry_budget: Duration,
) -> Result<(runner::Outcome, i64, String), String>
where
    F: Future<Output = Result<T, String>>,
    T: Into<Target>,
{
    let wanted: Target = database.await?.into();
    // No statement is logged: the user step sends a password as a literal.
    let options = wanted.options.clone().disable_statement_logging();
    let address = format!("{}:{}", options.get_host(), options.get_port());
    let started = std::time::Instant::now();
    let mut conn = db::connect_with_retry(&options, retry_budget)
        .await
        .map_err(|err| {
            format!(
                "cannot connect to the database at {address} (gave up after {} s): {err}",
                started.elapsed().as_secs()
            )
        })?;
    let migrator = migrator();
    let lock_wait = retry_budget.saturating_sub(started.elapsed());
    let outcome = runner::run(&mut conn, &migrator, lock_wait).await;
    let kept = match &outcome {
        Ok(_) => target::keep(&mut conn, &options, &wanted).await,
        Err(_) => Ok(String::new()),
    };
    conn.close().await.ok();
    let version = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    Ok((outcome?, version, kept?))
}

/// PUTs the response to the pre-signed URL, a few times if S3 hiccups.
pub async fn deliver(
    http: &reqwest::Client,
    url: &str,
    response: &Response,
) -> Result<(), DeliveryError> {
    if url.is_empty() {
        return Err(DeliveryError::NoResponseUrl);
    }
    let body = serde_json::to_vec(response).expect("a response always serialises");
    let mut last = String::new();
    for attempt in 0..3u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
        }
        let sent = http
            .put(url)
            // The URL is signed for an empty Content-Type.
            .header(reqwest::header::CONTENT_TYPE, "")
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(reply) if reply.status().is_success() => return Ok(()),
            Ok(reply) => last = format!("HTTP {}", reply.status()),
            // Without the URL: its query string is a signature.
            Err(err) => last = err.without_url().to_string(),
        }
        tracing::warn!(attempt, error = %last, "custom resource response not accepted");
    }
    Err(DeliveryError::Put(last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(kind: &str) -> Request {
        Request::from_event(&json!({
            "RequestType": kind,
            "ResponseURL": "https://example.invalid/r?X-Amz-Signature=abc",
            "StackId": "arn:aws:cloudformation:eu-west-1:1:stack/s/x",
            "RequestId": "req-1",
            "LogicalResourceId": "Migrations",
            "ResourceType": "Custom::Migrations",
            "ResourceProperties": {"ServiceToken": "arn", "FunctionVersion": "3"}
        }))
    }

    #[test]
    fn the_response_has_cloudformations_field_names() {
        let response = Response::new(&request("Create"), Status::Failed, "a\nb", Map::new());
        let body = serde_json::to_value(&response).unwrap();
        assert_eq!(
            body,
            json!({
                "Status": "FAILED",
                "Reason": "a b",
                "PhysicalResourceId": PHYSICAL_RESOURCE_ID,
                "StackId": "arn:aws:cloudformation:eu-west-1:1:stack/s/x",
                "RequestId": "req-1",
                "LogicalResourceId": "Migrations",
                "Data": {}
            })
        );
    }

    #[test]
    fn long_reasons_are_cut() {
        let reason = "é".repeat(2000);
        let response = Response::new(&request("Create"), Status::Failed, &reason, Map::new());
        assert!(response.reason.len() <= MAX_REASON + '…'.len_utf8());
    }

    #[tokio::test]
    async fn unknown_request_types_fail() {
        let response = decide(
            &request("Rename"),
            async { Err::<Target, _>("not reached".to_string()) },
            Duration::ZERO,
        )
        .await;
        assert_eq!(response.status, Status::Failed);
        assert!(response.reason.contains("Rename"));
    }

    #[test]
    fn the_budget_leaves_a_minute() {
        let deadline = SystemTime::now() + Duration::from_secs(900);
        let budget = retry_budget(deadline);
        assert!(budget <= Duration::from_secs(840) && budget > Duration::from_secs(830));
        assert_eq!(retry_budget(SystemTime::now()), Duration::ZERO);
    }

    #[test]
    fn the_migrator_ignores_missing_migrations() {
        let migrator = migrator();
        assert!(migrator.ignore_missing);
        assert_eq!(migrator.iter().count(), db::MIGRATOR.iter().count());
    }
}
