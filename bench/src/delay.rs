//! A delay line: a loopback TCP proxy in front of the database that holds
//! every byte for half of `D` in each direction, so that each round trip
//! gains `D`, as the network to RDS Proxy adds it on AWS (issue 32).
//!
//! Bytes are stamped when read and written once their time has come, in
//! order: a connection's later bytes never wait behind an earlier one's
//! delay twice, and connections never wait for each other (each direction
//! of each connection has its own reader and writer thread). Threads, not
//! tasks: the async runtime's timer counts whole milliseconds, and the
//! delays here are fractions of one; a thread's sleep overshoots by the
//! kernel's timer slack (about 50 µs), which the measured figure shows.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::str::FromStr;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running delay line; it lives as long as the process.
pub struct DelayLine {
    addr: SocketAddr,
    upstream: String,
}

impl DelayLine {
    /// Listens on 127.0.0.1 (a free port) and forwards to the server of
    /// `url` (a `mysql://` URL), adding `delay` to each round trip.
    pub fn start(url: &str, delay: Duration) -> Result<Self, String> {
        let options = sqlx::mysql::MySqlConnectOptions::from_str(url).map_err(|e| e.to_string())?;
        Self::start_to(
            format!("{}:{}", options.get_host(), options.get_port()),
            delay,
        )
    }

    /// The same line in front of any TCP server at `upstream` (`host:port`).
    pub fn start_to(upstream: String, delay: Duration) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let target = upstream.clone();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let _ = forward(client, server, delay / 2);
            }
        });
        Ok(Self { addr, upstream })
    }

    /// `url` with its server replaced by this line.
    pub fn url(&self, url: &str) -> String {
        url.replacen(&self.upstream, &self.addr.to_string(), 1)
    }
}

/// Both directions of one connection, each delayed by `half`.
fn forward(client: TcpStream, server: TcpStream, half: Duration) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    pipe(client.try_clone()?, server.try_clone()?, half);
    pipe(server, client, half);
    Ok(())
}

/// Copies `from` to `to`, each chunk written `half` after it was read.
fn pipe(mut from: TcpStream, mut to: TcpStream, half: Duration) {
    let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0
                || chunks
                    .send((Instant::now() + half, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    });
    thread::spawn(move || {
        for (at, bytes) in due {
            let now = Instant::now();
            if at > now {
                thread::sleep(at - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// What the line adds to a round trip, measured: the median of 200
/// `SELECT 1` through `through` less the median of 200 on `direct`, in ms.
pub async fn added_round_trip(
    through: &sqlx::MySqlPool,
    direct: &sqlx::MySqlPool,
) -> Result<f64, String> {
    async fn median(pool: &sqlx::MySqlPool) -> Result<f64, String> {
        let mut conn = pool.acquire().await.map_err(|e| e.to_string())?;
        let mut times = Vec::with_capacity(200);
        for _ in 0..200 {
            let started = Instant::now();
            sqlx::query("SELECT 1")
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }
    Ok(median(through).await? - median(direct).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server's round trips through a line of 20 ms: each takes at
    /// least the delay (a sleep never ends early), and every byte comes
    /// back in order, on two connections at once.
    #[test]
    fn each_round_trip_gains_the_delay_and_keeps_its_bytes_in_order() {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = echo.local_addr().unwrap().to_string();
        thread::spawn(move || {
            for mut conn in echo.incoming().flatten() {
                thread::spawn(move || {
                    let mut back = conn.try_clone().unwrap();
                    let _ = std::io::copy(&mut conn, &mut back);
                });
            }
        });
        let delay = Duration::from_millis(20);
        let line = DelayLine::start_to(upstream, delay).unwrap();
        let callers: Vec<_> = (0..2u8)
            .map(|c| {
                let addr = line.addr;
                thread::spawn(move || {
                    let mut conn = TcpStream::connect(addr).unwrap();
                    for i in 0..5u8 {
                        let sent = [c, i, 0xAB, i];
                        let started = Instant::now();
                        conn.write_all(&sent).unwrap();
                        let mut got = [0u8; 4];
                        conn.read_exact(&mut got).unwrap();
                        assert_eq!(got, sent);
                        assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
    }
}
