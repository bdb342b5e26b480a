//! What the migrate function keeps besides the schema, against the real
//! MariaDB: the application user, which may read and write rows (the API
//! and the sweeper work as it) and nothing else (the step is idempotent,
//! takes a rotated password, and takes back privileges granted beyond DML);
//! and the first admin key from its secret.

use shared::booking::SweepLimits;
use shared::clients::ApiKey;
use shared::config::Secret;
use shared::migrate::users::AppUser;
use shared::migrate::{self, Request, Status, Target};
use shared::{App, Config, http};
use slot_booking_tests::*;
use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError};
use sqlx::{ConnectOptions, Connection, Executor, MySqlConnection};
use std::str::FromStr;
use std::time::Duration;

/// A user name of this test's own on the shared server, dropped however
/// the test ends.
struct UniqueUser {
    name: String,
    server: String,
}

impl UniqueUser {
    fn new() -> Self {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Self {
            name: format!("sb_app_{}", &suffix[..12]),
            server: server_url(),
        }
    }
}

impl Drop for UniqueUser {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // A runtime of its own: Drop may run inside the test's runtime.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(async {
                    let mut conn = MySqlConnectOptions::from_str(&server)?.connect().await?;
                    conn.execute(sqlx::AssertSqlSafe(format!(
                        "DROP USER IF EXISTS '{name}'@'%'"
                    )))
                    .await?;
                    conn.close().await
                })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test user {}: {dropped:?}", self.name);
        }
    }
}

/// Runs the migrate function's decision (an Update, as on every deploy)
/// with the application user; the schema is already in place.
async fn deploy(db: &TestDb, user: &UniqueUser, password: &str) -> String {
    let target = Target {
        options: shared::db::url_options(&db.url).expect("options"),
        app_user: Some(AppUser::new(&user.name, Secret::new(password)).expect("user")),
        bootstrap_admin: None,
    };
    let reason = decide(target).await.expect("SUCCESS");
    assert!(!reason.contains(password), "{reason}");
    reason
}

/// The migrate function's decision on an Update: `Ok(reason)` on SUCCESS.
async fn decide(target: Target) -> Result<String, String> {
    let request = Request::from_event(&serde_json::json!({
        "RequestType": "Update",
        "ResponseURL": "https://example.invalid/r",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/sb/1",
        "RequestId": "req-users",
        "LogicalResourceId": "Migrations",
    }));
    let response =
        migrate::decide(&request, async move { Ok(target) }, Duration::from_secs(30)).await;
    match response.status {
        Status::Success => Ok(response.reason),
        Status::Failed => Err(response.reason),
    }
}

/// `mysql://user:password@host:port/database` on the test server.
fn url_as(db: &TestDb, user: &str, password: &str) -> String {
    let server = MySqlConnectOptions::from_str(&db.server).expect("server");
    format!(
        "mysql://{user}:{password}@{}:{}/{}",
        server.get_host(),
        server.get_port(),
        db.name
    )
}

async fn connect_as(
    db: &TestDb,
    user: &str,
    password: &str,
) -> Result<MySqlConnection, sqlx::Error> {
    MySqlConnectOptions::from_str(&url_as(db, user, password))?
        .connect()
        .await
}

/// The server's error number, or panics if it succeeded.
fn refusal(result: Result<sqlx::mysql::MySqlQueryResult, sqlx::Error>) -> u16 {
    match result {
        Ok(done) => panic!("allowed: {done:?}"),
        Err(err) => err
            .as_database_error()
            .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
            .map(MySqlDatabaseError::number)
            .unwrap_or_else(|| panic!("not a server refusal: {err}")),
    }
}

/// DML and the events procedure work; DDL (routines too), other databases
/// and granting are refused (1142: command denied on a table; 1044: access
/// denied to a database).
async fn assert_dml_only(conn: &mut MySqlConnection, db: &TestDb) {
    let inserted = conn
        .execute(
            "INSERT INTO slots (starts_at, ends_at, capacity, remaining) \
             VALUES ('2026-12-01 08:00:00', '2026-12-01 09:00:00', 3, 3)",
        )
        .await
        .expect("INSERT");
    let id = inserted.last_insert_id();
    let capacity: u32 = sqlx::query_scalar("SELECT capacity FROM slots WHERE id = ?")
        .bind(id)
        .fetch_one(&mut *conn)
        .await
        .expect("SELECT");
    assert_eq!(capacity, 3);
    let updated = sqlx::query("UPDATE slots SET capacity = 4, remaining = 4 WHERE id = ?")
        .bind(id)
        .execute(&mut *conn)
        .await
        .expect("UPDATE");
    assert_eq!(updated.rows_affected(), 1);
    let deleted = sqlx::query("DELETE FROM slots WHERE id = ?")
        .bind(id)
        .execute(&mut *conn)
        .await
        .expect("DELETE");
    assert_eq!(deleted.rows_affected(), 1);
    // A booking commits by the events procedure: EXECUTE works, and it
    // inserts with the caller's own INSERT (SQL SECURITY INVOKER).
    conn.execute("BEGIN").await.expect("BEGIN");
    sqlx::query(shared::events::EVENTS_COMMIT)
        .bind("slot.updated")
        .bind(None::<u64>)
        .bind(id)
        .bind(None::<u64>)
        .bind(None::<chrono::NaiveDateTime>)
        .bind("{}")
        .execute(&mut *conn)
        .await
        .expect("CALL events_commit");
    let open: u64 = sqlx::query_scalar("SELECT @@in_transaction")
        .fetch_one(&mut *conn)
        .await
        .expect("@@in_transaction");
    assert_eq!(open, 0, "the CALL committed");

    assert_eq!(
        refusal(conn.execute("CREATE TABLE intruder (id INT)").await),
        1142
    );
    // Routines are the schema's too: none made, changed or dropped.
    assert_ne!(
        refusal(conn.execute("CREATE PROCEDURE intruder() SELECT 1").await),
        0
    );
    assert_ne!(
        refusal(conn.execute("DROP PROCEDURE events_commit").await),
        0
    );
    assert_eq!(refusal(conn.execute("DROP TABLE holds").await), 1142);
    assert_eq!(
        refusal(
            conn.execute("ALTER TABLE slots ADD COLUMN intruder INT")
                .await
        ),
        1142
    );
    assert_eq!(
        refusal(
            conn.execute("CREATE INDEX intruder ON slots (capacity)")
                .await
        ),
        1142
    );
    assert_eq!(refusal(conn.execute("TRUNCATE TABLE holds").await), 1142);
    assert_eq!(
        refusal(conn.execute("SELECT * FROM mysql.user").await),
        1142
    );
    let other = format!("{}_other", db.name);
    assert_eq!(
        refusal(
            conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{other}`")))
                .await
        ),
        1044
    );
    assert_ne!(
        refusal(
            conn.execute(sqlx::AssertSqlSafe(format!(
                "GRANT SELECT ON `{}`.* TO CURRENT_USER()",
                db.name
            )))
            .await
        ),
        0
    );
}

#[tokio::test]
async fn the_application_user_can_use_rows_but_never_change_the_schema() {
    let db = TestDb::new().await;
    let user = UniqueUser::new();
    let password = "Fresh0Generated0Password0aB3dE5f";

    let reason = deploy(&db, &user, password).await;
    assert!(
        reason.ends_with(&format!("; application user {} created", user.name)),
        "{reason}"
    );
    let mut conn = connect_as(&db, &user.name, password).await.expect("login");
    assert_dml_only(&mut conn, &db).await;
    conn.close().await.ok();

    // The service itself runs as this user: hold, confirm, availability,
    // and the sweeper.
    let app = App::new(Config {
        database_url: url_as(&db, &user.name, password),
        ..db.config(Duration::from_secs(300))
    })
    .expect("app as the application user");
    let slot = db.insert_slot(2).await;
    hold_and_confirm(&app, slot).await;
    let (status, _) = read(
        http::availability(&app, availability_request())
            .await
            .unwrap(),
    );
    assert_eq!(status, 200);
    let report = app
        .booking
        .sweep(SweepLimits {
            max_due: 10,
            sample: 10,
            budget: Duration::from_secs(10),
        })
        .await
        .expect("the sweeper runs as the application user");
    assert_eq!(report.failed, 0, "{report:?}");
    db.assert_invariants().await;

    // Every deploy runs the step again: nothing changes.
    let reason = deploy(&db, &user, password).await;
    assert!(
        reason.ends_with(&format!("; application user {} checked", user.name)),
        "{reason}"
    );
    let mut conn = connect_as(&db, &user.name, password).await.expect("login");
    assert_dml_only(&mut conn, &db).await;
    conn.close().await.ok();
}

#[tokio::test]
async fn a_rotated_password_and_extra_grants_are_set_right_on_the_next_deploy() {
    let db = TestDb::new().await;
    let user = UniqueUser::new();
    deploy(&db, &user, "First0Generated0Password0xY12345").await;

    // Someone grants more by hand, here and on another database.
    for grant in [
        format!(
            "GRANT CREATE, DROP, ALTER, INDEX ON `{}`.* TO '{}'@'%'",
            db.name, user.name
        ),
        format!("GRANT SELECT ON mysql.* TO '{}'@'%'", user.name),
        format!(
            "GRANT SELECT ON `{}`.* TO '{}'@'%' WITH GRANT OPTION",
            db.name, user.name
        ),
    ] {
        db.admin
            .execute(sqlx::AssertSqlSafe(grant))
            .await
            .expect("grant by hand");
    }
    let mut conn = connect_as(&db, &user.name, "First0Generated0Password0xY12345")
        .await
        .expect("login");
    conn.execute("CREATE TABLE intruder (id INT)")
        .await
        .expect("the extra grant works before the deploy");
    conn.execute("DROP TABLE intruder").await.expect("drop it");
    conn.close().await.ok();

    // The secret was rotated; the deploy sets the new password and takes
    // the extra privileges back.
    let rotated = "Second0Generated0Password0zW6789";
    let reason = deploy(&db, &user, rotated).await;
    for extra in [
        "\"CREATE ",
        "\"DROP ",
        "\"ALTER ",
        "\"INDEX ",
        "\"SELECT ON mysql.*\"",
        "WITH GRANT OPTION",
    ] {
        assert!(reason.contains(extra), "{extra} not revoked: {reason}");
    }
    let old = connect_as(&db, &user.name, "First0Generated0Password0xY12345").await;
    let err = old.expect_err("the old password is refused");
    assert!(err.to_string().contains("Access denied"), "{err}");
    let mut conn = connect_as(&db, &user.name, rotated)
        .await
        .expect("new password");
    assert_dml_only(&mut conn, &db).await;
    conn.close().await.ok();

    // And the next deploy finds nothing to take back.
    let reason = deploy(&db, &user, rotated).await;
    assert!(!reason.contains("revoked"), "{reason}");
}

#[tokio::test]
async fn the_first_admin_key_is_installed_as_bootstrap_admin_and_a_bad_one_fails_the_deploy() {
    let db = TestDb::new().await;
    let key = "K3yFromSecretsManager0123456789abcdefABCDEFghijk";
    assert_eq!(key.len(), 48);
    let target = |key: &str| Target {
        options: shared::db::url_options(&db.url).expect("options"),
        app_user: None,
        bootstrap_admin: Some(Secret::new(key)),
    };
    let expected = ApiKey::parse(key).expect("a valid key").hash();
    for _ in 0..2 {
        // Every deploy installs it again: one client, the same hash.
        let reason = decide(target(key)).await.expect("SUCCESS");
        assert!(reason.ends_with("; first admin key installed"), "{reason}");
        assert!(!reason.contains(key), "{reason}");
        let rows: Vec<(String, String, Option<chrono::NaiveDateTime>)> = sqlx::query_as(
            "SELECT CAST(role AS CHAR), key_hash, revoked_at FROM api_clients \
             WHERE name = 'bootstrap-admin'",
        )
        .fetch_all(&db.admin)
        .await
        .expect("api_clients");
        assert_eq!(rows, [("admin".into(), expected.as_str().into(), None)]);
    }
    // A secret that is no API key fails the deploy, without showing it.
    let bad = "not a key: s3cret";
    let reason = decide(target(bad)).await.expect_err("FAILED");
    assert!(
        reason.starts_with("cannot install the first admin key"),
        "{reason}"
    );
    assert!(!reason.contains("s3cret"), "{reason}");
}
