//! moto, the AWS mock server from PyPI, as a local stand-in for AWS APIs
//! (`scripts/moto-server.sh` installs it into `.venv-tools` and starts it),
//! and an SDK configuration that talks to it.

use aws_config::retry::RetryConfig;
use aws_config::{Region, SdkConfig};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

pub struct Moto {
    pub url: String,
    log: std::path::PathBuf,
    child: tokio::process::Child,
}

impl Moto {
    /// Installs moto if needed (`scripts/moto-server.sh`) and starts it on
    /// a free port. Fails, never skips: the checks need it.
    pub async fn start() -> Self {
        let port = free_port();
        let log = std::env::temp_dir().join(format!("sb-moto-{port}.log"));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/moto-server.sh");
        let mut child = tokio::process::Command::new("bash")
            .arg(script)
            .arg(port.to_string())
            .env("MOTO_LOG", &log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // The install step's messages.
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("run scripts/moto-server.sh");
        let url = format!("http://127.0.0.1:{port}");
        // A first run installs moto from PyPI; later ones start in ~1 s.
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("scripts/moto-server.sh exited early ({status}): {log}");
            }
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "moto did not start in 300 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Self { url, log, child }
    }

    /// What moto logged: its request lines and tracebacks.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// The project's SDK configuration (`shared::aws::loader`) pointed at
/// `endpoint`, with test credentials, a fixed region and one attempt per
/// call (the callers decide what to retry).
pub async fn sdk(endpoint: &str) -> SdkConfig {
    shared::aws::loader()
        .empty_test_environment()
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .test_credentials()
        .retry_config(RetryConfig::standard().with_max_attempts(1))
        .load()
        .await
}

/// [`sdk`] for a test's own set-up and reads: moto loads a service's code
/// on its first call to it, which can take longer than the project's 3 s
/// per attempt on a busy machine.
pub async fn patient_sdk(endpoint: &str) -> SdkConfig {
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(30))
        .operation_timeout(Duration::from_secs(60))
        .build();
    shared::aws::loader()
        .empty_test_environment()
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .test_credentials()
        .timeout_config(timeouts)
        .retry_config(RetryConfig::standard().with_max_attempts(3))
        .load()
        .await
}
