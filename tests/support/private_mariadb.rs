//! A MariaDB server of the test's own (own data directory, own port), for
//! the scenarios that crash or stop the database: the machine's shared
//! server is never touched. Empty root password on 127.0.0.1, as the shared
//! one; small InnoDB files so that it initialises in well under a second.

use super::private_server::{Process, ScratchDir, free_port, program, running_as_root, wait_ready};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::{ConnectOptions, Connection};
use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Settings both the bootstrap and the server use: the redo log is created
/// at bootstrap with this size and must match.
const INNODB: [&str; 2] = ["--innodb-log-file-size=8M", "--innodb-buffer-pool-size=64M"];

/// How long a start (crash recovery included) may take before the test
/// fails: generous for a loaded 2-core machine; it takes ~0.2 s.
const START_WITHIN: Duration = Duration::from_secs(30);

pub struct PrivateMariaDb {
    /// Dropped first (killed), before the directory is removed.
    process: Option<Process>,
    port: u16,
    data: PathBuf,
    dir: ScratchDir,
    /// Time to initialise the data directory and answer the first query.
    pub setup: Duration,
}

impl PrivateMariaDb {
    /// Initialises a data directory and starts a server on it.
    pub async fn start() -> Self {
        let started = Instant::now();
        let dir = ScratchDir::new("sb-mariadb");
        let data = dir.path().join("data");
        let mut install = Command::new(program("mariadb-install-db"));
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(INNODB);
        if running_as_root() {
            install.arg("--user=root");
        }
        let log = dir.path().join("install.log");
        let output = install
            .output()
            .unwrap_or_else(|e| panic!("mariadb-install-db: {e}"));
        std::fs::write(&log, [output.stdout, output.stderr].concat()).ok();
        assert!(
            output.status.success(),
            "mariadb-install-db failed: see {}",
            log.display()
        );
        let mut server = Self {
            process: None,
            port: free_port(),
            data,
            dir,
            setup: Duration::ZERO,
        };
        server.restart().await;
        server.setup = started.elapsed();
        server
    }

    /// `mysql://root@127.0.0.1:<port>`: the server, no database.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same data directory and port, and
    /// waits until it answers a query. After a crash, InnoDB recovers first.
    pub async fn restart(&mut self) {
        assert!(self.process.is_none(), "the server is already running");
        let mut command = Command::new(program("mariadbd"));
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data.display()))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!(
                "--socket={}",
                self.dir.path().join("sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.dir.path().join("pid").display()
            ))
            .args(["--skip-log-bin", "--max-connections=200"])
            .args(INNODB);
        if running_as_root() {
            command.arg("--user=root");
        }
        let mut process = Process::spawn("mariadbd", command, self.dir.path().join("server.log"));
        let options = MySqlConnectOptions::from_str(&self.url()).expect("url");
        wait_ready(&mut process, START_WITHIN, || {
            let options = options.clone();
            async move {
                match options.connect().await {
                    Ok(conn) => conn.close().await.is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
        self.process = Some(process);
    }

    /// SIGKILL: a crash. Committed transactions survive it (the redo log
    /// is flushed at every commit, the server's default).
    pub async fn crash(&mut self) {
        self.running().stop("KILL", Duration::from_secs(10)).await;
        self.process = None;
    }

    /// SIGTERM: a clean shutdown, open transactions rolled back.
    pub async fn shut_down(&mut self) {
        let status = self.running().stop("TERM", Duration::from_secs(30)).await;
        assert!(status.success(), "mariadbd shut down with {status}");
        self.process = None;
    }

    fn running(&mut self) -> &mut Process {
        self.process.as_mut().expect("the server is running")
    }
}
