//! `make dev` started as a developer starts it, on a free port and a
//! database of its own, in its own process group: for `make soak` and
//! `make contract`.

use crate::redis_url;
use crate::watch::{cargo_run_env, workspace_root};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The first `make dev` builds the functions: bounded, but generous.
const READY_WITHIN: Duration = Duration::from_secs(900);

/// `make dev` exactly as a developer runs it, on this port and database,
/// in its own process group so that stopping it stops every instance.
/// `--ignore-changes`: editing the tree during a soak must not rebuild.
pub fn start_dev(
    port: u16,
    database_url: &str,
    log: &Path,
    keys: &Path,
    env: &[(&str, &str)],
) -> Child {
    let file = std::fs::File::create(log).expect("make dev log");
    let mut make = Command::new("make");
    for (name, _) in cargo_run_env() {
        make.env_remove(name);
    }
    make.args(["--no-print-directory", "dev"])
        .arg(format!("PORT={port}"))
        .arg(format!("DATABASE_URL={database_url}"))
        .arg(format!("REDIS_URL={}", redis_url()))
        .arg("WATCH_FLAGS=--ignore-changes")
        .current_dir(workspace_root())
        .env("DEV_KEYS_FILE", keys)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log"))
        .stderr(file)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("start make dev")
}

/// A key `make dev` printed and kept in its keys file.
pub fn dev_key(file: &Path, variable: &str) -> Option<String> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|line| Some(line.strip_prefix(variable)?.strip_prefix('=')?.to_string()))
}

/// Ready when an unknown route answers the API's JSON 404: the emulator
/// listens and the `not-found` function runs.
pub async fn ready(base: &str, dev: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + READY_WITHIN;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = dev.try_wait() {
            return Err(format!("make dev exited ({status}) before it served"));
        }
        if let Ok(response) = reqwest::get(format!("{base}/")).await
            && response.status() == 404
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("make dev did not serve within {READY_WITHIN:?}"))
}

/// Stops it as a developer's Ctrl-C does: SIGINT to its process group
/// (make, scripts/dev.sh, the sweeper loop; the watcher and its instances
/// are stopped by dev.sh, in order), SIGKILL if it has not gone within
/// 20 s.
pub async fn stop(dev: &mut Child) {
    let Some(pid) = dev.id() else { return };
    let signal = |sig: &str| {
        let _ = std::process::Command::new("kill")
            .args([sig, "--", &format!("-{pid}")])
            .status();
    };
    signal("-INT");
    if tokio::time::timeout(Duration::from_secs(20), dev.wait())
        .await
        .is_err()
    {
        signal("-KILL");
        let _ = dev.wait().await;
    }
}

/// One request to each of `calls` (method, path, body), one at a time, as
/// `key`: no later request waits for an instance's first start (`cargo run`
/// of its binary, longer while another cargo holds a lock). Fails on a 5xx.
pub async fn warm_up(base: &str, key: &str, calls: &[(&str, &str, &str)]) -> Result<(), String> {
    let http = reqwest::Client::new();
    for (method, path, body) in calls {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let response = http
            .request(method.clone(), format!("{base}{path}"))
            .bearer_auth(key)
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| format!("warm-up {method} {path}: {e}"))?;
        if response.status().is_server_error() {
            return Err(format!("warm-up {method} {path}: {}", response.status()));
        }
    }
    Ok(())
}
