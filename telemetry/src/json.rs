//! JSON log lines with the current span's `trace_id` and `span_id` (when exporting): the
//! standard JSON format, with the two ids added at the front of the object.

use std::fmt;
use std::sync::OnceLock;

use opentelemetry::trace::TraceContextExt;
use tracing::dispatcher::WeakDispatch;
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

static DISPATCH: OnceLock<WeakDispatch> = OnceLock::new();

/// Remembers the process's dispatch (to look the OpenTelemetry context of spans up).
pub(crate) fn remember(dispatch: &Dispatch) {
    let _ = DISPATCH.set(dispatch.downgrade());
}

/// The JSON event format plus trace ids.
pub(crate) struct WithTraceIds {
    inner: Format<Json>,
    exporting: bool,
}

impl WithTraceIds {
    pub(crate) fn new(exporting: bool) -> Self {
        Self {
            inner: tracing_subscriber::fmt::format().json(),
            exporting,
        }
    }
}

impl<S, N> FormatEvent<S, N> for WithTraceIds
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let ids = if self.exporting {
            ctx.lookup_current().and_then(|span| {
                let dispatch = DISPATCH.get()?.upgrade()?;
                let cx = tracing_opentelemetry::get_otel_context(&span.id(), &dispatch)?;
                let sc = cx.span().span_context().clone();
                sc.is_valid().then(|| {
                    format!(
                        "\"trace_id\":\"{}\",\"span_id\":\"{}\",",
                        sc.trace_id(),
                        sc.span_id()
                    )
                })
            })
        } else {
            None
        };
        let Some(ids) = ids else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{{ids}{rest}"),
            None => writer.write_str(&line),
        }
    }
}
