//! A webhook receiver on 127.0.0.1, in the test's process: a real HTTP
//! server (hyper) that records every request's headers and body and
//! answers as the test's rule says (a status, or hanging).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    /// The body as sent (the signature is over these bytes).
    pub raw: String,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }

    /// `<type> <data.id>`, the event in a word.
    pub fn event(&self) -> String {
        format!(
            "{} {}",
            self.body["type"].as_str().unwrap_or("?"),
            self.body["data"]["id"]
        )
    }
}

/// How to answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Status(u16),
    /// 307 to this URL.
    Redirect(String),
    /// No answer for a minute: past any test's timeout.
    Hang,
}

type Rule = Box<dyn FnMut(&Received) -> Reply + Send>;

struct State {
    received: Vec<Received>,
    rule: Rule,
}

pub struct Receiver {
    pub port: u16,
    state: Arc<Mutex<State>>,
    _tasks: JoinSet<()>,
}

impl Receiver {
    /// Answers every request `status`.
    pub async fn answering(status: u16) -> Self {
        Self::start(move |_| Reply::Status(status)).await
    }

    pub async fn start(rule: impl FnMut(&Received) -> Reply + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let state = Arc::new(Mutex::new(State {
            received: Vec::new(),
            rule: Box::new(rule),
        }));
        let mut tasks = JoinSet::new();
        let shared = state.clone();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| answer(request, state.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            port,
            state,
            _tasks: tasks,
        }
    }

    /// Its URL on 127.0.0.1 (or on `localhost`, a name).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn url_by_name(&self) -> String {
        format!("http://localhost:{}/hook", self.port)
    }

    pub fn set(&self, rule: impl FnMut(&Received) -> Reply + Send + 'static) {
        self.state.lock().unwrap().rule = Box::new(rule);
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// `<type> <data.id>` of each request, in arrival order.
    pub fn events(&self) -> Vec<String> {
        self.received().iter().map(Received::event).collect()
    }
}

async fn answer(
    request: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = value.to_str().unwrap_or_default().to_string();
            (name.as_str().to_string(), value)
        })
        .collect();
    let raw = request
        .into_body()
        .collect()
        .await
        .map(|body| String::from_utf8_lossy(&body.to_bytes()).into_owned())
        .unwrap_or_default();
    let received = Received {
        headers,
        body: serde_json::from_str(&raw).unwrap_or(Value::Null),
        raw,
    };
    let reply = {
        let mut state = state.lock().unwrap();
        let reply = (state.rule)(&received);
        state.received.push(received);
        reply
    };
    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
    let status = match reply {
        Reply::Status(status) => status,
        Reply::Redirect(to) => {
            let to = to.parse().expect("a header value");
            response.headers_mut().insert("location", to);
            307
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            200
        }
    };
    *response.status_mut() = StatusCode::from_u16(status).expect("a status");
    Ok(response)
}
