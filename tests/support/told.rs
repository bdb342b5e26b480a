//! Requests that remember what each was answered, as a summary log line
//! must tell it (`tests/telemetry.rs`).

use crate::keys::TestClient;
use reqwest::Method;
use serde_json::Value;
use std::collections::BTreeMap;

/// One answer, as its summary line must tell it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Told {
    pub route: String,
    pub status: u16,
    pub reason: Option<String>,
    pub client_id: Option<u64>,
}

/// The run so far: what each request was answered, and the `X-Cache` of
/// each availability answer.
pub struct Run {
    http: reqwest::Client,
    base: String,
    pub told: Vec<Told>,
    pub x_cache: BTreeMap<String, u64>,
}

impl Run {
    pub fn new(base: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: base.to_string(),
            told: Vec::new(),
            x_cache: BTreeMap::new(),
        }
    }

    /// `method path` as `who` (none: no key), named by its `route`
    /// template; its answer, remembered.
    pub async fn send(
        &mut self,
        route: &str,
        method: Method,
        path: &str,
        who: Option<&TestClient>,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(who) = who {
            request = request.header("authorization", who.bearer());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.body(body.to_string());
        }
        let response = request.send().await.expect("an answer");
        let status = response.status().as_u16();
        if let Some(cache) = response.headers().get("x-cache") {
            let cache = cache.to_str().unwrap().to_string();
            *self.x_cache.entry(cache).or_default() += 1;
        }
        let text = response.text().await.expect("a body");
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let reason = body["reason"].as_str().map(str::to_string);
        // Who the server could know: nobody before authentication.
        let known = status != 401 && route != "$default";
        self.told.push(Told {
            route: route.to_string(),
            status,
            reason,
            client_id: who.filter(|_| known).map(|who| who.id.0),
        });
        (status, body)
    }
}
