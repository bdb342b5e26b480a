//! Webhooks' subscriptions API (SPEC §20, §23.11) against the real
//! database: made, listed, read, changed, deleted and rotated through the
//! handlers; the secret in the answers that make or rotate it and nowhere
//! else; every bad field named; another client's subscription a 404; the
//! per-client limit held by parallel callers on their own connections.

use lambda_http::http::Method;
use serde_json::{Value, json};
use shared::clients::Role;
use shared::config::{AuthMode, WebhookRules};
use shared::http;
use shared::webhooks::WebhookSecret;
use slot_booking_tests::webhooks::*;
use slot_booking_tests::*;

#[tokio::test]
async fn a_subscription_is_made_read_changed_rotated_and_deleted_and_its_secret_shown_only_twice() {
    let db = TestDb::new().await;
    let app = app(&db);
    let shop = db.client("shop", Role::Booker, None).await;
    sqlx::query("UPDATE event_feed SET sequenced_through = 42 WHERE id = 1")
        .execute(&db.admin)
        .await
        .unwrap();

    let body =
        json!({"url": URL, "event_types": ["hold.*", "waitlist.offered"], "description": "shop"});
    let (status, made) = create(&app, &shop, body).await;
    assert_eq!(status, 201, "{made}");
    let mut with_secret = FIELDS.to_vec();
    with_secret.push("secret");
    with_secret.sort();
    assert_eq!(
        fields(&made),
        with_secret,
        "SPEC §20's resource and the secret"
    );
    assert_eq!(made["client_id"], shop.id.0);
    assert_eq!(made["url"], URL);
    assert_eq!(made["event_types"], json!(["hold.*", "waitlist.offered"]));
    assert_eq!(
        (made["status"].clone(), made["disabled_reason"].clone()),
        (json!("enabled"), Value::Null)
    );
    let secret = made["secret"].as_str().unwrap().to_string();
    let shown = WebhookSecret::parse(&secret).expect("whsec_ and 32 bytes");
    let id = id_of(&made);
    let (sealed, previous, _, scanned) = stored(&db, made["id"].as_u64().unwrap()).await;
    assert_eq!(
        key().unseal(&sealed).unwrap(),
        shown,
        "sealed, not in the clear"
    );
    assert!(!sealed.windows(6).any(|w| w == b"whsec_"));
    assert_eq!(
        (previous, scanned),
        (None, 42),
        "scans the feed from its creation"
    );

    let (status, read_back) = get(&app, &shop, &id).await;
    assert_eq!(status, 200, "{read_back}");
    assert_eq!(fields(&read_back), FIELDS, "no secret in a read");
    let (status, page, next) = list(&app, &shop, "").await;
    assert_eq!((status, next), (200, None));
    assert_eq!(page.as_array().unwrap().len(), 1);
    assert_eq!(fields(&page[0]), FIELDS, "no secret in a list");

    // A patch: each field, and the status with its reason.
    let (status, changed) = patch(
        &app,
        &shop,
        &id,
        json!({"url": "https://93.184.215.15/v2", "event_types": null, "description": "v2"}),
    )
    .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(
        (
            changed["url"].clone(),
            changed["event_types"].clone(),
            changed["description"].clone()
        ),
        (json!("https://93.184.215.15/v2"), Value::Null, json!("v2"))
    );
    assert_eq!(fields(&changed), FIELDS);
    let (_, disabled) = patch(&app, &shop, &id, json!({"status": "disabled"})).await;
    assert_eq!(
        (
            disabled["status"].clone(),
            disabled["disabled_reason"].clone()
        ),
        (json!("disabled"), json!("by_client"))
    );
    sqlx::query("UPDATE webhook_subscriptions SET disabled_reason = 'failing' WHERE id = ?")
        .bind(made["id"].as_u64())
        .execute(&db.admin)
        .await
        .unwrap();
    let (_, again) = patch(&app, &shop, &id, json!({"status": "disabled"})).await;
    assert_eq!(
        again["disabled_reason"], "failing",
        "already disabled: its reason stays"
    );
    let (_, enabled) = patch(&app, &shop, &id, json!({"status": "enabled"})).await;
    assert_eq!(
        (
            enabled["status"].clone(),
            enabled["disabled_reason"].clone()
        ),
        (json!("enabled"), Value::Null)
    );
    let (status, same) = patch(&app, &shop, &id, json!({})).await;
    assert_eq!(
        (status, same["url"].clone()),
        (200, json!("https://93.184.215.15/v2"))
    );

    // A rotation: the new secret shown, the old one kept sealed for 24 h.
    let (status, rotated) = rotate(&app, &shop, &id).await;
    assert_eq!(status, 200, "{rotated}");
    assert_eq!(fields(&rotated), with_secret);
    let new = WebhookSecret::parse(rotated["secret"].as_str().unwrap()).unwrap();
    assert_ne!(new, shown);
    let (sealed, previous, until, _) = stored(&db, made["id"].as_u64().unwrap()).await;
    assert_eq!(key().unseal(&sealed).unwrap(), new);
    assert_eq!(
        key().unseal(&previous.expect("kept")).unwrap(),
        shown,
        "the old secret, sealed"
    );
    let until = until.expect("previous_until");
    assert!(
        (86_400 - 60..=86_400).contains(&until),
        "{until} s: now + 24 h"
    );
    let (_, read_back) = get(&app, &shop, &id).await;
    assert!(read_back.get("secret").is_none());

    let (status, gone) = delete(&app, &shop, &id).await;
    assert_eq!(status, 200, "{gone}");
    assert_eq!(
        (fields(&gone), gone["id"].clone()),
        (FIELDS.to_vec(), made["id"].clone())
    );
    assert_eq!(get(&app, &shop, &id).await.0, 404);
    // A retry after a lost answer finds it done (tests/webhooks_delete.rs).
    assert_eq!(delete(&app, &shop, &id).await, (200, gone));
    assert_eq!(rotate(&app, &shop, &id).await.0, 404);
}

#[tokio::test]
async fn another_clients_subscription_does_not_exist_for_a_booker_and_an_admin_sees_and_filters_all()
 {
    let db = TestDb::new().await;
    let app = app(&db);
    let (shop, rival) = (
        db.client("shop", Role::Booker, None).await,
        db.client("rival", Role::Booker, None).await,
    );
    let admin = db.client("ops", Role::Admin, None).await;
    let (_, mine) = create(&app, &shop, json!({"url": URL})).await;
    let (_, theirs) = create(&app, &rival, json!({"url": URL})).await;
    let (_, ops) = create(&app, &admin, json!({"url": URL})).await;
    assert_eq!(mine["event_types"], Value::Null, "absent: every type");
    let id = id_of(&mine);

    let missing = get(&app, &rival, "999999").await;
    assert_eq!(missing.0, 404);
    for (status, body) in [
        get(&app, &rival, &id).await,
        patch(&app, &rival, &id, json!({"status": "disabled"})).await,
        rotate(&app, &rival, &id).await,
        delete(&app, &rival, &id).await,
    ] {
        assert_eq!((status, &body), (404, &missing.1), "as a missing one");
    }
    assert_eq!(
        get(&app, &shop, &id).await.1["status"],
        "enabled",
        "untouched"
    );
    assert_eq!(get(&app, &shop, "0").await.0, 404);
    assert_eq!(get(&app, &shop, "abc").await.0, 404);

    let ids = |page: &Value| {
        page.as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].clone())
            .collect::<Vec<_>>()
    };
    let (_, page, _) = list(&app, &rival, "").await;
    assert_eq!(ids(&page), [theirs["id"].clone()], "a booker's own only");
    let (status, page, _) = list(&app, &rival, &format!("client_id={}", shop.id.0)).await;
    assert_eq!((status, ids(&page)), (200, vec![]), "another's: nothing");
    let (_, page, _) = list(&app, &admin, "").await;
    assert_eq!(
        ids(&page),
        [mine["id"].clone(), theirs["id"].clone(), ops["id"].clone()]
    );
    let (_, page, _) = list(&app, &admin, &format!("client_id={}", rival.id.0)).await;
    assert_eq!(ids(&page), [theirs["id"].clone()]);
    // An admin reaches any subscription.
    assert_eq!(get(&app, &admin, &id).await.0, 200);
    assert_eq!(
        patch(&app, &admin, &id, json!({"description": "ops"}))
            .await
            .0,
        200
    );

    // Pages: two at a time, the next link visiting every one once.
    let (_, first, next) = list(&app, &admin, "limit=2").await;
    let next = next.expect("more follow");
    assert!(next.starts_with("limit=2&cursor="), "{next}");
    let (_, second, last) = list(&app, &admin, &next).await;
    assert_eq!(
        (ids(&first).len(), ids(&second), last),
        (2, vec![ops["id"].clone()], None)
    );
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("cursor=abc", "cursor"),
        ("client_id=x", "client_id"),
        ("page=2", "page"),
        ("limit=1&limit=2", "limit"),
    ] {
        let (status, body, _) = list(&app, &admin, query).await;
        assert_eq!(status, 422, "{query}: {body}");
        assert!(body["errors"].get(field).is_some(), "{query}: {body}");
    }
}

#[tokio::test]
async fn every_bad_field_is_a_422_under_its_own_name() {
    let db = TestDb::new().await;
    let app = app(&db);
    let shop = db.client("shop", Role::Booker, None).await;
    let named = |body: &Value| {
        let mut keys: Vec<String> = body["errors"]
            .as_object()
            .map(|e| e.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    };
    let long = format!("https://93.184.215.14/{}", "a".repeat(2048));
    for (body, field) in [
        (json!([1]), "body"),
        (json!("url"), "body"),
        (json!({}), "url"),
        (json!({"url": 7}), "url"),
        (json!({"url": "http://93.184.215.14/"}), "url"),
        (json!({"url": "ftp://93.184.215.14/"}), "url"),
        (json!({"url": "https://user:pw@93.184.215.14/"}), "url"),
        (json!({"url": "https://user@93.184.215.14/"}), "url"),
        (json!({"url": long}), "url"),
        (json!({"url": "not a url"}), "url"),
        (json!({"url": "https://127.0.0.1/"}), "url"),
        (json!({"url": "https://169.254.169.254/latest/"}), "url"),
        (json!({"url": "https://10.1.2.3/"}), "url"),
        (json!({"url": "https://[::ffff:192.168.0.1]/"}), "url"),
        (json!({"url": "https://[fe80::1]/"}), "url"),
        (json!({"url": "https://100.64.0.1/"}), "url"),
        (json!({"url": "https://localhost/"}), "url"),
        (json!({"url": "https://no-such-host.invalid/"}), "url"),
        (
            json!({"url": URL, "event_types": ["hold.made"]}),
            "event_types",
        ),
        (
            json!({"url": URL, "event_types": ["entry.*"]}),
            "event_types",
        ),
        (json!({"url": URL, "event_types": []}), "event_types"),
        (json!({"url": URL, "event_types": "hold.*"}), "event_types"),
        (json!({"url": URL, "description": 5}), "description"),
        (
            json!({"url": URL, "description": "d".repeat(501)}),
            "description",
        ),
        (json!({"url": URL, "secret": "whsec_x"}), "secret"),
        (json!({"url": URL, "status": "disabled"}), "status"),
    ] {
        let (status, answer) = create(&app, &shop, body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["reason"], "validation_failed");
        assert_eq!(named(&answer), [field], "{body}: {answer}");
    }
    let (status, answer) = create(
        &app,
        &shop,
        json!({"url": "ftp://x/", "event_types": 1, "extra": 1}),
    )
    .await;
    assert_eq!(
        (status, named(&answer)),
        (
            422,
            vec!["event_types".to_string(), "extra".into(), "url".into()]
        ),
        "all at once"
    );

    let (_, made) = create(&app, &shop, json!({"url": URL})).await;
    let id = id_of(&made);
    for (body, field) in [
        (json!(null), "body"),
        (json!({"url": null}), "url"),
        (json!({"url": "https://10.0.0.1/"}), "url"),
        (json!({"event_types": ["slot.*", "nope"]}), "event_types"),
        (json!({"status": "paused"}), "status"),
        (json!({"status": null}), "status"),
        (json!({"description": ["x"]}), "description"),
        (json!({"client_id": 1}), "client_id"),
    ] {
        let (status, answer) = patch(&app, &shop, &id, body.clone()).await;
        assert_eq!(
            (status, named(&answer)),
            (422, vec![field.to_string()]),
            "{body}: {answer}"
        );
    }
    assert_eq!(get(&app, &shop, &id).await.1["url"], URL, "nothing changed");
    // A body over 8 KiB is refused unread.
    let heavy = json!({"url": URL, "description": "x".repeat(9000)});
    assert_eq!(create(&app, &shop, heavy).await.0, 413);
    // Without a key, or with open mode's anonymous: 401.
    let open = db.app_in(AuthMode::Open, 0);
    let request = request(Method::POST, "/webhooks", None, Some(&json!({"url": URL})));
    assert_eq!(
        read(http::create_webhook(&open, request).await.unwrap()).0,
        401
    );
}

#[tokio::test]
async fn the_limit_holds_against_parallel_creates_on_their_own_connections() {
    let db = TestDb::new().await;
    let rules = WebhookRules {
        max_per_client: 3,
        ..WebhookRules::default()
    };
    let shop = db.client("shop", Role::Booker, None).await;
    let other = db.client("other", Role::Booker, None).await;
    let app = app_with(&db, rules);
    for _ in 0..2 {
        assert_eq!(create(&app, &shop, json!({"url": URL})).await.0, 201);
    }
    // Eight environments, each its own connection, released together
    // with one place left.
    let mut apps = Vec::new();
    for _ in 0..8 {
        let app = app_with(&db, rules);
        warm(&app).await;
        apps.push(app);
    }
    let by = shop.clone();
    let answers = together(apps, move |_, app| {
        let by = by.clone();
        async move { create(&app, &by, json!({"url": URL})).await }
    })
    .await;
    let made = answers.iter().filter(|(status, _)| *status == 201).count();
    let refused: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status == 409)
        .collect();
    let statuses: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
    assert_eq!((made, refused.len()), (1, 7), "{statuses:?}");
    assert!(
        refused
            .iter()
            .all(|(_, body)| body["reason"] == "webhook_limit_reached")
    );
    let count: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM webhook_subscriptions WHERE client_id = ?")
            .bind(shop.id.0)
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert_eq!(count, 3);
    // The limit is per client; a deleted one gives its place back.
    assert_eq!(create(&app, &other, json!({"url": URL})).await.0, 201);
    let (_, page, _) = list(&app, &shop, "").await;
    assert_eq!(delete(&app, &shop, &id_of(&page[0])).await.0, 200);
    assert_eq!(create(&app, &shop, json!({"url": URL})).await.0, 201);
    assert_eq!(create(&app, &shop, json!({"url": URL})).await.0, 409);
}

#[tokio::test]
async fn a_revoked_clients_key_still_trusted_by_an_environment_makes_no_subscription() {
    let db = TestDb::new().await;
    let app = app(&db);
    let shop = db.client("shop", Role::Booker, None).await;
    // The environment has looked the key up: it trusts it up to 30 s.
    assert_eq!(list(&app, &shop, "").await.0, 200);
    sqlx::query("UPDATE api_clients SET revoked_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(shop.id.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let (status, body) = create(&app, &shop, json!({"url": URL})).await;
    assert_eq!(
        (status, body["reason"].clone()),
        (401, json!("unauthenticated")),
        "{body}"
    );
}
