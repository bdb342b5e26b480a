//! Per-client rate limits (SPEC §8) on the real Redis: a client over its
//! rate gets 429 `rate_limited` with `Retry-After`, whichever environment
//! it reaches; other clients are not affected; the cache down → no limit.

use lambda_http::{Body, Request, Response};
use shared::clients::Role;
use shared::{App, http};
use slot_booking_tests::keys::{TestClient, authorized};
use slot_booking_tests::*;
use std::time::{Duration, Instant};

/// Status and `Retry-After` of one request, alternating availability (the
/// cache hit's one-script path) and holds (the separate check).
async fn send(app: &App, client: &TestClient, i: usize, slot: u64) -> (u16, Option<u64>) {
    let bearer = Some(client.bearer());
    let response: Response<Body> = if i.is_multiple_of(2) {
        http::availability(app, authorized(availability_request(), bearer.as_deref())).await
    } else {
        let request: Request = hold_request(&slot.to_string(), Some(new_key().as_str()));
        http::hold(app, authorized(request, bearer.as_deref())).await
    }
    .unwrap();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse::<u64>().expect("whole seconds"));
    let status = response.status().as_u16();
    if status == 429 {
        let (_, body) = read(response);
        assert_eq!(body["reason"], "rate_limited");
    }
    (status, retry_after)
}

/// `count` requests from `client` spread evenly over `over`, round robin
/// over the environments.
async fn burst(
    apps: &[App],
    client: &TestClient,
    count: usize,
    over: Duration,
    slot: u64,
) -> Vec<(u16, Option<u64>)> {
    let start = tokio::time::Instant::now();
    let mut answers = Vec::with_capacity(count);
    for i in 0..count {
        tokio::time::sleep_until(start + over * i as u32 / count as u32).await;
        answers.push(send(&apps[i % apps.len()], client, i, slot).await);
    }
    answers
}

async fn environments(db: &TestDb, redis: &str, n: usize) -> Vec<App> {
    let apps: Vec<App> = (0..n).map(|_| db.keyed_cached_app(redis, 20)).collect();
    for app in &apps {
        warm(app).await;
    }
    apps
}

#[tokio::test]
async fn a_client_at_5_per_second_sending_50_in_a_second_is_refused_the_excess_and_others_are_not()
{
    let db = TestDb::new().await;
    let slot = db.insert_slot(1_000).await.0;
    let limited = db.client("limited", Role::Booker, Some(5)).await;
    let bystander = db.client("bystander", Role::Booker, None).await; // default 20/s
    let apps = environments(&db, &redis_url(), 10).await;

    let started = Instant::now();
    let (limited_answers, bystander_answers) = tokio::join!(
        burst(&apps, &limited, 50, Duration::from_secs(1), slot),
        burst(&apps, &bystander, 20, Duration::from_secs(1), slot),
    );
    let elapsed = started.elapsed().as_secs_f64();
    let admitted = limited_answers.iter().filter(|(s, _)| *s < 300).count();
    let refused: Vec<_> = limited_answers.iter().filter(|(s, _)| *s == 429).collect();
    // A full bucket of 2 × 5, then 5 a second: about 15 of 50.
    let most = 10 + (5.0 * elapsed).ceil() as usize + 1;
    println!(
        "5/s client: {admitted} of 50 admitted, {} refused, in {elapsed:.2} s",
        refused.len()
    );
    assert!(
        (10..=most).contains(&admitted),
        "admitted {admitted} of 50 in {elapsed:.2} s (at most {most}): {limited_answers:?}"
    );
    assert_eq!(
        admitted + refused.len(),
        50,
        "only 2xx or 429: {limited_answers:?}"
    );
    for (_, retry_after) in &refused {
        let retry_after = retry_after.expect("a 429 carries Retry-After");
        assert!((1..=2).contains(&retry_after), "Retry-After {retry_after}");
    }
    assert!(
        bystander_answers.iter().all(|(s, _)| *s < 300),
        "another client is not limited by the first: {bystander_answers:?}"
    );
    // Waiting as told is enough for the next request to pass.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(send(&apps[0], &limited, 0, slot).await.0 < 300);
    db.drop().await;
}

#[tokio::test]
async fn an_unlimited_client_and_a_dead_cache_are_never_limited() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(1_000).await.0;
    let unlimited = db.client("unlimited", Role::Booker, Some(0)).await;
    let limited = db.client("limited", Role::Booker, Some(1)).await;
    let apps = environments(&db, &redis_url(), 4).await;
    let answers = burst(&apps, &unlimited, 60, Duration::from_millis(500), slot).await;
    assert!(answers.iter().all(|(s, _)| *s < 300), "{answers:?}");

    // The cache down: fail open, whatever the client's rate.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("redis://{}", listener.local_addr().unwrap());
    drop(listener); // nothing listens there now
    let apps = environments(&db, &dead, 4).await;
    let answers = burst(&apps, &limited, 30, Duration::from_millis(300), slot).await;
    assert!(
        answers.iter().all(|(s, _)| *s < 300),
        "no 429 while the cache is down: {answers:?}"
    );
    db.drop().await;
}

#[tokio::test]
async fn leased_tokens_never_let_a_fast_client_past_its_limit() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(10_000).await.0;
    // 100/s: a burst of 200, leases of 5 tokens per environment.
    let fast = db.client("fast", Role::Booker, Some(100)).await;
    let apps = environments(&db, &redis_url(), 10).await;
    let started = Instant::now();
    let answers = burst(&apps, &fast, 600, Duration::from_secs(1), slot).await;
    let elapsed = started.elapsed().as_secs_f64();
    let admitted = answers.iter().filter(|(s, _)| *s < 300).count();
    let most = 200 + (100.0 * elapsed).ceil() as usize;
    println!("100/s client: {admitted} of 600 admitted in {elapsed:.2} s (limit {most})");
    assert!(
        admitted <= most,
        "{admitted} admitted, the limit allows {most}"
    );
    // Lost tokens: at most 4 per environment and lease lifetime (on a
    // machine slow enough to stretch the burst, that bound says nothing:
    // saturating, not an overflow).
    let least = (200 + (100.0 * elapsed) as usize)
        .saturating_sub(4 * 10 * (elapsed / 0.25).ceil() as usize);
    assert!(
        admitted >= least,
        "{admitted} admitted, at least {least} expected"
    );
    assert!(
        answers.iter().all(|(s, _)| *s < 300 || *s == 429),
        "{answers:?}"
    );
    db.drop().await;
}

/// A fast client whose requests are spread over many quiet environments
/// keeps its whole rate: each environment sends one request a round, and
/// rounds are further apart than a lease lives. With a fixed lease every
/// such request took `rate / 20` tokens from the bucket, so thirty
/// environments of a 400/s client were refused at about 100/s.
#[tokio::test]
async fn a_fast_client_on_many_quiet_environments_is_not_refused_below_its_rate() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(10_000).await.0;
    // 400/s: a burst of 800, leases of at most 20 tokens.
    let spread = db.client("spread", Role::Booker, Some(400)).await;
    let apps = environments(&db, &redis_url(), 30).await;
    let started = Instant::now();
    let mut answers = Vec::new();
    for round in 0..5 {
        for (i, app) in apps.iter().enumerate() {
            answers.push(send(app, &spread, round * apps.len() + i, slot).await);
        }
        // Past the lease lifetime (250 ms): every lease has expired.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let refused = answers.iter().filter(|(s, _)| *s == 429).count();
    println!(
        "400/s client on 30 quiet environments: {} requests in {elapsed:.2} s, {refused} refused",
        answers.len()
    );
    assert_eq!(refused, 0, "well under 400/s: {answers:?}");
    assert!(answers.iter().all(|(s, _)| *s < 300), "{answers:?}");
    db.drop().await;
}
