//! Capped clients for the tests of SPEC §16's per-client cap: a booker
//! with its own `max_held_seats`, its holds through the handler, and
//! environments that already know its key.

use super::TestDb;
use super::keys::{TestClient, authorized};
use super::seats::{hold_seats_request, read_replayed};
use serde_json::Value;
use shared::App;
use shared::clients::{Needs, Role};
use shared::domain::SlotId;
use shared::http;
use std::time::Duration;

pub type Answer = (u16, Value, bool);

/// A booker whose own `max_held_seats` is `cap`.
pub async fn capped_client(db: &TestDb, name: &str, cap: u32) -> TestClient {
    let client = db.client(name, Role::Booker, None).await;
    set_cap(db, &client, cap).await;
    client
}

pub async fn set_cap(db: &TestDb, client: &TestClient, cap: u32) {
    sqlx::query("UPDATE api_clients SET max_held_seats = ? WHERE id = ?")
        .bind(cap)
        .bind(client.id.0)
        .execute(&db.admin)
        .await
        .expect("cap");
}

pub async fn capped_hold(
    app: &App,
    client: &TestClient,
    slot: SlotId,
    key: &str,
    quantity: u32,
) -> Answer {
    let request = hold_seats_request(&slot.0.to_string(), key, quantity);
    let request = authorized(request, Some(&client.bearer()));
    read_replayed(http::hold(app, request).await.expect("hold handler"))
}

/// `n` warm environments that already know the client's key, as warm
/// Lambdas do: the race is between the holds alone.
pub async fn warm_apps_for(db: &TestDb, n: usize, client: &TestClient) -> Vec<App> {
    let apps = db.warm_apps(n, Duration::from_secs(300)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    for app in &apps {
        let bearer = client.bearer();
        app.gate
            .identify(Some(&bearer), Needs::Booker, deadline)
            .await
            .expect("the key is known");
    }
    apps
}

/// The client's seats in active holds, by the database's clock.
pub async fn client_seats(db: &TestDb, client: &TestClient) -> i64 {
    sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM holds \
         WHERE client_id = ? AND status = 'held' AND expires_at > UTC_TIMESTAMP(6)",
    )
    .bind(client.id.0)
    .fetch_one(&db.admin)
    .await
    .expect("client seats")
}

/// Every client's active seats (and its allowance's bound above them) and
/// every slot's held and confirmed seats, in one consistent snapshot, with
/// a `now` read after it. A cap of 0 is none: that client is not checked.
pub async fn snapshot_broken(db: &TestDb, clients: &[TestClient], caps: &[u32]) -> Vec<String> {
    let mut conn = db.admin.acquire().await.expect("connection");
    sqlx::query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .execute(&mut *conn)
        .await
        .expect("snapshot");
    let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
        .fetch_one(&mut *conn)
        .await
        .expect("now");
    let mut broken = Vec::new();
    for (client, cap) in clients.iter().zip(caps).filter(|(_, cap)| **cap > 0) {
        let held: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) FROM holds \
             WHERE client_id = ? AND status = 'held' AND expires_at > ?",
        )
        .bind(client.id.0)
        .bind(now)
        .fetch_one(&mut *conn)
        .await
        .expect("client seats");
        if held > i64::from(*cap) {
            broken.push(format!("client {} holds {held} > cap {cap}", client.id.0));
        }
        // Its allowance's bound, when no count is due, is never below
        // what it holds: a hold the bound passes is within the cap.
        let bound: Option<(i64, bool)> = sqlx::query_as(
            "SELECT CAST(held AS SIGNED), counted_at >= recount_after FROM client_allowances \
             WHERE client_id = ?",
        )
        .bind(client.id.0)
        .fetch_optional(&mut *conn)
        .await
        .expect("allowance");
        if let Some((bound, true)) = bound
            && bound < held
        {
            broken.push(format!(
                "client {}: allowance {bound} < the {held} seats it holds",
                client.id.0
            ));
        }
    }
    let slots: Vec<(u64, u32, i64)> = sqlx::query_as(
        "SELECT s.id, s.capacity, CAST(COALESCE(SUM(h.quantity), 0) AS SIGNED) FROM slots s \
         LEFT JOIN holds h ON h.slot_id = s.id AND (h.status = 'confirmed' \
         OR (h.status = 'held' AND h.expires_at > ?)) GROUP BY s.id, s.capacity",
    )
    .bind(now)
    .fetch_all(&mut *conn)
    .await
    .expect("slot seats");
    for (id, capacity, taken) in slots {
        if taken > i64::from(capacity) {
            broken.push(format!(
                "slot {id}: {taken} seats held and confirmed > {capacity}"
            ));
        }
    }
    sqlx::query("ROLLBACK")
        .execute(&mut *conn)
        .await
        .expect("end");
    broken
}
