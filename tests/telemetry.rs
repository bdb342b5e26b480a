//! SPEC §13 over the real binaries, served by `cargo lambda watch` as
//! `make dev` serves them: a run over every route, then every line the
//! functions printed is read back. Each is one JSON object with
//! `request_id`, `function` and `cold_start` at the top; each request has
//! one summary line telling its route, status, reason and client; no key,
//! no key's hash appears anywhere; the EMF documents are valid and count
//! what the run did.

use reqwest::Method;
use serde_json::{Value, json};
use shared::clients::{KeyHash, Role};
use slot_booking_tests::keys::TestClient;
use slot_booking_tests::logs::{check_emf, emf_sums, function_lines, is_emf};
use slot_booking_tests::told::{Run, Told};
use slot_booking_tests::watch::{DEV_FUNCTIONS, Watch, WatchOptions, workspace_root};
use slot_booking_tests::*;
use std::collections::{BTreeMap, BTreeSet};

/// A database user with a password for the functions to connect as: the
/// password must not appear in any line either. Returns its URL.
async fn password_user(db: &TestDb, user: &str, password: &str) -> String {
    for host in ["%", "localhost", "127.0.0.1"] {
        for statement in [
            format!("CREATE USER '{user}'@'{host}' IDENTIFIED BY '{password}'"),
            format!("GRANT ALL ON `{}`.* TO '{user}'@'{host}'", db.name),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&db.admin)
                .await
                .expect("a database user");
        }
    }
    let url = db
        .url
        .replacen("://root@", &format!("://{user}:{password}@"), 1);
    assert_ne!(url, db.url, "the test server's URL names root: {}", db.url);
    url
}

async fn drop_user(db: &TestDb, user: &str) {
    for host in ["%", "localhost", "127.0.0.1"] {
        let statement = format!("DROP USER IF EXISTS '{user}'@'{host}'");
        let _ = sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&db.admin)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_line_of_a_run_is_json_with_its_invocation_and_the_metrics_count_the_run() {
    let db = TestDb::new().await;
    let admin = db.client("ops-admin", Role::Admin, None).await;
    let booker = db.client("ops-booker", Role::Booker, None).await;
    let limited = db.client("ops-limited", Role::Booker, Some(1)).await;
    let nobody = TestClient {
        id: shared::clients::ClientId(0),
        key: format!("sb_{}", "n".repeat(43)),
    };
    let one_seat = scenarios::insert_slot(&db.admin, 1).await;
    let five_seats = scenarios::insert_slot(&db.admin, 5).await;
    // A counter no request explains: the sweeper repairs it, once.
    let drifted = scenarios::insert_slot(&db.admin, 2).await;
    sqlx::query("UPDATE slots SET held = 1 WHERE id = ?")
        .bind(drifted)
        .execute(&db.admin)
        .await
        .unwrap();

    let user = format!("sb_ops_{}", &db.name[db.name.len() - 8..]);
    let password = format!("pw{}", uuid::Uuid::new_v4().simple());
    let database_url = password_user(&db, &user, &password).await;

    let watch = Watch::start(WatchOptions {
        database_url: &database_url,
        redis_url: &redis_url(),
        concurrency: 2,
        emulator_timeout_secs: None,
        release: false,
        log_prefix: "telemetry-watch",
        auth_mode: "api-key",
        // The most a deploy can ask for (`LogLevel=trace`): every line a
        // dependency writes below INFO would be here.
        application_log_level: Some("TRACE"),
    })
    .await
    .expect("cargo lambda watch");
    // The readiness probe's own request is not part of the run.
    let probed = std::fs::metadata(&watch.log).unwrap().len() as usize;
    let mut run = Run::new(&watch.base);
    let (b, a) = (Some(&booker), Some(&admin));
    let (get, post, patch, delete) = (Method::GET, Method::POST, Method::PATCH, Method::DELETE);
    let key = |k: &'static str| [("idempotency-key", k)];
    let (k1, k2, k3) = (
        "6f1c3a2e-0d4b-4e8a-9b7c-1a2b3c4d5e01",
        "6f1c3a2e-0d4b-4e8a-9b7c-1a2b3c4d5e02",
        "6f1c3a2e-0d4b-4e8a-9b7c-1a2b3c4d5e03",
    );

    run.send("$default", get.clone(), "/no/such/route", None, &[], None)
        .await;
    let list = "GET /slots/availability";
    run.send(list, get.clone(), "/slots/availability", b, &[], None)
        .await;
    run.send(list, get.clone(), "/slots/availability", b, &[], None)
        .await;
    run.send(
        list,
        get.clone(),
        "/slots/availability?limit=1",
        b,
        &[],
        None,
    )
    .await;
    let hold = "POST /slots/{id}/hold";
    let one = format!("/slots/{one_seat}/hold");
    let five = format!("/slots/{five_seats}/hold");
    let (status, first) = run.send(hold, post.clone(), &one, b, &key(k1), None).await;
    assert_eq!(status, 201, "{first}");
    run.send(hold, post.clone(), &one, b, &key(k1), None).await;
    run.send(hold, post.clone(), &one, b, &key(k2), None).await;
    let two = Some(json!({"quantity": 2}));
    let (status, second) = run.send(hold, post.clone(), &five, b, &key(k3), two).await;
    assert_eq!(status, 201, "{second}");
    run.send(hold, post.clone(), &five, b, &[], None).await;
    let (h1, h2) = (id_of(&first), id_of(&second));
    run.send(
        "GET /holds/{id}",
        get.clone(),
        &format!("/holds/{h1}"),
        b,
        &[],
        None,
    )
    .await;
    let find = format!("/holds?idempotency_key={k1}");
    run.send("GET /holds", get.clone(), &find, b, &[], None)
        .await;
    let extend = format!("/holds/{h2}/extend");
    run.send(
        "POST /holds/{id}/extend",
        post.clone(),
        &extend,
        b,
        &[],
        None,
    )
    .await;
    let confirm = format!("/holds/{h1}/confirm");
    run.send(
        "POST /holds/{id}/confirm",
        post.clone(),
        &confirm,
        b,
        &[],
        None,
    )
    .await;
    run.send(
        "POST /holds/{id}/confirm",
        post.clone(),
        &confirm,
        b,
        &[],
        None,
    )
    .await;
    run.send(
        "DELETE /holds/{id}",
        delete.clone(),
        &format!("/holds/{h2}"),
        b,
        &[],
        None,
    )
    .await;
    run.send(
        "GET /slots/{id}",
        get.clone(),
        &format!("/slots/{one_seat}"),
        b,
        &[],
        None,
    )
    .await;
    let slot = Some(
        json!({"starts_at": "2031-01-01T08:00:00Z", "ends_at": "2031-01-01T09:00:00Z", "capacity": 3}),
    );
    let (status, made) = run
        .send("POST /slots", post.clone(), "/slots", a, &[], slot.clone())
        .await;
    assert_eq!(status, 201, "{made}");
    let made = format!("/slots/{}", made["id"]);
    let nine = Some(json!({"capacity": 9}));
    run.send("PATCH /slots/{id}", patch.clone(), &made, a, &[], nine)
        .await;
    run.send("DELETE /slots/{id}", delete.clone(), &made, a, &[], None)
        .await;
    run.send("POST /slots", post.clone(), "/slots", b, &[], slot)
        .await;
    // A body's canary: a name no answer of the run logs.
    let canary = format!("ops-made-{}", uuid::Uuid::new_v4().simple());
    let new = Some(json!({"name": canary, "role": "booker"}));
    let (status, client) = run
        .send("POST /clients", post.clone(), "/clients", a, &[], new)
        .await;
    assert_eq!(status, 201, "{client}");
    let made_client = TestClient {
        id: shared::clients::ClientId(client["id"].as_u64().unwrap()),
        key: client["key"].as_str().unwrap().to_string(),
    };
    let missing = "/holds/999999";
    run.send(
        "GET /holds/{id}",
        get.clone(),
        missing,
        Some(&made_client),
        &[],
        None,
    )
    .await;
    run.send("GET /clients", get.clone(), "/clients", a, &[], None)
        .await;
    let revoke = format!("/clients/{}", made_client.id.0);
    let limits = Some(json!({"max_held_seats": 7}));
    let (status, patched) = run
        .send(
            "PATCH /clients/{id}",
            patch.clone(),
            &revoke,
            a,
            &[],
            limits,
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    run.send(
        "DELETE /clients/{id}",
        delete.clone(),
        &revoke,
        a,
        &[],
        None,
    )
    .await;
    run.send(
        list,
        get.clone(),
        "/slots/availability",
        Some(&nobody),
        &[],
        None,
    )
    .await;
    // Over one request a second (a burst of two): some of these are 429.
    for _ in 0..8 {
        run.send(
            "GET /holds/{id}",
            get.clone(),
            missing,
            Some(&limited),
            &[],
            None,
        )
        .await;
    }
    let sweep_event = workspace_root().join("tests/fixtures/eventbridge_scheduled.json");
    let (swept, printed) = watch.invoke("sweep", &sweep_event).await;
    assert!(swept, "{printed}");

    let log_path = watch.log.clone();
    watch.stop().await;
    let log = std::fs::read_to_string(&log_path).unwrap();
    let see = format!("see {}", log_path.display());

    // Never a key, nor the hash the database keeps of it, nor a password.
    for who in [&admin, &booker, &limited, &nobody, &made_client] {
        assert!(!log.contains(&who.key), "a key is in the log: {see}");
        let hash = KeyHash::of(&who.key);
        assert!(
            !log.contains(hash.as_str()),
            "a key's hash is in the log: {see}"
        );
    }
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT key_hash FROM api_clients WHERE key_hash IS NOT NULL")
            .fetch_all(&db.admin)
            .await
            .unwrap();
    assert!(stored.len() >= 4, "{stored:?}");
    for hash in &stored {
        assert!(
            !log.contains(hash.as_str()),
            "a stored hash is in the log: {see}"
        );
    }
    assert!(
        !log.contains(&password),
        "the database password is in the log: {see}"
    );
    assert!(
        !log.contains(&canary),
        "a request body is in the log: {see}"
    );
    assert!(
        !log.to_ascii_lowercase().contains("authorization"),
        "a request's headers are in the log: {see}"
    );
    assert!(
        log.contains(&format!("mysql://{user}:***@")),
        "the URL, redacted: {see}"
    );

    let lines = function_lines(&log).unwrap_or_else(|e| panic!("{e} ({see})"));
    for line in &lines {
        let function = line["function"].as_str().unwrap_or_default();
        assert!(DEV_FUNCTIONS.contains(&function), "function: {line}");
        assert!(line["cold_start"].is_boolean(), "cold_start: {line}");
        let id = &line["request_id"];
        assert!(id.is_string() || id.is_null(), "request_id: {line}");
        assert!(is_emf(line) || line["level"].is_string(), "level: {line}");
    }
    let after_probe = function_lines(&log[probed..]).unwrap();
    let summaries: Vec<&Value> = after_probe
        .iter()
        .filter(|line| line["message"] == "request")
        .collect();
    let summary_ids: BTreeSet<&str> = summaries
        .iter()
        .map(|s| s["request_id"].as_str().expect("a summary's request id"))
        .collect();
    assert_eq!(
        summary_ids.len(),
        summaries.len(),
        "one summary per request"
    );
    for summary in &summaries {
        assert!(summary["duration_ms"].is_number(), "{summary}");
    }
    // Every line of a request carries its id.
    for line in &after_probe {
        if let Some(id) = line["request_id"].as_str() {
            assert!(summary_ids.contains(id), "a line of no request: {line}");
        }
    }
    let (scheduled, answered): (Vec<&Value>, Vec<&Value>) =
        summaries.iter().partition(|s| s["route"] == "schedule");
    assert_eq!(scheduled.len(), 1, "one sweep: {scheduled:?}");
    let mut logged: Vec<Told> = answered
        .iter()
        .map(|s| Told {
            route: s["route"].as_str().unwrap().to_string(),
            status: s["status"].as_u64().unwrap() as u16,
            reason: s["reason"].as_str().map(str::to_string),
            client_id: s["client_id"].as_u64(),
        })
        .collect();
    let mut told = run.told.clone();
    logged.sort();
    told.sort();
    assert_eq!(logged, told, "the summaries tell the answers ({see})");
    let rate_limited = told.iter().filter(|t| t.status == 429).count() as u64;
    assert!(rate_limited > 0, "the burst was rate limited: {told:?}");

    let docs: Vec<&Value> = after_probe.iter().filter(|line| is_emf(line)).collect();
    let mut documented = BTreeSet::new();
    for doc in &docs {
        check_emf(doc).unwrap_or_else(|e| panic!("{e}"));
        let id = doc["request_id"].as_str().expect("the document's request");
        assert!(documented.insert(id), "two documents for {id}");
    }
    let retried = log.matches("retrying transaction").count() as u64;
    let owner_late = log.matches("owner did not deliver in time").count() as u64;
    let cache = |status: &str| run.x_cache.get(status).copied().unwrap_or(0);
    let expected: BTreeMap<String, u64> = [
        ("HoldsCreated", 2),
        ("SeatsHeld", 3),
        ("HoldsRefused:capacity_exhausted", 1),
        ("HoldsRefused:validation_failed", 1),
        ("SeatsConfirmed", 1),
        ("SeatsCancelled", 2),
        ("CacheHit", cache("hit")),
        ("CacheStale", cache("stale")),
        ("CacheMiss", cache("miss")),
        ("CacheBypass", cache("bypass")),
        ("CacheOwnerLate", owner_late),
        ("RateLimited", rate_limited),
        ("Retries", retried),
        ("CounterRepairs", 1),
        ("SweepSlotsFailed", 0),
        ("HoldsDeleted", 0),
        // Holds of 300 s: none expired during the run.
        ("HoldsExpiredUnconfirmed", 0),
        ("SeatsExpiredUnconfirmed", 0),
        ("SeatsCancelledAfterConfirm", 0),
    ]
    .into_iter()
    .filter(|(name, n)| {
        let heartbeat = [
            "CounterRepairs",
            "SweepSlotsFailed",
            "HoldsDeleted",
            "HoldsExpiredUnconfirmed",
            "SeatsExpiredUnconfirmed",
            "SeatsCancelledAfterConfirm",
        ];
        *n > 0 || heartbeat.contains(name)
    })
    .map(|(name, n)| (name.to_string(), n))
    .collect();
    assert_eq!(emf_sums(docs.iter().copied()), expected, "{see}");
    assert!(cache("hit") >= 1 && cache("miss") >= 1, "{:?}", run.x_cache);
    drop_user(&db, &user).await;
    db.drop().await;
}
