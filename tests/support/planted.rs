//! Planted bugs, to prove the history checker: hold sequences that are
//! known to be wrong, run as real SQL against a test database with the
//! project's schema. Never used by the service; they exist so that a test
//! can show the checker rejecting what they produce.
//!
//! Each answers like `shared::http::hold` (status, JSON body with the hold
//! resource's fields or `reason`), so its calls are recorded as the real
//! service's are. A barrier placed inside the sequence makes the race each
//! bug opens happen on every run.

use serde_json::{Value, json};
use sqlx::{MySqlConnection, MySqlPool};
use tokio::sync::Barrier;

const ACTIVE_COUNT: &str = "SELECT CAST(s.remaining AS SIGNED), (SELECT COUNT(*) FROM holds h \
     WHERE h.slot_id = s.id AND h.status = 'held' AND h.expires_at > UTC_TIMESTAMP(6)) \
     FROM slots s WHERE s.id = ?";
const INSERT: &str = "INSERT INTO holds (slot_id, idempotency_key, status, expires_at) \
     VALUES (?, ?, 'held', UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE)";
const BY_KEY: &str =
    "SELECT id, slot_id, idempotency_key, status FROM holds WHERE idempotency_key = ?";

type HoldRow = (u64, u64, String, String);

fn resource((id, slot_id, key, status): HoldRow) -> Value {
    json!({"id": id, "slot_id": slot_id, "idempotency_key": key, "status": status})
}

fn full() -> (u16, Value) {
    (
        409,
        json!({"message": "full", "reason": "capacity_exhausted"}),
    )
}

async fn by_key(conn: &mut MySqlConnection, key: &str) -> Option<HoldRow> {
    sqlx::query_as(BY_KEY)
        .bind(key)
        .fetch_optional(conn)
        .await
        .expect("hold by key")
}

/// Inserts the hold and answers 201, or 200 with the winner's hold when
/// the key's UNIQUE index refuses it.
async fn insert(conn: &mut MySqlConnection, slot: u64, key: &str) -> (u16, Value) {
    match sqlx::query(INSERT)
        .bind(slot)
        .bind(key)
        .execute(&mut *conn)
        .await
    {
        Ok(_) => (201, resource(by_key(conn, key).await.expect("inserted"))),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            (200, resource(by_key(conn, key).await.expect("winner")))
        }
        Err(e) => panic!("planted insert: {e}"),
    }
}

/// Bug (a), "lock removed": counts the slot's active holds with a plain
/// read, then inserts if there was room, with no slot lock and no counter.
/// Every caller waits at `between` after its count, so all of them count
/// the same free seats and all insert.
pub async fn hold_without_lock(
    pool: &MySqlPool,
    slot: u64,
    key: &str,
    between: &Barrier,
) -> (u16, Value) {
    let mut conn = pool.acquire().await.expect("connection");
    let (remaining, active): (i64, i64) = sqlx::query_as(ACTIVE_COUNT)
        .bind(slot)
        .fetch_one(&mut *conn)
        .await
        .expect("count");
    between.wait().await;
    if active >= remaining {
        return full();
    }
    insert(&mut conn, slot, key).await
}

/// The seed's sequence (SPEC §4): the key looked up, then in one
/// transaction the slot locked, the key looked up again, the active holds
/// counted, the hold inserted. Bug (b), "key re-check removed", is this
/// with `recheck = false`. Callers meet at `between` after the first
/// look-up, so all of them miss the key; the first to get the lock inserts,
/// and the ones queued behind it count its hold.
pub async fn seed_hold(
    pool: &MySqlPool,
    slot: u64,
    key: &str,
    between: &Barrier,
    recheck: bool,
) -> (u16, Value) {
    let mut conn = pool.acquire().await.expect("connection");
    if let Some(hold) = by_key(&mut conn, key).await {
        return (200, resource(hold));
    }
    between.wait().await;
    let mut tx = sqlx::Connection::begin(&mut *conn).await.expect("begin");
    sqlx::query("SELECT id FROM slots WHERE id = ? FOR UPDATE")
        .bind(slot)
        .fetch_one(&mut *tx)
        .await
        .expect("slot lock");
    if recheck && let Some(hold) = by_key(&mut tx, key).await {
        return (200, resource(hold));
    }
    let (remaining, active): (i64, i64) = sqlx::query_as(ACTIVE_COUNT)
        .bind(slot)
        .fetch_one(&mut *tx)
        .await
        .expect("count");
    if active >= remaining {
        return full();
    }
    let answer = insert(&mut tx, slot, key).await;
    tx.commit().await.expect("commit");
    answer
}
