//! One deadline per request, and an invalidation that cannot be lost.
//!
//! Every handler answers before the invocation's deadline (503
//! `service_unavailable` if it must), whatever the database does; a
//! confirm or cancel whose commit may have happened unseen still
//! invalidates the availability cache.

use lambda_http::{Request, RequestExt};
use serde_json::Value;
use shared::App;
use shared::cache::CacheSettings;
use shared::domain::SlotId;
use shared::http;
use slot_booking_tests::proxy::{Mode, Proxy};
use slot_booking_tests::*;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `request` as Lambda hands it over: with a context whose deadline is
/// `left` from now.
fn with_deadline(request: Request, left: Duration) -> Request {
    let deadline = SystemTime::now() + left;
    let mut context = lambda_runtime::Context::default();
    context.request_id = "test".into();
    context.deadline =
        u64::try_from(deadline.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
    request.with_lambda_context(context)
}

/// Every endpoint, with the database gone silent (connections accepted,
/// never answered): each answers 503 before its Lambda deadline, though
/// the service's own default budget (8 s) is far longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_database_silent_every_endpoint_answers_503_before_the_lambda_deadline() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let proxy = Proxy::start().await;
    let app = db.app_through(&proxy);
    let (status, held) = hold_new(&app, slot).await;
    assert_eq!(status, 201);
    proxy.set(Mode::Blackhole).await;
    let left = Duration::from_millis(1500);
    let id = id_of(&held);
    for (name, request) in [
        ("availability", availability_request()),
        (
            "hold",
            hold_request(&slot.0.to_string(), Some(&new_key().to_string())),
        ),
        ("confirm", confirm_request(&id)),
        ("cancel", cancel_request(&id)),
    ] {
        let request = with_deadline(request, left);
        let started = Instant::now();
        let response = match name {
            "availability" => http::availability(&app, request).await,
            "hold" => http::hold(&app, request).await,
            "confirm" => http::confirm(&app, request).await,
            _ => http::cancel(&app, request).await,
        }
        .unwrap();
        let took = started.elapsed();
        let (status, body) = read(response);
        assert_eq!(status, 503, "{name}: {body}");
        assert_eq!(body["reason"], "service_unavailable");
        assert!(took < left, "{name} answered after its deadline: {took:?}");
    }
    proxy.set(Mode::Up).await;
    db.drop().await;
}

/// A hold with a fresh key.
async fn hold_new(app: &App, slot: SlotId) -> (u16, Value) {
    let request = hold_request(&slot.0.to_string(), Some(&new_key().to_string()));
    read(http::hold(app, request).await.unwrap())
}

fn settings() -> CacheSettings {
    CacheSettings {
        timeout: Duration::from_secs(2),
        ..CacheSettings::new(Duration::from_secs(15))
    }
}

async fn listed_remaining(app: &App, slot: SlotId) -> (u64, String) {
    let response = http::availability(app, availability_request())
        .await
        .unwrap();
    let x_cache = response
        .headers()
        .get("x-cache")
        .map(|v| v.to_str().unwrap().to_string());
    let (status, body) = read(response);
    assert_eq!(status, 200, "{body}");
    let x_cache = x_cache.expect("X-Cache");
    let row: &Value = body
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["slot_id"] == slot.0)
        .unwrap();
    (row["remaining"].as_u64().unwrap(), x_cache)
}

/// A confirm whose request died after its COMMIT, before its invalidation
/// (a Lambda killed at its timeout): the client's retry finds the hold
/// already confirmed; that answer must invalidate, or the cache shows the
/// seat as free for a whole TTL and a stale copy for six.
#[tokio::test]
async fn a_retry_that_finds_the_hold_already_confirmed_still_invalidates_the_cache() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let cached = db.cached_app(&redis_url(), settings());
    let (_, held) = hold_new(&cached, slot).await;
    // The first attempt: committed, its invalidation lost (an environment
    // without the cache stands for the one that died).
    let died = db.app();
    assert_eq!(listed_remaining(&cached, slot).await.0, 1);
    assert_eq!(
        read(
            http::confirm(&died, confirm_request(&id_of(&held)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    assert_eq!(
        listed_remaining(&cached, slot).await,
        (1, "hit".into()),
        "the cache still has the figures from before the confirm"
    );
    // The retry.
    assert_eq!(
        read(
            http::confirm(&cached, confirm_request(&id_of(&held)))
                .await
                .unwrap()
        )
        .0,
        200
    );
    let (remaining, x_cache) = listed_remaining(&cached, slot).await;
    assert_eq!((remaining, x_cache.as_str()), (1, "miss"));
    assert_eq!(db.slot(slot).await, (2, 1), "one seat sold, one free");
    db.drop().await;
}

/// A cancel that ran out of time may have committed: it answers 503 and
/// invalidates all the same.
#[tokio::test]
async fn a_cancel_that_ran_out_of_time_still_invalidates_the_cache() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(2).await;
    let cached = db.cached_app(&redis_url(), settings());
    let (_, held) = hold_new(&cached, slot).await;
    assert_eq!(listed_remaining(&cached, slot).await, (1, "miss".into()));
    assert_eq!(listed_remaining(&cached, slot).await, (1, "hit".into()));
    // Less time than the reserve the invalidation keeps back.
    let request = with_deadline(cancel_request(&id_of(&held)), Duration::from_millis(600));
    let (status, body) = read(http::cancel(&cached, request).await.unwrap());
    assert_eq!(status, 503, "{body}");
    let (_, x_cache) = listed_remaining(&cached, slot).await;
    assert_eq!(
        x_cache, "miss",
        "invalidated although the outcome is unknown"
    );
    db.drop().await;
}

/// A request cut by its deadline mid-operation must not leave its
/// connection behind: the environment's next requests are served at once.
/// (An abandoned connection returned to sqlx's pool is pinged on its way
/// back; the ping could wait for ever and hold the environment's only
/// connection, so every later request waited 3 s and answered 503.)
#[tokio::test]
async fn after_a_request_cut_by_its_deadline_the_next_ones_are_served() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(10).await;
    let cached = db.cached_app(&redis_url(), settings());
    for round in 0..5 {
        let (status, held) = hold_new(&cached, slot).await;
        assert_eq!(status, 201, "round {round}: {held}");
        let cut = with_deadline(cancel_request(&id_of(&held)), Duration::from_millis(600));
        let (status, body) = read(http::cancel(&cached, cut).await.unwrap());
        assert_eq!(status, 503, "round {round}: {body}");
        listed_remaining(&cached, slot).await;
    }
    db.assert_invariants().await;
    db.drop().await;
}
