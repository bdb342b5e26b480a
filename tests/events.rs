//! SPEC §12, the change feed, through the handlers against the real
//! database: one event per change with the resource after it, who sees
//! what, cursors (422, 410, the same cursor when nothing is new) and
//! retention. The races are in `events_races.rs`.

use serde_json::{Value, json};
use shared::booking::{SweepLimits, SweepReport};
use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use shared::events::{EventCursor, Unsent};
use shared::{App, http};
use slot_booking_tests::events::{Follower, page};
use slot_booking_tests::keys::{TestClient, authorized};
use slot_booking_tests::slots::{create, delete, patch, slot_body, tomorrow};
use slot_booking_tests::*;
use sqlx::Connection;
use std::collections::HashSet;
use std::time::Duration;

/// A handler's answer to `who`: status and body.
async fn send(
    app: &App,
    route: &str,
    request: lambda_http::Request,
    who: &TestClient,
) -> (u16, Value) {
    let request = authorized(request, Some(&who.bearer()));
    let response = match route {
        "hold" => http::hold(app, request).await,
        "get" => http::get_hold(app, request).await,
        "extend" => http::extend_hold(app, request).await,
        "confirm" => http::confirm(app, request).await,
        "cancel" => http::cancel(app, request).await,
        other => panic!("no route {other}"),
    };
    read(response.expect("handled"))
}

async fn hold(app: &App, who: &TestClient, slot: u64, quantity: u32, key: &str) -> (u16, Value) {
    let request = with_body(
        hold_request(&slot.to_string(), Some(key)),
        &json!({ "quantity": quantity }).to_string(),
    );
    send(app, "hold", request, who).await
}

fn ok(answer: (u16, Value), status: u16) -> Value {
    assert_eq!(answer.0, status, "{}", answer.1);
    answer.1
}

fn keyed(db: &TestDb, ttl: Duration) -> App {
    db.app_with_rules(AuthMode::ApiKey, ttl, HoldRules::default())
}

/// Every event the admin's follower can read now, from the start.
async fn all_events(app: &App, admin: &TestClient) -> Vec<Value> {
    let mut follower = Follower::new();
    while follower.poll(app, admin).await > 0 {}
    follower.seen
}

/// `n` slots of one seat, tomorrow from 08:00, an hour each.
async fn one_seat_slots(app: &App, admin: &TestClient, n: u32) {
    for hour in 8..8 + n {
        let body = slot_body(&tomorrow(hour), &tomorrow(hour + 1), 1);
        ok(create(app, admin, &body).await, 201);
    }
}

async fn sweep(app: &App) -> SweepReport {
    app.booking
        .sweep(SweepLimits {
            max_due: 100,
            sample: 100,
            budget: Duration::from_secs(10),
        })
        .await
        .expect("sweep")
}

#[tokio::test]
async fn every_change_writes_one_event_with_the_resource_after_it_and_a_refusal_none() {
    let db = TestDb::new().await;
    let app = keyed(&db, Duration::from_secs(300));
    let short = keyed(&db, Duration::from_millis(800));
    let admin = db.client("admin", Role::Admin, None).await;
    let booker = db.client("booker", Role::Booker, None).await;
    let mut expected: Vec<(&str, Value)> = Vec::new();

    // Slots: a batch of two, one changed.
    let batch = ok(
        create(
            &app,
            &admin,
            &json!([
                slot_body(&tomorrow(8), &tomorrow(9), 4),
                slot_body(&tomorrow(9), &tomorrow(10), 2)
            ]),
        )
        .await,
        201,
    );
    let (a, b) = (
        batch[0]["id"].as_u64().unwrap(),
        batch[1]["id"].as_u64().unwrap(),
    );
    expected.push(("slot.created", batch[0].clone()));
    expected.push(("slot.created", batch[1].clone()));
    let changed = ok(patch(&app, &admin, a, &json!({"capacity": 10})).await, 200);
    expected.push(("slot.updated", changed));

    // A hold extended, confirmed, then cancelled (a booking given back).
    let key = new_key().to_string();
    let h1 = ok(hold(&app, &booker, a, 2, &key).await, 201);
    expected.push(("hold.created", h1.clone()));
    let id1 = id_of(&h1);
    let extended = ok(
        send(&app, "extend", extend_request(&id1), &booker).await,
        200,
    );
    expected.push(("hold.extended", extended));
    let confirmed = ok(
        send(&app, "confirm", confirm_request(&id1), &booker).await,
        200,
    );
    expected.push(("hold.confirmed", confirmed));
    // Replays and refusals change nothing, so they write nothing.
    ok(hold(&app, &booker, a, 2, &key).await, 200);
    ok(
        send(&app, "confirm", confirm_request(&id1), &booker).await,
        200,
    );
    assert_eq!(hold(&app, &booker, a, 3, &key).await.0, 422);
    assert_eq!(
        send(&app, "extend", extend_request(&id1), &booker).await.0,
        409
    );
    let cancelled = ok(
        send(&app, "cancel", cancel_request(&id1), &booker).await,
        200,
    );
    expected.push(("hold.cancelled", cancelled));
    ok(
        send(&app, "cancel", cancel_request(&id1), &booker).await,
        200,
    );

    // A hold cancelled while active.
    let h2 = ok(hold(&app, &booker, a, 1, &new_key().to_string()).await, 201);
    expected.push(("hold.created", h2.clone()));
    let cancelled = ok(
        send(&app, "cancel", cancel_request(&id_of(&h2)), &booker).await,
        200,
    );
    expected.push(("hold.cancelled", cancelled));

    // Two holds that expire: one reclaimed by the sweeper, one cancelled
    // after its expiry before any reclaim (its expiry comes first).
    let h3 = ok(
        hold(&short, &booker, b, 1, &new_key().to_string()).await,
        201,
    );
    expected.push(("hold.created", h3.clone()));
    let h4 = ok(
        hold(&short, &booker, b, 1, &new_key().to_string()).await,
        201,
    );
    expected.push(("hold.created", h4.clone()));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let expired4 = ok(
        send(&app, "get", get_hold_request(&id_of(&h4)), &booker).await,
        200,
    );
    assert_eq!(expired4["active"], false);
    let cancelled = ok(
        send(&app, "cancel", cancel_request(&id_of(&h4)), &booker).await,
        200,
    );
    expected.push(("hold.expired", expired4));
    expected.push(("hold.cancelled", cancelled));
    sweep(&app).await;
    let expired3 = ok(
        send(&app, "get", get_hold_request(&id_of(&h3)), &booker).await,
        200,
    );
    expected.push(("hold.expired", expired3));
    sweep(&app).await; // a second window finds nothing new

    // The slot deleted: as it was.
    let deleted = ok(delete(&app, &admin, b).await, 200);
    expected.push(("slot.deleted", deleted));
    assert_eq!(delete(&app, &admin, b).await.0, 404);

    let seen = all_events(&app, &admin).await;
    let got: Vec<(&str, &Value)> = seen
        .iter()
        .map(|event| (event["type"].as_str().unwrap(), &event["data"]))
        .collect();
    let want: Vec<(&str, &Value)> = expected.iter().map(|(kind, data)| (*kind, data)).collect();
    assert_eq!(
        got, want,
        "one event per change, in order, each with its resource"
    );
    let ids: HashSet<&str> = seen
        .iter()
        .map(|e| e["id"].as_str().expect("a string id"))
        .collect();
    assert_eq!(ids.len(), seen.len(), "unique ids");
    for event in &seen {
        let when = match event["type"].as_str().unwrap() {
            "hold.expired" => &event["data"]["expires_at"],
            "slot.deleted" => continue,
            _ => &event["data"]["updated_at"],
        };
        assert_eq!(&event["occurred_at"], when, "{event}");
    }
    db.drop().await;
}

#[tokio::test]
async fn a_booker_sees_its_own_holds_and_every_slot_an_admin_everything() {
    let db = TestDb::new().await;
    let app = keyed(&db, Duration::from_secs(300));
    let admin = db.client("admin", Role::Admin, None).await;
    let alice = db.client("alice", Role::Booker, None).await;
    let bob = db.client("bob", Role::Booker, None).await;
    let slot = ok(
        create(&app, &admin, &slot_body(&tomorrow(8), &tomorrow(9), 5)).await,
        201,
    );
    let slot = slot["id"].as_u64().unwrap();
    let mine = ok(
        hold(&app, &alice, slot, 1, &new_key().to_string()).await,
        201,
    );
    let theirs = ok(hold(&app, &bob, slot, 1, &new_key().to_string()).await, 201);
    // Bob's hold confirmed by an admin is still Bob's event.
    ok(
        send(&app, "confirm", confirm_request(&id_of(&theirs)), &admin).await,
        200,
    );

    let kinds = |events: Vec<Value>| -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_string(),
                    e["data"]["id"].to_string(),
                )
            })
            .collect()
    };
    let slot_created = ("slot.created".to_string(), slot.to_string());
    let held = |h: &Value| ("hold.created".to_string(), h["id"].to_string());
    let confirmed = ("hold.confirmed".to_string(), theirs["id"].to_string());
    assert_eq!(
        kinds(all_events(&app, &alice).await),
        [slot_created.clone(), held(&mine)]
    );
    assert_eq!(
        kinds(all_events(&app, &bob).await),
        [slot_created.clone(), held(&theirs), confirmed.clone()]
    );
    assert_eq!(
        kinds(all_events(&app, &admin).await),
        [slot_created, held(&mine), held(&theirs), confirmed]
    );
    db.drop().await;
}

#[tokio::test]
async fn next_is_always_there_a_foreign_cursor_is_422_and_one_behind_retention_410() {
    let db = TestDb::new().await;
    let app = keyed(&db, Duration::from_secs(300));
    let admin = db.client("admin", Role::Admin, None).await;
    let empty = page(&app, &admin, "").await;
    assert_eq!(
        (empty.status, empty.events().len()),
        (200, 0),
        "{}",
        empty.body
    );
    let start = empty.next.clone().expect("next on an empty feed");
    assert!(start.ends_with("&limit=100"), "{start}");
    let again = page(&app, &admin, &start).await;
    assert_eq!(
        again.next.as_deref(),
        Some(start.as_str()),
        "nothing new: the same cursor"
    );

    one_seat_slots(&app, &admin, 3).await;
    let first = page(
        &app,
        &admin,
        &format!("{}&limit=2", start.split('&').next().unwrap()),
    )
    .await;
    assert_eq!(first.events().len(), 2);
    let second = page(&app, &admin, first.next.as_deref().unwrap()).await;
    assert_eq!(second.events().len(), 1);
    assert!(
        second.next.as_deref().unwrap().ends_with("&limit=2"),
        "next keeps limit"
    );
    let last = second.next.clone().unwrap();

    for query in [
        "after=garbage".to_string(),
        format!("after={}", EventCursor { after: 4 }.encode()), // never reached
        // Forged with a valid checksum, at the edges of the column's range.
        format!("after={}", EventCursor { after: u64::MAX }.encode()),
        format!("after={}", EventCursor { after: 1 << 63 }.encode()),
        "limit=0".to_string(),
        "limit=501".to_string(),
        "from=1".to_string(),
    ] {
        let refused = page(&app, &admin, &query).await;
        assert_eq!(refused.status, 422, "{query}: {}", refused.body);
        assert_eq!(refused.body["reason"], "validation_failed");
    }
    // An unknown parameter under its own name (SPEC §19.6).
    let unknown = page(&app, &admin, "from=1&limit=2").await;
    assert_eq!(
        unknown.body["errors"]["from"][0],
        "The \"from\" parameter is not allowed; use after or limit.",
        "{}",
        unknown.body
    );
    let foreign = page(&app, &admin, "after=garbage").await;
    assert!(
        foreign.body["errors"]["cursor"].is_array(),
        "{}",
        foreign.body
    );

    // Retention takes every event so far: a cursor before them is gone.
    let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let cutoff = chrono::Utc::now() + chrono::Duration::hours(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let purged = shared::events::purge(&mut conn, cutoff, Unsent::Purge, deadline)
        .await
        .unwrap();
    assert_eq!((purged.deleted, purged.purged_through), (3, 3));
    let gone = page(&app, &admin, &start).await;
    assert_eq!(gone.status, 410, "{}", gone.body);
    assert_eq!(gone.body["reason"], "cursor_expired");
    let at_the_edge = page(&app, &admin, &last).await;
    assert_eq!((at_the_edge.status, at_the_edge.events().len()), (200, 0));
    let fresh = page(&app, &admin, "").await;
    assert_eq!((fresh.status, fresh.events().len()), (200, 0));
    assert_eq!(
        fresh
            .next
            .as_deref()
            .map(|q| q.split('&').next().unwrap().to_string()),
        last.split('&').next().map(str::to_string),
        "a new walk starts at the oldest event kept"
    );
    db.drop().await;
}

#[tokio::test]
async fn the_sweeper_numbers_what_no_poll_did_and_deletes_events_past_their_retention_oldest_first()
{
    let db = TestDb::new().await;
    let app = keyed(&db, Duration::from_secs(300));
    let admin = db.client("admin", Role::Admin, None).await;
    one_seat_slots(&app, &admin, 4).await;
    // Nothing has polled: the sweeper numbers them.
    sweep(&app).await;
    let numbered: Vec<(u64, Option<u64>)> =
        sqlx::query_as("SELECT id, seq FROM events ORDER BY id")
            .fetch_all(&db.admin)
            .await
            .unwrap();
    assert!(
        numbered.iter().all(|(_, seq)| seq.is_some()),
        "{numbered:?}"
    );
    // The first, second and fourth (by position) happened 8 days ago; the
    // third is young: retention stops there, so the kept events stay a
    // suffix of the feed and no cursor can jump a hole.
    let seqs: Vec<u64> = numbered.iter().map(|(_, seq)| seq.unwrap()).collect();
    for seq in [seqs[0], seqs[1], seqs[3]] {
        sqlx::query(
            "UPDATE events SET occurred_at = UTC_TIMESTAMP(6) - INTERVAL 8 DAY WHERE seq = ?",
        )
        .bind(seq)
        .execute(&db.admin)
        .await
        .unwrap();
    }
    let mut follower = Follower::new();
    follower.poll(&app, &admin).await;
    let from_the_start = follower.seen.len();
    sweep(&app).await;
    let kept: Vec<u64> = sqlx::query_scalar("SELECT seq FROM events ORDER BY seq")
        .fetch_all(&db.admin)
        .await
        .unwrap();
    assert_eq!(kept, seqs[2..], "the two oldest deleted, the rest kept");
    let purged: u64 = sqlx::query_scalar("SELECT purged_through FROM event_feed")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(purged, seqs[1]);
    assert_eq!(from_the_start, 4);
    let first = page(&app, &admin, "").await;
    assert_eq!(
        first.events().len(),
        2,
        "a new walk starts at the oldest kept"
    );
    db.drop().await;
}

#[tokio::test]
async fn where_the_feed_is_published_retention_keeps_every_event_the_publisher_has_not_sent() {
    let db = TestDb::new().await;
    let rules = HoldRules {
        events_published: true,
        ..HoldRules::default()
    };
    let app = db.app_with_rules(AuthMode::ApiKey, Duration::from_secs(300), rules);
    let admin = db.client("admin", Role::Admin, None).await;
    one_seat_slots(&app, &admin, 4).await;
    sweep(&app).await;
    let seqs: Vec<u64> = sqlx::query_scalar("SELECT seq FROM events ORDER BY seq")
        .fetch_all(&db.admin)
        .await
        .unwrap();
    assert_eq!(seqs.len(), 4);
    let kept = || async {
        let seqs: Vec<u64> = sqlx::query_scalar("SELECT seq FROM events ORDER BY seq")
            .fetch_all(&db.admin)
            .await
            .unwrap();
        let purged: u64 = sqlx::query_scalar("SELECT purged_through FROM event_feed")
            .fetch_one(&db.admin)
            .await
            .unwrap();
        (seqs, purged)
    };
    let published_through = |seq: u64| {
        sqlx::query("UPDATE event_feed SET published_through = ?")
            .bind(seq)
            .execute(&db.admin)
    };

    // All four are past their retention; the bus was down after the
    // first two were sent: those two go, the other two wait for it.
    sqlx::query("UPDATE events SET occurred_at = UTC_TIMESTAMP(6) - INTERVAL 8 DAY")
        .execute(&db.admin)
        .await
        .unwrap();
    published_through(seqs[1]).await.unwrap();
    let report = sweep(&app).await;
    assert_eq!(
        (report.events_deleted, report.events_waiting_for_publisher),
        (2, true)
    );
    assert_eq!(kept().await, (seqs[2..].to_vec(), seqs[1]));
    // A poller still reads them from the oldest kept.
    let first = page(&app, &admin, "").await;
    assert_eq!(first.events().len(), 2);

    // Nothing sent meanwhile: nothing more goes, however often it runs.
    let report = sweep(&app).await;
    assert_eq!(
        (report.events_deleted, report.events_waiting_for_publisher),
        (0, true)
    );
    assert_eq!(kept().await, (seqs[2..].to_vec(), seqs[1]));

    // The publisher catches up: the rest goes, and nothing waits.
    published_through(seqs[3]).await.unwrap();
    let report = sweep(&app).await;
    assert_eq!(
        (report.events_deleted, report.events_waiting_for_publisher),
        (2, false)
    );
    assert_eq!(kept().await, (vec![], seqs[3]));

    // Without a bus (locally), age alone decides, as before.
    let local = keyed(&db, Duration::from_secs(300));
    one_seat_slots(&local, &admin, 2).await;
    sweep(&local).await;
    sqlx::query("UPDATE events SET occurred_at = UTC_TIMESTAMP(6) - INTERVAL 8 DAY")
        .execute(&db.admin)
        .await
        .unwrap();
    let report = sweep(&local).await;
    assert_eq!(
        (report.events_deleted, report.events_waiting_for_publisher),
        (2, false)
    );
    db.drop().await;
}
