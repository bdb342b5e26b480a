//! The cache's connection and its health: what a request pays when the
//! cache is down (see the cache module's doc for the reasoning).
//!
//! - Up: requests use one multiplexed connection; every connect and every
//!   command is bounded by the settings' timeout, with no retry.
//! - A failure (timeout, refused, reset, server error) drops the
//!   connection and marks the cache down for a skip window: requests go
//!   straight to the database without contacting the cache.
//! - After the window, the next request starts one background probe (a
//!   new connection, then `PING` or the owed invalidation) and is itself
//!   bypassed: no request ever waits for a probe. A failed probe doubles
//!   the window, up to a cap; a successful one installs its connection.
//!   The consecutive-failure count resets only when a request's command
//!   succeeds, so a cache that answers probes but fails requests keeps
//!   its long window.
//! - Invalidations that could not be sent while down are owed: the probe
//!   sends one before the cache is used again.
//!
//! Only the first contact of an environment connects inline (a cold start
//! with a healthy cache serves its first read from it).

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Pipeline, RedisResult};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// A connection to the cache, shared by the clones of one environment's
/// cache client.
#[derive(Clone)]
pub(super) struct Link {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    config: AsyncConnectionConfig,
    /// Sent by the probe when an invalidation was skipped while down.
    invalidation: Pipeline,
    health: Mutex<Health<MultiplexedConnection>>,
    /// One inline first connect at a time.
    gate: tokio::sync::Mutex<()>,
    connects: AtomicU64,
}

/// A connection for one request, tagged with its epoch so a late failure
/// on a connection already replaced does not count.
pub(super) struct Lease {
    pub conn: MultiplexedConnection,
    epoch: u64,
}

impl Link {
    pub fn new(
        client: Client,
        timeout: Duration,
        window: Duration,
        max_window: Duration,
        invalidation: Pipeline,
    ) -> Self {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        Self {
            inner: Arc::new(Inner {
                client,
                config,
                invalidation,
                health: Mutex::new(Health::new(window, max_window)),
                gate: tokio::sync::Mutex::new(()),
                connects: AtomicU64::new(0),
            }),
        }
    }

    /// How many connections this environment has tried to open.
    pub fn connects(&self) -> u64 {
        self.inner.connects.load(Ordering::Relaxed)
    }

    /// The connection to use now, or `None`: the cache is down (or its
    /// first connect just failed) and the caller reads the database.
    pub async fn lease(&self) -> Option<Lease> {
        match self.without_connecting() {
            Ok(lease) => lease,
            Err(()) => self.connect_inline().await,
        }
    }

    /// The route taken, unless it is to connect inline (`Err`).
    fn without_connecting(&self) -> Result<Option<Lease>, ()> {
        match self.inner.health().route(Instant::now()) {
            Route::Use(conn, epoch) => Ok(Some(Lease { conn, epoch })),
            Route::Skip => Ok(None),
            Route::Probe => {
                tokio::spawn(probe(Arc::downgrade(&self.inner)));
                Ok(None)
            }
            Route::Connect => Err(()),
        }
    }

    /// The command on `lease` answered.
    pub fn succeeded(&self, lease: &Lease) {
        self.inner.health().succeeded(lease.epoch);
    }

    /// The command on `lease` failed: the cache is down for a while.
    pub fn failed(&self, lease: &Lease, what: &str, err: &redis::RedisError) {
        let window = self
            .inner
            .health()
            .failed(Some(lease.epoch), Instant::now());
        warn_down(&self.inner, what, err, window);
    }

    /// Whether the cache kept failing after its first skip window: down,
    /// not a blip (see `warn_down`).
    pub fn failing(&self) -> bool {
        self.inner.health().failing()
    }

    /// An invalidation was not sent (or may not have arrived): the probe
    /// sends one before the cache is used again.
    pub fn owe_invalidation(&self) {
        self.inner.health().owe();
    }

    async fn connect_inline(&self) -> Option<Lease> {
        let _gate = self.inner.gate.lock().await;
        // Another caller may have connected or failed while this one waited.
        if let Ok(lease) = self.without_connecting() {
            return lease;
        }
        match self.inner.connect().await {
            Ok(conn) => {
                let epoch = self.inner.health().install(conn.clone());
                Some(Lease { conn, epoch })
            }
            Err(err) => {
                let window = self.inner.health().failed(None, Instant::now());
                warn_down(&self.inner, "connect", &err, window);
                None
            }
        }
    }
}

impl Inner {
    fn health(&self) -> std::sync::MutexGuard<'_, Health<MultiplexedConnection>> {
        // The state is a few plain fields, valid after any panic.
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn connect(&self) -> RedisResult<MultiplexedConnection> {
        self.connects.fetch_add(1, Ordering::Relaxed);
        self.client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
    }
}

/// Reopens the cache in the background: a new connection, then either the
/// owed invalidation or a `PING`, each within the timeout. Ends on its own
/// if the environment's cache client is gone.
async fn probe(inner: Weak<Inner>) {
    let Some(inner) = inner.upgrade() else { return };
    let mut conn = match inner.connect().await {
        Ok(conn) => conn,
        Err(err) => {
            let window = inner.health().probe_failed(false, Instant::now());
            warn_down(&inner, "probe connect", &err, window);
            return;
        }
    };
    loop {
        let owed = inner.health().take_owed();
        let answered = if owed {
            inner.invalidation.exec_async(&mut conn).await
        } else {
            redis::cmd("PING").exec_async(&mut conn).await
        };
        if let Err(err) = answered {
            let window = inner.health().probe_failed(owed, Instant::now());
            warn_down(&inner, "probe", &err, window);
            return;
        }
        let mut health = inner.health();
        // An invalidation skipped while this probe ran is sent first.
        if !health.owed {
            health.install(conn);
            drop(health);
            tracing::info!("availability cache reachable again");
            return;
        }
    }
}

/// One failure is told at INFO: under a burst on a starved CPU a command
/// can miss its 100 ms and the probe finds the cache well a window later.
/// A cache still failing after its first window is down: WARN.
fn warn_down(inner: &Inner, what: &str, err: &redis::RedisError, window: Option<Duration>) {
    let Some(window) = window else { return };
    let skip_ms = window.as_millis() as u64;
    let message = format!("availability cache: {what} failed, reading the database meanwhile");
    if inner.health().failing() {
        tracing::warn!(error = %err, skip_ms, "{message}");
    } else {
        tracing::info!(error = %err, skip_ms, "{message}");
    }
}

/// What a request does with the cache now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route<C> {
    Use(C, u64),
    /// Never connected and never failed: connect inline.
    Connect,
    /// Down: read the database, contact nothing.
    Skip,
    /// Down, the window is over: start the (only) probe, read the database.
    Probe,
}

/// The health state machine, apart from sockets and clocks so that its
/// rules are tested as they are.
#[derive(Debug)]
pub(super) struct Health<C> {
    conn: Option<C>,
    /// Bumped whenever the connection is installed or dropped.
    epoch: u64,
    /// Consecutive failures; 0 once a request's command succeeds.
    failures: u32,
    /// While down: the end of the skip window.
    down_until: Option<Instant>,
    probing: bool,
    owed: bool,
    window: Duration,
    max_window: Duration,
}

impl<C: Clone> Health<C> {
    pub fn new(window: Duration, max_window: Duration) -> Self {
        Self {
            conn: None,
            epoch: 0,
            failures: 0,
            down_until: None,
            probing: false,
            owed: false,
            window,
            max_window: max_window.max(window),
        }
    }

    pub fn route(&mut self, now: Instant) -> Route<C> {
        match self.down_until {
            Some(until) if now < until || self.probing => Route::Skip,
            Some(_) => {
                self.probing = true;
                Route::Probe
            }
            None => match &self.conn {
                Some(conn) => Route::Use(conn.clone(), self.epoch),
                None => Route::Connect,
            },
        }
    }

    /// Puts a working connection in place; returns its epoch.
    pub fn install(&mut self, conn: C) -> u64 {
        self.conn = Some(conn);
        self.epoch += 1;
        self.down_until = None;
        self.probing = false;
        self.epoch
    }

    pub fn succeeded(&mut self, epoch: u64) {
        if epoch == self.epoch {
            self.failures = 0;
        }
    }

    /// A request's connect (`None`) or command failed. Returns the new
    /// skip window, or `None` if the failure was already accounted for
    /// (the connection it used is gone).
    pub fn failed(&mut self, epoch: Option<u64>, now: Instant) -> Option<Duration> {
        if epoch.is_some_and(|e| e != self.epoch || self.down_until.is_some()) {
            return None;
        }
        self.conn = None;
        self.epoch += 1;
        Some(self.down(now))
    }

    /// The probe failed; an invalidation it was sending is owed again.
    pub fn probe_failed(&mut self, owed: bool, now: Instant) -> Option<Duration> {
        self.probing = false;
        self.owed |= owed;
        Some(self.down(now))
    }

    fn down(&mut self, now: Instant) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let doublings = self.failures.saturating_sub(1).min(16);
        let window = self
            .window
            .saturating_mul(1 << doublings)
            .min(self.max_window);
        self.down_until = Some(now + window);
        window
    }

    /// Failed again after its first window (a probe, or a request once
    /// it was back): down, not a blip.
    pub fn failing(&self) -> bool {
        self.failures > 1
    }

    pub fn owe(&mut self) {
        self.owed = true;
    }

    pub fn take_owed(&mut self) -> bool {
        std::mem::take(&mut self.owed)
    }
}

#[cfg(test)]
mod tests;
