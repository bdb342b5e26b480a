//! `make smoke`'s HTTP side: one request per step, its status and the
//! fields that matter checked, one line printed per step. A failed step
//! carries the answer's body, so the report says what the stack said.

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A request that must be answered within this (a cold start on AWS
/// included: VPC, secret, TLS).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// 429s waited out per step (the admin key's rate may be low).
const RATE_LIMIT_RETRIES: u32 = 3;

/// Why the smoke stopped.
#[derive(Debug)]
pub struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Step<T> = Result<T, Failure>;

/// An answer, after its status was checked and its body parsed as JSON.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    /// The body's `id`, a positive integer.
    pub fn id(&self) -> u64 {
        self.body["id"].as_u64().unwrap_or_default()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What a step's check says: `Err(why)` fails the step.
pub type Check<'c> = Box<dyn FnOnce(&Answer) -> Result<(), String> + 'c>;

/// Fails with `why` unless `ok`.
pub fn ensure(ok: bool, why: impl Into<String>) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why.into()) }
}

/// One request of a step: `label` is the route as openapi.yaml names it
/// (`/holds/{id}`), `path` the one sent.
pub struct Call<'a> {
    pub method: Method,
    pub label: &'a str,
    pub path: String,
    pub query: Vec<(&'a str, String)>,
    pub headers: Vec<(&'a str, String)>,
    pub body: Option<Value>,
}

impl<'a> Call<'a> {
    pub fn new(method: Method, label: &'a str, path: impl Into<String>) -> Self {
        Self {
            method,
            label,
            path: path.into(),
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn query(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }

    pub fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
}

/// The API at `base`, called with one key.
pub struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    pub fn new(base: &str, key: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("an HTTP client");
        Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            key: key.to_string(),
        }
    }

    /// Sends `call`, waits out 429s, and fails unless the answer is
    /// `expected` with a JSON body of which `check` holds. Prints
    /// `ok  METHOD label  status  ms`.
    pub async fn send(&self, call: Call<'_>, expected: u16, check: Check<'_>) -> Step<Answer> {
        let started = Instant::now();
        let what = format!("{} {}", call.method, call.label);
        let mut attempt = 0;
        let response = loop {
            let mut request = self
                .http
                .request(call.method.clone(), format!("{}{}", self.base, call.path))
                .bearer_auth(&self.key)
                .query(&call.query);
            for (name, value) in &call.headers {
                request = request.header(*name, value);
            }
            if let Some(body) = &call.body {
                request = request.json(body);
            }
            let response = request
                .send()
                .await
                .map_err(|e| Failure(format!("FAIL  {what}: no answer: {e}")))?;
            if response.status() != 429 || expected == 429 || attempt == RATE_LIMIT_RETRIES {
                break response;
            }
            attempt += 1;
            let wait = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                .unwrap_or(1)
                .min(5);
            tokio::time::sleep(Duration::from_secs(wait)).await;
        };
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response
            .text()
            .await
            .map_err(|e| Failure(format!("FAIL  {what}  {status}: body unreadable: {e}")))?;
        let ms = started.elapsed().as_millis();
        let fail = |why: &str| {
            Failure(format!(
                "FAIL  {what}  {status}  {ms} ms: {why}; body: {text}"
            ))
        };
        if status != expected {
            return Err(fail(&format!("expected {expected}")));
        }
        let is_json = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/json"));
        if !is_json {
            return Err(fail("not application/json"));
        }
        let body: Value = serde_json::from_str(&text).map_err(|e| fail(&e.to_string()))?;
        let answer = Answer {
            status,
            headers,
            body,
        };
        check(&answer).map_err(|why| fail(&why))?;
        println!("ok  {what}  {status}  {ms} ms");
        Ok(answer)
    }

    /// A page or one of its files (`label` its route): sent without the
    /// key, which the pages do not take; fails unless it is a 200 of
    /// `media_type` with a Content-Security-Policy that frames nothing and
    /// a body holding `holds`. Prints as [`Api::send`] does.
    pub async fn page(&self, label: &str, path: &str, media_type: &str, holds: &str) -> Step<()> {
        let started = Instant::now();
        let what = format!("GET {label}");
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .map_err(|e| Failure(format!("FAIL  {what}: no answer: {e}")))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            let value = response.headers().get(name)?.to_str().ok()?;
            Some(value.to_owned())
        };
        let (kind, policy) = (header("content-type"), header("content-security-policy"));
        let text = response.text().await.unwrap_or_default();
        let ms = started.elapsed().as_millis();
        let why = if status != 200 {
            Some("expected 200".to_owned())
        } else if !kind.as_deref().is_some_and(|k| k.starts_with(media_type)) {
            Some(format!("not {media_type}: {kind:?}"))
        } else if !policy
            .as_deref()
            .is_some_and(|p| p.contains("frame-ancestors 'none'"))
        {
            Some(format!("no strict Content-Security-Policy: {policy:?}"))
        } else if !text.contains(holds) {
            Some(format!("the body holds no {holds:?}"))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Failure(format!("FAIL  {what}  {status}  {ms} ms: {why}")));
        }
        println!("ok  {what}  {status}  {ms} ms");
        Ok(())
    }
}
