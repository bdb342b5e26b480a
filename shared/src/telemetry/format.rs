//! One JSON object per line, everything at the top level: `level`,
//! `function`, the invocation's span fields (`request_id`, `cold_start`,
//! `client_id`), the event's message and fields, `target`.
//!
//! tracing-subscriber's JSON format nests span fields under `span` /
//! `spans` (`flatten_event` flattens the event's fields only), and the
//! runtime's `init_default_subscriber` is that same format (text unless
//! `AWS_LAMBDA_LOG_FORMAT=JSON`). CloudWatch Logs Insights and the SPEC's
//! line want them at the top, so this small `FormatEvent` reads the span
//! fields that `JsonFields` stored and writes them beside the event's.

use super::invocation;
use serde_json::Value;
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The runtime's own span: its `requestId` repeats our `request_id`.
const RUNTIME_SPAN: &str = "Lambda runtime invoke";

pub struct Lines {
    pub function: &'static str,
}

/// Keys in the order they were first written; a later value replaces an
/// earlier one (an event field over a span field), so no key repeats.
#[derive(Default)]
struct Line(Vec<(String, Value)>);

impl Line {
    fn set(&mut self, key: &str, value: Value) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = value,
            None => self.0.push((key.to_string(), value)),
        }
    }

    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    fn write(&self, writer: &mut Writer<'_>) -> fmt::Result {
        writer.write_char('{')?;
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                writer.write_char(',')?;
            }
            write!(writer, "{}:{}", Value::from(key.as_str()), value)?;
        }
        writer.write_str("}\n")
    }
}

impl Visit for Line {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.set(field.name(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set(field.name(), format!("{value:?}").into());
    }
}

impl<S> FormatEvent<S, JsonFields> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Line::default();
        line.set("level", meta.level().as_str().into());
        line.set("function", self.function.into());
        for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
            if span.name() == RUNTIME_SPAN {
                continue;
            }
            let extensions = span.extensions();
            let Some(fields) = extensions.get::<FormattedFields<JsonFields>>() else {
                continue;
            };
            if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) {
                for (key, value) in fields {
                    line.set(&key, value);
                }
            }
        }
        if !line.has("request_id") {
            // Outside an invocation: the cold start's lines, before the
            // first one, belong to it.
            line.set("request_id", Value::Null);
            line.set("cold_start", (!invocation::started()).into());
        }
        event.record(&mut line);
        if meta.target().starts_with("shared::telemetry")
            && line
                .0
                .iter()
                .any(|(k, v)| k == "message" && v == invocation::SUMMARY)
        {
            for key in invocation::SUMMARY_FIELDS {
                if !line.has(key) {
                    line.set(key, Value::Null);
                }
            }
        }
        line.set("target", meta.target().into());
        line.write(&mut writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Everything the subscriber writes, kept.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines(emit: impl FnOnce()) -> Vec<Value> {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(JsonFields::new())
            .event_format(Lines { function: "hold" })
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
            .collect()
    }

    #[test]
    fn span_fields_are_at_the_top_level_and_the_runtimes_span_is_left_out() {
        let lines = lines(|| {
            let runtime = tracing::info_span!(RUNTIME_SPAN, requestId = "r-1");
            let _runtime = runtime.enter();
            let span = tracing::info_span!(
                invocation::SPAN,
                request_id = "r-1",
                cold_start = true,
                client_id = tracing::field::Empty
            );
            let _span = span.enter();
            span.record("client_id", 7u64);
            tracing::info!(status = 201u64, "request");
        });
        let line = &lines[0];
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["function"], "hold");
        assert_eq!(line["request_id"], "r-1");
        assert_eq!(line["cold_start"], true);
        assert_eq!(line["client_id"], 7);
        assert_eq!(line["status"], 201);
        assert_eq!(line["message"], "request");
        assert!(line.get("requestId").is_none(), "{line}");
        assert!(
            line.get("span").is_none() && line.get("fields").is_none(),
            "{line}"
        );
    }

    #[test]
    fn a_line_outside_an_invocation_has_a_null_request_id() {
        let lines = lines(|| tracing::warn!(attempt = 2u64, "retrying"));
        assert_eq!(lines[0]["request_id"], Value::Null);
        assert!(lines[0]["cold_start"].is_boolean());
        assert_eq!(lines[0]["attempt"], 2);
    }
}
