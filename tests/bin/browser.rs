//! `make browser`: `make dev` on a free loopback port with a database of its
//! own, two clients made for the run (an admin and a booker, with keys no
//! log has seen), then scripts/browser.sh: the console and the reference in
//! Debian's Chromium, driven by Playwright (web/test/console.test.mjs).
//! Then the server is stopped and its whole output searched for every key
//! of the run (those two and the one the console creates): a key in a log
//! line fails the run, as does a panic.

use slot_booking_tests::TestDb;
use slot_booking_tests::dev::{dev_key, ready, start_dev, stop, warm_up};
use slot_booking_tests::watch::{cargo_run_env, workspace_root};
use std::path::Path;
use std::time::Instant;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let started = Instant::now();
    let db = TestDb::new().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let root = workspace_root();
    let artifacts = root.join("target/browser");
    let _ = std::fs::remove_dir_all(&artifacts);
    std::fs::create_dir_all(&artifacts).expect("target/browser");
    let log = artifacts.join("make-dev.log");
    let keys = artifacts.join("dev-keys.env");
    let mut dev = start_dev(port, &db.url, &log, &keys, &[]);
    let base = format!("http://127.0.0.1:{port}");
    let outcome = run(&base, &mut dev, &keys, &artifacts).await;
    stop(&mut dev).await;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    db.drop().await;
    let verdict = outcome.and_then(|run_keys| {
        let panics = output.matches("panicked at").count();
        if panics > 0 {
            return Err(format!("{panics} panics in the server's output"));
        }
        let created = std::fs::read_to_string(artifacts.join("keys-created.txt"))
            .map_err(|e| format!("the test wrote no keys-created.txt: {e}"))?;
        let all = run_keys.iter().map(String::as_str).chain(created.lines());
        for key in all.filter(|key| !key.is_empty()) {
            if let Some(line) = output.lines().find(|line| line.contains(key)) {
                return Err(format!("a key of the run is in a log line: {line}"));
            }
        }
        Ok(())
    });
    let secs = started.elapsed().as_secs();
    match verdict {
        Ok(()) => println!(
            "browser: PASSED in {}m{:02}s (make dev included); screenshots in {}",
            secs / 60,
            secs % 60,
            artifacts.display()
        ),
        Err(e) => {
            eprintln!(
                "browser: FAILED: {e}; the server's output is in {}",
                log.display()
            );
            std::process::exit(1);
        }
    }
}

/// The run: the server ready, its functions warm, two fresh clients, the
/// browser. Answers the two clients' keys.
async fn run(
    base: &str,
    dev: &mut tokio::process::Child,
    keys: &Path,
    artifacts: &Path,
) -> Result<Vec<String>, String> {
    ready(base, dev).await?;
    let dev_admin = dev_key(keys, "ADMIN_KEY")
        .ok_or_else(|| format!("make dev wrote no ADMIN_KEY to {}", keys.display()))?;
    warm_up(base, &dev_admin, &WARM_UP).await?;
    let admin = new_client(base, &dev_admin, "console-admin", "admin").await?;
    let booker = new_client(base, &dev_admin, "console-booker", "booker").await?;
    let mut script = tokio::process::Command::new("bash");
    for (name, _) in cargo_run_env() {
        script.env_remove(name);
    }
    let status = script
        .arg(workspace_root().join("scripts/browser.sh"))
        .env("BASE_URL", base)
        .env("ADMIN_KEY", &admin)
        .env("BOOKER_KEY", &booker)
        .env("ARTIFACTS", artifacts)
        .current_dir(workspace_root())
        .status()
        .await
        .map_err(|e| format!("scripts/browser.sh: {e}"))?;
    if !status.success() {
        return Err(format!("scripts/browser.sh: {status}"));
    }
    Ok(vec![admin, booker])
}

/// One request to each function the pages use, so that the browser's first
/// requests do not wait for an instance's start.
const WARM_UP: [(&str, &str, &str); 12] = [
    ("GET", "/console", ""),
    ("GET", "/docs", ""),
    ("GET", "/openapi.yaml", ""),
    ("GET", "/slots/availability", ""),
    ("GET", "/slots/0", ""),
    ("GET", "/events", ""),
    ("GET", "/clients", ""),
    ("POST", "/slots/0/hold", ""),
    ("POST", "/holds/0/confirm", ""),
    ("GET", "/holds/0", ""),
    ("POST", "/slots/0/waitlist", ""),
    ("PATCH", "/slots/0", ""),
];

/// A client made through the API for this run; its key.
async fn new_client(base: &str, admin: &str, name: &str, role: &str) -> Result<String, String> {
    let response = reqwest::Client::new()
        .post(format!("{base}/clients"))
        .bearer_auth(admin)
        .json(&serde_json::json!({"name": name, "role": role}))
        .send()
        .await
        .map_err(|e| format!("POST /clients: {e}"))?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| format!("POST /clients: {e}"))?;
    match body["key"].as_str() {
        Some(key) if status == 201 => Ok(key.to_owned()),
        _ => Err(format!("POST /clients answered {status}: {body}")),
    }
}
