//! `cargo lambda watch` serving the API's function binaries on a free
//! loopback port, as `make dev` serves them: for the end-to-end tests and
//! the bench.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The functions behind the API's routes.
pub const API_FUNCTIONS: [&str; 4] = ["availability", "hold", "confirm", "cancel"];

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
    // Run from a test, the environment carries what `cargo test` set for
    // the test process; a build script that watches one of those variables
    // would rerun, rebuilding half the tree here and again in the next
    // `cargo test`. Build as from a shell.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = name == "CARGO"
            || name == "LD_LIBRARY_PATH"
            || [
                "CARGO_PKG_",
                "CARGO_BIN_",
                "CARGO_MANIFEST_",
                "CARGO_CRATE_",
                "CARGO_TARGET_TMPDIR",
                "CARGO_PRIMARY_PACKAGE",
                "RUSTC",
                "RUST_RECURSION",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix));
        if set_by_cargo {
            build.env_remove(name.as_ref());
        }
    }
    for bin in API_FUNCTIONS {
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

pub struct WatchOptions<'a> {
    pub database_url: &'a str,
    pub redis_url: &'a str,
    /// Function instances per function.
    pub concurrency: u32,
    /// Seconds an invocation may take before the emulator answers 408.
    pub timeout_secs: u32,
    pub release: bool,
    /// The log goes to `target/<log_prefix>-<port>.log`.
    pub log_prefix: &'a str,
}

/// The running emulator, in its own process group so that stopping it also
/// stops the function instances it started. Dropped without [`Watch::stop`],
/// it sends the group SIGTERM.
pub struct Watch {
    child: Child,
    pub base: String,
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
            .args(["--timeout", &options.timeout_secs.to_string()])
            .arg("--ignore-changes");
        if options.release {
            command.arg("--release");
        }
        let child = command
            .current_dir(&root)
            .env("PATH", path)
            .env("DATABASE_URL", options.database_url)
            .env("REDIS_URL", options.redis_url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
            .stderr(log_file)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn cargo lambda watch: {e}"))?;
        let watch = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            // `/` is no function route: it answers 404 as soon as the
            // emulator listens, without starting a build.
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
