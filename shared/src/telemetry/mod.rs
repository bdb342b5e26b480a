//! Logs and metrics (SPEC §13): one JSON object per line on stdout, every
//! line of an invocation with its `request_id`, `function`, `cold_start`
//! and `client_id` at the top level, one summary line per request, and at
//! most one CloudWatch EMF document per invocation.
//!
//! The level is Lambda's (`AWS_LAMBDA_LOG_LEVEL`, which the template's
//! `LoggingConfig.ApplicationLogLevel` sets), else `RUST_LOG` (an
//! `EnvFilter`, default `info`). Lines are JSON whatever
//! `AWS_LAMBDA_LOG_FORMAT` says: the SPEC wants JSON, also under `make dev`.
//!
//! Nothing leaks at any level (SPEC §16): below INFO, only this service's
//! own targets are written. The Lambda runtime logs every raw event at
//! TRACE (the `Authorization` header and the body in it), and other
//! dependencies' DEBUG and TRACE lines are theirs to change; none of them
//! passes, whatever `LogLevel` or `RUST_LOG` asks.

mod format;
mod invocation;
pub mod metrics;

pub use invocation::{client, count, hold_refused, invoke, refused};
pub use metrics::Metric;

use std::sync::OnceLock;
use tracing::{Level, Metadata};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::format::JsonFields;
use tracing_subscriber::prelude::*;

/// Installs the global subscriber once; later calls do nothing.
pub fn init() {
    one_at_a_time_is_no_news();
    let lines = tracing_subscriber::fmt::layer()
        .fmt_fields(JsonFields::new())
        .event_format(format::Lines {
            function: function_name(),
        })
        .with_filter(filter(
            std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
            std::env::var("RUST_LOG").ok().as_deref(),
        ))
        .with_filter(filter_fn(ours_below_info));
    let _ = tracing_subscriber::registry().with(lines).try_init();
}

/// INFO and above from anyone; DEBUG and TRACE from this service only.
fn ours_below_info(metadata: &Metadata<'_>) -> bool {
    *metadata.level() <= Level::INFO || metadata.target().starts_with("shared")
}

/// `cargo lambda watch` starts every function process with
/// `AWS_LAMBDA_MAX_CONCURRENCY=1`, and lambda_runtime, whose
/// `concurrency-tokio` feature this service leaves off (an execution
/// environment serves one request at a time: `App`'s one connection),
/// then warns at start that it runs sequentially: twenty false alarms per
/// function under `make dev`. With `1`, sequentially is what the value
/// asks for, and the variable is dropped before the runtime reads it; any
/// other value (Lambda Managed Instances' real concurrency) is kept, and
/// so is its warning.
fn one_at_a_time_is_no_news() {
    const VARIABLE: &str = "AWS_LAMBDA_MAX_CONCURRENCY";
    if std::env::var(VARIABLE).is_ok_and(|value| value.trim() == "1") {
        // SAFETY: the first act of a function's start-up (`init`), before
        // its runtime loop and before it spawns anything; nothing else
        // reads or writes the environment meanwhile.
        unsafe { std::env::remove_var(VARIABLE) };
    }
}

/// Makes SIGTERM end the process at once, with status 0 and no line: how
/// a function is stopped, not a failure. Lambda sends it (to a runtime
/// with extensions) only at shutdown, between invocations; `make dev`
/// sends it to every instance before it stops the emulator, so that no
/// instance sees its Runtime API go (and logs [`exit_on_error`]'s ERROR)
/// and the emulator sees each instance end cleanly (it logs any other
/// end at ERROR: docs/LOCAL.md, "A quiet log"). Call it before the
/// runtime's loop.
pub fn exit_quietly_on_sigterm() {
    extern "C" fn on_sigterm(_: libc::c_int) {
        // Only async-signal-safe calls in a handler: `_exit`, which
        // flushes nothing (every line is written whole as it is logged).
        unsafe { libc::_exit(0) }
    }
    let handler: extern "C" fn(libc::c_int) = on_sigterm;
    // SAFETY: the handler calls only `_exit`, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
    }
}

/// The runtime's loop ends only on an error: its API gone (never on
/// Lambda while the process lives; the emulator stopping under `make
/// dev`). Logged as a JSON line like every other, then the process exits
/// with 1, rather than `main` printing `Error: …` as text.
pub fn exit_on_error<E: std::fmt::Display>(result: Result<(), E>) -> Result<(), E> {
    if let Err(err) = &result {
        tracing::error!(error = %err, "the Lambda runtime stopped");
        std::process::exit(1);
    }
    result
}

/// `AWS_LAMBDA_FUNCTION_NAME` (Lambda and `cargo lambda watch` set it),
/// else the binary's name.
pub fn function_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::env::var("AWS_LAMBDA_FUNCTION_NAME")
            .ok()
            .filter(|name| !name.is_empty())
            .or_else(|| {
                let exe = std::env::args().next()?;
                let name = std::path::Path::new(&exe).file_name()?;
                Some(name.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "unknown".into())
    })
}

/// Lambda's application log level (TRACE … FATAL) wins; then `RUST_LOG`;
/// then `info`. A value that cannot be read falls back to `info`.
fn filter(lambda_level: Option<&str>, rust_log: Option<&str>) -> EnvFilter {
    let lambda = lambda_level.filter(|level| !level.is_empty()).map(|level| {
        match level.to_ascii_uppercase().as_str() {
            "TRACE" => "trace",
            "DEBUG" => "debug",
            "WARN" => "warn",
            "ERROR" | "FATAL" => "error",
            _ => "info",
        }
    });
    let directives = lambda
        .or(rust_log.filter(|directives| !directives.is_empty()))
        .unwrap_or("info");
    EnvFilter::try_new(directives).unwrap_or_else(|_| EnvFilter::new("info"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_info_only_this_service_is_written() {
        use tracing::callsite::Identifier;
        use tracing::field::FieldSet;
        use tracing::metadata::Kind;
        struct Site;
        impl tracing::callsite::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unimplemented!()
            }
        }
        static SITE: Site = Site;
        let meta = |target: &'static str, level: Level| {
            Metadata::new(
                "event",
                target,
                level,
                None,
                None,
                None,
                FieldSet::new(&[], Identifier(&SITE)),
                Kind::EVENT,
            )
        };
        let raw_event = meta("lambda_runtime::layers::api_response", Level::TRACE);
        assert!(!ours_below_info(&raw_event), "the runtime's raw events");
        assert!(!ours_below_info(&meta(
            "hyper::proto::h1::role",
            Level::DEBUG
        )));
        assert!(ours_below_info(&meta("lambda_runtime", Level::INFO)));
        assert!(ours_below_info(&meta("sqlx::query", Level::WARN)));
        assert!(ours_below_info(&meta("shared::booking", Level::TRACE)));
    }

    #[test]
    fn lambdas_level_wins_over_rust_log_and_fatal_is_error() {
        let shown = |lambda, rust| filter(lambda, rust).to_string();
        assert_eq!(shown(Some("WARN"), Some("debug")), "warn");
        assert_eq!(shown(Some("FATAL"), None), "error");
        assert_eq!(shown(None, Some("shared=debug")), "shared=debug");
        assert_eq!(shown(Some(""), None), "info");
        assert_eq!(shown(None, Some("=not a filter=")), "info");
    }
}
