//! The migrate function's runner when a migration fails half-way or an
//! earlier run still holds the migration lock, against the real database
//! (each test on its own new database).

use serde_json::json;
use shared::migrate::{self, Status, runner};
use slot_booking_tests::server_url;
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor, MySqlConnection, SqlStr};
use std::str::FromStr;
use std::time::Duration;

/// A new, empty database; dropped at the end of the test.
struct FreshDb {
    name: String,
}

impl FreshDb {
    async fn new() -> Self {
        let name = format!("sb_migrate_{}", uuid::Uuid::new_v4().simple());
        let mut conn = server().connect().await.expect("connect to the server");
        conn.execute(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .await
            .expect("create database");
        conn.close().await.ok();
        Self { name }
    }

    fn options(&self) -> MySqlConnectOptions {
        server().database(&self.name)
    }

    async fn connect(&self) -> MySqlConnection {
        self.options().connect().await.expect("connect")
    }

    async fn drop(self) {
        let mut conn = server().connect().await.expect("connect");
        conn.execute(AssertSqlSafe(format!("DROP DATABASE `{}`", self.name)))
            .await
            .expect("drop database");
        conn.close().await.ok();
    }
}

fn server() -> MySqlConnectOptions {
    MySqlConnectOptions::from_str(&server_url()).expect("TEST_DATABASE_URL")
}

/// sqlx-mysql 0.9's lock name: `0x3d32ad9e * crc32(database)` in hex,
/// with the CRC-32 (ISO-HDLC, as zlib) computed here.
fn sqlx_lock_name(database: &str) -> String {
    let mut crc = !0u32;
    for byte in database.bytes() {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    format!("{:x}", 0x3d32_ad9e_i64 * i64::from(!crc))
}

const NEW_VERSION: i64 = 29_991_231_000_001;

/// The release after this one: today's migrations plus one whose second
/// statement fails until `repair_probe` exists.
fn newer_release() -> Migrator {
    let mut migrations: Vec<Migration> = migrate::migrator().iter().cloned().collect();
    migrations.push(Migration::new(
        NEW_VERSION,
        "add note".into(),
        MigrationType::Simple,
        SqlStr::from_static(
            "-- two statements\n\
             ALTER TABLE slots ADD COLUMN note INT NULL;\n\
             INSERT INTO repair_probe (id) VALUES (1);\n",
        ),
        false,
    ));
    let mut migrator = Migrator::with_migrations(migrations);
    migrator.set_ignore_missing(true);
    migrator
}

/// `(version, success)` of every recorded migration.
async fn recorded(conn: &mut MySqlConnection) -> Vec<(i64, bool)> {
    sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
        .fetch_all(conn)
        .await
        .expect("read _sqlx_migrations")
}

async fn has_note_column(conn: &mut MySqlConnection) -> bool {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'slots' AND column_name = 'note'",
    )
    .fetch_one(conn)
    .await
    .expect("read information_schema");
    n == 1
}

const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_half_applied_migration_does_not_wedge_the_rollback_and_a_rerun_completes_it() {
    let db = FreshDb::new().await;
    let mut conn = db.connect().await;
    let older = migrate::migrator();
    let newer = newer_release();
    let known = older.iter().count();

    // The deploy of the newer release: its migration fails on statement 2,
    // after statement 1 (DDL, committed at once) has run.
    let reason = runner::run(&mut conn, &newer, WAIT)
        .await
        .expect_err("the second statement fails");
    assert!(
        reason.starts_with(&format!(
            "migration {NEW_VERSION} add note failed: statement 2: "
        )),
        "{reason}"
    );
    assert!(reason.contains("repair_probe"), "{reason}");
    assert!(has_note_column(&mut conn).await);
    assert_eq!(
        recorded(&mut conn).await.last(),
        Some(&(NEW_VERSION, false)),
        "recorded as dirty, as sqlx does"
    );

    // What wedged the stack: sqlx's own runner, in the older release that
    // the rollback brings back, stops at the dirty row.
    let stock = older.run(&mut conn).await;
    assert!(
        matches!(stock, Err(MigrateError::Dirty(NEW_VERSION))),
        "{stock:?}"
    );

    // The rollback: the older release answers SUCCESS and leaves the newer
    // migration as it is.
    let rolled_back = runner::run(&mut conn, &older, WAIT)
        .await
        .expect("the older release migrates over a newer dirty migration");
    assert_eq!(rolled_back.applied, 0);
    assert_eq!(rolled_back.left_dirty, vec![NEW_VERSION]);
    assert_eq!(
        recorded(&mut conn).await.last(),
        Some(&(NEW_VERSION, false))
    );

    // The cause is fixed; the newer release is deployed again and resumes at
    // statement 2 (re-running statement 1 would fail: duplicate column).
    conn.execute("CREATE TABLE repair_probe (id INT PRIMARY KEY)")
        .await
        .expect("create repair_probe");
    let rerun = runner::run(&mut conn, &newer, WAIT)
        .await
        .expect("the re-run completes the migration");
    assert_eq!(rerun.applied, 0);
    assert_eq!(rerun.completed, vec![NEW_VERSION]);
    let probes: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM repair_probe")
        .fetch_one(&mut conn)
        .await
        .expect("count");
    assert_eq!(probes, 1);
    let all = recorded(&mut conn).await;
    assert_eq!(all.len(), known + 1);
    assert!(all.iter().all(|(_, success)| *success), "{all:?}");
    let steps: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {}",
        runner::STEPS
    )))
    .fetch_one(&mut conn)
    .await
    .expect("count steps");
    assert_eq!(steps, 0, "steps are forgotten once a migration completes");

    // A later rollback, and sqlx's own runner, find nothing wrong.
    let again = runner::run(&mut conn, &older, WAIT).await.expect("older");
    assert_eq!(again, runner::Outcome::default());
    older
        .run(&mut conn)
        .await
        .expect("sqlx's runner accepts the result");
    assert!(has_note_column(&mut conn).await);
    conn.close().await.ok();
    db.drop().await;
}

#[tokio::test]
async fn a_held_migration_lock_fails_the_run_within_its_budget() {
    let db = FreshDb::new().await;
    // An earlier run that has not let go, holding the lock under the name
    // sqlx's runner (any older release) uses. Not through sqlx's `lock()`:
    // its GET_LOCK(name, -1) waits forever on MySQL but is refused (NULL,
    // warning 1411) by MariaDB, where it would hold nothing.
    let mut earlier = db.connect().await;
    let name = sqlx_lock_name(&db.name);
    let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(&name)
        .fetch_one(&mut earlier)
        .await
        .expect("take the lock");
    assert_eq!(got, Some(1));

    let mut conn = db.connect().await;
    let reason = runner::run(&mut conn, &migrate::migrator(), Duration::from_secs(1))
        .await
        .expect_err("the lock is held");
    assert!(reason.contains("migration lock is held"), "{reason}");
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
    )
    .fetch_one(&mut conn)
    .await
    .expect("count tables");
    assert_eq!(tables, 0, "nothing ran without the lock");
    conn.close().await.ok();

    // Through the custom resource: the wait comes out of the budget, and
    // CloudFormation gets FAILED instead of no answer.
    let request = migrate::Request::from_event(&json!({"RequestType": "Update"}));
    let options = db.options();
    let response =
        migrate::decide(&request, async move { Ok(options) }, Duration::from_secs(2)).await;
    assert_eq!(response.status, Status::Failed);
    assert!(
        response.reason.contains("migration lock is held"),
        "{}",
        response.reason
    );

    // Once the earlier run lets go, the next run migrates.
    sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(&name)
        .execute(&mut earlier)
        .await
        .expect("unlock");
    let mut conn = db.connect().await;
    let outcome = runner::run(&mut conn, &migrate::migrator(), WAIT)
        .await
        .expect("the lock is free");
    assert_eq!(outcome.applied, migrate::migrator().iter().count());
    conn.close().await.ok();
    earlier.close().await.ok();
    db.drop().await;
}
