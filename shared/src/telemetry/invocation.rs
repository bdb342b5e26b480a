//! One invocation, observed: its span (the request id, the cold start, the
//! client once known: on every log line it emits), its one summary line,
//! and its one EMF document.
//!
//! What the invocation learns on the way (its client, why it was refused,
//! its counts) is kept in a task-local, so the service records through
//! [`count`] without knowing about Lambda or being handed a context; a
//! call outside an invocation (a test calling the service) records
//! nothing.

use super::metrics::{Counts, Metric};
use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tracing::Instrument;
use tracing::field::Empty;

/// The span name our formatter flattens; the runtime's own span
/// ("Lambda runtime invoke", `requestId`) is left out (format.rs).
pub(super) const SPAN: &str = "invocation";

/// The summary line's message, and the keys it always has (`null` when
/// unknown: no client before authentication, no reason on success).
pub(super) const SUMMARY: &str = "request";
pub(super) const SUMMARY_FIELDS: [&str; 5] =
    ["client_id", "route", "status", "reason", "duration_ms"];

/// Set when this execution environment's first invocation begins.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Whether an invocation has begun in this process: a line logged before
/// (the cold start's own) belongs to the first one.
pub(super) fn started() -> bool {
    STARTED.load(Ordering::Relaxed)
}

tokio::task_local! {
    static CURRENT: RefCell<Notes>;
}

#[derive(Default)]
struct Notes {
    client_id: Option<u64>,
    refusal: Option<Refusal>,
    counts: Counts,
}

struct Refusal {
    reason: &'static str,
    /// The error's own sentence: for a 5xx the internal cause, which is
    /// logged and never sent.
    error: String,
    server_side: bool,
}

/// Adds `n` to `metric` for the current invocation (0 still publishes it).
pub fn count(metric: Metric, n: u64) {
    let _ = CURRENT.try_with(|notes| notes.borrow_mut().counts.add(metric, n));
}

/// A hold request refused, with the `reason` it was answered.
pub fn hold_refused(reason: &'static str) {
    let _ = CURRENT.try_with(|notes| notes.borrow_mut().counts.hold_refused(reason));
}

/// The authenticated caller: on every later line of the invocation and on
/// its summary.
pub fn client(id: u64) {
    let _ = CURRENT.try_with(|notes| notes.borrow_mut().client_id = Some(id));
    tracing::Span::current().record("client_id", id);
}

/// Why the invocation answered an error: its summary line says it. Outside
/// an invocation (`false`) the caller logs it itself.
pub fn refused(reason: &'static str, error: &dyn std::fmt::Display, server_side: bool) -> bool {
    CURRENT
        .try_with(|notes| {
            notes.borrow_mut().refusal = Some(Refusal {
                reason,
                error: error.to_string(),
                server_side,
            });
        })
        .is_ok()
}

/// Runs `work` as one invocation of `route` (a route template, `POST
/// /slots/{id}/hold`, or the function's trigger): every line it logs
/// carries `request_id`, `cold_start` and, once known, `client_id`; then
/// one summary line (`"request"`: route, status, reason, duration_ms) and
/// at most one EMF document. `status_of` reads the HTTP status from the
/// outcome (`None` for a non-HTTP trigger).
pub async fn invoke<T>(
    request_id: String,
    route: &'static str,
    work: impl Future<Output = T>,
    status_of: impl FnOnce(&T) -> Option<u16>,
) -> T {
    let cold_start = !STARTED.swap(true, Ordering::Relaxed);
    let span = tracing::info_span!(
        SPAN,
        request_id = %request_id,
        cold_start,
        client_id = Empty
    );
    let began = Instant::now();
    CURRENT
        .scope(RefCell::default(), async move {
            let outcome = work.instrument(span.clone()).await;
            let notes = CURRENT.with(RefCell::take);
            let status = status_of(&outcome);
            span.in_scope(|| summary(route, status, &notes, began));
            emit_metrics(&notes.counts, &request_id, cold_start);
            outcome
        })
        .await
}

/// The invocation's one summary line: an error for a server-side failure
/// (the cause is in `error`), else info.
fn summary(route: &str, status: Option<u16>, notes: &Notes, began: Instant) {
    // Microseconds, in milliseconds: most requests take less than one.
    let duration_ms = began.elapsed().as_micros() as f64 / 1000.0;
    let client_id = notes.client_id;
    match &notes.refusal {
        Some(refusal) if refusal.server_side => tracing::error!(
            route,
            status,
            reason = refusal.reason,
            error = %refusal.error,
            duration_ms,
            client_id,
            message = SUMMARY
        ),
        Some(refusal) => tracing::info!(
            route,
            status,
            reason = refusal.reason,
            error = %refusal.error,
            duration_ms,
            client_id,
            message = SUMMARY
        ),
        None => tracing::info!(route, status, duration_ms, client_id, message = SUMMARY),
    }
}

/// The EMF document, written whole in one write so that no other line can
/// split it. Not through `tracing`: CloudWatch must see the document
/// itself, and the log level must not filter the metrics out.
fn emit_metrics(counts: &Counts, request_id: &str, cold_start: bool) {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64);
    let properties = [
        ("request_id", request_id.into()),
        ("cold_start", cold_start.into()),
    ];
    if let Some(document) = counts.document(super::function_name(), now_ms, &properties) {
        let mut line = document.to_string();
        line.push('\n');
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
    }
}
