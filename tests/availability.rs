//! `GET /slots/availability` at any size (SPEC §11, §15.11, §15.12):
//! parameters and their validation, the not-ended default, windows,
//! `available`, pages and their `next` links, cursors, ETag and 304, and
//! a walk to the end while slots are created and deleted.

use lambda_http::{Body, Request, Response};
use serde_json::Value;
use shared::cache::CacheSettings;
use shared::http;
use slot_booking_tests::*;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// `GET /slots/availability?<raw_query>` with these extra headers.
fn request(raw_query: &str, headers: &[(&str, Option<&str>)]) -> Request {
    let mut event = event_json(
        "apigw_v2_availability.json",
        "/slots/availability",
        None,
        headers,
    );
    event["rawQueryString"] = raw_query.into();
    lambda_http::request::from_str(&event.to_string()).expect("event")
}

struct Answer {
    status: u16,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn ids(&self) -> Vec<u64> {
        assert_eq!(self.status, 200, "{}", self.json());
        self.json()
            .as_array()
            .expect("array")
            .iter()
            .map(|s| s["slot_id"].as_u64().unwrap())
            .collect()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
    /// The query of the `next` link, if any.
    fn next(&self) -> Option<String> {
        let link = self.header("link")?;
        let target = link.strip_prefix('<')?.split_once(">; rel=\"next\"")?.0;
        let (path, query) = target.split_once('?').expect("a query");
        assert_eq!(path, "/slots/availability");
        Some(query.to_string())
    }
    fn error_fields(&self) -> Vec<String> {
        assert_eq!(self.status, 422, "{}", self.json());
        let body = self.json();
        assert_eq!(body["reason"], "validation_failed");
        body["errors"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }
}

fn answer(response: Response<Body>) -> Answer {
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap().to_string()))
        .collect();
    Answer {
        status: response.status().as_u16(),
        headers,
        body: response.body().to_vec(),
    }
}

async fn get(app: &shared::App, raw_query: &str) -> Answer {
    get_with(app, raw_query, &[]).await
}

async fn get_with(app: &shared::App, raw_query: &str, headers: &[(&str, Option<&str>)]) -> Answer {
    answer(
        http::availability(app, request(raw_query, headers))
            .await
            .unwrap(),
    )
}

/// A slot starting `start` hours from now (negative: in the past), an
/// hour long unless `hours` says otherwise.
async fn slot_at(db: &TestDb, start: i64, hours: i64, capacity: u32) -> u64 {
    sqlx::query(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining) VALUES \
         (UTC_TIMESTAMP(6) + INTERVAL ? HOUR, UTC_TIMESTAMP(6) + INTERVAL ? HOUR, ?, ?)",
    )
    .bind(start)
    .bind(start + hours)
    .bind(capacity)
    .bind(capacity)
    .execute(&db.admin)
    .await
    .unwrap()
    .last_insert_id()
}

async fn starts_at(db: &TestDb, id: u64) -> String {
    sqlx::query_scalar(
        "SELECT DATE_FORMAT(starts_at, '%Y-%m-%dT%H:%i:%s.%fZ') FROM slots WHERE id = ?",
    )
    .bind(id)
    .fetch_one(&db.admin)
    .await
    .unwrap()
}

/// Every page from `first` on, following `next`; the ids in order.
async fn walk(app: &shared::App, first: &str) -> (Vec<u64>, usize) {
    let (mut ids, mut pages, mut query) = (Vec::new(), 0, Some(first.to_string()));
    while let Some(q) = query {
        let page = get(app, &q).await;
        ids.extend(page.ids());
        pages += 1;
        query = page.next();
    }
    (ids, pages)
}

#[tokio::test]
async fn every_bad_parameter_is_a_422_naming_it() {
    let db = TestDb::new().await;
    let app = db.app();
    for (query, field) in [
        ("from=yesterday", "from"),
        ("from=2026-12-01%2009:00:00Z", "from"),
        ("from=2026-12-01T09:00:00", "from"),
        ("to=2026-13-01T09:00:00Z", "to"),
        ("from=2027-01-02T00:00:00Z&to=2027-01-02T00:00:00Z", "to"),
        ("from=2027-01-02T00:00:00Z&to=2027-01-01T00:00:00Z", "to"),
        ("available=yes", "available"),
        ("available=", "available"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("cursor=abc", "cursor"),
        ("cursor=", "cursor"),
        ("limit=5&limit=5", "limit"),
        (
            "from=2027-01-01T00:00:00Z&from=2027-01-01T00:00:00Z",
            "from",
        ),
        // An unknown parameter under its own name (SPEC §19.6).
        ("page=2", "page"),
        ("Limit=5", "Limit"),
    ] {
        let answer = get(&app, query).await;
        assert_eq!(answer.error_fields(), [field], "{query}");
        assert_no_leak(&String::from_utf8_lossy(&answer.body));
    }
    let all = get(&app, "from=x&to=y&available=maybe&limit=0&extra=1").await;
    assert_eq!(
        all.error_fields(),
        ["available", "extra", "from", "limit", "to"],
        "every problem at once"
    );
    db.drop().await;
}

#[tokio::test]
async fn without_from_only_slots_that_have_not_ended_are_listed() {
    let db = TestDb::new().await;
    let app = db.app();
    let ended = slot_at(&db, -3, 1, 2).await;
    let running = slot_at(&db, -1, 2, 2).await; // started, not ended
    let future = slot_at(&db, 24, 1, 2).await;
    assert_eq!(get(&app, "").await.ids(), [running, future]);
    assert_eq!(get(&app, "limit=10").await.ids(), [running, future]);
    // `to` alone keeps the not-ended default.
    let to = starts_at(&db, future).await;
    assert_eq!(get(&app, &format!("to={to}")).await.ids(), [running]);
    // With `from`, an ended slot is listed if it starts in the window.
    let from = starts_at(&db, ended).await;
    assert_eq!(
        get(&app, &format!("from={from}")).await.ids(),
        [ended, running, future]
    );
    db.drop().await;
}

#[tokio::test]
async fn from_is_inclusive_and_to_exclusive_in_any_offset() {
    let db = TestDb::new().await;
    let app = db.app();
    let a = slot_at(&db, 10, 1, 1).await;
    let b = slot_at(&db, 11, 1, 1).await;
    let c = slot_at(&db, 12, 1, 1).await;
    let (from, to) = (starts_at(&db, a).await, starts_at(&db, c).await);
    assert_eq!(
        get(&app, &format!("from={from}&to={to}")).await.ids(),
        [a, b]
    );
    // The same instants written with an offset (`+` sent as %2B).
    let shifted = |t: &str| {
        let at = chrono::DateTime::parse_from_rfc3339(t).unwrap();
        let offset = chrono::FixedOffset::east_opt(3600).unwrap();
        at.with_timezone(&offset)
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
            .replace('+', "%2B")
    };
    let shifted = get(
        &app,
        &format!("from={}&to={}", shifted(&from), shifted(&to)),
    )
    .await;
    assert_eq!(shifted.ids(), [a, b]);
    db.drop().await;
}

#[tokio::test]
async fn windows_after_2038_match() {
    let db = TestDb::new().await;
    let app = db.app();
    let far = sqlx::query(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining) \
         VALUES ('2100-06-01 09:00:00', '2100-06-01 10:00:00', 1, 1)",
    )
    .execute(&db.admin)
    .await
    .unwrap()
    .last_insert_id();
    let window = "from=2100-01-01T00:00:00Z&to=2101-01-01T00:00:00Z";
    assert_eq!(get(&app, window).await.ids(), [far]);
    db.drop().await;
}

#[tokio::test]
async fn available_true_lists_only_slots_with_a_seat_left() {
    let db = TestDb::new().await;
    let app = db.app();
    let full = slot_at(&db, 24, 1, 1).await;
    let open = slot_at(&db, 24, 1, 2).await;
    hold_and_confirm(&app, shared::domain::SlotId(full)).await;
    let held = slot_at(&db, 24, 1, 1).await;
    let request = hold_request(&held.to_string(), Some(new_key().as_str()));
    assert_eq!(http::hold(&app, request).await.unwrap().status(), 201);
    assert_eq!(get(&app, "available=true").await.ids(), [open]);
    assert_eq!(get(&app, "available=false").await.ids(), [full, open, held]);
    db.drop().await;
}

#[tokio::test]
async fn pages_follow_next_links_that_keep_filters_and_limit() {
    let db = TestDb::new().await;
    let app = db.app();
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(slot_at(&db, 24 + i, 1, 3).await);
    }
    let first = get(&app, "limit=4").await;
    assert_eq!(first.ids(), ids[..4]);
    let next = first.next().expect("a next link");
    assert!(next.starts_with("limit=4&cursor="), "{next}");
    let (all, pages) = walk(&app, "limit=4").await;
    assert_eq!((all, pages), (ids.clone(), 3));
    // A window: the link keeps from, to and available.
    let (from, to) = (starts_at(&db, ids[1]).await, starts_at(&db, ids[9]).await);
    let query = format!("from={from}&to={to}&available=true&limit=3");
    let page = get(&app, &query).await;
    let link = page.next().unwrap();
    for kept in ["from=", "to=", "available=true", "limit=3", "cursor="] {
        assert!(link.contains(kept), "{link} keeps {kept}");
    }
    assert_eq!(walk(&app, &query).await, (ids[1..9].to_vec(), 3));
    // Exactly a page: no link when nothing more matches.
    let exact = get(&app, "limit=10").await;
    assert_eq!((exact.ids().len(), exact.next()), (10, None));
    db.drop().await;
}

#[tokio::test]
async fn a_cursor_is_bound_to_its_filters_and_must_be_one_the_server_issued() {
    let db = TestDb::new().await;
    let app = db.app();
    for i in 0..3 {
        slot_at(&db, 24 + i, 1, 1).await;
    }
    let next = get(&app, "limit=1").await.next().unwrap();
    let cursor = next.split_once("cursor=").unwrap().1.to_string();
    assert_eq!(get(&app, &format!("cursor={cursor}")).await.ids().len(), 2);
    let other = get(&app, &format!("available=true&cursor={cursor}")).await;
    assert_eq!(other.error_fields(), ["cursor"]);
    assert!(
        other.json()["errors"]["cursor"][0]
            .as_str()
            .unwrap()
            .contains("other")
    );
    let from = get(&app, &format!("from=2026-01-01T00:00:00Z&cursor={cursor}")).await;
    assert_eq!(from.error_fields(), ["cursor"]);
    let mut altered = cursor.clone().into_bytes();
    altered[3] = if altered[3] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for forged in [&cursor[..cursor.len() - 1], altered.as_str(), "AAAA"] {
        let answer = get(&app, &format!("cursor={forged}")).await;
        assert_eq!(answer.error_fields(), ["cursor"], "{forged}");
    }
    db.drop().await;
}

/// A cursor whose checksum holds but whose values the server never issues
/// (the checksum has no secret: anyone can compute it) is a 422, never a
/// 500 from a value the database cannot hold.
#[tokio::test]
async fn a_forged_cursor_with_a_valid_checksum_is_422_or_an_ordinary_page() {
    use shared::slots::cursor::{Cursor, Filters};
    let db = TestDb::new().await;
    let app = db.app();
    slot_at(&db, 24, 1, 1).await;
    let instant = |micros| chrono::DateTime::from_timestamp_micros(micros).unwrap();
    let year = |y: i32| {
        chrono::NaiveDate::from_ymd_opt(y, 1, 1)
            .unwrap()
            .and_time(chrono::NaiveTime::MIN)
            .and_utc()
    };
    let forged = |after, now| {
        Cursor {
            after: shared::domain::SlotId(after),
            now,
        }
        .encode(&Filters::default())
    };
    for now in [
        year(-1),
        year(999),
        year(10_000),
        instant(i64::MAX / 2),
        year(-200_000),
    ] {
        let answer = get(&app, &format!("cursor={}", forged(1, Some(now)))).await;
        assert_eq!(answer.status, 422, "now {now}: {}", answer.json());
        assert_eq!(answer.error_fields(), ["cursor"], "now {now}");
    }
    // In range, however odd: an ordinary page.
    for (after, now) in [(u64::MAX, year(2026)), (0, year(1000)), (1, year(9999))] {
        let answer = get(&app, &format!("cursor={}", forged(after, Some(now)))).await;
        assert_eq!(
            answer.status,
            200,
            "after {after}, now {now}: {}",
            answer.json()
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_walk_without_from_keeps_the_first_pages_now() {
    let db = TestDb::new().await;
    let app = db.app();
    let a = slot_at(&db, -1, 2, 1).await;
    let b = slot_at(&db, 24, 1, 1).await;
    let c = slot_at(&db, 48, 1, 1).await;
    let first = get(&app, "limit=1").await;
    assert_eq!(first.ids(), [a]);
    // Slot b now ends at a moment after the first page was read and
    // before the second is: not ended for the walk (its `now` is the first
    // page's), though ended for a new walk.
    sqlx::query(
        "UPDATE slots SET starts_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, \
         ends_at = UTC_TIMESTAMP(6) WHERE id = ?",
    )
    .bind(b)
    .execute(&db.admin)
    .await
    .unwrap();
    let second = get(&app, &first.next().unwrap()).await;
    assert_eq!(second.ids(), [b]);
    assert_eq!(walk(&app, "limit=1").await.0, [a, c], "a new walk");
    db.drop().await;
}

#[tokio::test]
async fn a_last_page_may_link_to_an_empty_page() {
    let db = TestDb::new().await;
    let app = db.app();
    let a = slot_at(&db, 24, 1, 1).await;
    let b = slot_at(&db, 25, 1, 1).await;
    let first = get(&app, "limit=1").await;
    assert_eq!(first.ids(), [a]);
    let next = first.next().unwrap();
    sqlx::query("DELETE FROM slots WHERE id = ?")
        .bind(b)
        .execute(&db.admin)
        .await
        .unwrap();
    let empty = get(&app, &next).await;
    assert_eq!((empty.ids(), empty.next()), (vec![], None));
    db.drop().await;
}

#[tokio::test]
async fn every_200_has_an_etag_and_if_none_match_gives_a_304_until_the_list_changes() {
    let db = TestDb::new().await;
    let app = db.cached_app(
        &redis_url(),
        CacheSettings {
            timeout: Duration::from_secs(2),
            ..CacheSettings::new(Duration::from_secs(10))
        },
    );
    let slot = slot_at(&db, 24, 1, 2).await;
    slot_at(&db, 25, 1, 2).await;
    for query in ["", "limit=1", "available=true"] {
        let first = get(&app, query).await;
        assert_eq!(first.status, 200);
        let etag = first.header("etag").expect("an ETag").to_string();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "strong: {etag}"
        );
        let weak = format!("W/{etag}");
        for matching in [
            etag.as_str(),
            "*",
            weak.as_str(),
            &format!("\"nope\", {etag}"),
        ] {
            let again = get_with(&app, query, &[("if-none-match", Some(matching))]).await;
            assert_eq!(again.status, 304, "{query:?} {matching}");
            assert!(again.body.is_empty());
            assert_eq!(again.header("etag"), Some(etag.as_str()));
            assert_eq!(
                again.header("link").is_some(),
                first.header("link").is_some()
            );
        }
        let other = get_with(&app, query, &[("if-none-match", Some("\"nope\""))]).await;
        assert_eq!(other.status, 200);
    }
    // A page with more to come is another representation than the last.
    let one = get(&app, "limit=1").await;
    let two = get(&app, "limit=2").await;
    assert_ne!(one.header("etag"), two.header("etag"));
    // A change (a confirm invalidates the cache) changes the ETag.
    let before = get(&app, "").await;
    let etag = before.header("etag").unwrap().to_string();
    hold_and_confirm(&app, shared::domain::SlotId(slot)).await;
    let after = get_with(&app, "", &[("if-none-match", Some(etag.as_str()))]).await;
    assert_eq!(after.status, 200);
    assert_ne!(after.header("etag"), Some(etag.as_str()));
    let cached = get(&app, "").await;
    assert_eq!(cached.header("x-cache"), Some("hit"));
    assert_eq!(cached.header("etag"), after.header("etag"));
    db.drop().await;
}

#[tokio::test]
async fn the_call_without_parameters_is_the_cached_first_page_with_its_link() {
    let db = TestDb::new().await;
    let app = db.cached_app(
        &redis_url(),
        CacheSettings {
            timeout: Duration::from_secs(2),
            ..CacheSettings::new(Duration::from_secs(10))
        },
    );
    let values: Vec<String> = (0..1001)
        .map(|i| format!("(UTC_TIMESTAMP() + INTERVAL {} MINUTE, UTC_TIMESTAMP() + INTERVAL {} MINUTE, 1, 1)", 60 + i, 120 + i))
        .collect();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining) VALUES {}",
        values.join(",")
    )))
    .execute(&db.admin)
    .await
    .unwrap();
    let miss = get(&app, "").await;
    let hit = get(&app, "").await;
    assert_eq!(
        (miss.header("x-cache"), hit.header("x-cache")),
        (Some("miss"), Some("hit"))
    );
    assert_eq!(miss.ids().len(), 1000);
    assert_eq!(hit.body, miss.body);
    assert_eq!(hit.header("etag"), miss.header("etag"));
    assert_eq!(hit.header("link"), miss.header("link"));
    let next = hit.next().expect("more than a page");
    assert!(next.starts_with("limit=1000&cursor="), "{next}");
    let rest = get(&app, &next).await;
    assert_eq!(
        rest.header("x-cache"),
        Some("bypass"),
        "pages are not cached"
    );
    assert_eq!(rest.ids().len(), 1);
    assert_eq!(app.booking.projections_run(), 1);
    db.drop().await;
}

/// Walks with a small limit while another task creates and deletes slots:
/// every slot that existed for the whole walk is seen exactly once, and
/// no id is seen twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_sees_every_lasting_slot_once_while_slots_come_and_go() {
    for round in 0..5 {
        let db = TestDb::new().await;
        let mut lasting = BTreeSet::new();
        for i in 0..60 {
            lasting.insert(slot_at(&db, 24 + i, 1, 2).await);
        }
        let mut doomed = Vec::new();
        for i in 0..30 {
            doomed.push(slot_at(&db, 100 + i, 1, 2).await);
        }
        let churn_db = db.admin.clone();
        let (stop_tx, mut stop) = tokio::sync::oneshot::channel::<()>();
        let churn = tokio::spawn(async move {
            let mut made = 0;
            while stop.try_recv().is_err() {
                sqlx::query(
                    "INSERT INTO slots (starts_at, ends_at, capacity, remaining) VALUES \
                     (UTC_TIMESTAMP() + INTERVAL 30 HOUR, UTC_TIMESTAMP() + INTERVAL 31 HOUR, 1, 1)",
                )
                .execute(&churn_db)
                .await
                .unwrap();
                made += 1;
                if let Some(id) = doomed.pop() {
                    sqlx::query("DELETE FROM slots WHERE id = ?")
                        .bind(id)
                        .execute(&churn_db)
                        .await
                        .unwrap();
                }
                tokio::task::yield_now().await;
            }
            made
        });
        let app = db.app();
        let (seen, pages) = walk(&app, "limit=7").await;
        let windowed = {
            let (from, to) = ("2026-01-01T00:00:00Z", "2100-01-01T00:00:00Z");
            walk(&app, &format!("from={from}&to={to}&limit=7")).await.0
        };
        stop_tx.send(()).unwrap();
        let made = churn.await.unwrap();
        for ids in [&seen, &windowed] {
            let unique: BTreeSet<u64> = ids.iter().copied().collect();
            assert_eq!(unique.len(), ids.len(), "round {round}: an id seen twice");
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "round {round}: in id order"
            );
            assert!(
                lasting.is_subset(&unique),
                "round {round}: missed {:?}",
                lasting.difference(&unique).collect::<Vec<_>>()
            );
        }
        assert!(
            pages >= 9,
            "round {round}: {pages} pages, {made} slots made"
        );
        db.drop().await;
    }
}

/// `count` slots of an hour, the first starting `start_minutes` from now
/// and each a minute after the last, in one statement per thousand.
async fn slots_from(db: &TestDb, start_minutes: i64, count: usize) -> Vec<u64> {
    let mut ids = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(1000) {
        let mut insert = sqlx::QueryBuilder::<sqlx::MySql>::new(
            "INSERT INTO slots (starts_at, ends_at, capacity, remaining) ",
        );
        insert.push_values(chunk, |mut row, i| {
            let at = start_minutes + *i as i64;
            row.push(format!("UTC_TIMESTAMP(6) + INTERVAL {at} MINUTE"))
                .push(format!("UTC_TIMESTAMP(6) + INTERVAL {} MINUTE", at + 60))
                .push("1")
                .push("1");
        });
        let first = insert
            .build()
            .execute(&db.admin)
            .await
            .unwrap()
            .last_insert_id();
        ids.extend(first..first + chunk.len() as u64);
    }
    ids
}

/// A window with more index entries than the scan limit is walked along
/// the primary key, a range of `AVAILABILITY_SCAN_LIMIT` ids a page: below
/// it lie 20,000 ended slots that the not-ended default must not list (its
/// first pages examine them and come back empty, with `next`) and the
/// window must. Slots come and go meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_window_is_walked_along_the_primary_key_and_sees_every_lasting_slot_once() {
    use shared::slots::availability::DEFAULT_SCAN;
    let db = TestDb::new().await;
    let ended = slots_from(&db, -30 * 24 * 60, 20_000).await;
    let live = slots_from(&db, 24 * 60, DEFAULT_SCAN as usize + 2_000).await;
    let doomed: Vec<u64> = live.iter().copied().step_by(97).collect();
    let lasting: BTreeSet<u64> = live
        .iter()
        .copied()
        .filter(|id| !doomed.contains(id))
        .collect();
    let churn_db = db.admin.clone();
    let (stop_tx, mut stop) = tokio::sync::oneshot::channel::<()>();
    let churn = tokio::spawn(async move {
        let mut doomed = doomed;
        while stop.try_recv().is_err() {
            sqlx::query(
                "INSERT INTO slots (starts_at, ends_at, capacity, remaining) VALUES \
                 (UTC_TIMESTAMP() + INTERVAL 30 HOUR, UTC_TIMESTAMP() + INTERVAL 31 HOUR, 1, 1)",
            )
            .execute(&churn_db)
            .await
            .unwrap();
            if let Some(id) = doomed.pop() {
                sqlx::query("DELETE FROM slots WHERE id = ?")
                    .bind(id)
                    .execute(&churn_db)
                    .await
                    .unwrap();
            }
            tokio::task::yield_now().await;
        }
    });
    let app = db.app();
    let not_ended = walk(&app, "limit=1000").await.0;
    let windowed = {
        let (from, to) = ("2026-01-01T00:00:00Z", "2100-01-01T00:00:00Z");
        let all = walk(&app, &format!("from={from}&to={to}&limit=1000"))
            .await
            .0;
        // This window holds the ended slots too: the first page starts at
        // the oldest of them.
        assert_eq!(all.first(), ended.first(), "the window's first slot");
        all
    };
    stop_tx.send(()).unwrap();
    churn.await.unwrap();
    let ended: BTreeSet<u64> = ended.into_iter().collect();
    for (name, ids) in [("not ended", &not_ended), ("window", &windowed)] {
        let unique: BTreeSet<u64> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "{name}: an id seen twice");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{name}: in id order");
        assert!(
            lasting.is_subset(&unique),
            "{name}: missed {} lasting slots, e.g. {:?}",
            lasting.difference(&unique).count(),
            lasting.difference(&unique).take(3).collect::<Vec<_>>()
        );
    }
    assert!(
        not_ended.iter().all(|id| !ended.contains(id)),
        "an ended slot listed as not ended"
    );
    assert!(
        ended.iter().all(|id| windowed.contains(id)),
        "the window lists its ended slots"
    );
    db.drop().await;
}
