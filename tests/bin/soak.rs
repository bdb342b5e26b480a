//! `make soak`: runs `make dev` (on a free loopback port, with its own
//! database) under bursts of mixed traffic separated by idle gaps longer
//! than any emulator time-out that used to exist, then prints one summary
//! line. It fails on any panic in the server's output, any line at WARN or
//! above from its start to its stop (Ctrl-C), any request left unanswered, any answer the API
//! does not document, a sweeper that did not run every minute, or a broken
//! invariant.
//!
//! SOAK_MINUTES (default 30) is the length of the run; SOAK_GAP_SECS
//! (default 40) the idle gap; SOAK_BURST (default 300) requests per burst.

use slot_booking_tests::dev::{dev_key, ready, start_dev, stop};
use slot_booking_tests::logs::at_warn_or_above;
use slot_booking_tests::traffic::{Tally, Traffic};
use slot_booking_tests::watch::workspace_root;
use slot_booking_tests::{TestDb, scenarios};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Requests in flight at once: the functions run 20 instances each.
const PARALLEL: usize = 16;

fn setting(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("soak: {name} must be a whole number, got {v:?}");
            std::process::exit(2)
        }),
        Err(_) => default,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let minutes = setting("SOAK_MINUTES", 30);
    let gap = Duration::from_secs(setting("SOAK_GAP_SECS", 40));
    let burst = usize::try_from(setting("SOAK_BURST", 300)).unwrap_or(300);

    let db = TestDb::new().await;
    let mut slots = Vec::new();
    for capacity in [50, 50, 20, 5, 1] {
        slots.push(scenarios::insert_slot(&db.admin, capacity).await);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let log = workspace_root().join(format!("target/soak-{port}.log"));
    // `make dev`'s keys for this database, apart from the developer's.
    let keys = workspace_root().join(format!("target/soak-{port}.keys.env"));
    let mut dev = start_dev(
        port,
        &db.url,
        &log,
        &keys,
        &[
            // Holds expire within a gap, so the sweeper has seats to give back.
            ("HOLD_TTL_SECONDS", "30"),
            // Bursts come from one booker, faster than its default 20/s:
            // the soak is about the server, the limits have their own tests.
            ("RATE_LIMIT_PER_SECOND", "0"),
        ],
    );
    let base = format!("http://127.0.0.1:{port}");
    if let Err(e) = ready(&base, &mut dev).await {
        stop(&mut dev).await;
        db.drop().await;
        eprintln!("soak: {e}; see {}", log.display());
        std::process::exit(1);
    }

    let booker = match dev_key(&keys, "BOOKER_KEY") {
        Some(key) => format!("Bearer {key}"),
        None => {
            stop(&mut dev).await;
            db.drop().await;
            eprintln!("soak: make dev wrote no BOOKER_KEY to {}", keys.display());
            std::process::exit(1);
        }
    };
    let traffic = Arc::new(Traffic::new(&base, slots, &booker));
    let started = Instant::now();
    let length = Duration::from_secs(minutes * 60);
    let mut bursts = 0;
    // Bounded: a burst, then a gap, until the time is up; the last burst
    // comes after the last gap.
    loop {
        traffic.burst(burst, PARALLEL).await;
        bursts += 1;
        if started.elapsed() >= length {
            break;
        }
        tokio::time::sleep(gap).await;
    }
    let elapsed = started.elapsed();
    // Stopped as a developer stops it (Ctrl-C): its stop is read too.
    stop(&mut dev).await;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    db.assert_invariants().await;
    db.drop().await;

    let tally = std::mem::take(&mut *traffic.tally.lock().unwrap());
    let server = Server::read(&output);
    // The sweeper runs when the server is ready and every 60 s after.
    let sweeps_due = elapsed.as_secs() / 60;
    let ok = tally.unanswered == 0
        && tally.wrong == 0
        && server.panics == 0
        && server.alarms.is_empty()
        && server.sweep_failures == 0
        && server.sweeps >= sweeps_due.max(1);
    println!("{}", summary(&tally, &server, bursts, gap, elapsed, ok));
    for example in &tally.examples {
        eprintln!("soak: {example}");
    }
    if !server.alarms.is_empty() {
        eprintln!(
            "soak: {} lines at WARN or above, its stop included (a healthy make dev prints none); the first:",
            server.alarms.len()
        );
    }
    for line in server.alarms.iter().take(5) {
        eprintln!("soak: logged: {line}");
    }
    if !ok {
        eprintln!("soak: FAILED; the server's output is in {}", log.display());
        std::process::exit(1);
    }
}

/// What the server's output says.
struct Server {
    panics: usize,
    /// Lines at WARN or above, from its start to its stop, from the
    /// functions, the runtime client or the emulator: a healthy `make dev`
    /// prints none (a newcomer reads a warning as something wrong), so any
    /// one fails the soak, reported with the first few. What happens
    /// routinely under a burst and is handled (a late cache owner, a
    /// retried deadlock) is INFO and a metric.
    alarms: Vec<String>,
    sweeps: u64,
    sweep_failures: usize,
}

impl Server {
    fn read(output: &str) -> Self {
        Self {
            // Rust's panic message, from any function instance.
            panics: output.matches("panicked at").count(),
            alarms: output
                .lines()
                .filter(|line| at_warn_or_above(line))
                .map(str::to_string)
                .collect(),
            sweeps: output.matches("dev: sweep invoked").count() as u64,
            sweep_failures: output.matches("dev: sweep invocation failed").count(),
        }
    }
}

fn summary(
    tally: &Tally,
    server: &Server,
    bursts: u32,
    gap: Duration,
    elapsed: Duration,
    ok: bool,
) -> String {
    let secs = elapsed.as_secs();
    format!(
        "soak: {} in {}m{:02}s, {} requests in {bursts} bursts {}s apart ({}), \
         unanswered {}, undocumented {}, panics {}, lines at WARN or above {}, sweeps {} ({} failed)",
        if ok { "PASSED" } else { "FAILED" },
        secs / 60,
        secs % 60,
        tally.requests,
        gap.as_secs(),
        tally.statuses(),
        tally.unanswered,
        tally.wrong,
        server.panics,
        server.alarms.len(),
        server.sweeps,
        server.sweep_failures,
    )
}
