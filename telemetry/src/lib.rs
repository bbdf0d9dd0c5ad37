//! akbench-telemetry: how every akbench binary sets up `tracing` and OpenTelemetry (and the
//! open-files limit of the long-running ones).
//!
//! - [`init`]: logs (text or JSON lines) plus, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, an OTLP/gRPC span exporter. The standard
//!   `OTEL_*` variables apply (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//!   `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_HEADERS`, `..._TIMEOUT`,
//!   `..._COMPRESSION`); `service.name` defaults to the binary's name and
//!   `service.instance.id` to a fresh UUID. Which spans are exported: `AKBENCH_TRACE_FILTER`
//!   (an `EnvFilter`, default `info`). With the variable unset nothing is exported and
//!   [`enabled`] is false, so call sites skip building spans on hot paths.
//! - JSON log lines carry `trace_id` and `span_id` of the current span when exporting.
//! - W3C trace context: [`traceparent`] / [`set_parent`] (strings carried in messages),
//!   [`inject`] (gRPC request metadata) and [`grpc_server_span`] (a server span continuing
//!   the caller's trace).
//! - [`raise_open_files_limit`]: the other start-up step every long-running binary shares,
//!   the soft open-files limit raised to the hard one.
//!
//! The exporter runs on a small runtime of its own (one thread), so it works the same under
//! the caller's multi-thread, current-thread or no runtime, and [`Telemetry::shutdown`]
//! (or drop) flushes what is buffered.

mod json;
mod nofile;

pub use nofile::raise_open_files_limit;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer};

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (OTLP configured and [`init`] succeeded). Call sites on hot
/// paths build their spans only when this is true.
pub fn enabled() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// How a binary logs.
#[derive(Debug)]
pub struct Logs {
    /// `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
    pub service_name: &'static str,
    /// JSON lines instead of text.
    pub json: bool,
    /// What is logged.
    pub filter: EnvFilter,
    /// Colours (text only).
    pub ansi: bool,
    /// Log to stderr instead of stdout.
    pub stderr: bool,
    /// Tests: write the log lines here instead.
    pub capture: Option<Capture>,
}

/// A buffer log lines are written to (tests).
pub type Capture = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

#[derive(Clone)]
struct CaptureWriter(Capture);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The installed telemetry; flushes and stops the exporter when shut down or dropped.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Stops (`true`) or resumes building and exporting spans without reinstalling anything;
    /// while paused, [`enabled`] is false, as with export unset (for A/B benchmarks).
    pub fn pause(&self, paused: bool) {
        if self.provider.is_some() {
            EXPORTING.store(!paused, Ordering::Relaxed);
        }
    }

    /// Exports what is buffered and stops the exporter.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(p) = self.provider.take() {
            EXPORTING.store(false, Ordering::Relaxed);
            if let Err(e) = p.shutdown() {
                eprintln!("warning: failed to flush the trace exporter: {e}");
            }
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the environment asks for OTLP export.
pub fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
        && std::env::var("OTEL_TRACES_EXPORTER").map_or(true, |v| v.trim() != "none")
}

/// Installs the global subscriber (once per process; later calls only return an inert
/// [`Telemetry`]). A failing exporter setup is reported on stderr and logging goes on.
pub fn init(logs: Logs) -> Telemetry {
    let mut telemetry = Telemetry::default();
    let mut tracer = None;
    if otlp_configured() {
        match build_provider(logs.service_name) {
            Ok((provider, runtime)) => {
                tracer = Some(provider.tracer(logs.service_name));
                telemetry.provider = Some(provider);
                telemetry.runtime = Some(runtime);
            }
            Err(e) => eprintln!(
                "warning: failed to set up the OTLP trace exporter: {e}; fix: check \
                 OTEL_EXPORTER_OTLP_ENDPOINT (spans are not exported)"
            ),
        }
    }
    let writer = if let Some(c) = logs.capture {
        let w = CaptureWriter(c);
        BoxMakeWriter::new(move || w.clone())
    } else if logs.stderr {
        BoxMakeWriter::new(std::io::stderr)
    } else {
        BoxMakeWriter::new(std::io::stdout)
    };
    let exporting = tracer.is_some();
    let fmt = if logs.json {
        tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .event_format(json::WithTraceIds::new(exporting))
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .with_filter(logs.filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(logs.ansi)
            .with_filter(logs.filter)
            .boxed()
    };
    let otel = tracer.map(|t| {
        let filter = EnvFilter::try_from_env("AKBENCH_TRACE_FILTER")
            .unwrap_or_else(|_| EnvFilter::new("info"));
        tracing_opentelemetry::layer()
            .with_tracer(t)
            .with_filter(filter)
    });
    let subscriber = tracing_subscriber::registry().with(fmt).with(otel);
    let dispatch = tracing::Dispatch::new(subscriber);
    json::remember(&dispatch);
    if tracing::dispatcher::set_global_default(dispatch).is_err() {
        // Already installed (tests calling init twice): keep the first.
        return Telemetry::default();
    }
    if exporting {
        EXPORTING.store(true, Ordering::Relaxed);
    }
    telemetry
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn build_provider(
    service_name: &'static str,
) -> Result<(SdkTracerProvider, tokio::runtime::Runtime), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()?;
    let _entered = runtime.enter();
    use opentelemetry_otlp::WithExportConfig as _;
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if let Ok(proto) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL") {
        if proto.trim() != "grpc" {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={proto}: akbench exports over OTLP/gRPC only \
                 (set it to grpc or unset it)"
            )
            .into());
        }
    }
    exporter = exporter.with_protocol(opentelemetry_otlp::Protocol::Grpc);
    let exporter = exporter.build()?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").map_or(true, |v| v.trim().is_empty()) {
        resource = resource.with_service_name(service_name);
    }
    let has_instance =
        std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.instance.id="));
    if !has_instance {
        resource = resource.with_attribute(KeyValue::new(
            "service.instance.id",
            uuid::Uuid::now_v7().to_string(),
        ));
    }
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build();
    drop(_entered);
    Ok((provider, runtime))
}

/// The W3C `traceparent` of `span` (`00-<trace>-<span>-<flags>`), or empty when it has no
/// valid context (nothing exported).
pub fn traceparent(span: &Span) -> String {
    if !enabled() {
        return String::new();
    }
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return String::new();
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent").unwrap_or_default()
}

/// Makes `span` continue the trace of `traceparent` (ignored when empty or invalid, or when
/// nothing is exported). Call before the span is entered.
pub fn set_parent(span: &Span, traceparent: &str) {
    if !enabled() || traceparent.is_empty() {
        return;
    }
    let carrier: HashMap<String, String> =
        HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Adds to `span` a link to the span context `trace_id`/`span_id` (e.g. a trial's
/// context derived from its key: `akbench_core::telemetry::trial_context`). Nothing when
/// not exporting.
pub fn link(span: &Span, trace_id: [u8; 16], span_id: [u8; 8]) {
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};
    if !enabled() {
        return;
    }
    span.add_link(opentelemetry::trace::SpanContext::new(
        TraceId::from_bytes(trace_id),
        SpanId::from_bytes(span_id),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ));
}

/// Adds the current span's `traceparent` to gRPC request metadata.
pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
    let tp = traceparent(&Span::current());
    if let Ok(v) = tp.parse() {
        if !tp.is_empty() {
            metadata.insert("traceparent", v);
        }
    }
}

/// A gRPC server span for `request` (OpenTelemetry RPC conventions: `rpc.system`,
/// `rpc.service`, `rpc.method`), continuing the caller's `traceparent` header. A disabled
/// span when nothing is exported.
pub fn grpc_server_span<B>(request: &tonic::codegen::http::Request<B>) -> Span {
    if !enabled() {
        return Span::none();
    }
    let path = request.uri().path();
    let (service, method) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or((path, ""));
    let span = tracing::info_span!(
        "grpc.server",
        otel.name = %path.trim_start_matches('/'),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = %service,
        rpc.method = %method,
    );
    if let Some(tp) = request
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
    {
        set_parent(&span, tp);
    }
    span
}
