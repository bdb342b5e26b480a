//! `functions/webhooks-deliver` as Lambda runs it: the built binary
//! against a stand-in Runtime API, given the scheduled event, delivers a
//! committed event to a real receiver and answers its run's report.

use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use slot_booking_tests::delivery::*;
use slot_booking_tests::receiver::Receiver;
use slot_booking_tests::runtime_api::{RuntimeApi, Seen};
use slot_booking_tests::watch::{build_functions, workspace_root};
use slot_booking_tests::*;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

#[tokio::test]
async fn the_scheduled_function_delivers_what_committed_and_reports_it() {
    let db = TestDb::new().await;
    let app = db.app_with_rules(
        AuthMode::ApiKey,
        Duration::from_secs(300),
        HoldRules::default(),
    );
    let admin = db.client("admin", Role::Admin, None).await;
    let receiver = Receiver::answering(200).await;
    let (sub, _) = subscribe(&db, &admin, &receiver.url(), None).await;
    let slot = slot(&app, &admin, 8, 5).await;

    tokio::task::spawn_blocking(|| build_functions(false))
        .await
        .unwrap()
        .expect("the functions build");
    let mut api = RuntimeApi::start().await.expect("runtime API stand-in");
    let _child = Command::new(workspace_root().join("target/debug/webhooks-deliver"))
        .env_clear()
        .envs(api.environment("webhooks-deliver"))
        .env("DATABASE_URL", &db.url)
        .env("REDIS_URL", "")
        .env("WEBHOOK_ALLOW_HTTP", "true")
        .env("WEBHOOK_ALLOW_PRIVATE", "true")
        .env("WEBHOOK_SECRET_KEY", SEAL_KEY_BASE64)
        .env("WEBHOOK_TIMEOUT_MS", "1000")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start webhooks-deliver");
    let scheduled =
        std::fs::read_to_string(workspace_root().join("tests/fixtures/eventbridge_scheduled.json"))
            .unwrap();
    // A 15 s invocation: a 12 s run, claims for its first 6 s.
    api.invoke(
        serde_json::from_str(&scheduled).unwrap(),
        Duration::from_secs(15),
    );
    let answer = loop {
        match api.next(Duration::from_secs(60)).await {
            Some(Seen::Poll(_)) => continue,
            Some(Seen::Response { body, .. }) => break body,
            other => panic!("no answer but {other:?}"),
        }
    };
    let report: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
    assert_eq!(report["delivered"], 1, "{report}");
    assert_eq!(receiver.events(), vec![format!("slot.created {slot}")]);
    assert_eq!(deliveries(&db, sub).await[0].1, "delivered");
}
