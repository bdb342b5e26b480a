//! SPEC §9 through the Lambda handlers against the real database: reading
//! a hold back (by id, by key), extending it, the hold body (quantity),
//! the fingerprint of a replay and closed slots. Concurrency at the
//! extension's expiry boundary is in tests/concurrency.rs, retention in
//! tests/sweeper.rs.

use chrono::{DateTime, Utc};
use lambda_http::Request;
use serde_json::Value;
use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use shared::domain::SlotId;
use shared::{App, http};
use slot_booking_tests::keys::{TestClient, authorized};
use slot_booking_tests::*;
use std::time::{Duration, Instant};

/// One answer: status, JSON body, its bytes, `Idempotent-Replayed`.
struct Reply {
    status: u16,
    body: Value,
    bytes: Vec<u8>,
    replayed: Option<String>,
}

impl Reply {
    fn assert_error(&self, status: u16, reason: &str) {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(self.body["reason"], reason, "{}", self.body);
        assert!(
            self.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{}",
            self.body
        );
    }

    /// A 422 `validation_failed` whose `errors` name exactly `fields`.
    fn assert_invalid(&self, fields: &[&str]) {
        self.assert_error(422, "validation_failed");
        let named: Vec<&str> = self.body["errors"]
            .as_object()
            .expect("errors")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(named, fields, "{}", self.body);
    }

    fn message(&self) -> &str {
        self.body["message"].as_str().expect("message")
    }

    fn id(&self) -> String {
        id_of(&self.body)
    }
}

/// `route`'s handler on `request`, as `who` (no key: `open` mode's
/// anonymous client).
async fn send(app: &App, route: &str, request: Request, who: Option<&TestClient>) -> Reply {
    let request = match who {
        Some(client) => authorized(request, Some(&client.bearer())),
        None => request,
    };
    let response = match route {
        "hold" => http::hold(app, request).await,
        "get" => http::get_hold(app, request).await,
        "find" => http::find_hold(app, request).await,
        "extend" => http::extend_hold(app, request).await,
        "confirm" => http::confirm(app, request).await,
        "cancel" => http::cancel(app, request).await,
        other => panic!("no route {other}"),
    }
    .expect("handled");
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .map(|value| value.to_str().expect("text").to_string());
    let bytes = response.body().to_vec();
    let (status, body) = read(response);
    Reply {
        status,
        body,
        bytes,
        replayed,
    }
}

/// `POST /slots/{slot}/hold` with this key and, if any, this body.
fn hold_on(slot: SlotId, key: &str, body: Option<&str>) -> Request {
    let request = hold_request(&slot.0.to_string(), Some(key));
    match body {
        Some(body) => with_body(request, body),
        None => request,
    }
}

/// A new hold of `quantity` seats (201), as `who`.
async fn held(app: &App, slot: SlotId, quantity: u32, who: Option<&TestClient>) -> Reply {
    let body = format!(r#"{{"quantity": {quantity}}}"#);
    let reply = send(app, "hold", hold_on(slot, &key(), Some(&body)), who).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply
}

fn key() -> String {
    new_key().to_string()
}

/// An `open` environment (every request is anonymous) with these rules.
fn open_app(db: &TestDb, hold_ttl: Duration, rules: HoldRules) -> App {
    db.app_with_rules(AuthMode::Open, hold_ttl, rules)
}

fn keyed_app(db: &TestDb, hold_ttl: Duration) -> App {
    db.app_with_rules(AuthMode::ApiKey, hold_ttl, HoldRules::default())
}

fn at(body: &Value, field: &str) -> DateTime<Utc> {
    let text = body[field].as_str().unwrap_or_else(|| panic!("{field}"));
    DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

async fn db_now(db: &TestDb) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

/// `(status, expires_at, updated_at)` of a hold as stored.
async fn stored(db: &TestDb, hold: &str) -> (String, DateTime<Utc>, DateTime<Utc>) {
    sqlx::query_as("SELECT CAST(status AS CHAR), expires_at, updated_at FROM holds WHERE id = ?")
        .bind(hold)
        .fetch_one(&db.admin)
        .await
        .unwrap()
}

/// `(held, remaining, bookable)`: both counters as stored, and what the
/// oracle says is bookable (remaining − seats in active holds).
async fn figures(db: &TestDb, slot: SlotId) -> (u32, u32, i64) {
    let (held, remaining): (u32, u32) =
        sqlx::query_as("SELECT held, remaining FROM slots WHERE id = ?")
            .bind(slot.0)
            .fetch_one(&db.admin)
            .await
            .unwrap();
    let bookable = i64::from(remaining) - db.active_seats(slot).await;
    (held, remaining, bookable)
}

async fn start_slot(db: &TestDb, slot: SlotId) {
    sqlx::query("UPDATE slots SET starts_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?")
        .bind(slot.0)
        .execute(&db.admin)
        .await
        .unwrap();
}

async fn sleep_until(when: Instant) {
    tokio::time::sleep(when.saturating_duration_since(Instant::now())).await;
}

// ---- reading ------------------------------------------------------------

#[tokio::test]
async fn the_owner_reads_its_hold_with_quantity_and_active_as_the_database_clock_says() {
    let db = TestDb::new().await;
    let ttl = Duration::from_millis(1500);
    let app = keyed_app(&db, ttl);
    let owner = db.client("owner", Role::Booker, None).await;
    let slot = db.insert_slot(5).await;
    let created = held(&app, slot, 2, Some(&owner)).await;
    let expires = Instant::now() + ttl;

    let got = send(&app, "get", get_hold_request(&created.id()), Some(&owner)).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.body, created.body, "the resource as it was created");
    assert_eq!(
        (got.body["quantity"].as_u64(), got.body["active"].as_bool()),
        (Some(2), Some(true))
    );
    let mut fields: Vec<&str> = got
        .body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "active",
            "cancelled_at",
            "confirmed_at",
            "created_at",
            "expires_at",
            "id",
            "idempotency_key",
            "quantity",
            "slot_id",
            "status",
            "updated_at"
        ],
        "the resource of SPEC §4 and §9, and never the owner"
    );
    assert!(got.replayed.is_none());

    // Expired by the database's clock: still `held`, no longer active.
    sleep_until(expires + Duration::from_millis(300)).await;
    let later = send(&app, "get", get_hold_request(&created.id()), Some(&owner)).await;
    assert_eq!(later.status, 200);
    assert_eq!(later.body["status"], "held");
    assert_eq!(later.body["active"], false, "{}", later.body);
    let mut unchanged = created.body.clone();
    unchanged["active"] = false.into();
    assert_eq!(later.body, unchanged, "only `active` moved");

    // A booking and a cancelled hold are not active either.
    let booked = held(&app, slot, 1, Some(&owner)).await;
    let confirmed = send(&app, "confirm", confirm_request(&booked.id()), Some(&owner)).await;
    assert_eq!(confirmed.status, 200);
    let got = send(&app, "get", get_hold_request(&booked.id()), Some(&owner)).await;
    assert_eq!((got.status, &got.body), (200, &confirmed.body));
    assert_eq!(
        (got.body["status"].as_str(), got.body["active"].as_bool()),
        (Some("confirmed"), Some(false))
    );
    let dropped = held(&app, slot, 3, Some(&owner)).await;
    send(&app, "cancel", cancel_request(&dropped.id()), Some(&owner)).await;
    let got = send(&app, "get", get_hold_request(&dropped.id()), Some(&owner)).await;
    assert_eq!(
        (got.body["status"].as_str(), got.body["active"].as_bool()),
        (Some("cancelled"), Some(false))
    );
    assert_eq!(got.body["quantity"], 3);
    db.drop().await;
}

#[tokio::test]
async fn an_admin_reads_anyones_hold_and_another_booker_gets_the_404_of_a_missing_one() {
    let db = TestDb::new().await;
    let app = keyed_app(&db, Duration::from_secs(300));
    let owner = db.client("owner", Role::Booker, None).await;
    let other = db.client("other", Role::Booker, None).await;
    let admin = db.client("admin", Role::Admin, None).await;
    let slot = db.insert_slot(5).await;
    let created = held(&app, slot, 1, Some(&owner)).await;
    let id = created.id();

    let by_admin = send(&app, "get", get_hold_request(&id), Some(&admin)).await;
    assert_eq!((by_admin.status, &by_admin.body), (200, &created.body));
    let by_stranger = send(&app, "get", get_hold_request(&id), Some(&other)).await;
    by_stranger.assert_error(404, "not_found");
    assert_eq!(by_stranger.message(), format!("Hold {id} does not exist."));

    // Once no hold has that id, everybody gets the stranger's answer, byte
    // for byte (SPEC §15.3).
    sqlx::query("DELETE FROM holds WHERE id = ?")
        .bind(&id)
        .execute(&db.admin)
        .await
        .unwrap();
    for who in [&other, &owner, &admin] {
        let missing = send(&app, "get", get_hold_request(&id), Some(who)).await;
        assert_eq!(missing.status, 404);
        assert_eq!(
            missing.bytes,
            by_stranger.bytes,
            "{}",
            String::from_utf8_lossy(&missing.bytes)
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_path_id_that_cannot_name_a_hold_is_404_on_reading_and_extending() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    held(&app, slot, 1, None).await;
    for id in [
        "0",
        "-1",
        "abc",
        "18446744073709551616",
        "1.5",
        "%20",
        "1e3",
        "+1",
    ] {
        for route in ["get", "extend"] {
            let request = match route {
                "get" => get_hold_request(id),
                _ => extend_request(id),
            };
            let reply = send(&app, route, request, None).await;
            reply.assert_error(404, "not_found");
            assert_eq!(
                reply.message(),
                "No hold matches this request.",
                "{route} {id}"
            );
        }
    }
    for route in ["get", "extend"] {
        let request = match route {
            "get" => get_hold_request("18446744073709551615"),
            _ => extend_request("18446744073709551615"),
        };
        let reply = send(&app, route, request, None).await;
        reply.assert_error(404, "not_found");
        assert_eq!(reply.message(), "Hold 18446744073709551615 does not exist.");
    }
    db.drop().await;
}

#[tokio::test]
async fn a_client_finds_its_own_hold_by_key_and_an_admin_does_not_find_another_clients() {
    let db = TestDb::new().await;
    let app = keyed_app(&db, Duration::from_secs(300));
    let owner = db.client("owner", Role::Booker, None).await;
    let other = db.client("other", Role::Booker, None).await;
    let admin = db.client("admin", Role::Admin, None).await;
    let (a, b) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let shared_key = key();
    let body = Some(r#"{"quantity": 3}"#);
    let owners = send(&app, "hold", hold_on(a, &shared_key, body), Some(&owner)).await;
    assert_eq!(owners.status, 201);

    let found = send(&app, "find", find_by_key_request(&shared_key), Some(&owner)).await;
    assert_eq!((found.status, &found.body), (200, &owners.body));
    assert!(found.replayed.is_none(), "a read, not a replay");
    let upper = shared_key.to_ascii_uppercase();
    let found = send(&app, "find", find_by_key_request(&upper), Some(&owner)).await;
    assert_eq!((found.status, &found.body), (200, &owners.body), "any case");

    // Keys belong to clients (SPEC §15.4): an admin reaches others' holds
    // by id, never by key; another booker learns nothing either. Both get
    // exactly the answer for a key nobody used.
    let unused = send(&app, "find", find_by_key_request(&key()), Some(&other)).await;
    unused.assert_error(404, "not_found");
    assert_eq!(unused.message(), "No hold matches this request.");
    for who in [&admin, &other] {
        let reply = send(&app, "find", find_by_key_request(&shared_key), Some(who)).await;
        assert_eq!(reply.status, 404);
        assert_eq!(reply.bytes, unused.bytes, "{}", reply.body);
    }
    // The admin's own hold with that key is the one it finds.
    let admins = send(&app, "hold", hold_on(b, &shared_key, None), Some(&admin)).await;
    assert_eq!(admins.status, 201, "{}", admins.body);
    let found = send(&app, "find", find_by_key_request(&shared_key), Some(&admin)).await;
    assert_eq!((found.status, &found.body), (200, &admins.body));
    let found = send(&app, "find", find_by_key_request(&shared_key), Some(&owner)).await;
    assert_eq!(found.body, owners.body, "the owner still finds its own");
    db.drop().await;
}

#[tokio::test]
async fn finding_by_key_without_a_valid_key_or_with_another_parameter_is_422_naming_it() {
    let db = TestDb::new().await;
    let app = db.app();
    let required = "The idempotency key field is required.";
    let malformed =
        "The idempotency key field must be a valid UUID (8-4-4-4-12 hexadecimal digits).";
    for (query, message) in [
        ("", required),
        ("idempotency_key=", required),
        ("idempotency_key=%20%20", required),
        ("idempotency_key=not-a-uuid", malformed),
        (
            "idempotency_key=6f1c2a3b0d4e4f5a8b6c7d8e9f0a1b2c",
            malformed,
        ),
        (
            "idempotency_key=%7B6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c%7D",
            malformed,
        ),
        (
            "idempotency_key=urn:uuid:6f1c2a3b-0d4e-4f5a-8b6c-7d8e9f0a1b2c",
            malformed,
        ),
        ("idempotency_key=%27%20OR%201=1;%20--", malformed),
    ] {
        let reply = send(&app, "find", find_hold_request(query), None).await;
        reply.assert_invalid(&["idempotency_key"]);
        assert_eq!(
            reply.body["errors"]["idempotency_key"][0], message,
            "{query}"
        );
    }
    // Any other parameter, and the key given twice, are 422s naming the
    // parameter (SPEC §19.6), never a first-wins read or a silent skip.
    let (one, two) = (key(), key());
    for (query, fields) in [
        (
            format!("other=1&idempotency_key={one}&x="),
            vec!["other", "x"],
        ),
        (format!("key={one}"), vec!["idempotency_key", "key"]),
        (
            format!("idempotency_key={one}&idempotency_key={two}"),
            vec!["idempotency_key"],
        ),
        (
            format!("idempotency_key={one}&idempotency_key={one}"),
            vec!["idempotency_key"],
        ),
    ] {
        let reply = send(&app, "find", find_hold_request(&query), None).await;
        reply.assert_invalid(&fields);
        for field in fields.iter().filter(|f| **f != "idempotency_key") {
            let message = format!("The {field:?} parameter is not allowed; use idempotency_key.");
            assert_eq!(reply.body["errors"][field][0], message.as_str(), "{query}");
        }
        if query.matches("idempotency_key=").count() == 2 {
            assert_eq!(
                reply.body["errors"]["idempotency_key"][0],
                "The idempotency_key parameter may be given only once.",
                "{query}"
            );
        }
    }
    // A well-formed key that names nothing.
    let unknown = send(&app, "find", find_by_key_request(&key()), None).await;
    unknown.assert_error(404, "not_found");
    db.drop().await;
}

// ---- extension ----------------------------------------------------------

#[tokio::test]
async fn an_extension_moves_expires_at_to_now_plus_the_ttl_until_the_lifetime_cap() {
    let db = TestDb::new().await;
    // A 2 s TTL under a 3 s lifetime: the second extension meets the cap.
    let rules = HoldRules {
        max_lifetime: Duration::from_secs(3),
        ..HoldRules::default()
    };
    let ttl = Duration::from_secs(2);
    let app = open_app(&db, ttl, rules);
    let slot = db.insert_slot(5).await;
    let created = held(&app, slot, 2, None).await;
    let since = Instant::now();
    let id = created.id();
    let figures_before = figures(&db, slot).await;
    assert_eq!(figures_before, (2, 5, 3));

    sleep_until(since + Duration::from_millis(400)).await;
    let before = db_now(&db).await;
    let first = send(&app, "extend", extend_request(&id), None).await;
    let after = db_now(&db).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let ttl = chrono::Duration::from_std(ttl).unwrap();
    let moved = at(&first.body, "expires_at");
    assert!(
        before + ttl <= moved && moved <= after + ttl,
        "now + TTL: {before} + 2 s <= {moved} <= {after} + 2 s"
    );
    assert!(moved > at(&created.body, "expires_at"));
    assert!(at(&first.body, "updated_at") > at(&created.body, "updated_at"));
    for field in [
        "id",
        "slot_id",
        "status",
        "quantity",
        "active",
        "idempotency_key",
        "created_at",
    ] {
        assert_eq!(first.body[field], created.body[field], "{field}");
    }
    let got = send(&app, "get", get_hold_request(&id), None).await;
    assert_eq!(got.body, first.body, "as stored");
    assert_eq!(
        figures(&db, slot).await,
        figures_before,
        "an extension moves no seat"
    );

    // Past a second of age, now + TTL passes created_at + 3 s: the cap.
    sleep_until(since + Duration::from_millis(1300)).await;
    let capped = send(&app, "extend", extend_request(&id), None).await;
    assert_eq!(capped.status, 200, "{}", capped.body);
    assert_eq!(
        at(&capped.body, "expires_at"),
        at(&created.body, "created_at") + chrono::Duration::seconds(3),
        "created_at + HOLD_MAX_LIFETIME_SECONDS"
    );
    let stored_before = stored(&db, &id).await;
    let refused = send(&app, "extend", extend_request(&id), None).await;
    refused.assert_error(409, "extension_limit_reached");
    assert_eq!(
        refused.message(),
        format!("Hold {id} cannot be extended: it has reached its longest lifetime.")
    );
    assert_eq!(stored(&db, &id).await, stored_before, "nothing written");
    assert_eq!(figures(&db, slot).await, figures_before);
    db.assert_counters_exact("after the extensions").await;
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn extending_a_confirmed_cancelled_or_expired_hold_is_refused_and_changes_nothing() {
    let db = TestDb::new().await;
    let app = db.app();
    let short = db.app_with_hold_ttl(Duration::from_millis(300));
    let slot = db.insert_slot(5).await;
    let booked = held(&app, slot, 1, None).await;
    send(&app, "confirm", confirm_request(&booked.id()), None).await;
    let dropped = held(&app, slot, 1, None).await;
    send(&app, "cancel", cancel_request(&dropped.id()), None).await;
    let unbooked = held(&app, slot, 1, None).await;
    send(&app, "confirm", confirm_request(&unbooked.id()), None).await;
    send(&app, "cancel", cancel_request(&unbooked.id()), None).await;
    let lapsed = held(&short, slot, 2, None).await;
    tokio::time::sleep(Duration::from_millis(400)).await;

    let before = figures(&db, slot).await;
    for (hold, reason, message) in [
        (
            &booked,
            "hold_confirmed",
            "is confirmed; a booking has no expiry.",
        ),
        (&dropped, "hold_cancelled", "has been cancelled."),
        (&unbooked, "hold_cancelled", "has been cancelled."),
        (&lapsed, "hold_expired", "has expired."),
    ] {
        let id = hold.id();
        let row = stored(&db, &id).await;
        let reply = send(&app, "extend", extend_request(&id), None).await;
        reply.assert_error(409, reason);
        assert_eq!(reply.message(), format!("Hold {id} {message}"));
        assert_eq!(stored(&db, &id).await, row, "{reason}: nothing written");
    }
    // The expired hold is not revived: still `held`, still inactive.
    let got = send(&app, "get", get_hold_request(&lapsed.id()), None).await;
    assert_eq!(
        (got.body["status"].as_str(), got.body["active"].as_bool()),
        (Some("held"), Some(false))
    );
    assert_eq!(got.body["expires_at"], lapsed.body["expires_at"]);
    assert_eq!(figures(&db, slot).await, before);
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn an_expired_hold_is_never_revived_once_its_seat_is_taken() {
    let db = TestDb::new().await;
    let app = db.app();
    let short = db.app_with_hold_ttl(Duration::from_millis(300));
    let slot = db.insert_slot(1).await;
    let first = held(&short, slot, 1, None).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = held(&app, slot, 1, None).await;
    send(&app, "extend", extend_request(&first.id()), None)
        .await
        .assert_error(409, "hold_expired");
    assert_eq!(figures(&db, slot).await.2, 0, "one seat, one active hold");
    let extended = send(&app, "extend", extend_request(&second.id()), None).await;
    assert_eq!(extended.status, 200, "{}", extended.body);
    db.assert_counters_exact("after the refusal").await;
    db.assert_invariants().await;
    db.drop().await;
}

#[tokio::test]
async fn extending_a_hold_on_a_slot_that_has_started_is_409_slot_closed() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(3).await;
    let hold = held(&app, slot, 2, None).await;
    start_slot(&db, slot).await;
    let row = stored(&db, &hold.id()).await;
    let reply = send(&app, "extend", extend_request(&hold.id()), None).await;
    reply.assert_error(409, "slot_closed");
    assert_eq!(
        reply.message(),
        format!("Slot {} has started; it takes no more holds.", slot.0)
    );
    assert_eq!(stored(&db, &hold.id()).await, row);
    db.drop().await;
}

/// SPEC §15.8: each hold below meets its own refusal and every later one.
#[tokio::test]
async fn extension_refusals_come_in_the_order_of_the_spec() {
    let db = TestDb::new().await;
    let app = db.app();
    let short = db.app_with_hold_ttl(Duration::from_millis(800));
    let (started, open) = (db.insert_slot(10).await, db.insert_slot(10).await);
    let confirmed = held(&short, started, 1, None).await;
    send(&short, "confirm", confirm_request(&confirmed.id()), None).await;
    let cancelled = held(&short, started, 1, None).await;
    send(&short, "cancel", cancel_request(&cancelled.id()), None).await;
    let expired = held(&short, started, 1, None).await;
    let active = held(&app, started, 1, None).await;
    let capped = held(&app, open, 1, None).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    // Every hold is older than its lifetime (1800 s): no extension could
    // move it later.
    sqlx::query("UPDATE holds SET created_at = created_at - INTERVAL 1 HOUR")
        .execute(&db.admin)
        .await
        .unwrap();
    start_slot(&db, started).await;
    for (hold, reason) in [
        (&confirmed, "hold_confirmed"),
        (&cancelled, "hold_cancelled"),
        (&expired, "hold_expired"),
        (&active, "slot_closed"),
        (&capped, "extension_limit_reached"),
    ] {
        let reply = send(&app, "extend", extend_request(&hold.id()), None).await;
        reply.assert_error(409, reason);
    }
    db.drop().await;
}

// ---- the hold's body ----------------------------------------------------

#[tokio::test]
async fn no_body_or_an_empty_object_holds_one_seat_and_a_quantity_holds_that_many() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(10).await;
    for (body, quantity, bookable) in [
        (None, 1, 9),
        (Some(""), 1, 8),
        (Some("{}"), 1, 7),
        (Some(r#" {"quantity": 3} "#), 3, 4),
        (Some(r#"{"quantity":1}"#), 1, 3),
    ] {
        let reply = send(&app, "hold", hold_on(slot, &key(), body), None).await;
        assert_eq!(reply.status, 201, "{body:?}: {}", reply.body);
        assert_eq!(reply.body["quantity"], quantity, "{body:?}");
        assert_eq!(figures(&db, slot).await.2, bookable, "{body:?}");
    }
    let list = read(
        http::availability(&app, availability_request())
            .await
            .unwrap(),
    )
    .1;
    assert_eq!(list[0]["remaining"], 3, "the projection counts seats");
    // The Content-Type plays no part: a text/plain body is JSON too.
    let request = event(
        "apigw_v2_hold.json",
        &format!("/slots/{}/hold", slot.0),
        Some(&slot.0.to_string()),
        &[
            ("idempotency-key", Some(key().as_str())),
            ("content-type", Some("text/plain")),
        ],
    );
    let reply = send(&app, "hold", with_body(request, r#"{"quantity": 2}"#), None).await;
    assert_eq!(
        (reply.status, reply.body["quantity"].as_u64()),
        (201, Some(2))
    );
    let request = event(
        "apigw_v2_hold.json",
        &format!("/slots/{}/hold", slot.0),
        Some(&slot.0.to_string()),
        &[
            ("idempotency-key", Some(key().as_str())),
            ("content-type", None),
        ],
    );
    let reply = send(&app, "hold", with_body(request, "[1]"), None).await;
    reply.assert_invalid(&["body"]);
    assert_eq!(figures(&db, slot).await, (9, 10, 1));
    db.assert_counters_exact("after the holds").await;
    db.drop().await;
}

#[tokio::test]
async fn a_body_that_is_not_a_json_object_is_422_body_and_an_unknown_field_422_under_its_name() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(10).await;
    for body in [
        "null",
        "[]",
        "[{\"quantity\": 2}]",
        "3",
        "\"x\"",
        "true",
        "{\"quantity\": 2",
        "quantity=2",
        " ",
    ] {
        let reply = send(&app, "hold", hold_on(slot, &key(), Some(body)), None).await;
        reply.assert_invalid(&["body"]);
        assert_eq!(
            reply.body["errors"]["body"][0], "The body must be a JSON object.",
            "{body}"
        );
    }
    for (body, name) in [
        (r#"{"qty": 2}"#, "qty"),
        (r#"{"quantity": 2, "note": "x"}"#, "note"),
    ] {
        let reply = send(&app, "hold", hold_on(slot, &key(), Some(body)), None).await;
        // SPEC §19.6: under its own name, so a program need not parse the
        // message to learn which field.
        reply.assert_invalid(&[name]);
        assert_eq!(
            reply.body["errors"][name][0],
            format!("The \"{name}\" field is not allowed.")
        );
        assert!(reply.message().contains(name), "{}", reply.body);
    }
    assert_eq!(db.count_holds(slot, "TRUE").await, 0);
    db.drop().await;
}

#[tokio::test]
async fn a_quantity_that_is_not_an_integer_within_the_maximum_is_422_quantity() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(100).await;
    for quantity in ["0", "51", "-1", "2.5", "\"2\"", "null", "[2]", "1e1"] {
        let body = format!(r#"{{"quantity": {quantity}}}"#);
        let reply = send(&app, "hold", hold_on(slot, &key(), Some(&body)), None).await;
        reply.assert_invalid(&["quantity"]);
        assert_eq!(
            reply.body["errors"]["quantity"][0],
            "The quantity field must be an integer from 1 to 50.",
            "{body}"
        );
    }
    // Both problems at once are both reported.
    let both = send(
        &app,
        "hold",
        hold_on(slot, &key(), Some(r#"{"n": 1, "quantity": 0}"#)),
        None,
    )
    .await;
    both.assert_invalid(&["n", "quantity"]);
    assert!(
        both.message().ends_with("(and 1 more error)"),
        "{}",
        both.body
    );
    let fifty = send(
        &app,
        "hold",
        hold_on(slot, &key(), Some(r#"{"quantity": 50}"#)),
        None,
    )
    .await;
    assert_eq!(fifty.status, 201, "the maximum itself");
    // HOLD_MAX_QUANTITY sets the maximum.
    let rules = HoldRules {
        max_quantity: 4,
        ..HoldRules::default()
    };
    let small = open_app(&db, Duration::from_secs(300), rules);
    let five = send(
        &small,
        "hold",
        hold_on(slot, &key(), Some(r#"{"quantity": 5}"#)),
        None,
    )
    .await;
    five.assert_invalid(&["quantity"]);
    assert_eq!(
        five.body["errors"]["quantity"][0],
        "The quantity field must be an integer from 1 to 4."
    );
    let four = send(
        &small,
        "hold",
        hold_on(slot, &key(), Some(r#"{"quantity": 4}"#)),
        None,
    )
    .await;
    assert_eq!(four.status, 201);
    assert_eq!(db.seats(slot, "TRUE").await, 54);
    db.drop().await;
}

/// SPEC §15.6: header → body → key look-up → slot.
#[tokio::test]
async fn the_header_is_checked_before_the_body_and_the_body_before_the_key_and_the_slot() {
    let db = TestDb::new().await;
    let app = db.app();
    let (slot, other) = (db.insert_slot(3).await, db.insert_slot(3).await);
    let bad = Some(r#"{"quantity": 0}"#);
    let no_header = with_body(hold_request(&slot.0.to_string(), None), "null");
    send(&app, "hold", no_header, None)
        .await
        .assert_invalid(&["idempotency_key"]);
    let bad_header = with_body(hold_request(&slot.0.to_string(), Some("nope")), "null");
    send(&app, "hold", bad_header, None)
        .await
        .assert_invalid(&["idempotency_key"]);

    let used = key();
    let original = send(&app, "hold", hold_on(slot, &used, None), None).await;
    assert_eq!(original.status, 201);
    // A replay with a bad body is refused, not replayed.
    let replay = send(&app, "hold", hold_on(slot, &used, bad), None).await;
    replay.assert_invalid(&["quantity"]);
    assert!(replay.replayed.is_none());
    // Before the key's other slot is noticed, and before a missing slot.
    send(&app, "hold", hold_on(other, &used, Some("[]")), None)
        .await
        .assert_invalid(&["body"]);
    send(&app, "hold", hold_on(SlotId(999_999), &key(), bad), None)
        .await
        .assert_invalid(&["quantity"]);
    send(
        &app,
        "hold",
        with_body(hold_request("abc", Some(&key())), "3"),
        None,
    )
    .await
    .assert_invalid(&["body"]);
    // The key before the slot: a used key on a missing slot is a reuse.
    send(&app, "hold", hold_on(SlotId(999_999), &used, None), None)
        .await
        .assert_error(422, "idempotency_key_reuse");
    send(&app, "hold", hold_on(SlotId(999_999), &key(), None), None)
        .await
        .assert_error(404, "not_found");
    assert_eq!(
        db.count_holds(slot, "TRUE").await + db.count_holds(other, "TRUE").await,
        1
    );
    db.drop().await;
}

#[tokio::test]
async fn a_quantity_above_what_is_bookable_is_409_and_holds_nothing() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(5).await;
    let first = held(&app, slot, 3, None).await;
    let refused = send(
        &app,
        "hold",
        hold_on(slot, &key(), Some(r#"{"quantity": 3}"#)),
        None,
    )
    .await;
    refused.assert_error(409, "capacity_exhausted");
    assert_eq!(
        refused.message(),
        format!("Slot {} has no remaining capacity.", slot.0)
    );
    assert_eq!(db.count_holds(slot, "TRUE").await, 1, "all or nothing");
    assert_eq!(figures(&db, slot).await, (3, 5, 2));
    let rest = held(&app, slot, 2, None).await;
    assert_eq!(figures(&db, slot).await, (5, 5, 0));
    // Confirm consumes the quantity; cancelling the booking gives it back.
    let booked = send(&app, "confirm", confirm_request(&first.id()), None).await;
    assert_eq!(booked.status, 200);
    assert_eq!(figures(&db, slot).await, (2, 2, 0));
    send(&app, "cancel", cancel_request(&first.id()), None).await;
    send(&app, "cancel", cancel_request(&rest.id()), None).await;
    assert_eq!(figures(&db, slot).await, (0, 5, 5));
    // Seats freed by expiry or cancellation count again, all or nothing.
    let big = held(&app, slot, 5, None).await;
    assert_eq!(big.body["quantity"], 5);
    db.assert_counters_exact("after the holds").await;
    db.assert_invariants().await;
    db.drop().await;
}

// ---- fingerprint and replay ---------------------------------------------

#[tokio::test]
async fn a_replay_is_200_with_idempotent_replayed_and_the_original_hold() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(5).await;
    let used = key();
    let body = Some(r#"{"quantity": 2}"#);
    let created = send(&app, "hold", hold_on(slot, &used, body), None).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.replayed, None, "a 201 is no replay");
    let replay = send(
        &app,
        "hold",
        hold_on(slot, &used.to_ascii_uppercase(), body),
        None,
    )
    .await;
    assert_eq!(
        (replay.status, replay.replayed.as_deref()),
        (200, Some("true"))
    );
    assert_eq!(replay.body, created.body);
    // No body is one seat: its replay is the same request as `{"quantity": 1}`.
    let single = key();
    let created = send(&app, "hold", hold_on(slot, &single, None), None).await;
    let replay = send(
        &app,
        "hold",
        hold_on(slot, &single, Some(r#"{"quantity": 1}"#)),
        None,
    )
    .await;
    assert_eq!(
        (replay.status, replay.replayed.as_deref()),
        (200, Some("true"))
    );
    assert_eq!(replay.body, created.body);
    assert_eq!(db.count_holds(slot, "TRUE").await, 2);
    assert_eq!(figures(&db, slot).await, (3, 5, 2));
    db.drop().await;
}

#[tokio::test]
async fn the_same_key_with_another_quantity_or_slot_is_422_saying_which_differs() {
    let db = TestDb::new().await;
    let app = db.app();
    let (slot, other) = (db.insert_slot(5).await, db.insert_slot(5).await);
    let used = key();
    let created = send(
        &app,
        "hold",
        hold_on(slot, &used, Some(r#"{"quantity": 2}"#)),
        None,
    )
    .await;
    assert_eq!(created.status, 201);
    let quantity = send(
        &app,
        "hold",
        hold_on(slot, &used, Some(r#"{"quantity": 3}"#)),
        None,
    )
    .await;
    quantity.assert_error(422, "idempotency_key_reuse");
    assert_eq!(
        quantity.message(),
        "This idempotency key was already used for a quantity of 2, not 3."
    );
    let one = send(&app, "hold", hold_on(slot, &used, None), None).await;
    assert_eq!(
        one.message(),
        "This idempotency key was already used for a quantity of 2, not 1."
    );
    // The slot is compared first.
    for body in [Some(r#"{"quantity": 2}"#), Some(r#"{"quantity": 3}"#)] {
        let reply = send(&app, "hold", hold_on(other, &used, body), None).await;
        reply.assert_error(422, "idempotency_key_reuse");
        assert_eq!(
            reply.message(),
            format!("This idempotency key was already used for slot {}.", slot.0)
        );
        assert!(reply.replayed.is_none());
    }
    assert_eq!(db.count_holds(slot, "TRUE").await, 1);
    assert_eq!(db.count_holds(other, "TRUE").await, 0);
    assert_eq!(figures(&db, slot).await, (2, 5, 3));
    db.drop().await;
}

// ---- closed slots -------------------------------------------------------

#[tokio::test]
async fn a_started_slot_takes_no_hold_but_replays_confirms_and_cancels_still_work() {
    let db = TestDb::new().await;
    let app = db.app();
    let slot = db.insert_slot(5).await;
    let (to_replay, to_confirm, to_cancel) = (key(), key(), key());
    let replayed = send(
        &app,
        "hold",
        hold_on(slot, &to_replay, Some(r#"{"quantity": 2}"#)),
        None,
    )
    .await;
    let booked = send(&app, "hold", hold_on(slot, &to_confirm, None), None).await;
    let dropped = send(&app, "hold", hold_on(slot, &to_cancel, None), None).await;
    start_slot(&db, slot).await;

    let refused = send(&app, "hold", hold_on(slot, &key(), None), None).await;
    refused.assert_error(409, "slot_closed");
    assert_eq!(
        refused.message(),
        format!("Slot {} has started; it takes no more holds.", slot.0)
    );
    assert_eq!(db.count_holds(slot, "TRUE").await, 3, "no row");
    // SPEC §15.6: a replay on a started slot is 200; a bad body still 422.
    let replay = send(
        &app,
        "hold",
        hold_on(slot, &to_replay, Some(r#"{"quantity": 2}"#)),
        None,
    )
    .await;
    assert_eq!(
        (replay.status, replay.replayed.as_deref()),
        (200, Some("true"))
    );
    assert_eq!(replay.body, replayed.body);
    send(&app, "hold", hold_on(slot, &to_replay, Some("[]")), None)
        .await
        .assert_invalid(&["body"]);
    send(
        &app,
        "hold",
        hold_on(slot, &to_replay, Some(r#"{"quantity": 1}"#)),
        None,
    )
    .await
    .assert_error(422, "idempotency_key_reuse");

    let confirmed = send(&app, "confirm", confirm_request(&booked.id()), None).await;
    assert_eq!(
        (confirmed.status, confirmed.body["status"].as_str()),
        (200, Some("confirmed"))
    );
    let cancelled = send(&app, "cancel", cancel_request(&dropped.id()), None).await;
    assert_eq!(
        (cancelled.status, cancelled.body["status"].as_str()),
        (200, Some("cancelled"))
    );
    let returned = send(&app, "cancel", cancel_request(&booked.id()), None).await;
    assert_eq!(returned.status, 200);
    assert_eq!(figures(&db, slot).await, (2, 5, 3));
    db.assert_counters_exact("on the started slot").await;
    db.assert_invariants().await;
    db.drop().await;
}
