//! SPEC §8 through the Lambda handlers, in `api-key` mode: every row of
//! the route table for every kind of caller, ownership (a stranger's hold
//! answers exactly as a missing one), revocation within 30 s, and keys
//! scoped idempotency.

use lambda_http::http::Method;
use lambda_http::{Body, Request, Response};
use serde_json::{Value, json};
use shared::clients::Role;
use shared::config::AuthMode;
use shared::{App, http};
use slot_booking_tests::keys::{TestClient, authorized, clients_request};
use slot_booking_tests::*;
use std::time::Duration;

/// Builds the same request again for each caller.
type MakeRequest = Box<dyn Fn() -> Request>;

/// The kinds of caller of §8's tests.
struct Callers {
    owner: TestClient,
    other: TestClient,
    admin: TestClient,
    revoked: TestClient,
}

async fn callers(db: &TestDb) -> Callers {
    let callers = Callers {
        owner: db.client("owner", Role::Booker, None).await,
        other: db.client("other", Role::Booker, None).await,
        admin: db.client("admin", Role::Admin, None).await,
        revoked: db.client("revoked", Role::Booker, None).await,
    };
    sqlx::query("UPDATE api_clients SET revoked_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(callers.revoked.id.0)
        .execute(&db.admin)
        .await
        .unwrap();
    callers
}

/// The answers of the four callers without a working key.
fn keyless(callers: &Callers) -> Vec<(&'static str, Option<String>)> {
    vec![
        ("no key", None),
        ("malformed key", Some("Bearer not-a-key".into())),
        ("wrong scheme", Some(format!("Basic {}", callers.owner.key))),
        ("unknown key", Some(format!("Bearer {}", "u".repeat(40)))),
        ("revoked key", Some(callers.revoked.bearer())),
    ]
}

/// Status, `WWW-Authenticate`, and the body's bytes.
async fn call(app: &App, route: &str, request: Request) -> (u16, Option<String>, Vec<u8>) {
    let response: Response<Body> = match route {
        "availability" => http::availability(app, request).await,
        "hold" => http::hold(app, request).await,
        "confirm" => http::confirm(app, request).await,
        "cancel" => http::cancel(app, request).await,
        "get" => http::get_hold(app, request).await,
        "find" => http::find_hold(app, request).await,
        "extend" => http::extend_hold(app, request).await,
        "create" => http::create_client(app, request).await,
        "list" => http::list_clients(app, request).await,
        "revoke" => http::revoke_client(app, request).await,
        "slot-create" => http::create_slots(app, request).await,
        "slot-get" => http::get_slot(app, request).await,
        "slot-update" => http::update_slot(app, request).await,
        "slot-delete" => http::delete_slot(app, request).await,
        other => panic!("no route {other}"),
    }
    .unwrap();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    let status = response.status().as_u16();
    let body = response.body().to_vec();
    assert_no_leak(&String::from_utf8_lossy(&body));
    (status, challenge, body)
}

fn reason(body: &[u8]) -> String {
    let body: Value = serde_json::from_slice(body).expect("json body");
    body["reason"].as_str().unwrap_or_default().to_string()
}

/// A read, an extension, a confirm and a cancel of `hold`, as this caller.
async fn every_hold_route(
    app: &App,
    hold: &str,
    authorization: Option<&str>,
) -> [(u16, Option<String>, Vec<u8>); 4] {
    [
        call(
            app,
            "get",
            authorized(get_hold_request(hold), authorization),
        )
        .await,
        call(
            app,
            "extend",
            authorized(extend_request(hold), authorization),
        )
        .await,
        call(
            app,
            "confirm",
            authorized(confirm_request(hold), authorization),
        )
        .await,
        call(
            app,
            "cancel",
            authorized(cancel_request(hold), authorization),
        )
        .await,
    ]
}

async fn held(app: &App, caller: &TestClient, slot: u64) -> u64 {
    let request = authorized(
        hold_request(&slot.to_string(), Some(new_key().as_str())),
        Some(&caller.bearer()),
    );
    let (status, _, body) = call(app, "hold", request).await;
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice::<Value>(&body).unwrap()["id"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn every_route_refuses_callers_without_a_working_key_with_401_and_a_bearer_challenge() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let callers = callers(&db).await;
    let slot = db.insert_slot(5).await;
    let hold = held(&app, &callers.owner, slot.0).await.to_string();
    let key: String = sqlx::query_scalar("SELECT idempotency_key FROM holds WHERE id = ?")
        .bind(&hold)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    let routes: Vec<(&str, MakeRequest)> = vec![
        ("availability", Box::new(availability_request)),
        (
            "hold",
            Box::new(move || hold_request(&slot.to_string(), Some(new_key().as_str()))),
        ),
        (
            "confirm",
            Box::new({
                let hold = hold.clone();
                move || confirm_request(&hold)
            }),
        ),
        (
            "cancel",
            Box::new({
                let hold = hold.clone();
                move || cancel_request(&hold)
            }),
        ),
        (
            "get",
            Box::new({
                let hold = hold.clone();
                move || get_hold_request(&hold)
            }),
        ),
        (
            "find",
            Box::new({
                let key = key.clone();
                move || find_by_key_request(&key)
            }),
        ),
        (
            "extend",
            Box::new({
                let hold = hold.clone();
                move || extend_request(&hold)
            }),
        ),
        (
            "create",
            Box::new(|| {
                clients_request(Method::POST, "/clients", None, Some(&json!({"name": "x"})))
            }),
        ),
        (
            "list",
            Box::new(|| clients_request(Method::GET, "/clients", None, None)),
        ),
        (
            "revoke",
            Box::new({
                let id = callers.other.id.to_string();
                move || clients_request(Method::DELETE, &format!("/clients/{id}"), Some(&id), None)
            }),
        ),
        (
            "slot-create",
            Box::new(|| {
                let body = json!({"starts_at": "2026-12-01T09:00:00Z",
                                  "ends_at": "2026-12-01T10:00:00Z", "capacity": 1});
                clients_request(Method::POST, "/slots", None, Some(&body))
            }),
        ),
        (
            "slot-get",
            Box::new(move || {
                let id = slot.to_string();
                clients_request(Method::GET, &format!("/slots/{id}"), Some(&id), None)
            }),
        ),
        (
            "slot-update",
            Box::new(move || {
                let id = slot.to_string();
                let body = json!({"capacity": 9});
                clients_request(
                    Method::PATCH,
                    &format!("/slots/{id}"),
                    Some(&id),
                    Some(&body),
                )
            }),
        ),
        (
            "slot-delete",
            Box::new(move || {
                let id = slot.to_string();
                clients_request(Method::DELETE, &format!("/slots/{id}"), Some(&id), None)
            }),
        ),
    ];
    for (route, request) in &routes {
        for (who, authorization) in keyless(&callers) {
            let (status, challenge, body) =
                call(&app, route, authorized(request(), authorization.as_deref())).await;
            assert_eq!(
                (status, reason(&body).as_str()),
                (401, "unauthenticated"),
                "{route}, {who}"
            );
            let challenge =
                challenge.unwrap_or_else(|| panic!("{route}, {who}: no WWW-Authenticate"));
            assert!(challenge.starts_with("Bearer"), "{challenge}");
        }
    }
    // Nothing happened: the hold is still held, no client was made or
    // revoked, no slot was made, changed or deleted.
    assert_eq!(db.count_holds(slot, "status = 'held'").await, 1);
    assert_eq!(db.slot(slot).await, (5, 5));
    let slots: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM slots")
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(slots, 1);
    let clients: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM api_clients WHERE revoked_at IS NULL")
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert_eq!(clients, 4, "anonymous, owner, other, admin");
    db.drop().await;
}

#[tokio::test]
async fn bookers_book_and_only_admins_administer_clients() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let callers = callers(&db).await;
    let slot = db.insert_slot(5).await;
    for caller in [&callers.owner, &callers.admin] {
        let bearer = Some(caller.bearer());
        let (status, ..) = call(
            &app,
            "availability",
            authorized(availability_request(), bearer.as_deref()),
        )
        .await;
        assert_eq!(status, 200);
        let hold = held(&app, caller, slot.0).await;
        // Each finds its own hold by its key.
        let key: String = sqlx::query_scalar("SELECT idempotency_key FROM holds WHERE id = ?")
            .bind(hold)
            .fetch_one(&db.admin)
            .await
            .unwrap();
        let (status, _, body) = call(
            &app,
            "find",
            authorized(find_by_key_request(&key), bearer.as_deref()),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["id"], hold);
    }
    let admin_routes: [(&str, Request); 3] = [
        (
            "create",
            clients_request(
                Method::POST,
                "/clients",
                None,
                Some(&json!({"name": "new"})),
            ),
        ),
        ("list", clients_request(Method::GET, "/clients", None, None)),
        ("revoke", {
            let id = callers.other.id.to_string();
            clients_request(Method::DELETE, &format!("/clients/{id}"), Some(&id), None)
        }),
    ];
    for (route, request) in admin_routes {
        let (status, challenge, body) = call(
            &app,
            route,
            authorized(request, Some(&callers.owner.bearer())),
        )
        .await;
        assert_eq!(
            (status, reason(&body).as_str()),
            (403, "forbidden"),
            "{route}"
        );
        assert!(challenge.is_none(), "a 403 is not a challenge");
    }
    let request = clients_request(Method::GET, "/clients", None, None);
    let (status, ..) = call(
        &app,
        "list",
        authorized(request, Some(&callers.admin.bearer())),
    )
    .await;
    assert_eq!(status, 200);
    db.drop().await;
}

#[tokio::test]
async fn a_strangers_hold_does_not_exist_for_them_but_does_for_its_owner_and_admins() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let callers = callers(&db).await;
    let slot = db.insert_slot(5).await;

    // The other booker, on the owner's holds: 404, and nothing changes.
    let hold = held(&app, &callers.owner, slot.0).await.to_string();
    let stranger = Some(callers.other.bearer());
    let row = || async {
        let row: (String, String) = sqlx::query_as(
            "SELECT CAST(expires_at AS CHAR), CAST(updated_at AS CHAR) FROM holds WHERE id = ?",
        )
        .bind(&hold)
        .fetch_one(&db.admin)
        .await
        .unwrap();
        row
    };
    let before = row().await;
    let on_existing = every_hold_route(&app, &hold, stranger.as_deref()).await;
    assert_eq!(
        db.count_holds(slot, "status = 'held'").await,
        1,
        "untouched"
    );
    assert_eq!(row().await, before, "not extended");
    // Nor is it found by its key (which the stranger may have guessed): the
    // answer of a key nobody used.
    let key: String = sqlx::query_scalar("SELECT idempotency_key FROM holds WHERE id = ?")
        .bind(&hold)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    let by_key = call(
        &app,
        "find",
        authorized(find_by_key_request(&key), stranger.as_deref()),
    )
    .await;
    let unused = call(
        &app,
        "find",
        authorized(find_by_key_request(new_key().as_str()), stranger.as_deref()),
    )
    .await;
    assert_eq!((by_key.0, &by_key), (404, &unused));

    // The same requests once no hold with that id exists: byte for byte
    // the same answers (no enumeration).
    sqlx::query("DELETE FROM holds WHERE id = ?")
        .bind(&hold)
        .execute(&db.admin)
        .await
        .unwrap();
    sqlx::query("UPDATE slots SET held = 0 WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
    let on_missing = every_hold_route(&app, &hold, stranger.as_deref()).await;
    for (existing, missing) in on_existing.iter().zip(&on_missing) {
        assert_eq!(existing.0, 404);
        assert_eq!(
            existing,
            missing,
            "{}",
            String::from_utf8_lossy(&existing.2)
        );
    }

    // The owner reads and extends its own, an admin too; the owner
    // confirms it; an admin cancels it.
    let hold = held(&app, &callers.owner, slot.0).await.to_string();
    for caller in [&callers.owner, &callers.admin] {
        let bearer = Some(caller.bearer());
        for (route, request) in [
            ("get", get_hold_request(&hold)),
            ("extend", extend_request(&hold)),
        ] {
            let (status, _, body) = call(&app, route, authorized(request, bearer.as_deref())).await;
            assert_eq!(status, 200, "{route}: {}", String::from_utf8_lossy(&body));
            assert_eq!(
                serde_json::from_slice::<Value>(&body).unwrap()["id"].to_string(),
                hold
            );
        }
    }
    let (status, ..) = call(
        &app,
        "confirm",
        authorized(confirm_request(&hold), Some(&callers.owner.bearer())),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, body) = call(
        &app,
        "cancel",
        authorized(cancel_request(&hold), Some(&callers.admin.bearer())),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["status"],
        "cancelled"
    );
    // An admin confirms a booker's hold too.
    let hold = held(&app, &callers.other, slot.0).await.to_string();
    let (status, ..) = call(
        &app,
        "confirm",
        authorized(confirm_request(&hold), Some(&callers.admin.bearer())),
    )
    .await;
    assert_eq!(status, 200);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn a_revoked_key_stops_working_within_30_seconds_and_at_once_where_it_was_never_seen() {
    let db = TestDb::new().await;
    let warm = db.app_in(AuthMode::ApiKey, 0);
    let client = db.client("soon-revoked", Role::Booker, None).await;
    let bearer = Some(client.bearer());
    let list = || authorized(availability_request(), bearer.as_deref());
    assert_eq!(call(&warm, "availability", list()).await.0, 200);
    let admin = db.client("admin", Role::Admin, None).await;
    let id = client.id.to_string();
    let revoke = clients_request(Method::DELETE, &format!("/clients/{id}"), Some(&id), None);
    let (status, _, body) = call(&warm, "revoke", authorized(revoke, Some(&admin.bearer()))).await;
    assert_eq!(status, 200);
    assert!(serde_json::from_slice::<Value>(&body).unwrap()["revoked_at"].is_string());

    // A fresh environment never saw the key: refused at once.
    let cold = db.app_in(AuthMode::ApiKey, 0);
    assert_eq!(call(&cold, "availability", list()).await.0, 401);
    // The warm one trusts its look-up (no database round trip: the
    // revocation is not seen) until the look-up is 30 s old, never longer.
    let revoked_by = std::time::Instant::now();
    assert_eq!(
        call(&warm, "availability", list()).await.0,
        200,
        "cached look-up"
    );
    loop {
        let status = call(&warm, "availability", list()).await.0;
        if status == 401 {
            break;
        }
        assert!(
            revoked_by.elapsed() < shared::clients::Gate::LOOKUP_LIFETIME,
            "still served {status} {:?} after the revocation",
            revoked_by.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    db.drop().await;
}

#[tokio::test]
async fn idempotency_keys_belong_to_their_client() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let callers = callers(&db).await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let key = new_key();
    let hold = |caller: &TestClient, slot: shared::domain::SlotId| {
        authorized(
            hold_request(&slot.to_string(), Some(key.as_str())),
            Some(&caller.bearer()),
        )
    };
    let first = call(&app, "hold", hold(&callers.owner, a)).await;
    let second = call(&app, "hold", hold(&callers.other, a)).await;
    assert_eq!((first.0, second.0), (201, 201), "two clients, two holds");
    let id = |body: &[u8]| serde_json::from_slice::<Value>(body).unwrap()["id"].clone();
    assert_ne!(id(&first.2), id(&second.2));
    // Each replays its own.
    let replay = call(&app, "hold", hold(&callers.other, a)).await;
    assert_eq!((replay.0, id(&replay.2)), (200, id(&second.2)));
    // Another slot with a key only the owner used: the other client's key
    // is its own business, so the admin gets a hold, not a 422 about it.
    let admins = call(&app, "hold", hold(&callers.admin, b)).await;
    assert_eq!(admins.0, 201, "{}", String::from_utf8_lossy(&admins.2));
    let reuse = call(&app, "hold", hold(&callers.owner, b)).await;
    assert_eq!(
        (reuse.0, reason(&reuse.2).as_str()),
        (422, "idempotency_key_reuse")
    );
    assert_eq!(db.count_holds(a, "1").await, 2);
    db.drop().await;
}

#[tokio::test]
async fn twenty_concurrent_holds_with_one_key_from_one_client_make_one_hold() {
    let db = TestDb::new().await;
    let client = db.client("retrier", Role::Booker, None).await;
    let other = db.client("bystander", Role::Booker, None).await;
    let slot = db.insert_slot(1).await;
    let apps: Vec<App> = (0..20).map(|_| db.app_in(AuthMode::ApiKey, 0)).collect();
    for app in &apps {
        warm(app).await;
        // Warm look-ups, as in a running fleet.
        call(
            app,
            "availability",
            authorized(availability_request(), Some(&client.bearer())),
        )
        .await;
    }
    let key = new_key();
    let statuses = together(apps, move |_, app| {
        let (key, client) = (key.clone(), client.clone());
        async move {
            let request = authorized(
                hold_request(&slot.to_string(), Some(key.as_str())),
                Some(&client.bearer()),
            );
            call(&app, "hold", request).await.0
        }
    })
    .await;
    let created = statuses.iter().filter(|s| **s == 201).count();
    let replayed = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!((created, replayed), (1, 19), "{statuses:?}");
    assert_eq!(db.count_holds(slot, "1").await, 1);
    // The same key from another client on the now full slot: its own
    // hold would be a second seat, so 409, and still one row.
    let app = db.app_in(AuthMode::ApiKey, 0);
    let request = authorized(
        hold_request(&slot.to_string(), Some(new_key().as_str())),
        Some(&other.bearer()),
    );
    assert_eq!(call(&app, "hold", request).await.0, 409);
    db.assert_invariants().await;
    db.drop().await;
}

/// SPEC §16: the cap on held seats holds for every client, `open` mode's
/// keyless anonymous caller included (only its rate is unlimited, §8):
/// its own `max_held_seats`, else the configured default.
#[tokio::test]
async fn open_modes_anonymous_caller_is_held_to_its_cap_on_held_seats() {
    let db = TestDb::new().await;
    let slot = db.insert_slot(10).await.to_string();
    let hold = |quantity: u32| {
        with_body(
            hold_request(&slot, Some(new_key().as_str())),
            &format!(r#"{{"quantity": {quantity}}}"#),
        )
    };
    let environment = || {
        App::new(shared::Config {
            access: shared::config::Access {
                mode: AuthMode::Open,
                rate_limit_per_second: 0,
                client_max_held_seats: 4,
            },
            ..db.config(Duration::from_secs(300))
        })
        .expect("app")
    };
    // Its row says NULL: the default, 4 seats.
    let app = environment();
    assert_eq!(call(&app, "hold", hold(3)).await.0, 201);
    let (status, _, body) = call(&app, "hold", hold(2)).await;
    assert_eq!(
        (status, reason(&body).as_str()),
        (409, "hold_limit_reached")
    );
    assert_eq!(call(&app, "hold", hold(1)).await.0, 201);
    // Its own cap wins over the default (seen by a new environment: a
    // look-up is kept up to 30 s, like a key's).
    sqlx::query("UPDATE api_clients SET max_held_seats = 6 WHERE id = 1")
        .execute(&db.admin)
        .await
        .unwrap();
    let app = environment();
    assert_eq!(call(&app, "hold", hold(2)).await.0, 201);
    let (status, _, body) = call(&app, "hold", hold(1)).await;
    assert_eq!(
        (status, reason(&body).as_str()),
        (409, "hold_limit_reached")
    );
    assert_eq!(
        db.active_seats(slot.parse().map(shared::domain::SlotId).unwrap())
            .await,
        6
    );
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn open_mode_takes_requests_without_a_key_as_anonymous_but_still_checks_keys_that_are_sent() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::Open, 5);
    let callers = callers(&db).await;
    let slot = db.insert_slot(5).await;
    let request = hold_request(&slot.to_string(), Some(new_key().as_str()));
    let (status, _, body) = call(&app, "hold", request).await;
    assert_eq!(status, 201);
    let anonymous_hold = serde_json::from_slice::<Value>(&body).unwrap()["id"].to_string();
    let owner: u64 = sqlx::query_scalar("SELECT client_id FROM holds WHERE id = ?")
        .bind(&anonymous_hold)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(owner, shared::clients::ANONYMOUS.0);
    // A key always names its client: a bad one is refused, and a booker
    // with a key cannot touch anonymous's holds.
    let bad = authorized(availability_request(), Some("Bearer nope"));
    assert_eq!(call(&app, "availability", bad).await.0, 401);
    let revoked = authorized(availability_request(), Some(&callers.revoked.bearer()));
    assert_eq!(call(&app, "availability", revoked).await.0, 401);
    let stranger = authorized(
        confirm_request(&anonymous_hold),
        Some(&callers.other.bearer()),
    );
    assert_eq!(call(&app, "confirm", stranger).await.0, 404);
    // Admin routes still need an admin key.
    let list = clients_request(Method::GET, "/clients", None, None);
    assert_eq!(call(&app, "list", list).await.0, 401);
    let list = clients_request(Method::GET, "/clients", None, None);
    assert_eq!(
        call(
            &app,
            "list",
            authorized(list, Some(&callers.admin.bearer()))
        )
        .await
        .0,
        200
    );
    // anonymous has no key to revoke: open mode is AUTH_MODE's to close.
    let revoke = clients_request(Method::DELETE, "/clients/1", Some("1"), None);
    let (status, _, body) = call(
        &app,
        "revoke",
        authorized(revoke, Some(&callers.admin.bearer())),
    )
    .await;
    assert_eq!((status, reason(&body).as_str()), (403, "forbidden"));
    let revoked: Option<String> =
        sqlx::query_scalar("SELECT CAST(revoked_at AS CHAR) FROM api_clients WHERE id = 1")
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert_eq!(revoked, None);
    db.drop().await;
}
