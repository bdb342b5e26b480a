//! A stand-in of the Lambda Runtime API on loopback, for running a real
//! function binary as Lambda runs it: the binary polls `next`, gets the
//! invocations queued with [`RuntimeApi::invoke`] one at a time (a poll with
//! nothing queued waits, as on Lambda between invocations), and posts its
//! `response` or `error`. Each stand-in serves one execution environment.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinSet;

const NEXT: &str = "/2018-06-01/runtime/invocation/next";

/// One invocation: its event and how long the function has for it (the
/// `lambda-runtime-deadline-ms` header).
struct Invocation {
    request_id: String,
    event: Value,
    timeout: Duration,
}

/// What the stand-in saw, in order.
#[derive(Debug)]
pub enum Seen {
    Poll(Instant),
    Response {
        at: Instant,
        request_id: String,
        body: Bytes,
    },
    Error {
        at: Instant,
        request_id: String,
        report: String,
    },
}

pub struct RuntimeApi {
    /// `host:port`, the value of `AWS_LAMBDA_RUNTIME_API`.
    pub address: String,
    queue: mpsc::UnboundedSender<Invocation>,
    seen: mpsc::UnboundedReceiver<Seen>,
    /// Dropping it aborts the server and its connections.
    _tasks: JoinSet<()>,
}

impl RuntimeApi {
    pub async fn start() -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let address = listener
            .local_addr()
            .map_err(|e| e.to_string())?
            .to_string();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let (queue, pending) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(pending));
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (seen, pending) = (seen_tx.clone(), pending.clone());
                connections.spawn(async move {
                    let service =
                        service_fn(move |request| answer(request, seen.clone(), pending.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            address,
            queue,
            seen,
            _tasks: tasks,
        })
    }

    /// Queues `event` for the function's next poll; returns its request id.
    pub fn invoke(&self, event: Value, timeout: Duration) -> String {
        let request_id = uuid::Uuid::new_v4().to_string();
        let _ = self.queue.send(Invocation {
            request_id: request_id.clone(),
            event,
            timeout,
        });
        request_id
    }

    /// The next thing the function did, if it did something within `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Seen> {
        tokio::time::timeout(within, self.seen.recv())
            .await
            .ok()
            .flatten()
    }

    /// The environment Lambda gives a function process, for `function`.
    pub fn environment(&self, function: &str) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_LAMBDA_RUNTIME_API", self.address.clone()),
            ("AWS_LAMBDA_FUNCTION_NAME", function.to_string()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".into()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
            (
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{function}"),
            ),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "test".into()),
        ]
    }
}

async fn answer(
    request: Request<Incoming>,
    seen: mpsc::UnboundedSender<Seen>,
    pending: Arc<Mutex<mpsc::UnboundedReceiver<Invocation>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_string();
    if request.method() == Method::GET && path == NEXT {
        let _ = seen.send(Seen::Poll(Instant::now()));
        // One poller at a time takes the next invocation; with none queued
        // it waits (forever, if none comes).
        let Some(invocation) = pending.lock().await.recv().await else {
            return Ok(Response::new(Full::new(Bytes::new())));
        };
        let deadline = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            + invocation.timeout;
        let function = "arn:aws:lambda:eu-west-1:123456789012:function:test";
        let response = Response::builder()
            .header("content-type", "application/json")
            .header("lambda-runtime-aws-request-id", &invocation.request_id)
            .header(
                "lambda-runtime-deadline-ms",
                deadline.as_millis().to_string(),
            )
            .header("lambda-runtime-invoked-function-arn", function)
            .header(
                "lambda-runtime-trace-id",
                "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1",
            )
            .body(Full::new(Bytes::from(invocation.event.to_string())))
            .expect("response");
        return Ok(response);
    }
    // `/2018-06-01/runtime/invocation/<id>/response` or `…/error`, or
    // `/2018-06-01/runtime/init/error`.
    let request_id = path.split('/').nth(4).unwrap_or_default().to_string();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let at = Instant::now();
    let _ = if path.ends_with("/response") {
        seen.send(Seen::Response {
            at,
            request_id,
            body,
        })
    } else {
        seen.send(Seen::Error {
            at,
            request_id,
            report: format!("{path}: {}", String::from_utf8_lossy(&body)),
        })
    };
    let mut response = Response::new(Full::new(Bytes::from_static(b"{\"status\":\"OK\"}")));
    *response.status_mut() = StatusCode::ACCEPTED;
    Ok(response)
}

/// What API Gateway would make of a function's response (payload v2):
/// the status and the body, decoded when base64.
pub fn http_answer(body: &[u8]) -> Result<(u16, String), String> {
    use base64::Engine;
    let response: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let status = response["statusCode"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .ok_or_else(|| format!("no statusCode: {response}"))?;
    let text = response["body"].as_str().unwrap_or_default();
    let text = if response["isBase64Encoded"] == true {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| e.to_string())?;
        String::from_utf8(bytes).map_err(|e| e.to_string())?
    } else {
        text.to_string()
    };
    Ok((status, text))
}
