//! Clients administered (SPEC §16): `PATCH /clients/{id}` changes a
//! client's limits (and nothing else), which a fresh environment applies;
//! `GET /clients` a page at a time, its `next` links visiting every client
//! exactly once; every bad input a 4xx named after what was wrong.

use lambda_http::Request;
use lambda_http::http::{Method, header};
use serde_json::{Value, json};
use shared::clients::Role;
use shared::config::AuthMode;
use shared::{App, http};
use slot_booking_tests::caps::{capped_hold, warm_apps_for};
use slot_booking_tests::keys::{TestClient, authorized, clients_request};
use slot_booking_tests::*;

async fn patch(app: &App, admin: &TestClient, id: &str, body: Value) -> (u16, Value) {
    let request = clients_request(
        Method::PATCH,
        &format!("/clients/{id}"),
        Some(id),
        Some(&body),
    );
    read(
        http::patch_client(app, authorized(request, Some(&admin.bearer())))
            .await
            .unwrap(),
    )
}

fn list_request(raw_query: &str) -> Request {
    let mut event = event_json("apigw_v2_availability.json", "/clients", None, &[]);
    event["routeKey"] = "GET /clients".into();
    event["rawQueryString"] = raw_query.into();
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

/// One page: status, body, and the query of its `next` link.
async fn list(app: &App, admin: &TestClient, raw_query: &str) -> (u16, Value, Option<String>) {
    let request = authorized(list_request(raw_query), Some(&admin.bearer()));
    let response = http::list_clients(app, request).await.unwrap();
    let next = response.headers().get(header::LINK).map(|link| {
        let link = link.to_str().unwrap();
        assert!(
            link.starts_with("</clients?") && link.ends_with(">; rel=\"next\""),
            "{link}"
        );
        link["</clients?".len()..link.len() - ">; rel=\"next\"".len()].to_string()
    });
    let (status, body) = read(response);
    (status, body, next)
}

#[tokio::test]
async fn a_patch_changes_the_limits_which_a_fresh_environment_applies_to_holds() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let shop = db.client("shop", Role::Booker, None).await;
    let id = shop.id.0.to_string();

    let (status, body) = patch(&app, &admin, &id, json!({"max_held_seats": 1})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["max_held_seats"].clone(),
            body["rate_limit_per_second"].clone()
        ),
        (json!(1), Value::Null)
    );
    assert_eq!(body["name"], "shop", "the rest as it was");
    let (status, body) = patch(&app, &admin, &id, json!({"rate_limit_per_second": 9})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rate_limit_per_second"], 9);
    assert_eq!(body["max_held_seats"], 1, "a field left out is left alone");

    // A fresh environment reads the new cap with the key.
    let slot = db.insert_slot(5).await;
    let fresh = warm_apps_for(&db, 1, &shop).await.remove(0);
    let first = capped_hold(&fresh, &shop, slot, new_key().as_str(), 1).await;
    assert_eq!(first.0, 201, "{}", first.1);
    let second = capped_hold(&fresh, &shop, slot, new_key().as_str(), 1).await;
    assert_eq!(second.1["reason"], "hold_limit_reached", "{}", second.1);

    // null: back to the default (500 here); 0: unlimited.
    let (status, body) = patch(&app, &admin, &id, json!({"max_held_seats": null})).await;
    assert_eq!(
        (status, body["max_held_seats"].clone()),
        (200, Value::Null),
        "{body}"
    );
    let fresh = warm_apps_for(&db, 1, &shop).await.remove(0);
    let third = capped_hold(&fresh, &shop, slot, new_key().as_str(), 1).await;
    assert_eq!(third.0, 201, "{}", third.1);
    let (status, body) = patch(&app, &admin, &id, json!({})).await;
    assert_eq!(
        (status, body["rate_limit_per_second"].clone()),
        (200, json!(9)),
        "{body}"
    );
    db.drop().await;
}

/// A client's allowance is an upper bound only while every hold of the
/// client is a capped one. Unlimited for a while, it holds without it; a
/// cap set again must count those holds, not trust the old bound.
#[tokio::test]
async fn a_cap_set_again_counts_the_holds_made_while_unlimited() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let shop = db.client("shop", Role::Booker, None).await;
    let id = shop.id.0.to_string();
    let slot = db.insert_slot(10).await;
    let hold = async |cap: Value| {
        let (status, body) = patch(&app, &admin, &id, json!({"max_held_seats": cap})).await;
        assert_eq!(status, 200, "{body}");
        let fresh = warm_apps_for(&db, 1, &shop).await.remove(0);
        capped_hold(&fresh, &shop, slot, new_key().as_str(), 1).await
    };
    // Capped at 2: one hold, its allowance 1.
    assert_eq!(hold(json!(2)).await.0, 201);
    // Unlimited: three more, outside the allowance.
    for _ in 0..3 {
        assert_eq!(hold(json!(0)).await.0, 201);
    }
    // Capped at 2 again: four seats held, so no fifth.
    let refused = hold(json!(2)).await;
    assert_eq!(refused.0, 409, "{}", refused.1);
    assert_eq!(refused.1["reason"], "hold_limit_reached", "{}", refused.1);
    db.drop().await;
}

/// Whether `client`'s allowance is marked for a count more than `seconds`
/// ahead.
async fn marked_beyond(db: &TestDb, client: &TestClient, seconds: u32) -> bool {
    sqlx::query_scalar(
        "SELECT recount_after > UTC_TIMESTAMP(6) + INTERVAL ? SECOND FROM client_allowances \
         WHERE client_id = ?",
    )
    .bind(seconds)
    .bind(client.id.0)
    .fetch_one(&db.admin)
    .await
    .expect("the client's allowance")
}

/// A patch marks the allowance for a count a minute ahead, never earlier
/// than a mark it finds (a deploy's, 15 minutes).
#[tokio::test]
async fn a_patch_never_shortens_a_deploys_mark() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let shop = db.client("shop", Role::Booker, None).await;
    let id = shop.id.0.to_string();
    assert!(
        !marked_beyond(&db, &shop, 0).await,
        "a new client: no count due"
    );
    let (status, body) = patch(&app, &admin, &id, json!({"max_held_seats": 3})).await;
    assert_eq!(status, 200, "{body}");
    assert!(marked_beyond(&db, &shop, 30).await, "a minute ahead");
    sqlx::query(
        "UPDATE client_allowances SET recount_after = UTC_TIMESTAMP(6) + INTERVAL 15 MINUTE \
         WHERE client_id = ?",
    )
    .bind(shop.id.0)
    .execute(&db.admin)
    .await
    .unwrap();
    let (status, body) = patch(&app, &admin, &id, json!({"max_held_seats": 4})).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        marked_beyond(&db, &shop, 600).await,
        "the deploy's mark stays"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_patch_refuses_names_roles_unknown_fields_and_bad_values_under_their_names() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let shop = db.client("shop", Role::Booker, None).await;
    let id = shop.id.0.to_string();
    let cases = [
        (json!({"name": "other"}), vec!["name"]),
        (json!({"role": "admin"}), vec!["role"]),
        (
            json!({"seats": 3, "max_held_seats": -1}),
            vec!["max_held_seats", "seats"],
        ),
        (
            json!({"rate_limit_per_second": "5"}),
            vec!["rate_limit_per_second"],
        ),
        (
            json!({"max_held_seats": 1_000_000_001u64}),
            vec!["max_held_seats"],
        ),
        (json!([1]), vec!["body"]),
    ];
    for (body, fields) in cases {
        let (status, answer) = patch(&app, &admin, &id, body.clone()).await;
        assert_eq!(status, 422, "{body} → {answer}");
        let named: Vec<&str> = answer["errors"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(named, fields, "{body} → {answer}");
    }
    let unchanged: (Option<u32>, Option<u32>) = sqlx::query_as(
        "SELECT rate_limit_per_second, max_held_seats FROM api_clients WHERE id = ?",
    )
    .bind(shop.id.0)
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert_eq!(unchanged, (None, None), "nothing was written");

    let (status, body) = patch(&app, &admin, "424242", json!({"max_held_seats": 1})).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    let (status, body) = patch(&app, &admin, "1", json!({"max_held_seats": 1})).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let (status, body) = patch(&app, &shop, &id, json!({"max_held_seats": 1000})).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("forbidden")),
        "a booker: {body}"
    );
    let revoke = clients_request(Method::DELETE, &format!("/clients/{id}"), Some(&id), None);
    let revoked = read(
        http::revoke_client(&app, authorized(revoke, Some(&admin.bearer())))
            .await
            .unwrap(),
    );
    assert_eq!(revoked.0, 200, "{}", revoked.1);
    let (status, body) = patch(&app, &admin, &id, json!({"max_held_seats": 1})).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("client_revoked")),
        "{body}"
    );
    db.drop().await;
}

#[tokio::test]
async fn next_links_visit_every_client_once_in_pages_of_limit() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    for i in 0..6 {
        db.client(&format!("shop-{i}"), Role::Booker, None).await;
    }
    let every: Vec<u64> = sqlx::query_scalar("SELECT id FROM api_clients ORDER BY id")
        .fetch_all(&db.admin)
        .await
        .unwrap();
    assert_eq!(every.len(), 8, "anonymous, root and six shops");

    let (status, body, next) = list(&app, &admin, "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_array().unwrap().len(), 8, "100 by default");
    assert_eq!(next, None, "no next page when all fit");

    let mut seen = Vec::new();
    let mut query = "limit=3".to_string();
    let mut pages = 0;
    loop {
        let (status, body, next) = list(&app, &admin, &query).await;
        assert_eq!(status, 200, "{body}");
        let page = body.as_array().unwrap();
        assert!(page.len() <= 3);
        assert!(
            page.iter()
                .all(|c| c.get("key").is_none() && c.get("key_hash").is_none())
        );
        seen.extend(page.iter().map(|c| c["id"].as_u64().unwrap()));
        pages += 1;
        match next {
            Some(next) => query = next,
            None => break,
        }
    }
    assert_eq!(seen, every, "each client once, oldest first");
    assert_eq!(pages, 3);
    db.drop().await;
}

#[tokio::test]
async fn a_bad_limit_cursor_or_parameter_is_422_under_its_name() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let (_, _, next) = list(&app, &admin, "limit=1").await;
    let real = next
        .expect("a next page")
        .rsplit_once("cursor=")
        .unwrap()
        .1
        .to_string();
    let mut flipped = real.clone().into_bytes();
    flipped[3] = if flipped[3] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    let cases = [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=abc", "limit"),
        ("limit=%2B5", "limit"),
        ("limit=2&limit=3", "limit"),
        ("cursor=abc", "cursor"),
        ("page=2", "page"),
    ];
    for (query, field) in cases {
        let (status, body, _) = list(&app, &admin, query).await;
        assert_eq!(status, 422, "{query} → {body}");
        assert!(body["errors"][field].is_array(), "{query} → {body}");
    }
    for cursor in [
        flipped,
        real[..real.len() - 1].to_string(),
        format!("{real}A"),
    ] {
        let (status, body, _) = list(&app, &admin, &format!("cursor={cursor}")).await;
        assert_eq!(status, 422, "{cursor} → {body}");
        assert!(body["errors"]["cursor"].is_array(), "{cursor} → {body}");
    }
    db.drop().await;
}
