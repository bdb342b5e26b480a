//! `make dev` from start to stop, as a developer runs it: started, warmed
//! (one call to every route's function, the sweeper's run included), read,
//! and stopped with Ctrl-C (SIGINT to its process group). A healthy server
//! logs nothing at WARN or above in all that, its stop included
//! (docs/LOCAL.md, "A quiet log"): a newcomer reads any such line as
//! something wrong.

use slot_booking_tests::dev::{dev_key, ready, start_dev, stop, warm_up};
use slot_booking_tests::logs::at_warn_or_above;
use slot_booking_tests::watch::workspace_root;
use slot_booking_tests::{TestDb, scenarios};

/// One call to every method of every route, with ids that name nothing
/// (`0`) and bodies that change nothing: every function starts an
/// instance and answers once.
fn every_route() -> Vec<(String, String, String)> {
    let mut calls = Vec::new();
    for (path, methods) in shared::http::ROUTES {
        let path = path.replace("{id}", "0").replace("{name}", "main.js");
        for method in methods {
            let body = match *method {
                "POST" | "PATCH" => "{}",
                _ => "",
            };
            calls.push((method.to_string(), path.clone(), body.to_string()));
        }
    }
    // API Gateway's `$default` route: the `not-found` function.
    calls.push(("GET".into(), "/no-such-route".into(), String::new()));
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_dev_started_warmed_read_and_stopped_with_ctrl_c_logs_nothing_at_warn_or_above() {
    let db = TestDb::new().await;
    scenarios::insert_slot(&db.admin, 5).await;
    // A free loopback port of its own: never `make dev`'s 9000, never
    // another run's.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let root = workspace_root();
    let log = root.join(format!("target/dev-stop-{port}.log"));
    let keys = root.join(format!("target/dev-stop-{port}.keys.env"));
    // Forty reads from one booker, faster than its default rate.
    let mut dev = start_dev(
        port,
        &db.url,
        &log,
        &keys,
        &[("RATE_LIMIT_PER_SECOND", "0")],
    );
    let base = format!("http://127.0.0.1:{port}");
    let served = async {
        ready(&base, &mut dev).await?;
        let key = |name: &str| dev_key(&keys, name).ok_or(format!("no {name} in the keys file"));
        let (admin, booker) = (key("ADMIN_KEY")?, key("BOOKER_KEY")?);
        let calls = every_route();
        let calls: Vec<(&str, &str, &str)> = calls
            .iter()
            .map(|(m, p, b)| (m.as_str(), p.as_str(), b.as_str()))
            .collect();
        warm_up(&base, &admin, &calls).await?;
        let http = reqwest::Client::new();
        for _ in 0..40 {
            let response = http
                .get(format!("{base}/slots/availability"))
                .bearer_auth(&booker)
                .send()
                .await
                .map_err(|e| format!("a read: {e}"))?;
            if response.status() != 200 {
                return Err(format!("a read answered {}", response.status()));
            }
        }
        Ok::<(), String>(())
    }
    .await;
    // As Ctrl-C stops it.
    stop(&mut dev).await;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    db.drop().await;
    if let Err(e) = served {
        panic!("{e}; the server's output is in {}", log.display());
    }
    let loud: Vec<&str> = output.lines().filter(|l| at_warn_or_above(l)).collect();
    assert!(
        loud.is_empty(),
        "{} lines at WARN or above from start to stop (log: {}); the first:\n{}",
        loud.len(),
        log.display(),
        loud.iter().take(8).copied().collect::<Vec<_>>().join("\n")
    );
    // Not even the emulator's: it is killed once its instances have
    // stopped (scripts/dev.sh), never left to run its own shutdown, which
    // now and then panicked (cargo-lambda 1.9.2, tokio 1.53.1's timer).
    let panics = output.lines().filter(|line| line.contains("panicked at"));
    assert_eq!(panics.count(), 0, "{}", log.display());
    let _ = std::fs::remove_file(&keys);
}
