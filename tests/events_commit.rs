//! `events::commit_with`, a booking's events and its COMMIT (the last one
//! by the `events_commit` procedure, `db::Tx::commit_by`): strings arrive
//! byte for byte whatever they hold, a CALL that fails commits nothing,
//! and a transaction left open never reaches the pool.

use shared::db::Tx;
use shared::events::{EVENTS_COMMIT, EventType, NewEvent, commit_with};
use slot_booking_tests::TestDb;
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{MySqlPool, Row};

/// A pool of one connection, as a Lambda environment has.
async fn one_connection(db: &TestDb) -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&db.url)
        .await
        .expect("pool")
}

fn event(data: &str) -> NewEvent {
    NewEvent {
        kind: EventType::SlotUpdated,
        client_id: None,
        slot_id: 7,
        hold_id: None,
        occurred_at: None,
        data: data.to_string(),
    }
}

/// A write inside `tx` before its last statement: an event by the
/// prepared INSERT.
async fn write_prepared(tx: &mut Tx<'_>) {
    sqlx::query(shared::events::EVENT_INSERT)
        .bind("slot.created")
        .bind(None::<u64>)
        .bind(1_u64)
        .bind(None::<u64>)
        .bind(None::<chrono::NaiveDateTime>)
        .bind("{}")
        .execute(&mut **tx)
        .await
        .unwrap();
}

async fn events(db: &TestDb) -> Vec<(String, Option<u64>, u64, String)> {
    sqlx::query("SELECT type, client_id, slot_id, data FROM events ORDER BY id")
        .fetch_all(&db.admin)
        .await
        .expect("events")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect()
}

/// Strings that would end a quoted literal, escape one, or comment the
/// rest out, if they were quoted, through the prepared INSERT and the
/// procedure's parameters: each comes back as it went in, in order.
#[tokio::test]
async fn strings_arrive_byte_for_byte() {
    let db = TestDb::new().await;
    let pool = one_connection(&db).await;
    let hostile = [
        r#"{"key":"it's"}"#,
        r"back\slash\' and \0 and \\",
        "'); DROP TABLE events; -- ",
        "\"; COMMIT; DELETE FROM events; #",
        "ünï©ødé 🚀 \u{0} and a\nnewline",
        "",
    ];
    let mut conn = pool.acquire().await.unwrap();
    let tx = Tx::begin(&mut conn).await.unwrap();
    let rows: Vec<NewEvent> = hostile.iter().map(|data| event(data)).collect();
    commit_with(tx, &rows).await.expect("committed");
    drop(conn);

    let stored = events(&db).await;
    let data: Vec<&str> = stored.iter().map(|row| row.3.as_str()).collect();
    assert_eq!(data, hostile, "each string as sent, in order");
    assert!(
        stored
            .iter()
            .all(|row| row.0 == "slot.updated" && row.2 == 7 && row.1.is_none()),
        "{stored:?}"
    );
    db.drop().await;
}

/// The procedure's parameters keep a time past 2038 and the largest ids
/// exactly.
#[tokio::test]
async fn times_and_ids_are_exact() {
    let db = TestDb::new().await;
    let pool = one_connection(&db).await;
    let at = chrono::NaiveDate::from_ymd_opt(2039, 2, 3)
        .unwrap()
        .and_hms_micro_opt(4, 5, 6, 7)
        .unwrap();
    let hold = NewEvent {
        kind: EventType::HoldCreated,
        client_id: Some(u64::MAX),
        slot_id: u64::MAX,
        hold_id: Some(u64::MAX - 1),
        occurred_at: Some(at),
        data: "{}".into(),
    };
    let mut conn = pool.acquire().await.unwrap();
    let tx = Tx::begin(&mut conn).await.unwrap();
    commit_with(tx, &[hold]).await.unwrap();
    drop(conn);

    type Stored = (String, u64, u64, u64, chrono::NaiveDateTime);
    let (kind, client, slot, hold_id, occurred): Stored =
        sqlx::query_as("SELECT type, client_id, slot_id, hold_id, occurred_at FROM events")
            .fetch_one(&db.admin)
            .await
            .unwrap();
    assert_eq!(
        (kind.as_str(), client, slot, hold_id, occurred),
        ("hold.created", u64::MAX, u64::MAX, u64::MAX - 1, at)
    );
    db.drop().await;
}

/// A procedure stops at its first error: the COMMIT after a failed INSERT
/// never runs, and the transaction's earlier write is rolled back with it.
#[tokio::test]
async fn a_failed_call_commits_nothing() {
    let db = TestDb::new().await;
    let pool = one_connection(&db).await;
    let mut conn = pool.acquire().await.unwrap();
    let mut tx = Tx::begin(&mut conn).await.unwrap();
    write_prepared(&mut tx).await;
    // slot_id is NOT NULL: the procedure's INSERT fails.
    let bad = sqlx::query(EVENTS_COMMIT)
        .bind("slot.updated")
        .bind(None::<u64>)
        .bind(None::<u64>)
        .bind(None::<u64>)
        .bind(None::<chrono::NaiveDateTime>)
        .bind("{}");
    let err = tx.commit_by(bad).await.expect_err("slot_id cannot be null");
    assert!(err.to_string().contains("slot_id"), "{err}");
    drop(conn);

    assert!(events(&db).await.is_empty(), "nothing committed");
    // The pool's one connection was closed, not returned inside the
    // failed transaction: the next one starts clean and commits alone.
    let mut conn = pool.acquire().await.unwrap();
    let tx = Tx::begin(&mut conn).await.unwrap();
    commit_with(tx, &[event("after")]).await.unwrap();
    drop(conn);
    let stored = events(&db).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].3, "after");
    db.drop().await;
}

/// A `Tx` dropped open (an error left by `?`) closes its connection: its
/// write is rolled back and the next user of the pool is not inside it.
/// One that ends by `rollback` keeps its connection.
#[tokio::test]
async fn a_dropped_transaction_never_reaches_the_pool() {
    let db = TestDb::new().await;
    let pool = one_connection(&db).await;
    let connection_id = |pool: MySqlPool| async move {
        sqlx::query_scalar::<_, u64>("SELECT CONNECTION_ID()")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let first = connection_id(pool.clone()).await;

    let mut conn = pool.acquire().await.unwrap();
    let tx = Tx::begin(&mut conn).await.unwrap();
    tx.rollback().await.unwrap();
    drop(conn);
    assert_eq!(
        connection_id(pool.clone()).await,
        first,
        "kept after rollback"
    );

    let mut conn = pool.acquire().await.unwrap();
    let mut tx = Tx::begin(&mut conn).await.unwrap();
    write_prepared(&mut tx).await;
    drop(tx);
    drop(conn);

    let next = connection_id(pool.clone()).await;
    assert_ne!(next, first, "the open one was closed");
    let in_transaction: u64 = sqlx::query_scalar("SELECT @@in_transaction")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(in_transaction, 0);
    assert!(events(&db).await.is_empty(), "its write rolled back");
    db.drop().await;
}
