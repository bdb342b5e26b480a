//! `make contract`: `make dev` on a free loopback port with a database of
//! its own (a few slots ahead, one started, one full), then
//! scripts/schemathesis.sh against it with the dev admin's and the dev
//! booker's keys, then the server stopped. It fails when schemathesis
//! finds anything, or when the server's output holds a panic.

use slot_booking_tests::dev::{dev_key, ready, start_dev, stop, warm_up};
use slot_booking_tests::watch::{cargo_run_env, workspace_root};
use slot_booking_tests::{TestDb, scenarios};
use std::time::Instant;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let started = Instant::now();
    let db = TestDb::new().await;
    // Slots that take holds, one with a single seat, one already started:
    // the fuzzer's ids 1 to 6 reach 201, 409 capacity_exhausted and
    // slot_closed as well as 404.
    for capacity in [50, 10, 1, 5] {
        scenarios::insert_slot(&db.admin, capacity).await;
    }
    sqlx::query(
        "INSERT INTO slots (starts_at, ends_at, capacity, remaining) \
         VALUES (UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 3, 3)",
    )
    .execute(&db.admin)
    .await
    .expect("a started slot");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let root = workspace_root();
    let log = root.join(format!("target/contract-{port}.log"));
    let keys = root.join(format!("target/contract-{port}.keys.env"));
    // The fuzzer is one admin and one booker sending as fast as they can:
    // unlimited, so that it tests the routes rather than the limiter (429
    // is documented on every route all the same).
    let mut dev = start_dev(
        port,
        &db.url,
        &log,
        &keys,
        &[("RATE_LIMIT_PER_SECOND", "0")],
    );
    let base = format!("http://127.0.0.1:{port}");
    let outcome = run(&base, &mut dev, &keys).await;
    stop(&mut dev).await;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    db.drop().await;
    let panics = output.matches("panicked at").count();
    let secs = started.elapsed().as_secs();
    match outcome {
        Ok(()) if panics == 0 => {
            println!(
                "contract: PASSED in {}m{:02}s (make dev included)",
                secs / 60,
                secs % 60
            );
        }
        Ok(()) => {
            eprintln!(
                "contract: FAILED: {panics} panics in the server's output, {}",
                log.display()
            );
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!(
                "contract: FAILED: {e}; the server's output is in {}",
                log.display()
            );
            std::process::exit(1);
        }
    }
}

/// One request to every function, changing nothing, so that no fuzzed
/// request waits for an instance's first start.
const WARM_UP: [(&str, &str, &str); 14] = [
    ("GET", "/slots/availability", ""),
    ("POST", "/slots/0/hold", ""),
    ("POST", "/holds/0/confirm", ""),
    ("DELETE", "/holds/0", ""),
    ("GET", "/holds/0", ""),
    ("GET", "/holds", ""),
    ("POST", "/holds/0/extend", ""),
    ("POST", "/slots", "[]"),
    ("GET", "/slots/0", ""),
    ("PATCH", "/slots/0", "{}"),
    ("DELETE", "/slots/0", ""),
    ("POST", "/clients", "{}"),
    ("GET", "/clients", ""),
    ("DELETE", "/clients/0", ""),
];

async fn run(
    base: &str,
    dev: &mut tokio::process::Child,
    keys: &std::path::Path,
) -> Result<(), String> {
    ready(base, dev).await?;
    let key = |name: &str| {
        dev_key(keys, name).ok_or_else(|| format!("make dev wrote no {name} to {}", keys.display()))
    };
    let (admin, booker) = (key("ADMIN_KEY")?, key("BOOKER_KEY")?);
    warm_up(base, &admin, &WARM_UP).await?;
    let mut script = tokio::process::Command::new("bash");
    for (name, _) in cargo_run_env() {
        script.env_remove(name);
    }
    let status = script
        .arg(workspace_root().join("scripts/schemathesis.sh"))
        .args([base, &admin, &booker])
        .current_dir(workspace_root())
        .status()
        .await
        .map_err(|e| format!("scripts/schemathesis.sh: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("scripts/schemathesis.sh: {status}"))
    }
}
