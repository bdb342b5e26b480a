//! What the private servers of the outage tests share: a scratch
//! directory, a free port, and a child process that can be crashed,
//! stopped and started again on the same directory and port. Dropped, the
//! process is killed and the directory removed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A directory of its own under the system's temporary directory.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(prefix: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port nothing listens on now. Another process could take it before the
/// server binds; on loopback, in a test run, that does not happen.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// True when this process runs as root (whose servers must be told so).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next().map(|id| id == "0"))
        })
        .unwrap_or(false)
}

/// `name` from PATH, else from the sbin directories that are often not on
/// a user's PATH (Debian installs `mariadbd` in /usr/sbin).
pub fn program(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// A server process whose output goes to `log`.
pub struct Process {
    child: Option<Child>,
    pub log: PathBuf,
    what: &'static str,
}

impl Process {
    pub fn spawn(what: &'static str, mut command: Command, log: PathBuf) -> Self {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let err = out.try_clone().expect("log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        Self {
            child: Some(child),
            log,
            what,
        }
    }

    /// Why the server is not usable: it exited (with its log's tail).
    pub fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(format!("{} exited ({status}): {}", self.what, self.tail())),
            _ => None,
        }
    }

    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Sends `signal` (`KILL`, `TERM`) and waits until the process is gone.
    pub async fn stop(&mut self, signal: &str, within: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("the server is running");
        let pid = child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{signal} {pid}");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait().expect("wait for the server") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} did not stop within {within:?} of SIG{signal}",
                    self.what
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `ready` every 50 ms until it is true, failing after `within` or
/// as soon as the process exits.
pub async fn wait_ready<F, Fut>(process: &mut Process, within: Duration, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if ready().await {
            return;
        }
        if let Some(why) = process.exited() {
            panic!("{why}");
        }
        assert!(
            Instant::now() < deadline,
            "{} not ready within {within:?}: {}",
            process.what,
            process.tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
