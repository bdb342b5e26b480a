//! Runs the migrations so that a failed one cannot wedge later deploys.
//!
//! sqlx's `Migrator::run` is not used as is, for two reasons:
//! - It records a migration as `success = FALSE` before running it, and
//!   MySQL DDL commits implicitly, so a migration that fails half-way leaves
//!   that row behind; every later `run` then stops at `Dirty` before
//!   anything else, `ignore_missing` included. A rollback to the release
//!   before could never answer SUCCESS.
//! - Its lock is `GET_LOCK(name, -1)`: it waits forever, past Lambda's
//!   deadline, if an earlier run still holds the lock.
//!
//! Here, under the same lock name (so this runner and sqlx's, in any older
//! release, still exclude each other), with a bounded wait, each migration
//! runs one statement at a time, and each statement that succeeds is
//! recorded in [`STEPS`] (MySQL commits DDL at once, so a statement that
//! ran stays run). The `_sqlx_migrations` row is the one sqlx writes
//! (`success = FALSE` first, `TRUE` at the end), so sqlx still reads it.
//! - A migration this release knows that an earlier run left dirty (same
//!   checksum) is resumed at its first unrecorded statement: a statement
//!   that failed had no effect (one DDL statement is atomic in MySQL 8, a
//!   failed DML statement is rolled back), so once its cause is gone the
//!   re-run completes the migration.
//! - A dirty migration this release does not know (a newer one, met during
//!   a rollback) is left as it is, for the release that has it: under
//!   expand/contract the older code works with whatever part of it ran.
//!
//! Not covered: a run killed between a statement and its record (the
//! re-run repeats that statement and usually fails with "already exists"),
//! and rows left dirty by sqlx's own runner (no steps recorded). Both are
//! repaired by hand, docs/DEPLOY.md "A failed migration".

use super::statements;
use sqlx::migrate::{Migrate, Migration, Migrator};
use sqlx::{AssertSqlSafe, Executor, MySqlConnection};
use std::time::{Duration, Instant};

/// The statements of unfinished migrations that have run: rows exist only
/// while a migration is incomplete.
pub const STEPS: &str = "_migration_steps";

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Pending migrations applied.
    pub applied: usize,
    /// Dirty migrations of this release completed.
    pub completed: Vec<i64>,
    /// Dirty migrations unknown to this release, left alone.
    pub left_dirty: Vec<i64>,
}

/// The name sqlx-mysql 0.9 locks: `0x3d32ad9e * CRC32(database name)` in
/// hex. MySQL's `CRC32` is the same CRC-32 (ISO-HDLC) sqlx computes.
pub async fn lock_name(conn: &mut MySqlConnection) -> Result<String, String> {
    let crc: Option<i64> = sqlx::query_scalar("SELECT CAST(CRC32(DATABASE()) AS SIGNED)")
        .fetch_one(&mut *conn)
        .await
        .map_err(|err| format!("cannot read the database name: {err}"))?;
    let crc = crc.ok_or("the connection has no database selected")?;
    Ok(format!("{:x}", 0x3d32_ad9e_i64 * crc))
}

/// Takes the migration lock (waiting at most `lock_wait`), migrates,
/// releases the lock. One readable line on failure.
pub async fn run(
    conn: &mut MySqlConnection,
    migrator: &Migrator,
    lock_wait: Duration,
) -> Result<Outcome, String> {
    let name = lock_name(conn).await?;
    // Whole seconds, at least one: GET_LOCK(name, 0) would not wait at all.
    let seconds = lock_wait.as_secs().max(1);
    let started = Instant::now();
    let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, ?)")
        .bind(&name)
        .bind(seconds)
        .fetch_one(&mut *conn)
        .await
        .map_err(|err| format!("cannot take the migration lock: {err}"))?;
    if got != Some(1) {
        return Err(format!(
            "the migration lock is held by another session (waited {} s): an earlier \
             migration run may still hold it through its database connection; retry \
             the deploy after the proxy's IdleClientTimeout (docs/DEPLOY.md, A failed migration)",
            started.elapsed().as_secs()
        ));
    }
    let outcome = migrate_locked(conn, migrator).await;
    // Released with the session anyway; explicitly, for a pooled connection.
    let _ = sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(&name)
        .execute(&mut *conn)
        .await;
    outcome
}

async fn migrate_locked(
    conn: &mut MySqlConnection,
    migrator: &Migrator,
) -> Result<Outcome, String> {
    let table = migrator.table_name.as_ref();
    conn.ensure_migrations_table(table)
        .await
        .map_err(|err| format!("migrations failed: {err}"))?;
    conn.execute(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {STEPS} (version BIGINT NOT NULL, statement INT NOT NULL, \
         PRIMARY KEY (version, statement))"
    )))
    .await
    .map_err(|err| format!("cannot create {STEPS}: {err}"))?;
    let rows: Vec<(i64, Vec<u8>, bool)> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT version, checksum, success FROM {table} ORDER BY version"
    )))
    .fetch_all(&mut *conn)
    .await
    .map_err(|err| format!("cannot read {table}: {err}"))?;
    let mut outcome = Outcome::default();
    for migration in migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match rows
            .iter()
            .find(|(version, ..)| *version == migration.version)
        {
            Some((_, checksum, success)) => {
                if checksum.as_slice() != migration.checksum.as_ref() {
                    return Err(format!(
                        "migration {} {} was changed after it was applied (checksum differs); \
                         an applied migration must never be edited",
                        migration.version, migration.description
                    ));
                }
                if !success {
                    let done: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
                        "SELECT COUNT(*) FROM {STEPS} WHERE version = ?"
                    )))
                    .bind(migration.version)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(|err| format!("cannot read {STEPS}: {err}"))?;
                    tracing::warn!(
                        version = migration.version,
                        done,
                        "resuming a migration an earlier run left incomplete"
                    );
                    let from = usize::try_from(done).unwrap_or(0);
                    run_statements(conn, table, migration, from, true).await?;
                    outcome.completed.push(migration.version);
                }
            }
            None => {
                sqlx::query(AssertSqlSafe(format!(
                    "INSERT INTO {table} (version, description, success, checksum, execution_time) \
                     VALUES (?, ?, FALSE, ?, -1)"
                )))
                .bind(migration.version)
                .bind(&*migration.description)
                .bind(&*migration.checksum)
                .execute(&mut *conn)
                .await
                .map_err(|err| format!("cannot record migration {}: {err}", migration.version))?;
                run_statements(conn, table, migration, 0, false).await?;
                outcome.applied += 1;
            }
        }
    }
    outcome.left_dirty = rows
        .iter()
        .filter(|(version, _, success)| !success && !migrator.version_exists(*version))
        .map(|(version, ..)| *version)
        .collect();
    if !outcome.left_dirty.is_empty() {
        tracing::warn!(versions = ?outcome.left_dirty, "newer migrations are incomplete; left for the release that has them");
    }
    Ok(outcome)
}

/// Runs `migration`'s statements from index `from` on, recording each,
/// then marks the migration successful and forgets its steps.
async fn run_statements(
    conn: &mut MySqlConnection,
    table: &str,
    migration: &Migration,
    from: usize,
    resumed: bool,
) -> Result<(), String> {
    let started = Instant::now();
    for (index, statement) in statements::split(migration.sql.as_str())
        .into_iter()
        .enumerate()
        .skip(from)
    {
        if let Err(err) = conn.execute(AssertSqlSafe(statement)).await {
            let repair = if resumed {
                " (resumed; if it keeps failing, repair it by hand: docs/DEPLOY.md, A failed migration)"
            } else {
                ""
            };
            return Err(format!(
                "migration {} {} failed: statement {}: {}{repair}",
                migration.version,
                migration.description,
                index + 1,
                cause(&err)
            ));
        }
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {STEPS} (version, statement) VALUES (?, ?)"
        )))
        .bind(migration.version)
        .bind(i64::try_from(index).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await
        .map_err(|err| {
            format!(
                "cannot record a step of migration {}: {err}",
                migration.version
            )
        })?;
    }
    let nanos = i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX);
    sqlx::query(AssertSqlSafe(format!(
        "UPDATE {table} SET success = TRUE, execution_time = ? WHERE version = ?"
    )))
    .bind(nanos)
    .bind(migration.version)
    .execute(&mut *conn)
    .await
    .map_err(|err| format!("cannot record migration {}: {err}", migration.version))?;
    sqlx::query(AssertSqlSafe(format!(
        "DELETE FROM {STEPS} WHERE version = ?"
    )))
    .bind(migration.version)
    .execute(&mut *conn)
    .await
    .map_err(|err| {
        format!(
            "cannot clear the steps of migration {}: {err}",
            migration.version
        )
    })?;
    Ok(())
}

fn cause(err: &sqlx::Error) -> String {
    match err.as_database_error() {
        Some(db) => db.message().to_string(),
        None => err.to_string(),
    }
}
