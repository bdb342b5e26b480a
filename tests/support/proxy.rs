//! A TCP proxy in front of the test database whose "network" a test can cut
//! and restore, without touching the database server (which other tests and
//! people share).
//!
//! ```ignore
//! let proxy = Proxy::start().await;
//! let app = db.app_through(&proxy);   // DATABASE_URL points at the proxy
//! proxy.set(Mode::Refuse).await;      // the database is unreachable
//! proxy.set(Mode::Up).await;          // and back
//! proxy.lose_answers().await;         // what is in flight arrives, its answer never does
//! proxy.lose_the_answer_to_commit();  // the next plain COMMIT's answer, and all after it
//! ```

use crate::{TestDb, server_url};
use shared::App;
use sqlx::ConnectOptions;
use sqlx::mysql::MySqlConnectOptions;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the network between the app and the database does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every connection is forwarded to the database.
    Up,
    /// Nothing listens: new connections are refused (ECONNREFUSED), as from
    /// a host whose database process is gone. Forwarded ones are closed.
    Refuse,
    /// New connections are accepted and closed at once, as by a proxy or
    /// load balancer without a healthy target. Forwarded ones are closed.
    Close,
    /// Packets vanish, as behind a firewall or a dead host: new connections
    /// are accepted and never answered, forwarded ones stall. Once the mode
    /// changes again, all of them are closed.
    Blackhole,
}

pub struct Proxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    /// The mode the accept loop has put in place.
    applied: watch::Receiver<Mode>,
    /// Connections through which bytes still flow.
    flowing: Arc<AtomicUsize>,
    /// Bumped by [`Proxy::lose_answers`].
    cut: watch::Sender<u64>,
    /// Armed by [`Proxy::lose_the_answer_to_commit`].
    commit_trap: Arc<AtomicBool>,
    accept_loop: JoinHandle<()>,
}

#[derive(Clone)]
struct Upstream {
    host: String,
    port: u16,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port), forwarding to the test server.
    pub async fn start() -> Self {
        let server = MySqlConnectOptions::from_str(&server_url()).expect("TEST_DATABASE_URL");
        Self::start_to(server.get_host(), server.get_port()).await
    }

    /// The same proxy in front of any TCP server (the cache tests put one
    /// in front of Redis).
    pub async fn start_to(host: &str, port: u16) -> Self {
        let upstream = Upstream {
            host: host.to_string(),
            port,
        };
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (mode, mode_rx) = watch::channel(Mode::Up);
        let (applied_tx, applied) = watch::channel(Mode::Up);
        let flowing = Arc::new(AtomicUsize::new(0));
        let (cut, cut_rx) = watch::channel(0);
        let commit_trap = Arc::new(AtomicBool::new(false));
        let accept_loop = tokio::spawn(accept_loop(
            listener,
            addr,
            upstream,
            (mode_rx, cut_rx, commit_trap.clone()),
            applied_tx,
            flowing.clone(),
        ));
        Self {
            addr,
            mode,
            applied,
            flowing,
            cut,
            commit_trap,
            accept_loop,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    /// Switches the network and returns once the switch is complete: the
    /// listener is in the new state and, unless `Up`, no byte flows through
    /// any connection forwarded before.
    pub async fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
        let mut applied = self.applied.clone();
        applied
            .wait_for(|applied| *applied == mode)
            .await
            .expect("the proxy's accept loop is running");
        if mode != Mode::Up {
            while self.flowing.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// Every connection forwarded so far loses what the server answers
    /// from now on, as when a network fails after a request left: the
    /// app's end is closed at once, unanswered; the server's end stays
    /// open, so the server finishes what it was sent (a COMMIT commits),
    /// and is closed once the server's next answer has arrived, or after
    /// 5 s without one. New
    /// connections are forwarded as before.
    pub fn lose_answers(&self) {
        self.cut.send_modify(|cuts| *cuts += 1);
    }

    /// The next connection to send a plain `COMMIT` (not a procedure's)
    /// loses every answer from then on, as [`Proxy::lose_answers`] says:
    /// the COMMIT commits, its answer never arrives. Once.
    pub fn lose_the_answer_to_commit(&self) {
        self.commit_trap.store(true, Ordering::SeqCst);
    }

    /// `url` (a `mysql://` URL of the test server) going through the proxy.
    pub fn url_for(&self, url: &str) -> String {
        MySqlConnectOptions::from_str(url)
            .expect("mysql URL")
            .host(&self.addr.ip().to_string())
            .port(self.addr.port())
            .to_url_lossy()
            .to_string()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Forwarding tasks end on their own when `mode` is dropped.
        self.accept_loop.abort();
    }
}

impl TestDb {
    /// One Lambda execution environment whose database connection goes
    /// through `proxy`.
    pub fn app_through(&self, proxy: &Proxy) -> App {
        let mut config = self.config(Duration::from_secs(300));
        config.database_url = proxy.url_for(&self.url);
        App::new(config).expect("app")
    }
}

async fn accept_loop(
    listener: TcpListener,
    addr: SocketAddr,
    upstream: Upstream,
    (mut mode, cut, trap): (watch::Receiver<Mode>, watch::Receiver<u64>, Arc<AtomicBool>),
    applied: watch::Sender<Mode>,
    flowing: Arc<AtomicUsize>,
) {
    let mut listener = Some(listener);
    loop {
        let current = *mode.borrow_and_update();
        if current == Mode::Refuse {
            // Closing the listening socket: connects are refused (and any
            // not yet accepted are reset).
            listener = None;
        } else if listener.is_none() {
            listener = Some(
                TcpListener::bind(addr)
                    .await
                    .expect("bind the proxy's port again"),
            );
        }
        applied.send_replace(current);
        let Some(open) = &listener else {
            if mode.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::select! {
            changed = mode.changed() => if changed.is_err() { return },
            accepted = open.accept() => {
                let Ok((client, _)) = accepted else { continue };
                match *mode.borrow() {
                    Mode::Up => {
                        flowing.fetch_add(1, Ordering::SeqCst);
                        let guard = Flowing(flowing.clone());
                        let watched = (mode.clone(), cut.clone(), trap.clone());
                        tokio::spawn(forward(client, upstream.clone(), watched, guard));
                    }
                    Mode::Blackhole => {
                        tokio::spawn(silence(client, mode.clone()));
                    }
                    Mode::Close | Mode::Refuse => drop(client),
                }
            }
        }
    }
}

/// Counts a connection through which bytes flow until dropped.
struct Flowing(Arc<AtomicUsize>);

impl Drop for Flowing {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn forward(
    mut client: TcpStream,
    upstream: Upstream,
    (mut mode, mut cut, trap): (watch::Receiver<Mode>, watch::Receiver<u64>, Arc<AtomicBool>),
    flowing: Flowing,
) {
    let Ok(mut server) = TcpStream::connect((upstream.host.as_str(), upstream.port)).await else {
        return;
    };
    cut.borrow_and_update();
    let answers_lost = {
        let (mut from_client, mut to_client) = client.split();
        let (mut from_server, mut to_server) = server.split();
        tokio::select! {
            sent = requests(&mut from_client, &mut to_server, &trap) => sent.unwrap_or(false),
            _ = tokio::io::copy(&mut from_server, &mut to_client) => false,
            _ = mode.wait_for(|mode| *mode != Mode::Up) => false,
            changed = cut.changed() => changed.is_ok(),
        }
    };
    if answers_lost {
        drop(client);
        drop(flowing);
        // A session cut between statements would otherwise sit inside its
        // transaction, holding its locks, until the server's time-out.
        let mut answer = [0u8; 1];
        let next_answer = tokio::io::AsyncReadExt::read(&mut server, &mut answer);
        let _ = tokio::time::timeout(Duration::from_secs(5), next_answer).await;
        return;
    }
    if *mode.borrow() == Mode::Blackhole {
        // Stalled: both ends stay open, and nothing moves.
        drop(flowing);
        let _ = mode.wait_for(|mode| *mode != Mode::Blackhole).await;
    } else {
        drop(client);
        drop(server);
        drop(flowing);
    }
}

/// Copies the client's requests to the server until either end closes
/// (`false`) or, the trap armed, a plain `COMMIT` has been sent (`true`,
/// the trap disarmed): a COM_QUERY packet, its length 7.
async fn requests(
    from: &mut tokio::net::tcp::ReadHalf<'_>,
    to: &mut tokio::net::tcp::WriteHalf<'_>,
    trap: &AtomicBool,
) -> std::io::Result<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const COMMIT: &[u8] = b"\x07\x00\x00\x00\x03COMMIT";
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(false);
        }
        to.write_all(&buf[..n]).await?;
        let commit = buf[..n].windows(COMMIT.len()).any(|w| w == COMMIT);
        if commit && trap.swap(false, Ordering::SeqCst) {
            return Ok(true);
        }
    }
}

/// A connection accepted into the void: never answered, closed once the
/// network changes again.
async fn silence(client: TcpStream, mut mode: watch::Receiver<Mode>) {
    let _ = mode.wait_for(|mode| *mode != Mode::Blackhole).await;
    drop(client);
}
