//! What a dead cache costs, on real sockets: a listener that accepts and
//! never answers, a closed port, and a proxy in front of the real Redis
//! whose network is cut and restored. The assertions count contacts
//! (connections the listener accepted, connects the client tried) and
//! where each read was served from, never how long anything took.

use futures::future::join_all;
use serde_json::Value;
use shared::App;
use shared::cache::CacheSettings;
use shared::http;
use slot_booking_tests::proxy::{Mode, Proxy};
use slot_booking_tests::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3_600);

/// A listener that accepts connections and never answers; the first
/// `close_first` of them it closes at once instead. Counts what it
/// accepted.
async fn silent_listener(close_first: usize) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            if count.fetch_add(1, Ordering::SeqCst) >= close_first {
                open.push(socket); // keep it open, say nothing
            }
        }
    });
    (url, accepted)
}

async fn closed_port() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

/// `remaining` of `slot` and the `X-Cache` header of one read.
async fn read_once(app: &App, slot: u64) -> (u64, String) {
    let response = http::availability(app, availability_request())
        .await
        .unwrap();
    let x_cache = response.headers()["x-cache"].to_str().unwrap().to_string();
    let (status, body) = read(response);
    assert_eq!(status, 200, "{body}");
    let remaining = body
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["slot_id"] == slot)
        .unwrap()["remaining"]
        .as_u64()
        .unwrap();
    (remaining, x_cache)
}

async fn hold_one(app: &App, slot: u64) -> Value {
    let request = hold_request(&slot.to_string(), Some(&new_key().to_string()));
    let (status, body) = read(http::hold(app, request).await.unwrap());
    assert_eq!(status, 201, "{body}");
    body
}

/// A confirm and a cancel, both answered 200.
async fn confirm_and_cancel(app: &App, slot: u64) {
    let (confirmed, cancelled) = (hold_one(app, slot).await, hold_one(app, slot).await);
    let confirm = http::confirm(app, confirm_request(&id_of(&confirmed)));
    assert_eq!(read(confirm.await.unwrap()).0, 200);
    let cancel = http::cancel(app, cancel_request(&id_of(&cancelled)));
    assert_eq!(read(cancel.await.unwrap()).0, 200);
}

/// A window longer than the test: after its first failure the cache is
/// never tried again.
fn one_window(timeout: Duration) -> CacheSettings {
    CacheSettings {
        timeout,
        backoff: HOUR,
        ..CacheSettings::new(Duration::from_secs(10))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hanging_cache_is_contacted_once_then_reads_and_writes_go_to_the_database() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(20).await;
    let (url, accepted) = silent_listener(0).await;
    let app = db.cached_app(&url, one_window(Duration::from_millis(100)));
    // Ten reads at once on a cold environment: one connect among them.
    let first = join_all((0..10).map(|_| read_once(&app, slot.0))).await;
    assert!(
        first.iter().all(|r| r == &(20, "bypass".into())),
        "{first:?}"
    );
    for _ in 0..20 {
        assert_eq!(read_once(&app, slot.0).await, (20, "bypass".into()));
    }
    confirm_and_cancel(&app, slot.0).await;
    assert_eq!(read_once(&app, slot.0).await, (19, "bypass".into()));
    assert_eq!(
        app.booking.projections_run(),
        31,
        "every read was served from the database"
    );
    assert_eq!(
        (
            accepted.load(Ordering::SeqCst),
            app.booking.cache().unwrap().connects()
        ),
        (1, 1),
        "the hanging cache was contacted once, by the first read"
    );
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_refusing_cache_is_tried_once_per_window_and_writes_do_not_try_it() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(5).await;
    let app = db.cached_app(&closed_port().await, one_window(Duration::from_millis(100)));
    for _ in 0..20 {
        assert_eq!(read_once(&app, slot.0).await, (5, "bypass".into()));
    }
    confirm_and_cancel(&app, slot.0).await;
    assert_eq!(read_once(&app, slot.0).await, (4, "bypass".into()));
    assert_eq!(app.booking.projections_run(), 21);
    assert_eq!(app.booking.cache().unwrap().connects(), 1);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_never_wait_for_the_probe_and_one_probe_runs_at_a_time() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    // The first connection is closed at once (the first read fails fast);
    // the probe's is held unanswered, and with an hour's timeout it
    // cannot finish during the test.
    let (url, accepted) = silent_listener(1).await;
    let app = db.cached_app(
        &url,
        CacheSettings {
            timeout: HOUR,
            backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(1),
            ..CacheSettings::new(Duration::from_secs(10))
        },
    );
    assert_eq!(read_once(&app, slot.0).await, (3, "bypass".into()));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(20)).await; // the 1 ms window passes
    assert_eq!(read_once(&app, slot.0).await, (3, "bypass".into()));
    for _ in 0..500 {
        if accepted.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "the probe connected");
    // Only a guard against a hang: a read that waited for this probe would
    // wait an hour.
    let reads = async {
        for _ in 0..10 {
            assert_eq!(read_once(&app, slot.0).await, (3, "bypass".into()));
        }
        confirm_and_cancel(&app, slot.0).await;
    };
    tokio::time::timeout(Duration::from_secs(60), reads)
        .await
        .expect("requests went on while the probe hung");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "no second probe while the first is in flight, though the window is long over"
    );
    db.drop().await;
}

#[tokio::test]
async fn an_invalidation_missed_while_the_cache_was_down_is_sent_before_it_is_used_again() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(3).await;
    let redis = redis::Client::open(redis_url()).unwrap();
    let info = redis.get_connection_info().addr().to_string();
    let (host, port) = info.rsplit_once(':').expect("host:port");
    let proxy = Proxy::start_to(host, port.parse().unwrap()).await;
    let app = db.cached_app(
        &format!("redis://{}", proxy.addr()),
        CacheSettings {
            timeout: Duration::from_secs(2),
            backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(1),
            ..CacheSettings::new(Duration::from_secs(15))
        },
    );
    let held = hold_one(&app, slot.0).await;
    assert_eq!(read_once(&app, slot.0).await, (2, "miss".into()));
    assert_eq!(read_once(&app, slot.0).await, (2, "hit".into()));

    proxy.set(Mode::Refuse).await;
    let cancel = http::cancel(&app, cancel_request(&id_of(&held)));
    assert_eq!(read(cancel.await.unwrap()).0, 200, "the cancel committed");
    assert_eq!(read_once(&app, slot.0).await, (3, "bypass".into()));
    proxy.set(Mode::Up).await;

    // Reads bypass the cache until a probe gets through; the first one
    // served from it must not be the pre-cancel copy (fresh for 15 s).
    let mut served = (0, "bypass".to_string());
    for _ in 0..500 {
        served = read_once(&app, slot.0).await;
        if served.1 != "bypass" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(served, (3, "miss".into()));
    assert_eq!(read_once(&app, slot.0).await, (3, "hit".into()));
    db.drop().await;
}
