//! End to end: the real function binaries served by `cargo lambda watch`
//! (20 instances per function, as `make dev` runs them), driven over HTTP.

use serde_json::Value;
use slot_booking_tests::watch::{Watch, WatchOptions, build_functions, workspace_root};
use slot_booking_tests::*;
use std::process::Stdio;
use tokio::process::Command;

/// The emulator serving the functions with this test's database.
async fn serve(db: &TestDb) -> Watch {
    Watch::start(WatchOptions {
        database_url: &db.url,
        redis_url: &redis_url(),
        concurrency: 20,
        emulator_timeout_secs: None,
        release: false,
        log_prefix: "e2e-watch",
        auth_mode: "open",
        application_log_level: None,
    })
    .await
    .expect("cargo lambda watch")
}

async fn call(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").cloned();
    let text = response.text().await.expect("body");
    assert_no_leak(&text);
    assert_eq!(
        content_type.as_ref().and_then(|v| v.to_str().ok()),
        Some("application/json"),
        "{text}"
    );
    (status, serde_json::from_str(&text).expect("JSON body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_served_binaries_answer_every_endpoint_and_the_seed_table_over_http() {
    let db = TestDb::new().await;
    let slot = scenarios::insert_slot(&db.admin, 2).await;
    let watch = serve(&db).await;
    let http = reqwest::Client::new();
    let base = &watch.base;

    // Availability: the bare list, with the cache's header.
    let response = http
        .get(format!("{base}/slots/availability"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "see {}", watch.log.display());
    assert!(response.headers().get("x-cache").is_some());
    let list: Value = response.json().await.unwrap();
    assert_eq!(list[0]["slot_id"], slot);
    assert_eq!(list[0]["remaining"], 2);

    // Hold, replay, confirm, confirm again, cancel, cancel again.
    let key = new_key().to_string();
    let hold = || {
        http.post(format!("{base}/slots/{slot}/hold"))
            .header("idempotency-key", &key)
    };
    let (status, held) = call(hold()).await;
    assert_eq!(status, 201, "{held}");
    assert_eq!(call(hold()).await, (200, held.clone()));
    let id = id_of(&held);
    let (status, confirmed) = call(http.post(format!("{base}/holds/{id}/confirm"))).await;
    assert_eq!(
        (status, confirmed["status"].as_str()),
        (200, Some("confirmed"))
    );
    assert_eq!(
        call(http.post(format!("{base}/holds/{id}/confirm")))
            .await
            .0,
        200
    );
    let (status, cancelled) = call(http.delete(format!("{base}/holds/{id}"))).await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("cancelled"))
    );
    assert_eq!(call(http.delete(format!("{base}/holds/{id}"))).await.0, 200);
    assert_eq!(db.slot(shared::domain::SlotId(slot)).await, (2, 2));

    // Errors: JSON with message and reason, never a 500.
    let (status, body) = call(http.post(format!("{base}/slots/{slot}/hold"))).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (422, Some("validation_failed"))
    );
    assert_eq!(
        body["errors"]["idempotency_key"][0],
        "The idempotency key field is required."
    );
    for bad in ["0", "abc", "18446744073709551616"] {
        let (status, body) = call(http.post(format!("{base}/holds/{bad}/confirm"))).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (404, Some("not_found")),
            "{bad}"
        );
    }
    let (status, body) = call(
        http.post(format!("{base}/slots/999999/hold"))
            .header("idempotency-key", new_key().to_string()),
    )
    .await;
    assert_eq!((status, body["reason"].as_str()), (404, Some("not_found")));
    assert_eq!(
        http.get(format!("{base}/no/such/route"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // The seed's concurrency table, through 20 parallel instances.
    let target = scenarios::Target { base, key: None };
    for outcome in scenarios::seed_table(&target, &db.admin).await {
        println!("{outcome}");
        assert!(outcome.holds(), "{outcome}");
    }
    watch.stop().await;
    db.drop().await;
}

#[tokio::test]
async fn a_function_refuses_to_start_on_an_invalid_cache_ttl_with_one_clear_line() {
    build_functions(false).expect("the functions build");
    let binary = workspace_root().join("target/debug/availability");
    for bad in ["4", "16", "abc"] {
        let output = Command::new(&binary)
            .env("SLOT_AVAILABILITY_CACHE_TTL", bad)
            .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run the function binary");
        assert!(!output.status.success(), "TTL {bad} must stop the function");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("SLOT_AVAILABILITY_CACHE_TTL") && stderr.contains("from 5 to 15"),
            "TTL {bad}: {stderr}"
        );
    }
}
