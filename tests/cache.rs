//! The availability cache against the real Redis and MariaDB: hits,
//! single-flight, stale copy, bounded wait, invalidation, and a cache that
//! is down, hanging or full of garbage.

use futures::future::join_all;
use lambda_http::{Body, Response};
use serde_json::Value;
use shared::App;
use shared::cache::CacheSettings;
use shared::http;
use slot_booking_tests::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

/// The SPEC's settings, with a roomier command timeout: on a loaded
/// 2-core CI machine a slow answer must not pass for a dead cache here
/// (the dead and hanging cache tests keep the production timeout).
fn settings(ttl: Duration) -> CacheSettings {
    CacheSettings {
        timeout: Duration::from_secs(2),
        ..CacheSettings::new(ttl)
    }
}

/// Body, `X-Cache` and `Age` of an availability response.
async fn get(app: &App) -> (Vec<Value>, String, u64) {
    let response = http::availability(app, availability_request())
        .await
        .unwrap();
    served(response)
}

fn served(response: Response<Body>) -> (Vec<Value>, String, u64) {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (x_cache, age) = (
        header("x-cache"),
        header("age").parse().expect("Age header"),
    );
    let (status, body) = read(response);
    assert_eq!(status, 200, "{body}");
    (body.as_array().expect("array").clone(), x_cache, age)
}

fn remaining(list: &[Value], slot: u64) -> u64 {
    list.iter().find(|s| s["slot_id"] == slot).unwrap()["remaining"]
        .as_u64()
        .unwrap()
}

async fn redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("redis")
}

async fn hold_one(app: &App, slot: u64) -> Value {
    let (status, body) = read(
        http::hold(
            app,
            hold_request(&slot.to_string(), Some(&new_key().to_string())),
        )
        .await
        .unwrap(),
    );
    assert_eq!(status, 201, "{body}");
    body
}

#[tokio::test]
async fn a_second_read_is_a_hit_that_serves_the_stored_bytes_without_a_query() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(4).await;
    let app = db.cached_app(&redis_url(), settings(Duration::from_secs(10)));
    let (first, status, _) = get(&app).await;
    assert_eq!(status, "miss");
    assert_eq!(remaining(&first, slot.0), 4);
    let (second, status, age) = get(&app).await;
    assert_eq!((status.as_str(), age), ("hit", 0));
    assert_eq!(first, second);
    assert_eq!(
        app.booking.projections_run(),
        1,
        "the hit ran no projection"
    );
    db.drop().await;
}

#[tokio::test]
async fn the_loser_of_the_recompute_race_serves_the_stale_copy_without_touching_the_database() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(4).await;
    let keys = db.cache_keys();
    let owner = db.cached_app(&redis_url(), settings(Duration::from_secs(10)));
    get(&owner).await; // fills fresh and stale
    let mut r = redis().await;
    let _: () = redis::cmd("DEL")
        .arg(&keys.fresh)
        .query_async(&mut r)
        .await
        .unwrap();
    // Another environment is recomputing right now.
    let _: () = redis::cmd("SET")
        .arg(&keys.lock)
        .arg("someone-else")
        .arg("PX")
        .arg(5000)
        .query_async(&mut r)
        .await
        .unwrap();
    let loser = db.cached_app(&redis_url(), settings(Duration::from_secs(10)));
    let (list, status, _) = get(&loser).await;
    assert_eq!(status, "stale");
    assert_eq!(remaining(&list, slot.0), 4);
    assert_eq!(loser.booking.projections_run(), 0);
    assert_eq!(
        loser.booking.pool().size(),
        0,
        "the loser never even opened a connection"
    );
    let owner_token: String = redis::cmd("GET")
        .arg(&keys.lock)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(
        owner_token, "someone-else",
        "a loser never releases another's lock"
    );
    db.drop().await;
}

/// Runs `n` readers, each its own environment with a lazily connected
/// pool, released together; returns how many of them touched the
/// database, how many projections ran, and every reader's list.
async fn stampede(db: &TestDb, n: usize) -> (usize, u64, Vec<(Vec<Value>, String)>) {
    let apps: Vec<App> = (0..n)
        .map(|_| db.cached_app(&redis_url(), settings(Duration::from_secs(10))))
        .collect();
    // Open each cache connection first, as a warm Lambda would have it.
    for app in &apps {
        assert!(app.booking.cache().unwrap().ping().await);
    }
    let barrier = Arc::new(Barrier::new(n));
    let tasks = apps.iter().cloned().map(|app| {
        let barrier = barrier.clone();
        tokio::spawn(async move {
            barrier.wait().await;
            let (list, status, _) = get(&app).await;
            (list, status)
        })
    });
    let results: Vec<(Vec<Value>, String)> = join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let connected = apps.iter().filter(|a| a.booking.pool().size() > 0).count();
    let projections = apps.iter().map(|a| a.booking.projections_run()).sum();
    (connected, projections, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_hundred_parallel_readers_on_a_cold_cache_cause_one_projection_query() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(7).await;
    let (connected, projections, results) = stampede(&db, 100).await;
    println!("cold stampede: {projections} projection(s), {connected} connection(s)");
    assert_eq!((projections, connected), (1, 1));
    assert!(
        results.iter().all(|(list, _)| remaining(list, slot.0) == 7),
        "every reader is right"
    );
    assert_eq!(results.iter().filter(|(_, s)| s == "miss").count(), 1);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_hundred_parallel_readers_after_an_invalidation_cause_one_projection_query() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(7).await;
    let writer = db.cached_app(&redis_url(), settings(Duration::from_secs(10)));
    let held = hold_one(&writer, slot.0).await;
    assert_eq!(remaining(&get(&writer).await.0, slot.0), 6);
    // Confirming invalidates both copies: the cache is cold again.
    assert_eq!(
        read(
            http::confirm(&writer, confirm_request(&id_of(&held)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    let (connected, projections, results) = stampede(&db, 100).await;
    println!("stampede after invalidation: {projections} projection(s), {connected} connection(s)");
    assert_eq!((projections, connected), (1, 1));
    assert!(results.iter().all(|(list, _)| remaining(list, slot.0) == 6));
    db.drop().await;
}

#[tokio::test]
async fn a_hold_does_not_invalidate_but_the_ttl_expiry_shows_it() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    let app = db.cached_app(&redis_url(), settings(Duration::from_millis(1500)));
    assert_eq!(remaining(&get(&app).await.0, slot.0), 3);
    hold_one(&app, slot.0).await;
    let (list, status, _) = get(&app).await;
    assert_eq!(
        (remaining(&list, slot.0), status.as_str()),
        (3, "hit"),
        "within the TTL"
    );
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let (list, _, _) = get(&app).await;
    assert_eq!(remaining(&list, slot.0), 2, "after the TTL the hold shows");
    db.drop().await;
}

#[tokio::test]
async fn confirm_and_cancel_show_up_in_the_very_next_read() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    let app = db.cached_app(&redis_url(), settings(Duration::from_secs(15)));
    let held = hold_one(&app, slot.0).await;
    let other = hold_one(&app, slot.0).await;
    assert_eq!(remaining(&get(&app).await.0, slot.0), 1);
    assert_eq!(
        read(
            http::cancel(&app, cancel_request(&id_of(&other)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    assert_eq!(
        remaining(&get(&app).await.0, slot.0),
        2,
        "cancel of a hold shows at once"
    );
    assert_eq!(
        read(
            http::confirm(&app, confirm_request(&id_of(&held)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    get(&app).await;
    assert_eq!(db.slot(slot).await, (3, 2));
    assert_eq!(
        read(
            http::cancel(&app, cancel_request(&id_of(&held)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    let (list, status, _) = get(&app).await;
    assert_eq!((remaining(&list, slot.0), status.as_str()), (3, "miss"));
    db.drop().await;
}

#[tokio::test]
async fn a_dead_lock_owner_holds_nobody_up_for_longer_than_its_lock() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    let keys = db.cache_keys();
    let mut r = redis().await;
    // An owner took the lock and died mid-recompute: no fresh, no stale.
    let _: () = redis::cmd("SET")
        .arg(&keys.lock)
        .arg("dead-owner")
        .arg("PX")
        .arg(600)
        .query_async(&mut r)
        .await
        .unwrap();
    let app = db.cached_app(
        &redis_url(),
        CacheSettings {
            cold_wait: Duration::from_millis(300),
            ..CacheSettings::new(Duration::from_secs(10))
        },
    );
    let started = Instant::now();
    let (list, status, _) = get(&app).await;
    let waited = started.elapsed();
    assert_eq!(
        (remaining(&list, slot.0), status.as_str()),
        (5, "miss"),
        "read the database itself"
    );
    assert!(
        waited >= Duration::from_millis(300),
        "it waited for the owner first: {waited:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await; // the dead owner's lock expires
    let (_, status, _) = get(&app).await;
    assert_eq!(
        status, "miss",
        "the next reader won the lock and recomputed"
    );
    let (_, status, _) = get(&app).await;
    assert_eq!(status, "hit", "and stored the result");
    db.drop().await;
}

#[tokio::test]
async fn garbage_in_the_cache_is_ignored_and_replaced() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let keys = db.cache_keys();
    let mut r = redis().await;
    for garbage in ["not json at all", "123\n{\"a\":1}", "\u{0}\u{1}"] {
        let _: () = redis::cmd("SET")
            .arg(&keys.fresh)
            .arg(garbage)
            .query_async(&mut r)
            .await
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(&keys.stale)
            .arg(garbage)
            .query_async(&mut r)
            .await
            .unwrap();
        let app = db.cached_app(&redis_url(), settings(Duration::from_secs(10)));
        let (list, status, _) = get(&app).await;
        assert_eq!((remaining(&list, slot.0), status.as_str()), (2, "miss"));
    }
    db.drop().await;
}

/// A listener that accepts connections and never answers.
async fn hanging_redis() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket); // keep it open, say nothing
        }
    });
    (url, task)
}

async fn closed_port() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

async fn a_broken_cache_never_breaks_reads_or_writes(url: &str) {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    let app = db.cached_app(url, CacheSettings::new(Duration::from_secs(10)));
    let held = hold_one(&app, slot.0).await;
    let other = hold_one(&app, slot.0).await;
    for _ in 0..3 {
        let started = Instant::now();
        let (list, status, _) = get(&app).await;
        assert_eq!((remaining(&list, slot.0), status.as_str()), (1, "bypass"));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "bounded: {:?}",
            started.elapsed()
        );
    }
    let started = Instant::now();
    assert_eq!(
        read(
            http::confirm(&app, confirm_request(&id_of(&held)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    assert_eq!(
        read(
            http::cancel(&app, cancel_request(&id_of(&other)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "writes bounded: {:?}",
        started.elapsed()
    );
    assert_eq!(remaining(&get(&app).await.0, slot.0), 2);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn with_the_cache_down_availability_comes_from_the_database_and_writes_succeed() {
    a_broken_cache_never_breaks_reads_or_writes(&closed_port().await).await;
}

#[tokio::test]
async fn with_the_cache_hanging_every_request_is_bounded_and_still_answers() {
    let (url, listener) = hanging_redis().await;
    a_broken_cache_never_breaks_reads_or_writes(&url).await;
    listener.abort();
}
