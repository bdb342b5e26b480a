//! `cargo lambda watch` serving the API's function binaries on a free
//! loopback port, as `make dev` serves them: for the end-to-end tests and
//! the bench.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// What the emulator serves, as `make dev` does: the API's routes, the
/// `$default` route (`not-found`), the scheduled `sweep` and the
/// publisher, `events-publish` (built, never invoked: no bus runs locally),
/// and the webhooks' delivery engine, `webhooks-deliver`.
pub const DEV_FUNCTIONS: [&str; 35] = [
    "availability",
    "hold",
    "confirm",
    "cancel",
    "holds-get",
    "holds-find",
    "holds-extend",
    "holds-move",
    "waitlist-join",
    "waitlist-get",
    "waitlist-leave",
    "events-list",
    "slots-create",
    "slots-get",
    "slots-update",
    "slots-delete",
    "clients-create",
    "clients-list",
    "clients-revoke",
    "clients-update",
    "webhooks-create",
    "webhooks-list",
    "webhooks-get",
    "webhooks-update",
    "webhooks-delete",
    "webhooks-rotate",
    "webhooks-deliveries",
    "webhooks-ping",
    "console",
    "docs",
    "openapi",
    "not-found",
    "sweep",
    "events-publish",
    "webhooks-deliver",
];

/// `make dev`'s key sealing webhook secrets (scripts/dev.sh): a
/// development key, for development databases.
pub const DEV_WEBHOOK_SECRET_KEY: &str = "bWFrZS1kZXYgd2ViaG9vayBzZWFsIGtleSAoZGV2ISk=";

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// Builds the functions exactly as `cargo lambda watch` will run them
/// (`cargo run --bin NAME`: features unified over the functions only), so
/// its first requests do not wait for a build. `cargo test` alone does not
/// build other packages' binaries.
pub fn build_functions(release: bool) -> Result<(), String> {
    let mut build = std::process::Command::new("cargo");
    build.arg("build").current_dir(workspace_root());
    for (name, _) in cargo_run_env() {
        build.env_remove(name);
    }
    for bin in DEV_FUNCTIONS {
        build.args(["--bin", bin]);
    }
    if release {
        build.arg("--release");
    }
    let built = build.status().map_err(|e| format!("cargo build: {e}"))?;
    if built.success() {
        Ok(())
    } else {
        Err("the functions do not build".into())
    }
}

/// The variables `cargo run` / `cargo test` set for the program it runs
/// (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, …). A cargo started from here
/// must not inherit them: ring's build script declares
/// `rerun-if-env-changed` on several, so they would rebuild ring and
/// everything above it, and again for the next cargo run from a shell.
pub fn cargo_run_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(name, _)| {
            name.starts_with("CARGO_PKG_")
                || name.starts_with("CARGO_BIN_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_CRATE_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                ]
                .contains(&name.as_str())
        })
        .collect()
}

pub struct WatchOptions<'a> {
    pub database_url: &'a str,
    pub redis_url: &'a str,
    /// Function instances per function.
    pub concurrency: u32,
    /// `cargo lambda watch --timeout`: `None`, as `make dev` runs it. That
    /// time-out also cuts the runtime's idle long-poll for its next event,
    /// which panics the instance (docs/LOCAL.md); only the test that keeps
    /// that upstream defect reproduced sets it.
    pub emulator_timeout_secs: Option<u32>,
    pub release: bool,
    /// The log goes to `target/<log_prefix>-<port>.log`.
    pub log_prefix: &'a str,
    /// `AUTH_MODE`: `open` serves Part I's anonymous API, `api-key` (as
    /// `make dev`) needs a key on every route.
    pub auth_mode: &'a str,
    /// `AWS_LAMBDA_LOG_LEVEL`, as the template's `LoggingConfig` sets it:
    /// `None` leaves the functions at `RUST_LOG=warn` (a short log),
    /// `INFO` has every request's summary line.
    pub application_log_level: Option<&'a str>,
}

/// The running emulator, in its own process group so that stopping it also
/// stops the function instances it started. Dropped without [`Watch::stop`],
/// it sends the group SIGTERM.
pub struct Watch {
    child: Child,
    pub port: u16,
    pub base: String,
    path: String,
    pub log: PathBuf,
}

impl Watch {
    pub async fn start(options: WatchOptions<'_>) -> Result<Self, String> {
        let root = workspace_root();
        // The project's own installer: cargo-lambda from PATH, or from the
        // project-local venv it creates.
        let tools = std::process::Command::new("bash")
            .arg(root.join("scripts/ensure-cargo-lambda.sh"))
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("ensure-cargo-lambda.sh: {e}"))?;
        if !tools.status.success() {
            return Err("cargo-lambda could not be installed".into());
        }
        // cargo-lambda's directory first on PATH, as it must be.
        let tools = String::from_utf8_lossy(&tools.stdout).trim().to_string();
        let path = format!("{tools}:{}", std::env::var("PATH").unwrap_or_default());
        build_functions(options.release)?;

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let log = root.join(format!("target/{}-{port}.log", options.log_prefix));
        let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let mut command = Command::new("cargo");
        command
            .args(["lambda", "watch", "--invoke-address", "127.0.0.1"])
            .args(["--invoke-port", &port.to_string()])
            .args(["--concurrency", &options.concurrency.to_string()])
            .arg("--ignore-changes");
        if let Some(secs) = options.emulator_timeout_secs {
            command.args(["--timeout", &secs.to_string()]);
        }
        if options.release {
            command.arg("--release");
        }
        for (name, _) in cargo_run_env() {
            command.env_remove(name);
        }
        if let Some(level) = options.application_log_level {
            command.env("AWS_LAMBDA_LOG_LEVEL", level);
        }
        let child = command
            .current_dir(&root)
            .env("PATH", &path)
            .env("DATABASE_URL", options.database_url)
            .env("REDIS_URL", options.redis_url)
            .env("AUTH_MODE", options.auth_mode)
            // Webhooks as `make dev` has them (scripts/dev.sh).
            .env("WEBHOOK_ALLOW_HTTP", "true")
            .env("WEBHOOK_ALLOW_PRIVATE", "true")
            .env("WEBHOOK_SECRET_KEY", DEV_WEBHOOK_SECRET_KEY)
            .env("RUST_LOG", "warn")
            // No `Finished`/`Running`/`Blocking` from each instance's
            // `cargo run`: cargo writes them in pieces, which the other
            // processes' lines split, and the log is for the functions.
            .env("CARGO_TERM_QUIET", "true")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
            .stderr(log_file)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn cargo lambda watch: {e}"))?;
        let watch = Self {
            child,
            port,
            path,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            // `/` is API Gateway's `$default` route, the prebuilt
            // `not-found` function: it answers once the emulator listens.
            if reqwest::get(format!("{}/", watch.base)).await.is_ok() {
                return Ok(watch);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!(
            "cargo lambda watch did not listen: see {}",
            watch.log.display()
        ))
    }

    /// `cargo lambda invoke NAME --data-file FILE` through this emulator, as
    /// Lambda's Invoke API (not an HTTP trigger) delivers an event: its exit
    /// status and what it printed (the function's JSON answer on success).
    pub async fn invoke(&self, function: &str, event: &Path) -> (bool, String) {
        let output = Command::new("cargo")
            .args([
                "lambda",
                "invoke",
                function,
                "--invoke-address",
                "127.0.0.1",
            ])
            .args(["--invoke-port", &self.port.to_string()])
            .arg("--data-file")
            .arg(event)
            .env("PATH", &self.path)
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run cargo lambda invoke");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        (output.status.success(), format!("{stdout}{stderr}"))
    }

    /// SIGTERM to the group (the emulator and its instances), then SIGKILL
    /// if it has not gone within 10 s.
    pub async fn stop(mut self) {
        self.signal("-TERM");
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            self.signal("-KILL");
            let _ = self.child.wait().await;
        }
    }

    fn signal(&self, signal: &str) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args([signal, "--", &format!("-{pid}")])
                .status();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // After `stop` the child has been reaped and has no id any more.
        self.signal("-TERM");
    }
}
