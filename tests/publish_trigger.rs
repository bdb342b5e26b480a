//! The publisher's trigger after a commit (`events::PublishTrigger`)
//! against a stand-in of EventBridge's PutEvents: one `publish requested`
//! event on the feed's bus, only after a route that wrote events answered
//! 2xx, at most one a second, and never in the caller's way, even when the
//! bus cannot be reached. tests/publisher.rs checks it against moto's bus,
//! whose rule sees it.

use shared::events::PublishTrigger;
use slot_booking_tests::moto::{free_port, sdk};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The `X-Amz-Target` header and the body of every call.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// Answers every request as PutEvents does when it accepts one entry.
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
                let header = |wanted: &str| {
                    head.lines().find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case(wanted)
                            .then(|| value.trim().to_string())
                    })
                };
                let target = header("x-amz-target").unwrap_or_default();
                let length: usize = header("content-length")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; length];
                if stream.read_exact(&mut body).await.is_err() {
                    return;
                }
                log.lock()
                    .unwrap()
                    .push((target, String::from_utf8_lossy(&body).to_string()));
                let answer = r#"{"FailedEntryCount":0,"Entries":[{"EventId":"e-1"}]}"#;
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.1\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{answer}",
                            answer.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    (url, seen)
}

async fn trigger(endpoint: &str) -> PublishTrigger {
    let client = aws_sdk_eventbridge::Client::new(&sdk(endpoint).await);
    PublishTrigger::new(client, "sb-events")
}

#[tokio::test]
async fn a_change_puts_one_publish_request_on_the_bus_at_most_once_a_second() {
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
    for (target, body) in &seen {
        assert_eq!(target, "AWSEvents.PutEvents");
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
        let entries = body["Entries"].as_array().expect("entries");
        assert_eq!(entries.len(), 1, "{body}");
        assert_eq!(entries[0]["EventBusName"], "sb-events");
        assert_eq!(entries[0]["Source"], "slot-booking.publisher");
        assert_eq!(entries[0]["DetailType"], "publish requested");
    }
}

#[tokio::test]
async fn a_bus_out_of_reach_never_holds_the_caller() {
    let trigger = trigger(&format!("http://127.0.0.1:{}", free_port())).await;
    let started = Instant::now();
    assert!(trigger.after("POST /slots/{id}/hold", 201));
    assert!(started.elapsed() < Duration::from_millis(50));
    // The spawned invoke fails on its own, logged only.
    tokio::time::sleep(Duration::from_millis(300)).await;
}
