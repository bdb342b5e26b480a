//! A Redis server of the test's own (own port, own directory, nothing
//! persisted), for the scenarios that restart the cache: the machine's
//! shared Redis is never touched.

use super::private_server::{Process, ScratchDir, free_port, program, wait_ready};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct PrivateRedis {
    /// Dropped first (killed), before the directory is removed.
    process: Option<Process>,
    port: u16,
    dir: ScratchDir,
    /// Time to start and answer the first PING.
    pub setup: Duration,
}

impl PrivateRedis {
    pub async fn start() -> Self {
        let started = Instant::now();
        let mut server = Self {
            process: None,
            port: free_port(),
            dir: ScratchDir::new("sb-redis"),
            setup: Duration::ZERO,
        };
        server.restart().await;
        server.setup = started.elapsed();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same port, empty, and waits until
    /// it answers PING.
    pub async fn restart(&mut self) {
        assert!(self.process.is_none(), "the server is already running");
        let mut command = Command::new(program("redis-server"));
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path());
        let mut process =
            Process::spawn("redis-server", command, self.dir.path().join("redis.log"));
        let port = self.port;
        wait_ready(&mut process, Duration::from_secs(10), || pong(port)).await;
        self.process = Some(process);
    }

    /// SIGKILL: every key is gone with it (nothing is persisted).
    pub async fn crash(&mut self) {
        let process = self.process.as_mut().expect("the server is running");
        process.stop("KILL", Duration::from_secs(10)).await;
        self.process = None;
    }
}

/// True when the server on `port` answers `PING` with `+PONG`.
async fn pong(port: u16) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").await.is_ok()
        && stream.read_exact(&mut reply).await.is_ok()
        && &reply == b"+PONG\r\n"
}
