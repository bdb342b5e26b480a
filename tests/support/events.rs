//! `GET /events` through its handler: one page, and a follower that walks
//! `next` the way a client does.

use crate::keys::{TestClient, authorized};
use crate::read;
use lambda_http::Request;
use serde_json::Value;
use shared::{App, http};

/// `GET /events?<raw_query>` as API Gateway passes it.
pub fn events_request(raw_query: &str) -> Request {
    let mut event = crate::event_json("apigw_v2_availability.json", "/events", None, &[]);
    event["routeKey"] = "GET /events".into();
    event["rawQueryString"] = raw_query.into();
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

/// One page: status, body, and the queries of its `next` and `last`
/// (the feed's head) links.
pub struct EventPage {
    pub status: u16,
    pub body: Value,
    pub next: Option<String>,
    pub last: Option<String>,
}

impl EventPage {
    pub fn events(&self) -> &[Value] {
        self.body.as_array().map_or(&[], Vec::as_slice)
    }
}

pub async fn page(app: &App, who: &TestClient, raw_query: &str) -> EventPage {
    let request = authorized(events_request(raw_query), Some(&who.bearer()));
    let response = http::list_events(app, request).await.expect("handled");
    let link = response
        .headers()
        .get("link")
        .map(|link| link.to_str().expect("text").to_string());
    // `</events?Q1>; rel="next", </events?Q2>; rel="last"`, exactly.
    let (next, last) = match &link {
        None => (None, None),
        Some(link) => {
            let (next, last) = link
                .strip_prefix("</events?")
                .and_then(|rest| rest.split_once(">; rel=\"next\", </events?"))
                .and_then(|(next, rest)| Some((next, rest.strip_suffix(">; rel=\"last\"")?)))
                .unwrap_or_else(|| panic!("a next and a last link: {link}"));
            (Some(next.to_string()), Some(last.to_string()))
        }
    };
    let (status, body) = read(response);
    EventPage {
        status,
        body,
        next,
        last,
    }
}

/// A client following `next` from the first page.
pub struct Follower {
    pub query: String,
    pub seen: Vec<Value>,
}

impl Follower {
    pub fn new() -> Self {
        Self {
            query: String::new(),
            seen: Vec::new(),
        }
    }

    /// One poll: the page's events are kept; returns how many came.
    pub async fn poll(&mut self, app: &App, who: &TestClient) -> usize {
        let page = page(app, who, &self.query).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let n = page.events().len();
        self.seen.extend(page.events().iter().cloned());
        self.query = page.next.expect("next is always there");
        n
    }
}

impl Default for Follower {
    fn default() -> Self {
        Self::new()
    }
}
