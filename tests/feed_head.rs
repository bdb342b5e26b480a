//! The feed's head (issue "What a read costs at scale", point 7): every
//! page of `GET /events` links, besides its `next`, to the feed's head
//! (`rel="last"`), so a reader that wants only what happens from now on
//! (the console) finds it in one request instead of walking the feed.

use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use slot_booking_tests::TestDb;
use slot_booking_tests::events::page;
use slot_booking_tests::slots::{create, slot_body, tomorrow};
use std::time::Duration;

#[tokio::test]
async fn the_last_link_of_the_first_page_skips_the_whole_feed_and_misses_nothing_after_it() {
    let db = TestDb::new().await;
    let app = db.app_with_rules(
        AuthMode::ApiKey,
        Duration::from_secs(300),
        HoldRules::default(),
    );
    let admin = db.client("admin", Role::Admin, None).await;
    let booker = db.client("booker", Role::Booker, None).await;
    // A history longer than one page of one event.
    for hour in 8..13 {
        let body = slot_body(&tomorrow(hour), &tomorrow(hour + 1), 1);
        assert_eq!(create(&app, &admin, &body).await.0, 201);
    }
    for who in [&admin, &booker] {
        let first = page(&app, who, "limit=1").await;
        assert_eq!(
            (first.status, first.events().len()),
            (200, 1),
            "{}",
            first.body
        );
        let head = first.last.clone().expect("a last link");
        assert!(
            head.ends_with("&limit=1"),
            "the last link keeps limit: {head}"
        );
        assert_ne!(
            first.next, first.last,
            "one event of five served: next is not the head"
        );
        // At the head: nothing yet, and the head links to itself.
        let at_head = page(&app, who, &head).await;
        assert_eq!(
            (at_head.status, at_head.events().len()),
            (200, 0),
            "{}",
            at_head.body
        );
        assert_eq!(at_head.next.as_deref(), Some(head.as_str()));
        assert_eq!(at_head.last.as_deref(), Some(head.as_str()));
    }
    // What happens after the head was read is served from it, and only that.
    let head = page(&app, &booker, "limit=1")
        .await
        .last
        .expect("a last link");
    let body = slot_body(&tomorrow(14), &tomorrow(15), 1);
    let (status, made) = create(&app, &admin, &body).await;
    assert_eq!(status, 201, "{made}");
    let after = page(&app, &booker, &head).await;
    assert_eq!(after.events().len(), 1, "{}", after.body);
    assert_eq!(after.events()[0]["type"], "slot.created");
    assert_eq!(after.events()[0]["data"]["id"], made["id"]);
    db.drop().await;
}
