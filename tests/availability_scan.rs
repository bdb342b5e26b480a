//! A page of the availability list examines at most
//! `AVAILABILITY_SCAN_LIMIT` slots (SPEC §16): on a table of full slots a
//! walk with `available=true` from the year 1000 gets short or empty pages
//! that still link on, one range of ids each, and following `next` still
//! lists every match exactly once.

use lambda_http::{Body, Request, Response};
use serde_json::Value;
use shared::config::{AuthMode, HoldRules};
use shared::http;
use slot_booking_tests::*;
use std::time::Duration;

const SCAN: u32 = 200;

fn request(raw_query: &str) -> Request {
    let mut event = event_json(
        "apigw_v2_availability.json",
        "/slots/availability",
        None,
        &[],
    );
    event["rawQueryString"] = raw_query.into();
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

/// The page's slot ids and the query of its `next` link.
fn page(response: Response<Body>) -> (Vec<u64>, Option<String>) {
    assert_eq!(response.status(), 200);
    let next = response.headers().get("link").map(|link| {
        let link = link.to_str().unwrap();
        let query = link.split_once('?').unwrap().1;
        query.split_once('>').unwrap().0.to_string()
    });
    let body: Value = serde_json::from_slice(response.body()).unwrap();
    let ids = body
        .as_array()
        .unwrap()
        .iter()
        .map(|slot| slot["slot_id"].as_u64().unwrap())
        .collect();
    (ids, next)
}

#[tokio::test]
async fn pages_of_full_slots_stop_at_the_scan_limit_and_the_walk_still_sees_every_match() {
    let db = TestDb::new().await;
    let rules = HoldRules {
        availability_scan: SCAN,
        ..HoldRules::default()
    };
    let app = db.app_with_rules(AuthMode::Open, Duration::from_secs(300), rules);
    // 1,000 slots, all full but every 450th: some ranges of 200 ids hold
    // no match.
    let mut open = Vec::new();
    for i in 0..1000u32 {
        let slot = db.insert_slot(1).await;
        if i % 450 != 0 {
            sqlx::query("UPDATE slots SET remaining = 0 WHERE id = ?")
                .bind(slot.0)
                .execute(&db.admin)
                .await
                .unwrap();
        } else {
            open.push(slot.0);
        }
    }
    let mut query = Some("from=1000-01-01T00:00:00Z&available=true&limit=1000".to_string());
    let (mut seen, mut pages, mut empty) = (Vec::new(), 0, 0);
    while let Some(q) = query {
        let (ids, next) = page(http::availability(&app, request(&q)).await.unwrap());
        assert!(
            ids.len() <= SCAN as usize,
            "a page examined more than its range"
        );
        if ids.is_empty() && next.is_some() {
            empty += 1;
        }
        seen.extend(ids);
        pages += 1;
        query = next;
        assert!(pages <= 20, "the walk ends");
    }
    assert_eq!(seen, open, "every match once, in id order");
    assert!(
        pages >= 1000 / SCAN as usize,
        "{pages} pages of at most {SCAN} ids"
    );
    assert!(empty > 0, "a range without a match still links on");
    db.drop().await;
}

/// `to` alone bounds `starts_at`, which the not-ended default's index
/// (`ends_at`) does not hold: its probe must count that index's entries
/// read, not the matches, or a window of few matches among many slots not
/// ended would be read whole from the index on every page.
#[tokio::test]
async fn a_window_bounded_by_to_alone_is_still_walked_a_range_at_a_time() {
    let db = TestDb::new().await;
    let rules = HoldRules {
        availability_scan: SCAN,
        ..HoldRules::default()
    };
    let app = db.app_with_rules(AuthMode::Open, Duration::from_secs(300), rules);
    // 1,000 slots not ended; one in ten starts within the day.
    let mut soon = Vec::new();
    for i in 0..1000i64 {
        let hours = if i % 10 == 0 { 2 } else { 48 + i };
        let id = sqlx::query(
            "INSERT INTO slots (starts_at, ends_at, capacity, remaining) VALUES \
             (UTC_TIMESTAMP() + INTERVAL ? HOUR, UTC_TIMESTAMP() + INTERVAL ? HOUR, 1, 1)",
        )
        .bind(hours)
        .bind(hours + 1)
        .execute(&db.admin)
        .await
        .unwrap()
        .last_insert_id();
        if i % 10 == 0 {
            soon.push(id);
        }
    }
    let to = (chrono::Utc::now() + chrono::Duration::hours(24)).format("%Y-%m-%dT%H:%M:%SZ");
    let mut query = Some(format!("to={to}&limit=1000"));
    let (mut seen, mut pages) = (Vec::new(), 0);
    while let Some(q) = query {
        let (ids, next) = page(http::availability(&app, request(&q)).await.unwrap());
        seen.extend(ids);
        pages += 1;
        query = next;
        assert!(pages <= 20, "the walk ends");
    }
    assert_eq!(seen, soon, "every match once, in id order");
    assert!(
        pages >= 1000 / SCAN as usize,
        "{pages} pages: read a range at a time"
    );
    db.drop().await;
}
