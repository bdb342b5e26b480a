//! End to end: the real function binaries served by `cargo lambda watch`
//! (20 instances per function, as `make dev` runs them), driven over HTTP.

use serde_json::Value;
use slot_booking_tests::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// Builds the functions exactly as `cargo lambda watch` will run them
/// (`cargo run --bin NAME`: features unified over the functions only), so
/// its first request does not rebuild the dependencies. `cargo test` alone
/// does not build other packages' binaries.
fn build_functions() {
    let built = std::process::Command::new("cargo")
        .args([
            "build",
            "--bin",
            "availability",
            "--bin",
            "hold",
            "--bin",
            "confirm",
        ])
        .args(["--bin", "cancel"])
        .current_dir(workspace_root())
        .status()
        .expect("cargo build");
    assert!(built.success(), "the functions must build");
}

/// `cargo lambda watch` on a free port, stopped when dropped.
struct Watch {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Watch {
    async fn start(db: &TestDb) -> Self {
        let root = workspace_root();
        // The project's own installer: cargo-lambda from PATH, or from the
        // project-local venv it creates.
        let tools = std::process::Command::new("bash")
            .arg(root.join("scripts/ensure-cargo-lambda.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run ensure-cargo-lambda.sh");
        assert!(
            tools.status.success(),
            "cargo-lambda could not be installed"
        );
        let tools = String::from_utf8(tools.stdout).unwrap().trim().to_string();
        let path = format!("{tools}:{}", std::env::var("PATH").unwrap_or_default());

        build_functions();
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let log = root.join(format!("target/e2e-watch-{port}.log"));
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = Command::new("cargo")
            .args([
                "lambda",
                "watch",
                "--invoke-address",
                "127.0.0.1",
                "--invoke-port",
            ])
            .arg(port.to_string())
            .args([
                "--concurrency",
                "20",
                "--timeout",
                "120",
                "--ignore-changes",
            ])
            .current_dir(&root)
            .env("PATH", path)
            .env("DATABASE_URL", &db.url)
            .env("REDIS_URL", redis_url())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn cargo lambda watch");
        let watch = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        watch.wait_until_listening().await;
        watch
    }

    async fn wait_until_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            // `/` is no function route: it answers 404 as soon as the
            // emulator listens, without starting a build.
            if reqwest::get(format!("{}/", self.base)).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "cargo lambda watch did not listen: see {}",
            self.log.display()
        );
    }

    fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SIGTERM lets it stop its function instances cleanly.
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
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
    let watch = Watch::start(&db).await;
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
    for outcome in scenarios::seed_table(base, &db.admin).await {
        println!("{outcome}");
        assert!(outcome.holds(), "{outcome}");
    }
    drop(watch);
    db.drop().await;
}

#[tokio::test]
async fn a_function_refuses_to_start_on_an_invalid_cache_ttl_with_one_clear_line() {
    build_functions();
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
