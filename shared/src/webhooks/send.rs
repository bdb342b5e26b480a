//! The request to a receiver (SPEC §20), and nothing else: no database,
//! no secret. Its input and output are plain serializable values so that,
//! on AWS, it can run as a function of its own outside the VPC (the worker
//! in the VPC builds and signs the request, this sends it; docs/DESIGN.md,
//! "Webhooks: the delivery protocol").

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A request, built and signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    pub url: String,
    /// The address the URL's host resolved to and was checked: the only
    /// one connected to (a name that resolves elsewhere by now is not
    /// asked again).
    pub address: SocketAddr,
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature`,
    /// `content-type`.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub timeout_ms: u64,
}

/// How it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The receiver's status; `None` when it gave none in time.
    pub status_code: Option<u16>,
    pub error: Option<SendError>,
    pub latency_ms: u64,
}

impl Answer {
    /// An attempt refused before any request (`address_not_allowed`).
    pub fn refused(error: SendError) -> Self {
        Self {
            status_code: None,
            error: Some(error),
            latency_ms: 0,
        }
    }
}

/// Why there was no status (SPEC §23.11's ping errors, and the
/// deliveries' `last_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendError {
    Timeout,
    ConnectionFailed,
    AddressNotAllowed,
}

impl SendError {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::ConnectionFailed => "connection_failed",
            Self::AddressNotAllowed => "address_not_allowed",
        }
    }
}

/// The most of an answer's body read (then dropped): a receiver cannot
/// make the worker read forever.
pub const BODY_READ: usize = 64 * 1024;

/// Sends `outgoing`: a POST to its URL, connected to its address only, no
/// redirect followed, its status awaited for `timeout_ms` at most.
pub async fn send(outgoing: &Outgoing) -> Answer {
    let started = Instant::now();
    let timeout = Duration::from_millis(outgoing.timeout_ms);
    let status = tokio::time::timeout(timeout, request(outgoing)).await;
    let latency_ms = started.elapsed().as_millis() as u64;
    match status {
        Err(_) => Answer {
            status_code: None,
            error: Some(SendError::Timeout),
            latency_ms,
        },
        Ok(Err(error)) => Answer {
            status_code: None,
            error: Some(error),
            latency_ms,
        },
        Ok(Ok(mut response)) => {
            // The body, up to BODY_READ, in what is left of the time;
            // ignored (the status decides), and not waited for past it.
            let left = timeout.saturating_sub(started.elapsed());
            let _ = tokio::time::timeout(left, async {
                let mut read = 0;
                while let Ok(Some(chunk)) = response.chunk().await {
                    read += chunk.len();
                    if read >= BODY_READ {
                        break;
                    }
                }
            })
            .await;
            Answer {
                status_code: Some(response.status().as_u16()),
                error: None,
                latency_ms,
            }
        }
    }
}

async fn request(outgoing: &Outgoing) -> Result<reqwest::Response, SendError> {
    let url = reqwest::Url::parse(&outgoing.url).map_err(|_| SendError::ConnectionFailed)?;
    // reqwest (already in the workspace): `resolve` pins the host to the
    // checked address (the URL's port is kept), and redirects are answers,
    // not followed. One client per request: the pin is the client's.
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_millis(outgoing.timeout_ms));
    if let Some(host) = url.host_str() {
        builder = builder.resolve(host, outgoing.address);
    }
    let client = builder.build().map_err(|_| SendError::ConnectionFailed)?;
    let mut request = client.post(url).body(outgoing.body.clone());
    for (name, value) in &outgoing.headers {
        request = request.header(name, value);
    }
    request.send().await.map_err(|err| {
        if err.is_timeout() {
            SendError::Timeout
        } else {
            SendError::ConnectionFailed
        }
    })
}
