//! Revoking a client gives its seats back (SPEC §23.9, which changes §8):
//! in the revoking transaction its active holds are cancelled and its
//! waiting entries end `expired`, each with its event, the seats freed
//! go to the lines at once, its bookings stay; a revoked client is never
//! offered seats, also when the revocation races its own holds and
//! cancels and the offers of others' cancels.

use lambda_http::Request;
use lambda_http::http::Method;
use serde_json::Value;
use shared::clients::Role;
use shared::config::AuthMode;
use shared::domain::SlotId;
use shared::{App, http};
use slot_booking_tests::keys::{TestClient, clients_request};
use slot_booking_tests::seats::{hold_seats_request, read_replayed};
use slot_booking_tests::*;

async fn revoke(app: &App, admin: &TestClient, id: u64) -> (u16, Value) {
    let id = id.to_string();
    let request = clients_request(Method::DELETE, &format!("/clients/{id}"), Some(&id), None);
    read(http::revoke_client(app, admin.by(request)).await.unwrap())
}

async fn hold(app: &App, who: &TestClient, slot: SlotId, quantity: u32) -> (u16, Value) {
    let request = hold_seats_request(&slot.0.to_string(), new_key().as_str(), quantity);
    let (status, body, _) = read_replayed(http::hold(app, who.by(request)).await.unwrap());
    (status, body)
}

async fn held(app: &App, who: &TestClient, slot: SlotId, quantity: u32) -> Value {
    let (status, body) = hold(app, who, slot, quantity).await;
    assert_eq!(status, 201, "{body}");
    body
}

async fn confirm(app: &App, who: &TestClient, hold: &Value) -> Value {
    let request = who.by(confirm_request(&id_of(hold)));
    let (status, body) = read(http::confirm(app, request).await.unwrap());
    assert_eq!(status, 200, "{body}");
    body
}

async fn cancel(app: &App, who: &TestClient, hold: &Value) -> (u16, Value) {
    let request = who.by(cancel_request(&id_of(hold)));
    read(http::cancel(app, request).await.unwrap())
}

async fn join(app: &App, who: &TestClient, slot: SlotId, quantity: u32) -> Value {
    let body = format!(r#"{{"quantity": {quantity}}}"#);
    let request: Request = join_request(&slot.0.to_string(), new_key().as_str(), &body);
    let (status, body) = read(http::join_waitlist(app, who.by(request)).await.unwrap());
    assert_eq!(status, 201, "{body}");
    body
}

/// A hold's or an entry's row, as stored: status, and the entry's hold.
async fn hold_status(db: &TestDb, hold: &Value) -> String {
    sqlx::query_scalar("SELECT CAST(status AS CHAR) FROM holds WHERE id = ?")
        .bind(hold["id"].as_u64().unwrap())
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

async fn entry_row(db: &TestDb, entry: &Value) -> (String, Option<u64>) {
    sqlx::query_as("SELECT CAST(status AS CHAR), hold_id FROM waitlist_entries WHERE id = ?")
        .bind(entry["id"].as_u64().unwrap())
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

/// How many events of `kind` name this hold (`hold_id`), or this entry
/// (the id of their `data`, the entry) when `entry`.
async fn events_of(db: &TestDb, kind: &str, id: Option<u64>, entry: bool) -> i64 {
    let sql = if entry {
        "SELECT COUNT(*) FROM events WHERE type = ? AND JSON_VALUE(data, '$.id') = ?"
    } else {
        "SELECT COUNT(*) FROM events WHERE type = ? AND hold_id = ?"
    };
    sqlx::query_scalar(sql)
        .bind(kind)
        .bind(id.unwrap())
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

/// Every invariant of the counters (D, the ledger, no oversell) and of
/// the lines (W1, W2, first fit) from the rows.
async fn check(db: &TestDb, what: &str) {
    db.assert_counters_exact(what).await;
    db.assert_invariants().await;
    db.assert_lines().await;
}

#[tokio::test]
async fn a_revocation_cancels_the_clients_holds_and_its_seats_go_to_the_line_at_once() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let admin = db.client("root", Role::Admin, None).await;
    let shop = db.client("shop", Role::Booker, None).await;
    let other = db.client("other", Role::Booker, None).await;
    // A full slot: the shop's booking of 1 and its hold of 2; the other
    // client waits for 2.
    let full = db.insert_slot(3).await;
    let booking = held(&app, &shop, full, 1).await;
    confirm(&app, &shop, &booking).await;
    let holding = held(&app, &shop, full, 2).await;
    let waits = join(&app, &other, full, 2).await;
    // Another full slot, the other's; the shop waits there.
    let line = db.insert_slot(1).await;
    let others = held(&app, &other, line, 1).await;
    let shop_waits = join(&app, &shop, line, 1).await;

    let (status, revoked) = revoke(&app, &admin, shop.id.0).await;
    assert_eq!(status, 200, "{revoked}");
    assert!(revoked["revoked_at"].is_string(), "{revoked}");

    // The hold is cancelled, with its event; the booking stays.
    assert_eq!(hold_status(&db, &holding).await, "cancelled");
    let holding_id = holding["id"].as_u64();
    assert_eq!(events_of(&db, "hold.cancelled", holding_id, false).await, 1);
    assert_eq!(hold_status(&db, &booking).await, "confirmed");
    // Its 2 seats went to the line in the revoking transaction.
    let (status, offer) = entry_row(&db, &waits).await;
    assert_eq!(status, "offered", "the line's first entry got the seats");
    let offered: String = sqlx::query_scalar(
        "SELECT CAST(status AS CHAR) FROM holds WHERE id = ? AND client_id = ? AND quantity = 2",
    )
    .bind(offer.unwrap())
    .bind(other.id.0)
    .fetch_one(&db.admin)
    .await
    .unwrap();
    assert_eq!(offered, "held");
    // Its own entry ended, with its event, and is never offered.
    let (status, _) = entry_row(&db, &shop_waits).await;
    assert_eq!(status, "expired");
    let entry_id = shop_waits["id"].as_u64();
    assert_eq!(events_of(&db, "waitlist.expired", entry_id, true).await, 1);
    let (status, body) = cancel(&app, &other, &others).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(entry_row(&db, &shop_waits).await, ("expired".into(), None));
    check(&db, "after the revocation").await;
    // Revoking again answers the same resource.
    let (status, again) = revoke(&app, &admin, shop.id.0).await;
    assert_eq!((status, &again), (200, &revoked));
    db.drop().await;
}

/// An entry the revocation could not end — joined by a key an environment
/// still trusted (SPEC §8: up to 30 s), here a client revoked behind the
/// service's back — is never offered: the next offer pass that its
/// seats fit ends it `expired` (with its event), and the next entry that
/// fits gets them.
#[tokio::test]
async fn a_revoked_clients_waiting_entry_is_never_offered() {
    let db = TestDb::new().await;
    let app = db.app_in(AuthMode::ApiKey, 0);
    let shop = db.client("shop", Role::Booker, None).await;
    let other = db.client("other", Role::Booker, None).await;
    let third = db.client("third", Role::Booker, None).await;
    let slot = db.insert_slot(2).await;
    let first_hold = held(&app, &other, slot, 1).await;
    held(&app, &other, slot, 1).await;
    let revoked = join(&app, &shop, slot, 1).await;
    let pair = join(&app, &other, slot, 2).await;
    let single = join(&app, &third, slot, 1).await;
    sqlx::query("UPDATE api_clients SET revoked_at = UTC_TIMESTAMP(6) WHERE id = ?")
        .bind(shop.id.0)
        .execute(&db.admin)
        .await
        .unwrap();
    // One seat free: the shop's entry is first and fits, but ends; the
    // pair does not fit; the single gets it.
    let (status, body) = cancel(&app, &other, &first_hold).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(entry_row(&db, &revoked).await, ("expired".into(), None));
    let entry_id = revoked["id"].as_u64();
    assert_eq!(events_of(&db, "waitlist.expired", entry_id, true).await, 1);
    assert_eq!(entry_row(&db, &pair).await.0, "waiting");
    assert_eq!(entry_row(&db, &single).await.0, "offered");
    let offers: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM holds WHERE client_id = ?")
        .bind(shop.id.0)
        .fetch_one(&db.admin)
        .await
        .unwrap();
    assert_eq!(offers, 0, "the revoked client was offered nothing");
    check(&db, "after the cancel").await;
    db.drop().await;
}

/// The revocation against everything else its client's seats take part
/// in, truly parallel (each caller its own environment and connection,
/// released together): the shop holding more, cancelling its own, and
/// the other client cancelling seats that the shop's entries wait for.
/// Afterwards the counters and lines are exact and the shop holds no
/// offer and waits nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_revocation_racing_the_clients_holds_and_cancels_leaves_every_counter_exact() {
    let db = TestDb::new().await;
    let admin = db.client("root", Role::Admin, None).await;
    for round in 0..4 {
        let shop = db.client(&format!("shop{round}"), Role::Booker, None).await;
        let other = db
            .client(&format!("other{round}"), Role::Booker, None)
            .await;
        let setup = db.app_in(AuthMode::ApiKey, 0);
        // Lines the shop waits in, on slots the other fills.
        let mut others = Vec::new();
        for _ in 0..4 {
            let slot = db.insert_slot(2).await;
            others.push(held(&setup, &other, slot, 2).await);
            join(&setup, &shop, slot, 1).await;
        }
        // Slots the shop holds on, others waiting there.
        let mut shops = Vec::new();
        let mut spare = Vec::new();
        for _ in 0..4 {
            let slot = db.insert_slot(3).await;
            shops.push(held(&setup, &shop, slot, 1).await);
            held(&setup, &other, slot, 1).await;
            spare.push(slot);
        }
        let callers = 13;
        let apps: Vec<App> = (0..callers)
            .map(|_| db.app_in(AuthMode::ApiKey, 0))
            .collect();
        // Every environment has looked its caller's key up already, as a
        // warm fleet has: the race is the transactions'.
        for (i, app) in apps.iter().enumerate() {
            let who = match i {
                0 => &admin,
                1..=4 => &other,
                _ => &shop,
            };
            let request = who.by(get_hold_request("999999999"));
            let (status, _) = read(http::get_hold(app, request).await.unwrap());
            assert_eq!(status, 404);
        }
        let (admin_, shop_, other_) = (admin.clone(), shop.clone(), other.clone());
        let (others_, shops_, spare_) = (others.clone(), shops.clone(), spare.clone());
        let answers = together(apps, move |i, app| {
            let (admin, shop, other) = (admin_.clone(), shop_.clone(), other_.clone());
            let (others, shops, spare) = (others_.clone(), shops_.clone(), spare_.clone());
            async move {
                match i {
                    0 => revoke(&app, &admin, shop.id.0).await,
                    1..=4 => cancel(&app, &other, &others[i - 1]).await,
                    5..=8 => cancel(&app, &shop, &shops[i - 5]).await,
                    _ => hold(&app, &shop, spare[i - 9], 1).await,
                }
            }
        })
        .await;
        assert_eq!(answers[0].0, 200, "round {round}: {answers:?}");
        for (i, (status, body)) in answers.iter().enumerate().skip(1) {
            // A cancel answers 200 (revoked or not, the hold was there);
            // a hold 201, or 409 when the slot's seats are taken.
            assert!(
                [200, 201, 409].contains(status),
                "round {round}, caller {i}: {status} {body}"
            );
        }
        check(&db, &format!("round {round}")).await;
        let (offered, waiting): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM holds WHERE client_id = ? AND entry_id IS NOT NULL \
             AND status = 'held' AND expires_at > UTC_TIMESTAMP(6)), \
             (SELECT COUNT(*) FROM waitlist_entries WHERE client_id = ? AND status = 'waiting')",
        )
        .bind(shop.id.0)
        .bind(shop.id.0)
        .fetch_one(&db.admin)
        .await
        .unwrap();
        assert_eq!(
            (offered, waiting),
            (0, 0),
            "round {round}: the revoked shop holds no offer and waits nowhere"
        );
        // Every hold cancelled has exactly one `hold.cancelled`.
        let unmatched: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM holds h WHERE h.status = 'cancelled' AND \
             (SELECT COUNT(*) FROM events e WHERE e.type = 'hold.cancelled' AND e.hold_id = h.id) <> 1",
        )
        .fetch_one(&db.admin)
        .await
        .unwrap();
        assert_eq!(unmatched, 0, "round {round}");
    }
    db.drop().await;
}
