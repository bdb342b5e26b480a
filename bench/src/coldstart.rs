//! Cold start of a function binary (the release `availability`), against a
//! stand-in of the Lambda Runtime API (`slot_booking_tests::runtime_api`): the time
//! from exec to its first `next` poll (start-up: logging, configuration,
//! clients), to its first response (one `GET /slots/availability`), and
//! its resident memory once that invocation is done.
//!
//! Also the size of every arm64 `bootstrap.zip` that `make sam-build` left.

use crate::e2e::workspace_root;
use crate::measure;
use crate::report::Row;
use crate::setup::{Bench, Env};
use serde_json::json;
use slot_booking_tests::runtime_api::{RuntimeApi, Seen};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;

const RUNS: usize = 10;
/// Why a cold start went wrong, for the error message.
fn unexpected(expected: &str, seen: Option<Seen>) -> String {
    match seen {
        None => format!("no {expected} within the time allowed"),
        Some(Seen::Error { report, .. }) => format!("the function reported an error: {report}"),
        Some(Seen::Poll(_)) => format!("a poll where the {expected} was expected"),
        Some(Seen::Response { body, .. }) => format!(
            "a response where the {expected} was expected: {}",
            String::from_utf8_lossy(&body)
        ),
    }
}

/// An API Gateway HTTP API (payload v2) event for `GET /slots/availability`
/// with the bench client's key: the first request pays its look-up.
fn event(bearer: &str) -> serde_json::Value {
    json!({
        "version": "2.0",
        "routeKey": "GET /slots/availability",
        "rawPath": "/slots/availability",
        "rawQueryString": "",
        "headers": {
            "accept": "application/json",
            "authorization": bearer,
            "host": "bench.execute-api.eu-west-1.amazonaws.com"
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "bench",
            "domainName": "bench.execute-api.eu-west-1.amazonaws.com",
            "domainPrefix": "bench",
            "http": {
                "method": "GET",
                "path": "/slots/availability",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "bench"
            },
            "requestId": "bench",
            "routeKey": "GET /slots/availability",
            "stage": "$default",
            "time": "30/Nov/2026:10:00:00 +0000",
            "timeEpoch": 1796032800000u64
        },
        "isBase64Encoded": false
    })
}

/// One measured cold start.
struct Start {
    to_poll: Duration,
    to_response: Duration,
    rss_kb: u64,
    hwm_kb: u64,
    status: u64,
    cache: String,
}

async fn cold_start(binary: &PathBuf, bench: &Bench) -> Result<Start, String> {
    let mut stand_in = RuntimeApi::start().await?;
    // The first poll gets it; the next waits, as on Lambda between
    // invocations.
    stand_in.invoke(event(&bench.bearer), Duration::from_secs(30));
    let started = Instant::now();
    let mut child = Command::new(binary)
        .env_clear()
        .envs(stand_in.environment("availability"))
        .env("DATABASE_URL", &bench.url)
        .env("REDIS_URL", &bench.redis_url)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let pid = child.id().ok_or("no pid")?;
    let result = async {
        let to_poll = match stand_in.next(Duration::from_secs(10)).await {
            Some(Seen::Poll(at)) => at - started,
            other => return Err(unexpected("first poll", other)),
        };
        let (to_response, body) = match stand_in.next(Duration::from_secs(10)).await {
            Some(Seen::Response { at, body, .. }) => (at - started, body),
            other => return Err(unexpected("response", other)),
        };
        // The next poll: the invocation is over, the environment idles.
        match stand_in.next(Duration::from_secs(2)).await {
            Some(Seen::Poll(_)) => {}
            other => return Err(unexpected("second poll", other)),
        }
        let status =
            std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let response: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        let header = |name: &str| {
            response["headers"]
                .as_object()
                .and_then(|h| h.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
                .and_then(|(_, v)| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        Ok(Start {
            to_poll,
            to_response,
            rss_kb: field("VmRSS:"),
            hwm_kb: field("VmHWM:"),
            status: response["statusCode"].as_u64().unwrap_or(0),
            cache: header("x-cache"),
        })
    }
    .await;
    let _ = child.start_kill();
    let output = child.wait_with_output().await.map_err(|e| e.to_string())?;
    result.map_err(|e| format!("{e}; stderr: {}", String::from_utf8_lossy(&output.stderr)))
}

/// The release binary, built (or found up to date) by cargo.
fn release_binary() -> Result<PathBuf, String> {
    let root = workspace_root();
    let built = std::process::Command::new("cargo")
        .args(["build", "--release", "-p", "availability"])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !built.success() {
        return Err("cargo build --release -p availability failed".into());
    }
    Ok(root.join("target/release/availability"))
}

/// Ten cold starts with the availability cache empty (the first request
/// reads the database: connection, projection, cache store) and ten with
/// it filled (one Redis GET).
pub async fn run(bench: &Bench, env: &Env, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    let binary = release_binary()?;
    let size = std::fs::metadata(&binary).map(|m| m.len()).unwrap_or(0);
    let cache = env.app.booking.cache().ok_or("no cache")?;
    for mode in ["miss", "hit"] {
        let mut starts = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            cache.invalidate().await;
            if mode == "hit" {
                env.app
                    .booking
                    .availability_json(None)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let start = cold_start(&binary, bench).await?;
            // A refusal (a 401) would time a start that never read anything.
            if start.status != 200 {
                return Err(format!("cold start answered {}", start.status));
            }
            starts.push(start);
        }
        let median = |mut v: Vec<Duration>| {
            v.sort_unstable();
            (measure::ms(v[v.len() / 2]), measure::ms(v[v.len() - 1]))
        };
        let (poll_median, poll_max) = median(starts.iter().map(|s| s.to_poll).collect());
        let (response_median, response_max) =
            median(starts.iter().map(|s| s.to_response).collect());
        let mut rss: Vec<u64> = starts.iter().map(|s| s.rss_kb).collect();
        rss.sort_unstable();
        let params = json!({
            "binary": "target/release/availability",
            "binary_bytes": size,
            "runs": RUNS,
            "cache_served": starts.iter().map(|s| s.cache.clone()).collect::<Vec<_>>(),
            "statuses": starts.iter().map(|s| s.status).collect::<Vec<_>>(),
            "exec_to_first_poll_ms": { "median": poll_median, "max": poll_max },
            "exec_to_first_response_ms": { "median": response_median, "max": response_max },
            "rss_after_first_invocation_mb": {
                "median": measure::round(rss[rss.len() / 2] as f64 / 1024.0, 1),
                "max": measure::round(rss[rss.len() - 1] as f64 / 1024.0, 1),
            },
            "peak_rss_mb_max": measure::round(starts.iter().map(|s| s.hwm_kb).max().unwrap_or(0) as f64 / 1024.0, 1),
        });
        emit(Row::info(
            &format!("cold_start.cache_{mode}"),
            "release_binary",
            params,
        ));
    }
    Ok(())
}

/// The arm64 bootstraps `make sam-build` built and zipped (`make bench`
/// runs it first): the zip of each function, as `sam deploy` would upload
/// it, and whether its bootstrap really is an aarch64 ELF.
pub fn bootstrap_zips(emit: &mut dyn FnMut(Row)) {
    let root = workspace_root().join(".aws-sam");
    let mut zips: Vec<(String, u64, bool, String)> = std::fs::read_dir(root.join("zip"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let function = path.file_stem()?.to_string_lossy().into_owned();
            if path.extension()? != "zip" {
                return None;
            }
            let meta = std::fs::metadata(&path).ok()?;
            let built: chrono::DateTime<chrono::Utc> = meta.modified().ok()?.into();
            let bootstrap = root.join("build").join(&function).join("bootstrap");
            Some((
                function,
                meta.len(),
                is_aarch64_elf(&bootstrap),
                built.format("%Y-%m-%d %H:%M UTC").to_string(),
            ))
        })
        .collect();
    zips.sort();
    let params = if zips.is_empty() {
        json!({ "built": false, "note": "not built: `make sam-build` builds them (`make bench` runs it first)" })
    } else {
        let bytes: serde_json::Map<String, serde_json::Value> = zips
            .iter()
            .map(|(name, size, _, _)| (name.clone(), json!(size)))
            .collect();
        let not_arm64: Vec<&str> = zips
            .iter()
            .filter(|(_, _, arm64, _)| !arm64)
            .map(|(name, _, _, _)| name.as_str())
            .collect();
        let oldest = zips.iter().map(|(_, _, _, at)| at.clone()).min();
        json!({
            "built": true,
            "bytes": bytes,
            "not_aarch64": not_arm64,
            "oldest_built_at": oldest,
        })
    };
    emit(Row::info("bootstrap_zips.arm64", "size", params));
}

/// ELF, 64-bit, little-endian, `e_machine` = EM_AARCH64 (183).
fn is_aarch64_elf(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut bytes = [0u8; 20];
    let read = std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut bytes));
    read.is_ok()
        && bytes[..4] == *b"\x7fELF"
        && bytes[4] == 2
        && bytes[5] == 1
        && u16::from_le_bytes([bytes[18], bytes[19]]) == 183
}
