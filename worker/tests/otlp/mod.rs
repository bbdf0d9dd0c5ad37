//! An in-process OTLP/gRPC trace receiver for tests: a tonic `TraceService` server on a
//! loopback port that keeps every span it receives, with its resource's `service.name`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

/// One received span.
#[derive(Debug, Clone)]
pub struct Span {
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub start: u64,
    pub attributes: Vec<(String, String)>,
    /// The OTLP type of each attribute (`string`, `int`, `double`, `bool`, `other`).
    pub types: Vec<(String, &'static str)>,
    /// The (trace id, span id) of each span link, hex.
    pub links: Vec<(String, String)>,
}

impl Span {
    /// A string form of attribute `key` (empty when absent).
    pub fn attr(&self, key: &str) -> &str {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

fn kind(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> &'static str {
    match v.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(_)) => "string",
        Some(Value::IntValue(_)) => "int",
        Some(Value::DoubleValue(_)) => "double",
        Some(Value::BoolValue(_)) => "bool",
        _ => "other",
    }
}

fn text(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        _ => String::new(),
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut out = Vec::new();
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .map(|kv| text(kv.value.as_ref()))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    out.push(Span {
                        service: service.clone(),
                        name: s.name,
                        trace_id: hex::encode(&s.trace_id),
                        span_id: hex::encode(&s.span_id),
                        parent_span_id: hex::encode(&s.parent_span_id),
                        start: s.start_time_unix_nano,
                        attributes: s
                            .attributes
                            .iter()
                            .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                            .collect(),
                        types: s
                            .attributes
                            .iter()
                            .map(|kv| (kv.key.clone(), kind(kv.value.as_ref())))
                            .collect(),
                        links: s
                            .links
                            .iter()
                            .map(|l| (hex::encode(&l.trace_id), hex::encode(&l.span_id)))
                            .collect(),
                    });
                }
            }
        }
        self.spans.lock().unwrap().extend(out);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A running receiver.
pub struct Receiver {
    pub addr: SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let collector = Collector::default();
        let spans = collector.spans.clone();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(collector))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        Receiver { addr, spans }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}
