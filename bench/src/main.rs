//! `make bench`: slot-booking's benchmarks.
//!
//! Simulates Lambda execution environments (each a `shared::App` with its
//! own one-connection pool and cache connection) calling the real service
//! with auth on (a bench client's key through the gate, as a request),
//! and, in the same run and on the same connections, the raw statement
//! sequences; then end to end over HTTP through `cargo lambda watch`, the
//! sold-out storm, and the cold start of a release function binary.
//! Prints one JSON line per scenario, the ratios and the targets, and
//! writes `docs/BENCHMARKS.md` when every group ran (a run of only groups
//! with a section of their own, like `--only cache_down`, rewrites just
//! those sections, each saying the commit it was measured at).
//!
//! ```text
//! cargo run --release -p bench -- [--seconds 4] [--only hold,confirm] [--no-docs] [--list]
//! ```
//! Environment: `BENCH_SECONDS`, `BENCH_ONLY`, `BENCH_DATABASE_SERVER`
//! (default `mysql://root@127.0.0.1:3306`), `BENCH_REDIS_URL` (default
//! `redis://127.0.0.1:6379`), `BENCH_E2E_RELEASE=1` (serve the functions
//! with the release profile), `BENCH_KEEP_DB=1`.

mod cachedown;
mod coldstart;
mod delay;
mod e2e;
mod fair;
mod feed;
mod history;
mod hot;
mod lifecycle;
mod markdown;
mod measure;
mod prose;
mod raw;
mod reads;
mod report;
mod scale;
mod scenarios;
mod sections;
mod seed;
mod setup;
mod table;
mod targets;

use report::{Meta, Row};
use scenarios::Timing;
use std::time::Duration;

/// The groups, in the order they run.
const GROUPS: &[(&str, &str)] = &[
    (
        "hold",
        "hold: one slot with holds piling up (0 / 5,000 to start), expired at once, spread, 5 seats vs 1",
    ),
    (
        "confirm",
        "confirm: one slot and spread, 1 and 8 environments",
    ),
    (
        "revision",
        "issue 28's cost: hold (hot slot) and confirm with today's statements vs those of before, raw",
    ),
    (
        "read",
        "GET /holds/{id}: service and its one statement, the statements per call counted by the server",
    ),
    (
        "projection",
        "availability: projection at 100 / 10k slots with 0 / 100k holds, miss path, cache hit with and without auth vs Redis GET",
    ),
    (
        "storm",
        "1,000 holds at once on a sold-out slot, in process",
    ),
    (
        "fair_use",
        "SPEC §16: hold with the per-client cap in force vs none (hot and spread, 1 and 8 env); the round trips of a 429 and of an unknown key refused again, counted",
    ),
    (
        "lifecycle",
        "SPEC §17: a booking moved to another slot vs a confirm (spread over 1,000 slots, 1 and 8 env)",
    ),
    (
        "hot",
        "issue 32: one hot slot's holds, service vs raw, 8 and 32 env, direct and through a delay line adding 0.5 ms per round trip",
    ),
    (
        "cache_down",
        "a hanging and a refusing cache, 20 environments: reads and writes, sequential and parallel",
    ),
    (
        "scale",
        "1,000,000 slots and 10,000,000 holds of history: pages with from/to, walks, the cached call, GET and POST /slots, the index migration, the seed's unbounded list",
    ),
    (
        "feed",
        "GET /events at 10,000,000 events of history: a page of 100 as an admin and as a booker, the idle poll",
    ),
    (
        "sweep_history",
        "issue 45: the sweeper's check of a slot with 1,000,000 ended holds vs 1,000, by turns",
    ),
    (
        "e2e",
        "every endpoint over HTTP through cargo lambda watch, and the storm over HTTP",
    ),
    (
        "cold_start",
        "exec → first poll → first response of the release binary, RSS; arm64 zip sizes",
    ),
];

struct Options {
    seconds: f64,
    only: Vec<String>,
    docs: bool,
}

fn options() -> Result<Options, String> {
    let mut seconds: f64 = std::env::var("BENCH_SECONDS")
        .ok()
        .map(|s| {
            s.parse()
                .map_err(|_| format!("BENCH_SECONDS={s}: not a number"))
        })
        .transpose()?
        .unwrap_or(4.0);
    let mut only: Vec<String> = std::env::var("BENCH_ONLY")
        .map(|s| {
            s.split(',')
                .map(|g| g.trim().to_string())
                .filter(|g| !g.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut docs = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                let value = args.next().ok_or("--seconds needs a value")?;
                seconds = value
                    .parse()
                    .map_err(|_| format!("--seconds {value}: not a number"))?;
            }
            "--only" => {
                let value = args.next().ok_or("--only needs a list of groups")?;
                only.extend(value.split(',').map(|g| g.trim().to_string()));
            }
            "--no-docs" => docs = false,
            "--list" => {
                for (name, what) in GROUPS {
                    println!("{name:<12} {what}");
                }
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other} (try --list)")),
        }
    }
    if !(0.5..=60.0).contains(&seconds) {
        return Err(format!("seconds {seconds}: allowed 0.5 to 60"));
    }
    for group in &only {
        if !GROUPS.iter().any(|(name, _)| name == group) {
            return Err(format!("unknown group {group} (try --list)"));
        }
    }
    Ok(Options {
        seconds,
        only,
        docs,
    })
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(err) => {
            eprintln!("bench: {err}");
            std::process::exit(2);
        }
    };
    if let Err(err) = run(options).await {
        eprintln!("bench: {err}");
        std::process::exit(1);
    }
}

async fn run(options: Options) -> Result<(), String> {
    let timing = Timing {
        seconds: Duration::from_secs_f64(options.seconds),
        rounds: 8,
        warmup: Duration::from_secs_f64((options.seconds / 8.0).clamp(0.2, 1.0)),
    };
    let server = std::env::var("BENCH_DATABASE_SERVER")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into());
    let redis_url =
        std::env::var("BENCH_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let load_before = load_average();
    let bench = setup::Bench::create(&server, "slot_booking_bench", &redis_url).await?;
    let commit_before = bench.commit_latency().await?;
    let selected = |group: &str| options.only.is_empty() || options.only.iter().any(|g| g == group);

    let mut rows: Vec<Row> = Vec::new();
    let mut emit = |row: Row| {
        report::print_line("scenario", &row);
        rows.push(row);
    };
    let mut failures = Vec::new();
    for (group, _) in GROUPS {
        if !selected(group) {
            continue;
        }
        eprintln!("bench: {group}…");
        let done = match *group {
            "hold" => scenarios::holds(&bench, timing, &mut emit).await,
            "confirm" => scenarios::confirms(&bench, timing, &mut emit).await,
            "revision" => scenarios::revision(&bench, timing, &mut emit).await,
            "read" => reads::hold_reads(&bench, timing, &mut emit).await,
            "projection" => reads::projections(&bench, timing, &mut emit).await,
            "storm" => scenarios::storm(&bench, &mut emit).await,
            "fair_use" => fair::run(&bench, timing, &mut emit).await,
            "lifecycle" => lifecycle::run(&bench, timing, &mut emit).await,
            "hot" => hot::run(&bench, timing, &mut emit).await,
            "cache_down" => cachedown::run(&bench, timing, &mut emit).await,
            "scale" => scale::run(&server, &redis_url, timing, &mut emit).await,
            "feed" => feed::run(&server, &redis_url, timing, &mut emit).await,
            "sweep_history" => history::run(&bench, timing, &mut emit).await,
            "e2e" => e2e::run(&bench, timing, &mut emit).await,
            "cold_start" => cold_starts(&bench, &mut emit).await,
            _ => Ok(()),
        };
        if let Err(err) = done {
            eprintln!("bench: {group} failed: {err}");
            failures.push(format!("{group}: {err}"));
        }
    }

    let ratios = report::ratios(&rows);
    for ratio in &ratios {
        report::print_line("ratio", ratio);
    }
    let targets = targets::targets(&rows);
    for target in &targets {
        report::print_line("target", target);
    }

    let mut meta = meta(&bench, options.seconds, timing.rounds).await;
    meta.load_before = load_before;
    let commit_after = bench.commit_latency().await?;
    let pair = |(p50, p99): (f64, f64)| format!("{p50:.2} / {p99:.2}");
    meta.commit_before = pair(commit_before);
    meta.commit_after = pair(commit_after);
    report::print_line("meta", &meta);
    let complete = options.only.is_empty() && failures.is_empty();
    if options.docs && complete {
        let path = e2e::workspace_root().join("docs/BENCHMARKS.md");
        std::fs::write(&path, markdown::render(&meta, &rows, &ratios, &targets))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    } else if options.docs
        && failures.is_empty()
        && options
            .only
            .iter()
            .all(|g| sections::IN_PLACE.contains(&g.as_str()))
    {
        // A run of groups that have their own section: those sections only.
        let path = e2e::workspace_root().join("docs/BENCHMARKS.md");
        let mut doc = std::fs::read_to_string(&path).unwrap_or_default();
        for group in &options.only {
            let section = sections::render(group, &meta, &rows, &targets, false);
            doc = sections::replace(&doc, group, &section);
        }
        std::fs::write(&path, doc).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!(
            "bench: updated the {} section(s) of {}",
            options.only.join(", "),
            path.display()
        );
    } else if options.docs {
        eprintln!("bench: docs/BENCHMARKS.md left as it was (not every group ran, or one failed)");
    }
    if std::env::var("BENCH_KEEP_DB").is_ok_and(|v| v == "1") {
        eprintln!("bench: kept database {}", bench.url);
    } else {
        bench.drop_database().await;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

async fn cold_starts(bench: &setup::Bench, emit: &mut dyn FnMut(Row)) -> Result<(), String> {
    bench.reset().await?;
    bench.insert_slots(100, setup::ROOMY).await?;
    let env = bench.envs(1).await?.remove(0);
    coldstart::run(bench, &env, emit).await?;
    coldstart::bootstrap_zips(emit);
    Ok(())
}

async fn meta(bench: &setup::Bench, seconds: f64, rounds: u32) -> Meta {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let memory_kb: f64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let command = |program: &str, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .current_dir(e2e::workspace_root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let mut commit =
        command("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let changes = command("git", &["status", "--porcelain"]);
    if changes.is_none_or(|c| !c.is_empty()) {
        commit.push_str(" + uncommitted changes");
    }
    let mariadb: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&bench.admin)
        .await
        .unwrap_or_else(|_| "unknown".into());
    let redis = match bench.redis().await {
        Ok(mut conn) => redis::cmd("INFO")
            .arg("server")
            .query_async::<String>(&mut conn)
            .await
            .ok()
            .and_then(|info| {
                info.lines()
                    .find_map(|l| l.strip_prefix("redis_version:").map(str::to_string))
            })
            .map(|v| format!("Redis {}", v.trim())),
        Err(_) => None,
    }
    .unwrap_or_else(|| "unknown".into());
    Meta {
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        commit,
        cpu,
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_gib: measure::round(memory_kb / 1_048_576.0, 1),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        mariadb,
        redis,
        rustc: command("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
        seconds_per_variant: seconds,
        rounds,
        load_before: String::new(),
        commit_before: String::new(),
        commit_after: String::new(),
        load_after: load_average(),
        e2e_profile: if std::env::var("BENCH_E2E_RELEASE").is_ok_and(|v| v == "1") {
            "release".into()
        } else {
            "dev".into()
        },
    }
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
