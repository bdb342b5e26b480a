//! The publisher's trigger after a commit (`events::PublishTrigger`)
//! against a stand-in of Lambda's Invoke API: asynchronous (`Event`)
//! invokes of the named function, only after a route that wrote events
//! answered 2xx, at most one a second, and never in the caller's way, even
//! when Lambda cannot be reached.

use shared::events::PublishTrigger;
use slot_booking_tests::moto::{free_port, sdk};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The request line and the invocation-type header of every call.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// Answers every request 202 (Lambda's answer to an `Event` invoke).
async fn stand_in() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let line = head.lines().next().unwrap_or_default().to_string();
                let kind = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("x-amz-invocation-type")
                            .then(|| value.trim().to_string())
                    })
                    .unwrap_or_default();
                log.lock().unwrap().push((line, kind));
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    (url, seen)
}

async fn trigger(endpoint: &str) -> PublishTrigger {
    let client = aws_sdk_lambda::Client::new(&sdk(endpoint).await);
    PublishTrigger::new(client, "sb-events-publish")
}

#[tokio::test]
async fn a_change_invokes_the_publisher_at_most_once_a_second() {
    let (url, seen) = stand_in().await;
    let trigger = trigger(&url).await;
    // Not a change, or a refused one: no invoke.
    assert!(!trigger.after("GET /slots/availability", 200));
    assert!(!trigger.after("GET /events", 200));
    assert!(!trigger.after("POST /slots/{id}/hold", 409));
    // A change: one invoke; more within the second: none.
    assert!(trigger.after("POST /slots/{id}/hold", 201));
    assert!(!trigger.after("POST /holds/{id}/confirm", 200));
    assert!(!trigger.clone().after("DELETE /holds/{id}", 200));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(trigger.after("PATCH /slots/{id}", 200));

    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (line, kind) in &seen {
        assert!(
            line.starts_with("POST /2015-03-31/functions/sb-events-publish/invocations"),
            "{line}"
        );
        assert_eq!(kind, "Event");
    }
}

#[tokio::test]
async fn lambda_unreachable_never_holds_the_caller() {
    let trigger = trigger(&format!("http://127.0.0.1:{}", free_port())).await;
    let started = Instant::now();
    assert!(trigger.after("POST /slots/{id}/hold", 201));
    assert!(started.elapsed() < Duration::from_millis(50));
    // The spawned invoke fails on its own, logged only.
    tokio::time::sleep(Duration::from_millis(300)).await;
}
