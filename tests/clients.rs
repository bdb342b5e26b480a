//! Client administration (SPEC §8) through the handlers: create (the key
//! shown once, only its hash stored), list, revoke (idempotent, never the
//! last admin, also when two revocations race), and the deploy's
//! bootstrap admin.

use lambda_http::http::Method;
use serde_json::{Value, json};
use shared::clients::install::install_bootstrap_admin;
use shared::clients::{KeyHash, Role};
use shared::config::AuthMode;
use shared::secret::Secret;
use shared::{App, http};
use slot_booking_tests::keys::{TestClient, authorized, clients_request};
use slot_booking_tests::*;

async fn create(app: &App, admin: &TestClient, body: Value) -> (u16, Value) {
    let request = clients_request(Method::POST, "/clients", None, Some(&body));
    read(
        http::create_client(app, authorized(request, Some(&admin.bearer())))
            .await
            .unwrap(),
    )
}

async fn list(app: &App, admin: &TestClient) -> (u16, Value) {
    let request = clients_request(Method::GET, "/clients", None, None);
    read(
        http::list_clients(app, authorized(request, Some(&admin.bearer())))
            .await
            .unwrap(),
    )
}

async fn revoke(app: &App, admin: &TestClient, id: &str) -> (u16, Value) {
    let request = clients_request(Method::DELETE, &format!("/clients/{id}"), Some(id), None);
    read(
        http::revoke_client(app, authorized(request, Some(&admin.bearer())))
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn a_created_client_gets_a_key_once_that_works_at_once_and_only_its_hash_is_kept() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let (status, created) = create(
        &app,
        &admin,
        json!({"name": "shop", "role": "booker", "rate_limit_per_second": 7}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let key = created["key"].as_str().expect("the key, once").to_string();
    assert_eq!(created["name"], "shop");
    assert_eq!(created["role"], "booker");
    assert_eq!(created["rate_limit_per_second"], 7);
    assert!(created["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(created["revoked_at"].is_null());
    // Only the lowercase hex SHA-256 is stored.
    let stored: String = sqlx::query_scalar("SELECT key_hash FROM api_clients WHERE id = ?")
        .bind(created["id"].as_u64())
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(stored, KeyHash::of(&key).as_str());
    assert!(!stored.contains(&key));
    // Works at once, in this very environment.
    let shop = TestClient {
        id: shared::clients::ClientId(created["id"].as_u64().unwrap()),
        key,
    };
    let response = http::availability(
        &app,
        authorized(availability_request(), Some(&shop.bearer())),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);

    // Listed without key or hash, oldest first.
    let (status, clients) = list(&app, &admin).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = clients
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["anonymous", "root", "shop"]);
    for client in clients.as_array().unwrap() {
        assert!(
            client.get("key").is_none() && client.get("key_hash").is_none(),
            "{client}"
        );
    }
    // A taken name.
    let (status, body) = create(&app, &admin, json!({"name": "shop"})).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("name_taken")),
        "{body}"
    );
    db.drop().await;
}

#[tokio::test]
async fn bad_bodies_are_422_naming_the_field() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    for (body, field) in [
        (json!([]), "body"),
        (json!("x"), "body"),
        (json!({}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "x".repeat(101)}), "name"),
        (json!({"name": "x", "role": "superuser"}), "role"),
        (
            json!({"name": "x", "rate_limit_per_second": -1}),
            "rate_limit_per_second",
        ),
        // An unknown field under its own name (SPEC §19.6).
        (json!({"name": "x", "key": "mine"}), "key"),
    ] {
        let (status, answer) = create(&app, &admin, body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["reason"], "validation_failed");
        assert!(answer["errors"][field].is_array(), "{body}: {answer}");
    }
    // Not JSON at all.
    let mut request = clients_request(Method::POST, "/clients", None, None);
    *request.body_mut() = lambda_http::Body::Text("{name".into());
    let (status, answer) = read(
        http::create_client(&app, authorized(request, Some(&admin.bearer())))
            .await
            .unwrap(),
    );
    assert_eq!(
        (status, answer["errors"]["body"].is_array()),
        (422, true),
        "{answer}"
    );
    db.drop().await;
}

#[tokio::test]
async fn revoking_is_idempotent_and_never_takes_the_last_admin() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let booker = db.client("shop", Role::Booker, None).await;
    let (status, first) = revoke(&app, &admin, &booker.id.to_string()).await;
    assert_eq!(status, 200);
    assert!(first["revoked_at"].is_string());
    let (status, again) = revoke(&app, &admin, &booker.id.to_string()).await;
    assert_eq!(
        (status, &again),
        (200, &first),
        "the same resource, unchanged"
    );
    let (status, body) = revoke(&app, &admin, &admin.id.to_string()).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("last_admin")),
        "{body}"
    );
    for missing in ["999999", "abc", "0"] {
        let (status, body) = revoke(&app, &admin, missing).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (404, Some("not_found")),
            "{missing}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn two_admins_revoking_each_other_at_once_leave_one_admin() {
    let db = TestDb::new().await;
    for round in 0..10 {
        let a = db.client(&format!("a{round}"), Role::Admin, None).await;
        let b = db.client(&format!("b{round}"), Role::Admin, None).await;
        let apps = vec![
            db.app_in(AuthMode::ApiKey, 0),
            db.app_in(AuthMode::ApiKey, 0),
        ];
        // Each environment has looked its admin's key up already, as a warm
        // fleet has: both requests get past the gate, and the race is the
        // transactions'. (Cold, the loser's look-up may come after the
        // winner's commit: a 401, also correct.)
        for (app, by) in apps.iter().zip([&a, &b]) {
            assert_eq!(list(app, by).await.0, 200);
        }
        let pairs = [(a.clone(), b.id), (b.clone(), a.id)];
        let answers = together(apps, move |i, app| {
            let (by, target) = pairs[i].clone();
            async move { revoke(&app, &by, &target.to_string()).await }
        })
        .await;
        let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
        statuses.sort();
        // One revocation wins; the other counts the admins it left and is
        // refused as the last admin.
        assert_eq!(statuses, [200, 409], "round {round}: {answers:?}");
        let active: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM api_clients WHERE role = 'admin' AND revoked_at IS NULL",
        )
        .fetch_one(&db.admin)
        .await
        .unwrap();
        assert_eq!(active, 1, "round {round}");
        // Make room for the next round: every admin out of the way.
        sqlx::query("UPDATE api_clients SET role = 'booker' WHERE role = 'admin'")
            .execute(&db.admin)
            .await
            .unwrap();
    }
    db.drop().await;
}

#[tokio::test]
async fn the_bootstrap_admin_is_installed_once_rekeyed_by_a_new_secret_and_stays_revoked_otherwise()
{
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let first = Secret::new("Ab3".repeat(16));
    install_bootstrap_admin(&db.admin, &first).await.unwrap();
    install_bootstrap_admin(&db.admin, &first).await.unwrap();
    let rows: Vec<(u64, String)> =
        sqlx::query_as("SELECT id, role FROM api_clients WHERE name = 'bootstrap-admin'")
            .fetch_all(&db.admin)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1, "admin");
    let admin = TestClient {
        id: shared::clients::ClientId(rows[0].0),
        key: first.expose().into(),
    };
    assert_eq!(list(&app, &admin).await.0, 200);

    // Revoked (another admin exists): a redeploy with the same secret
    // does not bring it back.
    let other = db.client("ops", Role::Admin, None).await;
    assert_eq!(revoke(&app, &other, &admin.id.to_string()).await.0, 200);
    install_bootstrap_admin(&db.admin, &first).await.unwrap();
    let fresh = db.app_in(AuthMode::ApiKey, 0);
    assert_eq!(list(&fresh, &admin).await.0, 401);
    // A rotated secret re-keys it and lifts the revocation; the old key
    // is dead.
    let second = Secret::new("Zx9_".repeat(10));
    install_bootstrap_admin(&db.admin, &second).await.unwrap();
    let rotated = TestClient {
        id: admin.id,
        key: second.expose().into(),
    };
    let fresh = db.app_in(AuthMode::ApiKey, 0);
    assert_eq!(list(&fresh, &rotated).await.0, 200);
    assert_eq!(list(&fresh, &admin).await.0, 401);
    // A secret that is not a key is refused, and nothing changes.
    assert!(
        install_bootstrap_admin(&db.admin, &Secret::new("short"))
            .await
            .is_err()
    );
    db.drop().await;
}

#[tokio::test]
async fn a_part_one_database_migrates_with_its_holds_owned_by_anonymous_and_still_served() {
    use sqlx::Connection;
    let db = TestDb::new().await;
    let server = format!("{}/{}_old", db.server, db.name);
    let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE `{}_old`",
        db.name
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let mut old = sqlx::MySqlConnection::connect(&server).await.unwrap();
    // The schema before clients: every migration before api_clients.
    let clients = shared::db::MIGRATOR
        .iter()
        .find(|m| m.description.contains("api clients"))
        .expect("the api_clients migration")
        .version;
    let before: Vec<_> = shared::db::MIGRATOR
        .iter()
        .filter(|m| m.version < clients)
        .cloned()
        .collect();
    assert_eq!(before.len(), 3, "Part I's migrations");
    let part_one = sqlx::migrate::Migrator::with_migrations(before);
    shared::migrate::runner::run(&mut old, &part_one, std::time::Duration::from_secs(5))
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining, held) \
         VALUES ('2030-01-01 08:00:00', '2030-01-01 09:00:00', 3, 2, 1)",
    )
    .execute(&mut old)
    .await
    .unwrap();
    let key = new_key();
    sqlx::query(
        "INSERT INTO holds (slot_id, idempotency_key, status, expires_at) VALUES \
         (1, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR), \
         (1, UUID(), 'confirmed', UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)",
    )
    .bind(key.as_str())
    .execute(&mut old)
    .await
    .unwrap();
    // Now the whole set, as a deploy runs it.
    shared::migrate::runner::run(
        &mut old,
        &shared::migrate::migrator(),
        std::time::Duration::from_secs(5),
    )
    .await
    .unwrap();
    let owners: Vec<u64> = sqlx::query_scalar("SELECT client_id FROM holds ORDER BY id")
        .fetch_all(&mut old)
        .await
        .unwrap();
    assert_eq!(owners, [1, 1], "anonymous owns the seed's holds");
    let quantities: Vec<u32> = sqlx::query_scalar("SELECT quantity FROM holds ORDER BY id")
        .fetch_all(&mut old)
        .await
        .unwrap();
    assert_eq!(quantities, [1, 1], "the seed's holds were of one seat");
    // In open mode the seed's clients keep their holds: the key replays.
    let app = App::new(shared::Config {
        database_url: server.clone(),
        ..db.app_in(AuthMode::Open, 0).config.clone()
    })
    .unwrap();
    let (status, hold) = read(
        http::hold(&app, hold_request("1", Some(key.as_str())))
            .await
            .unwrap(),
    );
    assert_eq!((status, hold["id"].as_u64()), (200, Some(1)), "{hold}");
    let (status, _) = read(http::confirm(&app, confirm_request("1")).await.unwrap());
    assert_eq!(status, 200);
    old.close().await.ok();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE `{}_old`",
        db.name
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    db.drop().await;
}

/// A revocation locks the active admins' rows only: a booker's row, which
/// its capped holds lock (SPEC §16), held by a long transaction, never
/// makes it wait (nor deadlock with those holds).
#[tokio::test]
async fn a_revocation_does_not_wait_for_a_bookers_locked_row() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let other = db.client("ops", Role::Admin, None).await;
    let shop = db.client("shop", Role::Booker, None).await;
    let mut held = db.admin.begin().await.unwrap();
    sqlx::query("SELECT id FROM api_clients WHERE id = ? FOR UPDATE")
        .bind(shop.id.0)
        .execute(&mut *held)
        .await
        .unwrap();
    // Waiting for it would end in the lock wait timeout: 503.
    let (status, body) = revoke(&app, &admin, &other.id.0.to_string()).await;
    assert_eq!(status, 200, "{body}");
    held.rollback().await.unwrap();
    db.drop().await;
}
