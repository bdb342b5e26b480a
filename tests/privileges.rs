//! Least privilege (SPEC §16): the migrate function's two application
//! users, logged in as themselves. Each may do exactly what its table
//! below says, table by table, and is refused every other statement: DDL,
//! routines, other schemas, grants, locks. And the service runs as them:
//! every booking route, the sweeper and the publisher's statements as the
//! booking user; every `/clients` route as the client administration user.
//!
//! The tables are the contract written out: a grant added in the code
//! without a line here, or a table no user may touch turned into one they
//! may, fails.

use lambda_http::http::Method;
use serde_json::{Value, json};
use shared::clients::Role;
use shared::events::{self, Unsent};
use shared::http;
use shared::migrate::duty::Duty;
use slot_booking_tests::caps::capped_hold;
use slot_booking_tests::db_users::{UniqueUser, denied, deploy};
use slot_booking_tests::keys::{TestClient, clients_request};
use slot_booking_tests::*;
use sqlx::{Connection, Executor, MySqlConnection};
use std::time::Duration;

const ROWS: &[&str] = &["SELECT", "INSERT", "UPDATE", "DELETE"];

/// What the booking user may do, table by table; nothing on any other.
const BOOKING: &[(&str, &[&str])] = &[
    ("slots", ROWS),
    ("holds", ROWS),
    ("api_clients", &["SELECT"]),
    ("client_allowances", &["SELECT", "INSERT", "UPDATE"]),
    ("waitlist_entries", &["SELECT", "INSERT", "UPDATE"]),
    ("events", ROWS),
    ("event_feed", &["SELECT", "UPDATE"]),
    ("sweep_reports", &["SELECT", "UPDATE"]),
    // Webhooks (SPEC §20): the subscriptions API, the dispatcher and the
    // delivery worker.
    ("webhook_subscriptions", ROWS),
    ("webhook_deliveries", ROWS),
];

/// What the client administration user may do; nothing on any other.
const CLIENT_ADMIN: &[(&str, &[&str])] = &[
    ("api_clients", &["SELECT", "INSERT", "UPDATE"]),
    ("client_allowances", &["SELECT", "INSERT", "UPDATE"]),
    // A revocation gives the client's seats back (SPEC §23.9).
    ("slots", &["SELECT", "UPDATE"]),
    ("holds", &["SELECT", "INSERT", "UPDATE"]),
    ("waitlist_entries", &["SELECT", "UPDATE"]),
    ("events", &["INSERT"]),
];

async fn two_users(db: &TestDb) -> (UniqueUser, UniqueUser) {
    let booking = UniqueUser::new(Duty::Booking, "Booking0Generated0Password0aB3dE5");
    let clients = UniqueUser::new(Duty::ClientAdmin, "Clients0Generated0Password0cD4eF6");
    let reason = deploy(db, &[&booking, &clients]).await;
    assert!(
        reason.ends_with(&format!(
            "; booking user {} created; client administration user {} created",
            booking.name, clients.name
        )),
        "{reason}"
    );
    (booking, clients)
}

/// The probe of `privilege` on `table`: a statement that needs it and, on
/// the rows, changes nothing (inside a transaction rolled back).
fn probe(privilege: &str, table: &str, column: &str) -> String {
    match privilege {
        "SELECT" => format!("SELECT COUNT(*) FROM `{table}`"),
        "INSERT" => format!("INSERT INTO `{table}` () VALUES ()"),
        "UPDATE" => format!("UPDATE `{table}` SET `{column}` = NULL WHERE FALSE"),
        "DELETE" => format!("DELETE FROM `{table}` WHERE FALSE"),
        other => panic!("no probe for {other}"),
    }
}

/// Every table of the schema with its first column.
async fn tables(db: &TestDb) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT CAST(TABLE_NAME AS CHAR), CAST(COLUMN_NAME AS CHAR) FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = ? AND ORDINAL_POSITION = 1 ORDER BY TABLE_NAME",
    )
    .bind(&db.name)
    .fetch_all(&db.admin)
    .await
    .expect("tables")
}

/// Runs the matrix for `user`: every table of the schema × SELECT, INSERT,
/// UPDATE, DELETE, allowed exactly where `allowed` says.
async fn assert_table_privileges(db: &TestDb, user: &UniqueUser, allowed: &[(&str, &[&str])]) {
    let tables = tables(db).await;
    for (table, _) in allowed {
        assert!(
            tables.iter().any(|(name, _)| name == table),
            "{table} is not in the schema"
        );
    }
    let mut conn = user.connect(db).await.expect("login");
    let mut wrong = Vec::new();
    for (table, column) in &tables {
        let expected: &[&str] = allowed
            .iter()
            .find(|(name, _)| name == table)
            .map_or(&[], |(_, privileges)| privileges);
        for privilege in ROWS {
            conn.execute("BEGIN").await.expect("BEGIN");
            let result = conn
                .execute(sqlx::AssertSqlSafe(probe(privilege, table, column)))
                .await;
            conn.execute("ROLLBACK").await.expect("ROLLBACK");
            let refused = denied(&result).is_some();
            if refused == expected.contains(privilege) {
                wrong.push(format!(
                    "{privilege} on {table}: {}",
                    if refused { "refused" } else { "allowed" }
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}: {wrong:#?}", user.name);
    conn.close().await.ok();
}

/// Statements no application user may run; each must be refused for want
/// of a privilege (not for any other error).
/// `victim`: a connection of another user's, for `KILL`.
fn never(db: &TestDb, victim: u64) -> Vec<String> {
    let other = format!("{}_other", db.name);
    vec![
        "CREATE TABLE intruder (id INT)".into(),
        "CREATE TABLE intruder LIKE slots".into(),
        "ALTER TABLE slots ADD COLUMN intruder INT".into(),
        "CREATE INDEX intruder ON slots (capacity)".into(),
        "DROP TABLE holds".into(),
        "TRUNCATE TABLE holds".into(),
        "RENAME TABLE holds TO intruder".into(),
        "CREATE VIEW intruder AS SELECT 1".into(),
        "CREATE TRIGGER intruder BEFORE INSERT ON slots FOR EACH ROW SET @x = 1".into(),
        "CREATE PROCEDURE intruder() SELECT 1".into(),
        "DROP PROCEDURE events_commit".into(),
        "ALTER PROCEDURE events_commit COMMENT 'intruder'".into(),
        "LOCK TABLES slots READ".into(),
        "SELECT * FROM _sqlx_migrations".into(),
        "DELETE FROM _sqlx_migrations".into(),
        "SELECT * FROM mysql.user".into(),
        "SELECT * FROM mysql.proxies_priv".into(),
        format!("CREATE DATABASE `{other}`"),
        format!("GRANT SELECT ON `{}`.* TO CURRENT_USER()", db.name),
        "CREATE USER intruder IDENTIFIED BY 'Intruder0Password0123'".into(),
        "CREATE ROLE intruder".into(),
        "SET GLOBAL max_connections = 10".into(),
        format!("KILL {victim}"),
    ]
}

async fn assert_refused_everything_else(db: &TestDb, user: &UniqueUser) {
    let mut victim = MySqlConnection::connect(&db.url).await.expect("root");
    let victim_id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&mut victim)
        .await
        .expect("CONNECTION_ID");
    let mut conn = user.connect(db).await.expect("login");
    let mut allowed = Vec::new();
    for statement in never(db, victim_id) {
        let result = conn.execute(sqlx::AssertSqlSafe(statement.clone())).await;
        if denied(&result).is_none() {
            allowed.push(format!("{statement}: {result:?}"));
        }
    }
    conn.execute("UNLOCK TABLES").await.ok();
    assert!(allowed.is_empty(), "{}: {allowed:#?}", user.name);
    conn.close().await.ok();
    sqlx::query("SELECT 1")
        .execute(&mut victim)
        .await
        .expect("the other user's connection is alive");
}

/// `CALL events_commit(…)`: a slot.updated event, committed.
async fn call_events_commit(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    conn.execute("BEGIN").await?;
    let called = sqlx::query(shared::events::EVENTS_COMMIT)
        .bind("slot.updated")
        .bind(None::<u64>)
        .bind(1u64)
        .bind(None::<u64>)
        .bind(None::<chrono::NaiveDateTime>)
        .bind("{}")
        .execute(&mut *conn)
        .await
        .map(drop);
    conn.execute("ROLLBACK").await?;
    called
}

#[tokio::test]
async fn each_user_may_do_exactly_what_its_table_says_and_nothing_else() {
    let db = TestDb::new().await;
    let (booking, clients) = two_users(&db).await;
    assert_table_privileges(&db, &booking, BOOKING).await;
    assert_table_privileges(&db, &clients, CLIENT_ADMIN).await;
    assert_refused_everything_else(&db, &booking).await;
    assert_refused_everything_else(&db, &clients).await;

    // The procedures a booking commits and a capped hold claims by: the
    // booking user's alone.
    let mut conn = booking.connect(&db).await.expect("login");
    call_events_commit(&mut conn)
        .await
        .expect("the booking user calls events_commit");
    // A capped hold locks its client's row.
    conn.execute("BEGIN").await.unwrap();
    sqlx::query("SELECT id FROM api_clients WHERE id = 1 FOR UPDATE")
        .execute(&mut conn)
        .await
        .expect("SELECT … FOR UPDATE on api_clients");
    conn.execute("ROLLBACK").await.unwrap();
    conn.close().await.ok();
    let mut conn = clients.connect(&db).await.expect("login");
    let result = call_events_commit(&mut conn).await;
    assert!(denied(&result).is_some(), "{result:?}");
    // A capped hold's claim, the booking user's alone too (its use by the
    // booking user: the capped holds below).
    for claim in [
        "CALL hold_claim_capped(1, 60, 1, 10, 1)",
        "CALL hold_claim_waiting(1, 60, 1, 10, 1)",
        "CALL hold_claim_floor(1, 60, 1, 10, 1, 300000000)",
    ] {
        let result = conn.execute(claim).await.map(drop);
        assert!(denied(&result).is_some(), "{claim}: {result:?}");
    }
    conn.close().await.ok();
}

/// The answer of a handler, read.
fn answered(response: http::HandlerResult) -> (u16, Value) {
    read(response.expect("handled"))
}

#[tokio::test]
async fn the_service_runs_as_its_users() {
    let db = TestDb::new().await;
    let (booking, clients) = two_users(&db).await;
    let admin = db.client("root", Role::Admin, None).await;
    let shop = db.client("shop", Role::Booker, None).await;

    // Every booking route, as the booking user; a keyed client's holds are
    // capped (the client's row locked first).
    let app = booking.app(&db);
    let (status, body) = slots::create(
        &app,
        &admin,
        &slots::slot_body(&slots::tomorrow(9), &slots::tomorrow(10), 3),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let slot = body["slots"][0]["id"]
        .as_u64()
        .or(body["id"].as_u64())
        .expect("slot id");
    let (status, body) = slots::patch(&app, &admin, slot, &json!({"capacity": 4})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = slots::get(&app, Some(&shop), &slot.to_string()).await;
    assert_eq!(status, 200, "{body}");
    let slot_id = shared::domain::SlotId(slot);
    let (status, held, _) = capped_hold(&app, &shop, slot_id, new_key().as_str(), 2).await;
    assert_eq!(status, 201, "{held}");
    let hold = id_of(&held);
    for (name, answer) in [
        (
            "extend",
            answered(http::extend_hold(&app, shop.by(extend_request(&hold))).await),
        ),
        (
            "get",
            answered(http::get_hold(&app, shop.by(get_hold_request(&hold))).await),
        ),
        (
            "confirm",
            answered(http::confirm(&app, shop.by(confirm_request(&hold))).await),
        ),
        (
            "availability",
            answered(http::availability(&app, shop.by(availability_request())).await),
        ),
    ] {
        assert_eq!(answer.0, 200, "{name}: {}", answer.1);
    }
    let (status, second, _) = capped_hold(&app, &shop, slot_id, new_key().as_str(), 1).await;
    assert_eq!(status, 201, "{second}");
    let (status, body) =
        answered(http::cancel(&app, shop.by(cancel_request(&id_of(&second)))).await);
    assert_eq!(status, 200, "{body}");
    let feed = slot_booking_tests::events::page(&app, &admin, "").await;
    assert_eq!(feed.status, 200, "{}", feed.body);
    let (status, body) = slots::create(
        &app,
        &admin,
        &slots::slot_body(&slots::tomorrow(11), &slots::tomorrow(12), 1),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let empty = body["slots"][0]["id"]
        .as_u64()
        .or(body["id"].as_u64())
        .expect("slot id");
    let (status, body) = slots::delete(&app, &admin, empty).await;
    assert!(matches!(status, 200 | 204), "{status} {body}");

    // The sweeper (its expiries, repairs, sequencing and retention) and
    // the publisher's statements, as the booking user.
    let report = app
        .booking
        .sweep(shared::booking::SweepLimits {
            max_due: 10,
            sample: 10,
            budget: Duration::from_secs(10),
        })
        .await
        .expect("the sweeper runs as the booking user");
    assert_eq!(report.failed, 0, "{report:?}");
    let mut conn = booking.connect(&db).await.expect("login");
    let got: Option<i64> = sqlx::query_scalar(events::PUBLISH_LOCK)
        .fetch_one(&mut conn)
        .await
        .expect("lock");
    assert_eq!(got, Some(1));
    let through: u64 = sqlx::query_scalar(events::PUBLISHED_THROUGH)
        .fetch_one(&mut conn)
        .await
        .expect("through");
    let sent = sqlx::query(events::PUBLISH_SCAN)
        .bind(through)
        .bind(100u32)
        .fetch_all(&mut conn)
        .await
        .expect("scan");
    assert!(
        !sent.is_empty(),
        "the events of the run, sequenced by the sweeper"
    );
    sqlx::query(events::PUBLISH_ADVANCE)
        .bind(through + sent.len() as u64)
        .execute(&mut conn)
        .await
        .expect("advance");
    sqlx::query(events::PUBLISH_BACKLOG)
        .fetch_one(&mut conn)
        .await
        .expect("backlog");
    sqlx::query(events::PUBLISH_UNLOCK)
        .fetch_one(&mut conn)
        .await
        .expect("unlock");
    let cutoff = chrono::Utc::now() + chrono::Duration::hours(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let purged = events::purge(&mut conn, cutoff, Unsent::Purge, deadline)
        .await
        .expect("retention");
    assert!(purged.deleted > 0, "{purged:?}");
    conn.close().await.ok();
    db.assert_invariants().await;

    // Every client route, as the client administration user.
    let app = clients.app(&db);
    let request = |method: Method, path: &str, id: Option<&str>, body: Option<Value>| {
        admin.by(clients_request(method, path, id, body.as_ref()))
    };
    let created = request(Method::POST, "/clients", None, Some(json!({"name": "new"})));
    let (status, created) = answered(http::create_client(&app, created).await);
    assert_eq!(status, 201, "{created}");
    let (id, list) = (
        created["id"].to_string(),
        request(Method::GET, "/clients", None, None),
    );
    let (status, body) = answered(http::list_clients(&app, list).await);
    assert_eq!(status, 200, "{body}");
    let (path, limits) = (format!("/clients/{id}"), json!({"max_held_seats": 3}));
    let patch = request(Method::PATCH, &path, Some(&id), Some(limits));
    let (status, body) = answered(http::patch_client(&app, patch).await);
    assert_eq!(status, 200, "{body}");
    // The new client holds the last seat of a slot whose line the shop
    // waits in: its revocation gives it back and offers it, every
    // statement as the client administration user (SPEC §23.9).
    let new = TestClient {
        id: shared::clients::ClientId(created["id"].as_u64().expect("id")),
        key: created["key"].as_str().expect("key").to_string(),
    };
    let booking_app = booking.app(&db);
    let (status, body) = slots::create(
        &booking_app,
        &admin,
        &slots::slot_body(&slots::tomorrow(11), &slots::tomorrow(12), 1),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let full = body["id"].as_u64().expect("slot id").to_string();
    let hold = new.by(hold_request(&full, Some(new_key().as_str())));
    let (status, body) = answered(http::hold(&booking_app, hold).await);
    assert_eq!(status, 201, "{body}");
    let join = shop.by(join_request(&full, new_key().as_str(), "{}"));
    let (status, entry) = answered(http::join_waitlist(&booking_app, join).await);
    assert_eq!(status, 201, "{entry}");
    let revoke = request(Method::DELETE, &path, Some(&id), None);
    let (status, body) = answered(http::revoke_client(&app, revoke).await);
    assert!(matches!(status, 200 | 204), "{status} {body}");
    let entry = shop.by(entry_request("GET", &entry["id"].to_string()));
    let (status, entry) = answered(http::get_entry(&booking_app, entry).await);
    assert_eq!(
        (status, entry["status"].as_str()),
        (200, Some("offered")),
        "{entry}"
    );
}
