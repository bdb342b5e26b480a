//! The publisher (SPEC §12, `events::publish`) against moto's EventBridge:
//! a rule on the stand-in bus forwards every `slot-booking` event to an SQS
//! queue, and the test reads the queue to see what reached the bus.
//!
//! - every event reaches the bus at least once, each hold's in order, with
//!   the event (and its `id`) in `detail`;
//! - with the bus unreachable, bookings answer as fast as ever (they never
//!   wait on EventBridge), the publisher gives up at its deadline without
//!   recording an unsent event as sent, and once the bus is back the
//!   backlog drains;
//! - a second publisher returns at once while one is at work;
//! - the trigger after a change reaches a rule with the template's
//!   `PublishRequested` pattern, and no rule of the feed's source.

use aws_sdk_eventbridge::types::Target;
use serde_json::Value;
use shared::App;
use shared::events::{PublishReport, publish};
use slot_booking_tests::moto::{Moto, free_port, patient_sdk, sdk};
use slot_booking_tests::*;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

/// The stand-in bus with a rule that copies its events to a queue.
struct Bus {
    name: String,
    events: aws_sdk_eventbridge::Client,
    setup: aws_sdk_eventbridge::Client,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    queue_arn: String,
}

impl Bus {
    async fn create(moto: &Moto) -> Self {
        let setup = patient_sdk(&moto.url).await;
        let sqs = aws_sdk_sqs::Client::new(&setup);
        let name = format!("sb-test-{}", uuid::Uuid::new_v4().simple());
        let queue_url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .expect("create queue")
            .queue_url
            .expect("queue url");
        let events = aws_sdk_eventbridge::Client::new(&setup);
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .expect("queue attributes");
        let queue_arn = attributes
            .attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
            .expect("queue arn")
            .clone();
        events
            .create_event_bus()
            .name(&name)
            .send()
            .await
            .expect("create bus");
        // The publisher's client: the project's timeouts, one attempt per
        // call (its own back-off does the retrying).
        let bus = Self {
            events: aws_sdk_eventbridge::Client::new(&sdk(&moto.url).await),
            setup: events,
            name,
            sqs,
            queue_url,
            queue_arn,
        };
        bus.route("to-queue", r#"{"source": ["slot-booking"]}"#)
            .await;
        bus
    }

    /// A rule on the bus with this pattern, copying to the queue.
    async fn route(&self, rule: &str, pattern: &str) {
        self.setup
            .put_rule()
            .name(rule)
            .event_bus_name(&self.name)
            .event_pattern(pattern)
            .send()
            .await
            .expect("put rule");
        self.setup
            .put_targets()
            .rule(rule)
            .event_bus_name(&self.name)
            .targets(
                Target::builder()
                    .id("queue")
                    .arn(&self.queue_arn)
                    .build()
                    .expect("target"),
            )
            .send()
            .await
            .expect("put targets");
    }

    /// Every EventBridge event the queue received, in arrival order.
    async fn received(&self) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let output = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .send()
                .await
                .expect("receive");
            let messages = output.messages();
            if messages.is_empty() {
                return got;
            }
            for message in messages {
                let body = message.body().expect("body");
                got.push(serde_json::from_str(body).expect("an EventBridge event"));
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(message.receipt_handle().expect("receipt"))
                    .send()
                    .await
                    .expect("delete");
            }
        }
    }
}

/// A client of a bus that is down: nothing listens on its port.
async fn unreachable_bus() -> aws_sdk_eventbridge::Client {
    let sdk = sdk(&format!("http://127.0.0.1:{}", free_port())).await;
    aws_sdk_eventbridge::Client::new(&sdk)
}

async fn run(
    app: &App,
    client: &aws_sdk_eventbridge::Client,
    bus: &str,
    budget: Duration,
) -> PublishReport {
    publish(app.booking.pool(), client, bus, Instant::now() + budget)
        .await
        .expect("publish")
}

/// The feed as the database has it: `(id, hold_id)` in `seq` order.
async fn feed(db: &TestDb) -> Vec<(u64, Option<u64>)> {
    sqlx::query_as("SELECT id, hold_id FROM events WHERE seq IS NOT NULL ORDER BY seq")
        .fetch_all(&db.admin)
        .await
        .expect("events")
}

async fn published_through(db: &TestDb) -> u64 {
    sqlx::query_scalar("SELECT published_through FROM event_feed WHERE id = 1")
        .fetch_one(&db.admin)
        .await
        .expect("event_feed")
}

/// A hold (201) on `slot`: its id.
async fn hold(app: &App, slot: shared::domain::SlotId) -> String {
    let request = hold_request(&slot.0.to_string(), Some(new_key().as_str()));
    let (status, body) = read(shared::http::hold(app, request).await.expect("handled"));
    assert_eq!(status, 201, "{body}");
    id_of(&body)
}

/// Holds, confirms and cancels on two slots: every kind of hold event,
/// several per hold, interleaved across holds.
async fn changes(app: &App, db: &TestDb) {
    let slots = [db.insert_slot(50).await, db.insert_slot(50).await];
    let mut holds = Vec::new();
    for round in 0..6 {
        holds.push(hold(app, slots[round % 2]).await);
    }
    for (i, id) in holds.iter().enumerate() {
        let response = if i % 2 == 0 {
            shared::http::confirm(app, confirm_request(id)).await
        } else {
            shared::http::cancel(app, cancel_request(id)).await
        };
        let (status, body) = read(response.expect("handled"));
        assert_eq!(status, 200, "{body}");
    }
    for id in holds.iter().skip(1).step_by(2) {
        // A cancelled hold cancelled again: no change, no event.
        let (status, _) = read(shared::http::cancel(app, cancel_request(id)).await.unwrap());
        assert_eq!(status, 200);
    }
}

/// Every event of the feed reached the bus at least once, as the API
/// serves it, and each hold's arrived in feed order (a repeat only ever
/// repeats the latest or an earlier one already seen, never jumps back
/// past a later one).
fn assert_delivered(feed: &[(u64, Option<u64>)], received: &[Value]) {
    let position: HashMap<String, usize> = feed
        .iter()
        .enumerate()
        .map(|(at, (id, _))| (id.to_string(), at))
        .collect();
    let mut seen = HashSet::new();
    let mut last_of_hold: HashMap<u64, usize> = HashMap::new();
    for event in received {
        assert_eq!(event["source"], "slot-booking", "{event}");
        let detail = &event["detail"];
        assert_eq!(event["detail-type"], detail["type"], "{event}");
        let id = detail["id"].as_str().expect("the id, a string");
        assert!(
            detail["occurred_at"].is_string() && detail["data"].is_object(),
            "{event}"
        );
        let at = *position
            .get(id)
            .unwrap_or_else(|| panic!("unknown event {id}"));
        if let Some(hold) = feed[at].1 {
            let last = last_of_hold.entry(hold).or_insert(at);
            assert!(
                at >= *last || seen.contains(id),
                "hold {hold}: event {id} out of order"
            );
            *last = (*last).max(at);
        }
        seen.insert(id.to_string());
    }
    let missing: Vec<&u64> = feed
        .iter()
        .map(|(id, _)| id)
        .filter(|id| !seen.contains(&id.to_string()))
        .collect();
    assert!(missing.is_empty(), "never reached the bus: {missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_reaches_the_bus_in_order_per_hold() {
    let (db, moto) = (TestDb::new().await, Moto::start().await);
    let bus = Bus::create(&moto).await;
    let app = db.app();
    changes(&app, &db).await;

    let report = run(&app, &bus.events, &bus.name, Duration::from_secs(20)).await;
    let feed = feed(&db).await;
    // Six holds, each confirmed or cancelled (a second cancel changes
    // nothing and writes nothing).
    assert_eq!(feed.len(), 12, "{feed:?}");
    assert!(!report.busy, "{report:?}");
    assert_eq!(report.failure, None, "{report:?}\n{}", moto.log());
    assert_eq!(report.published, feed.len() as u64, "{report:?}");
    assert_eq!(published_through(&db).await, report.published_through);
    assert_delivered(&feed, &bus.received().await);

    // Nothing new: a run sends nothing again.
    let again = run(&app, &bus.events, &bus.name, Duration::from_secs(5)).await;
    assert_eq!((again.published, again.failure), (0, None));
    assert!(bus.received().await.is_empty());
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_bus_down_bookings_go_on_and_the_backlog_drains_after() {
    let (db, moto) = (TestDb::new().await, Moto::start().await);
    let bus = Bus::create(&moto).await;
    let app = db.app();
    let slot = db.insert_slot(100).await;
    // Before the outage: the feed is published up to here.
    hold(&app, slot).await;
    let before = run(&app, &bus.events, &bus.name, Duration::from_secs(10)).await;
    assert_eq!((before.published, before.failure.as_deref()), (1, None));
    let through = published_through(&db).await;

    // The outage: a publisher retries against a bus that is down, while
    // bookings go on, each answering as fast as ever.
    changes(&app, &db).await;
    let down = unreachable_bus().await;
    let publisher = {
        let (app, bus) = (db.app(), bus.name.clone());
        tokio::spawn(async move { run(&app, &down, &bus, Duration::from_secs(3)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let booker = db.app();
    warm(&booker).await;
    for _ in 0..10 {
        let started = std::time::Instant::now();
        hold(&booker, slot).await;
        let took = started.elapsed();
        assert!(took < Duration::from_millis(500), "a hold took {took:?}");
    }
    assert!(
        !publisher.is_finished(),
        "the outage was over before the holds"
    );
    let report = publisher.await.expect("publisher");
    assert!(report.failure.is_some(), "{report:?}");
    assert!(report.retries >= 1, "{report:?}");
    assert_eq!(report.published, 0, "{report:?}");
    // Nothing unsent is recorded as sent.
    assert_eq!(report.published_through, through, "{report:?}");
    assert_eq!(published_through(&db).await, through);
    // Its backlog: every numbered event above what was sent, the oldest
    // made moments ago.
    let unsent: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE seq > ?")
        .bind(through)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(report.unsent, unsent as u64, "{report:?}");
    assert!(report.unsent >= 12, "{report:?}");
    assert!(report.oldest_unsent_s < 60, "{report:?}");
    // An outage of an hour: the age the alarm watches says so.
    sqlx::query("UPDATE events SET occurred_at = occurred_at - INTERVAL 1 HOUR WHERE seq = ?")
        .bind(through + 1)
        .execute(&db.admin)
        .await
        .unwrap();
    let still_down = run(
        &app,
        &unreachable_bus().await,
        &bus.name,
        Duration::from_secs(1),
    )
    .await;
    assert!(still_down.failure.is_some(), "{still_down:?}");
    assert!(
        (3600..3700).contains(&still_down.oldest_unsent_s),
        "{still_down:?}"
    );

    // The bus is back: the backlog drains, everything arrives.
    let after = run(&app, &bus.events, &bus.name, Duration::from_secs(20)).await;
    assert_eq!(after.failure, None, "{after:?}\n{}", moto.log());
    assert_eq!((after.unsent, after.oldest_unsent_s), (0, 0), "{after:?}");
    let feed = feed(&db).await;
    assert_eq!(after.published, feed.len() as u64 - 1, "{after:?}");
    assert_eq!(published_through(&db).await, feed.len() as u64);
    // What arrived before the outage, and the backlog.
    let received = bus.received().await;
    assert_eq!(received.len(), feed.len(), "each exactly once here");
    assert_delivered(&feed, &received);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_publisher_at_a_time() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(10).await;
    hold(&app, slot).await;
    let mut other = db.admin.acquire().await.expect("connection");
    let got: Option<i64> = sqlx::query_scalar(shared::events::PUBLISH_LOCK)
        .fetch_one(&mut *other)
        .await
        .expect("lock");
    assert_eq!(got, Some(1));
    // The bus is never asked: the run returns at once.
    let started = Instant::now();
    let report = run(
        &app,
        &unreachable_bus().await,
        "any",
        Duration::from_secs(10),
    )
    .await;
    assert!(report.busy, "{report:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(published_through(&db).await, 0);
    sqlx::query(shared::events::PUBLISH_UNLOCK)
        .execute(&mut *other)
        .await
        .expect("unlock");
    drop(other);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trigger_reaches_the_publishers_rule_and_no_feed_consumer() {
    let moto = Moto::start().await;
    let bus = Bus::create(&moto).await;
    // template.yaml's PublishRequested pattern, beside the feed's rule.
    bus.route(
        "publisher",
        r#"{"source": ["slot-booking.publisher"], "detail-type": ["publish requested"]}"#,
    )
    .await;
    let trigger = shared::events::PublishTrigger::new(bus.events.clone(), &bus.name);
    assert!(trigger.after("POST /slots/{id}/hold", 201));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        got = bus.received().await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    got.extend(bus.received().await);
    assert_eq!(
        got.len(),
        1,
        "one delivery, by the publisher's rule alone: {got:?}"
    );
    assert_eq!(got[0]["source"], "slot-booking.publisher");
    assert_eq!(got[0]["detail-type"], "publish requested");
}
