//! SPEC §20 "On AWS": the worker in the VPC invokes the sender function
//! outside it. The built `webhooks-deliver`, given `WEBHOOK_SENDER_FUNCTION`,
//! signs each request and hands it through the Lambda Invoke API (a
//! stand-in on loopback, SigV4-signed) to the built `webhooks-send`, which
//! sends it to a real receiver on 127.0.0.1; the answer comes back the same
//! way and is recorded.

use shared::clients::Role;
use shared::config::{AuthMode, HoldRules};
use slot_booking_tests::delivery::*;
use slot_booking_tests::invoke_api::InvokeApi;
use slot_booking_tests::receiver::Receiver;
use slot_booking_tests::runtime_api::{RuntimeApi, Seen};
use slot_booking_tests::watch::{build_functions, cargo_run_env, workspace_root};
use slot_booking_tests::*;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

fn build_sender() {
    let mut build = std::process::Command::new("cargo");
    build
        .args(["build", "--bin", "webhooks-send"])
        .current_dir(workspace_root());
    for (name, _) in cargo_run_env() {
        build.env_remove(name);
    }
    assert!(build.status().expect("cargo build").success());
}

#[tokio::test]
async fn the_worker_sends_through_the_invoked_sender_and_records_its_answer() {
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

    tokio::task::spawn_blocking(|| {
        build_functions(false).expect("the functions build");
        build_sender();
    })
    .await
    .unwrap();
    let binary = |name: &str| workspace_root().join("target/debug").join(name);

    // The sender: no database, no secret, no AWS credentials.
    let sender_runtime = RuntimeApi::start().await.expect("runtime API stand-in");
    let _sender = Command::new(binary("webhooks-send"))
        .env_clear()
        .envs(sender_runtime.environment("webhooks-send"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start webhooks-send");
    let lambda = InvokeApi::start(sender_runtime).await;

    let mut api = RuntimeApi::start().await.expect("runtime API stand-in");
    let _worker = Command::new(binary("webhooks-deliver"))
        .env_clear()
        .envs(api.environment("webhooks-deliver"))
        .env("DATABASE_URL", &db.url)
        .env("REDIS_URL", "")
        .env("WEBHOOK_ALLOW_HTTP", "true")
        .env("WEBHOOK_ALLOW_PRIVATE", "true")
        .env("WEBHOOK_SECRET_KEY", SEAL_KEY_BASE64)
        .env("WEBHOOK_TIMEOUT_MS", "1000")
        .env("WEBHOOK_SENDER_FUNCTION", "stack-webhooks-send")
        .env("AWS_ENDPOINT_URL_LAMBDA", &lambda.url)
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
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
    let invoked = lambda.invoked();
    assert_eq!(invoked.len(), 1, "one invoke of the sender: {invoked:?}");
    assert_eq!(
        invoked[0].path,
        "/2015-03-31/functions/stack%2Dwebhooks%2Dsend/invocations"
    );
    assert!(
        invoked[0]
            .authorization
            .starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
            && invoked[0]
                .authorization
                .contains("/eu-west-1/lambda/aws4_request"),
        "SigV4 for lambda: {}",
        invoked[0].authorization
    );
    assert_eq!(report["delivered"], 1, "{report}");
    assert_eq!(receiver.events(), vec![format!("slot.created {slot}")]);
    let recorded = &deliveries(&db, sub).await[0];
    assert_eq!(recorded.1, "delivered", "{recorded:?}");
    assert_eq!(recorded.3, Some(200), "{recorded:?}");
}
