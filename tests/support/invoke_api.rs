//! A stand-in of the Lambda Invoke API on loopback (`POST
//! /2015-03-31/functions/<name>/invocations`, synchronous): each invoke's
//! payload goes to a real function binary behind a [`RuntimeApi`] stand-in,
//! and its response comes back as the invoke's answer (or, for a function
//! error, 200 with `X-Amz-Function-Error: Unhandled`, as Lambda answers).
//! Records every invoke's path and `authorization` header.

use super::runtime_api::{RuntimeApi, Seen};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// One invoke as received.
#[derive(Debug, Clone)]
pub struct Invoked {
    pub path: String,
    pub authorization: String,
}

pub struct InvokeApi {
    /// `http://127.0.0.1:<port>`, for `AWS_ENDPOINT_URL_LAMBDA`.
    pub url: String,
    seen: Arc<Mutex<Vec<Invoked>>>,
    _tasks: JoinSet<()>,
}

impl InvokeApi {
    /// Invokes go to the function that polls `runtime`, one at a time.
    pub async fn start(runtime: RuntimeApi) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let runtime = Arc::new(tokio::sync::Mutex::new(runtime));
        let mut tasks = JoinSet::new();
        let recorded = seen.clone();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (seen, runtime) = (recorded.clone(), runtime.clone());
                connections.spawn(async move {
                    let service =
                        service_fn(move |request| answer(request, seen.clone(), runtime.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url,
            seen,
            _tasks: tasks,
        }
    }

    pub fn invoked(&self) -> Vec<Invoked> {
        self.seen.lock().expect("lock").clone()
    }
}

async fn answer(
    request: Request<Incoming>,
    seen: Arc<Mutex<Vec<Invoked>>>,
    runtime: Arc<tokio::sync::Mutex<RuntimeApi>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let path = request.uri().path().to_string();
    seen.lock().expect("lock").push(Invoked {
        path,
        authorization,
    });
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let event = serde_json::from_slice(&body).unwrap_or_default();
    let mut runtime = runtime.lock().await;
    let id = runtime.invoke(event, Duration::from_secs(30));
    let (body, failed) = loop {
        match runtime.next(Duration::from_secs(60)).await {
            Some(Seen::Poll(_)) => continue,
            Some(Seen::Response {
                request_id, body, ..
            }) if request_id == id => break (body, false),
            Some(Seen::Error {
                request_id, report, ..
            }) if request_id == id => break (Bytes::from(report), true),
            Some(_) => continue,
            None => break (Bytes::from_static(b"no answer"), true),
        }
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = StatusCode::OK;
    if failed {
        response.headers_mut().insert(
            "x-amz-function-error",
            hyper::header::HeaderValue::from_static("Unhandled"),
        );
    }
    Ok(response)
}
