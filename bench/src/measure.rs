//! The timing loop: N clients, each its own Tokio task, calling one
//! operation back to back for a bounded time (or until a fixed number of
//! calls is done), and the figures drawn from their latencies.

use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

/// What one call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done; the label counts outcomes ("201", "409", "hit"…).
    Done(&'static str),
    /// Done, and the operation timed itself (it had set-up to leave out,
    /// e.g. an invalidation before a cache miss).
    Timed(&'static str, Duration),
    /// Nothing left to do (the pre-made holds ran out): this client stops.
    Exhausted,
}

/// How long a measurement lasts.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// Every client calls until this much time has passed.
    Time(Duration),
    /// This many calls in all, shared among the clients, all released at
    /// once (a storm).
    Calls(u64),
}

/// Every call's outcome and latency, in the order they finished per client.
#[derive(Debug, Default, Clone)]
pub struct Sample {
    pub calls: Vec<(&'static str, Duration)>,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    pub exhausted: bool,
}

impl Sample {
    /// Adds another round of the same measurement.
    pub fn merge(&mut self, other: Sample) {
        self.calls.extend(other.calls);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.elapsed += other.elapsed;
        self.exhausted |= other.exhausted;
    }

    pub fn stats(&self) -> Stats {
        Stats::of(self, |_| true)
    }

    /// The figures of the calls whose outcome is `label` only.
    pub fn stats_of(&self, label: &str) -> Stats {
        Stats::of(self, |l| l == label)
    }
}

/// The figures of one measurement.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub outcomes: BTreeMap<&'static str, u64>,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exhausted: bool,
}

impl Stats {
    fn of(sample: &Sample, keep: impl Fn(&str) -> bool) -> Self {
        let mut latencies: Vec<Duration> = Vec::with_capacity(sample.calls.len());
        let mut outcomes = BTreeMap::new();
        for (label, latency) in &sample.calls {
            *outcomes.entry(*label).or_insert(0) += 1;
            if keep(label) {
                latencies.push(*latency);
            }
        }
        latencies.sort_unstable();
        let ops = latencies.len() as u64;
        let seconds = sample.elapsed.as_secs_f64();
        Self {
            ops,
            seconds: round(seconds, 2),
            ops_per_s: if seconds > 0.0 {
                round(ops as f64 / seconds, 1)
            } else {
                0.0
            },
            p50_ms: percentile_ms(&latencies, 0.50),
            p99_ms: percentile_ms(&latencies, 0.99),
            max_ms: latencies.last().map_or(0.0, |d| ms(*d)),
            outcomes,
            errors: sample.errors,
            first_error: sample.first_error.clone(),
            exhausted: sample.exhausted,
        }
    }
}

/// Nearest-rank percentile, in milliseconds.
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    ms(sorted[rank - 1])
}

pub fn ms(duration: Duration) -> f64 {
    round(duration.as_secs_f64() * 1000.0, 3)
}

pub fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// Runs `op(client)` in `clients` tasks, released together, within
/// `budget`. A call's latency is measured around the whole `op` future
/// unless the operation reports its own ([`Outcome::Timed`]).
pub async fn run<F, Fut>(clients: usize, budget: Budget, op: F) -> Sample
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, String>> + Send + 'static,
{
    let op = Arc::new(op);
    let barrier = Arc::new(Barrier::new(clients + 1));
    let issued = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let (op, barrier, issued) = (op.clone(), barrier.clone(), issued.clone());
        tasks.push(tokio::spawn(async move {
            let mut sample = Sample::default();
            barrier.wait().await;
            let deadline = match budget {
                Budget::Time(duration) => Some(Instant::now() + duration),
                Budget::Calls(_) => None,
            };
            loop {
                match (budget, deadline) {
                    (Budget::Time(_), Some(deadline)) if Instant::now() >= deadline => break,
                    (Budget::Calls(n), _) if issued.fetch_add(1, Ordering::Relaxed) >= n => break,
                    _ => {}
                }
                let started = Instant::now();
                let outcome = op(client).await;
                let took = started.elapsed();
                match outcome {
                    Ok(Outcome::Done(label)) => sample.calls.push((label, took)),
                    Ok(Outcome::Timed(label, own)) => sample.calls.push((label, own)),
                    Ok(Outcome::Exhausted) => {
                        sample.exhausted = true;
                        break;
                    }
                    Err(err) => {
                        sample.errors += 1;
                        sample.first_error.get_or_insert(err);
                        // A failing client must not spin: back off a little.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
            sample
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut total = Sample::default();
    for task in tasks {
        match task.await {
            Ok(sample) => total.merge(sample),
            Err(err) => {
                total.errors += 1;
                total
                    .first_error
                    .get_or_insert(format!("client task failed: {err}"));
            }
        }
    }
    total.elapsed = started.elapsed();
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&v, 0.5), 50.0);
        assert_eq!(percentile_ms(&v, 0.99), 99.0);
        assert_eq!(percentile_ms(&v[..1], 0.99), 1.0);
        assert_eq!(percentile_ms(&[], 0.99), 0.0);
    }
}
