//! The dispatch benchmark with span export on against the same with export off, in one run:
//! N synthetic worker sessions over real gRPC against the real coordinator (`WorkersService`
//! with gRPC server spans, as `serve` builds it) and a private PostgreSQL cluster; each
//! attempt is claim -> 11 transitions (one batch) -> record upload -> finish, with the spans a
//! real worker makes (`attempt`, its phases, `agent.process`, `evaluator`), the reports
//! carrying the `attempt` span's `traceparent` as a real worker's do. Export goes over
//! OTLP/gRPC to a receiver in this process that decodes and counts the spans.
//!
//! Phases: a warm-up (not counted), then off, on, on, off (ABBA, so that a drift over the
//! run, e.g. the tables growing, cancels out), `ATTEMPTS` attempts each; prints attempts/s per phase and the ratio
//! on/off. "Off" pauses the exporter ([`akbench_telemetry::Telemetry::pause`]): no span is
//! built, as with `OTEL_EXPORTER_OTLP_ENDPOINT` unset.
//!
//! `cargo bench -p akbench-coordinator --bench dispatch_export`; environment: `ATTEMPTS`
//! (5000), `SESSIONS` (8), `SLOTS` (8).

#[path = "common/synthetic.rs"]
mod synthetic;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use akbench_coordinator::pgcluster::{ClusterOptions, PrivateCluster};
use akbench_coordinator::scheduler::test_support::seed_run;
use akbench_coordinator::scheduler::{Caps, Scheduler};
use akbench_coordinator::store::Store;
use akbench_coordinator::workers_service::{WorkersConfig, WorkersService};
use akbench_core::lifecycle::State;
use akbench_proto::v1::{coordinator_message::Body as Out, Subject};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use synthetic::{env, messages, session, PATH};
use tokio::sync::Notify;
use tokio_stream::wrappers::TcpListenerStream;

struct Progress {
    finished: AtomicU64,
    changed: Notify,
}

/// Counts the spans it receives.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let n: usize = request
            .into_inner()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.spans.fetch_add(n as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

async fn worker(addr: std::net::SocketAddr, id: String, slots: u32, progress: Arc<Progress>) {
    let (tx, mut inbound) = session(addr, id, slots).await.expect("opens a session");
    while let Ok(Some(m)) = inbound.message().await {
        match m.body {
            Some(Out::Assignment(a)) => {
                let traceparent = worker_spans(&a.traceparent);
                for m in messages(&a.attempt_id, a.epoch, &traceparent) {
                    tx.send(m).await.unwrap();
                }
            }
            Some(Out::Ack(a)) if a.subject == Subject::Finished as i32 => {
                progress.finished.fetch_add(1, Ordering::Relaxed);
                progress.changed.notify_waiters();
            }
            Some(Out::Refusal(r)) => panic!("refused: {r:?}"),
            _ => {}
        }
    }
}

/// The spans a real worker makes for one attempt (worker/src/daemon/spans.rs and the
/// runtime's): `attempt` continuing the assignment's `traceparent`, one `phase` span per
/// lifecycle phase, `agent.process` and `evaluator`, so the export carries the span volume of
/// a real attempt (about 20 with the coordinator's). Returns the `attempt` span's
/// `traceparent`, which the reports carry as a real worker's do (empty when paused).
fn worker_spans(assignment_traceparent: &str) -> String {
    let attempt = tracing::info_span!(
        parent: None,
        "attempt",
        otel.kind = "consumer",
        akbench.attempt.state = "not_graded",
    );
    akbench_telemetry::set_parent(&attempt, assignment_traceparent);
    for state in PATH.iter().take(10) {
        let phase = tracing::info_span!(parent: &attempt, "phase", otel.name = state.as_str(), akbench.phase = state.as_str());
        if *state == State::Executing {
            drop(tracing::info_span!(parent: &phase, "agent.process"));
        }
        if *state == State::Evaluating {
            drop(tracing::info_span!(parent: &phase, "evaluator"));
        }
    }
    akbench_telemetry::traceparent(&attempt)
}

async fn wait_for(progress: &Progress, target: u64) {
    loop {
        let changed = progress.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if progress.finished.load(Ordering::Relaxed) >= target {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
    }
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let attempts = env("ATTEMPTS", 5_000);
    let sessions = env("SESSIONS", 8);
    let slots = env("SLOTS", 8) as u32;

    // The local OTLP receiver, and export to it (paused until the "on" phases).
    let otlp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp_addr = otlp.local_addr().unwrap();
    let receiver = Receiver::default();
    let received = receiver.spans.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver))
            .serve_with_incoming(TcpListenerStream::new(otlp)),
    );
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{otlp_addr}"));
    let telemetry = akbench_telemetry::init(akbench_telemetry::Logs {
        service_name: "akbench-coordinator",
        json: false,
        filter: tracing_subscriber::EnvFilter::new("warn"),
        ansi: false,
        stderr: true,
        capture: None,
    });
    assert!(telemetry.exporting(), "the exporter did not start");
    telemetry.pause(true);

    let cluster = PrivateCluster::start_with(ClusterOptions::default()).expect("private cluster");
    let url = cluster.create_database("bench").await.expect("database");
    let store = Store::connect(&url).await.expect("connects");
    store.migrate().await.expect("migrates");
    let scheduler = Scheduler::new(store.clone());
    let service = WorkersService::new(
        scheduler.clone(),
        WorkersConfig {
            lease_ttl: Duration::from_secs(30),
            ..Default::default()
        },
    );
    let _reaper = service.spawn_reaper();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = service.clone().into_server();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .trace_fn(akbench_telemetry::grpc_server_span)
            .add_service(server)
            .serve_with_incoming(akbench_coordinator::server::accepted(listener))
            .await
            .unwrap();
    });
    let progress = Arc::new(Progress {
        finished: AtomicU64::new(0),
        changed: Notify::new(),
    });
    for i in 0..sessions {
        tokio::spawn(worker(
            addr,
            format!("bench-{i}"),
            slots,
            Arc::clone(&progress),
        ));
    }
    while service.connected() < sessions {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let mut rates = Vec::new();
    let mut offs = Vec::new();
    // A warm-up phase (caches, plans, connections), not counted, then ABBA.
    let phases = [
        ("warm-up", false),
        ("off", false),
        ("on", true),
        ("on", true),
        ("off", false),
    ];
    for (phase, export) in phases {
        telemetry.pause(!export);
        let run = seed_run(&store, attempts, "noop", &Caps::default())
            .await
            .unwrap();
        let items = run.items("noop", 0);
        let target = progress.finished.load(Ordering::Relaxed) + attempts as u64;
        let t0 = Instant::now();
        scheduler.enqueue(run.run_id, &items).await.unwrap();
        wait_for(&progress, target).await;
        let rate = attempts as f64 / t0.elapsed().as_secs_f64();
        println!("  phase {phase:<7}: {rate:.0} attempts/s");
        if phase != "warm-up" {
            rates.push((export, rate));
            if !export {
                offs.push(rate);
            }
        }
    }
    let mean = |on: bool| {
        let r: Vec<f64> = rates.iter().filter(|r| r.0 == on).map(|r| r.1).collect();
        r.iter().sum::<f64>() / r.len() as f64
    };
    let (off, on) = (mean(false), mean(true));
    telemetry.pause(false);
    telemetry.shutdown();
    println!("dispatch with span export on vs off (ABBA, {attempts} attempts per phase, {sessions} x {slots} slots)");
    println!("  export off: {off:.0} attempts/s");
    println!("  export on:  {on:.0} attempts/s");
    // The ABBA pairs: (off1, on1) and (on2, off2); the spread of the two "off" phases is the
    // noise the on/off effect must be read against.
    let pair = |i: usize, j: usize| rates[i].1 / rates[j].1;
    let spread = (offs[0] - offs[1]).abs() / off;
    let spans = received.load(Ordering::Relaxed);
    println!(
        "  ratio on/off: {:.2} (pairs {:.2} and {:.2}); off phases differ by {:.1}%",
        on / off,
        pair(1, 0),
        pair(2, 3),
        spread * 100.0
    );
    println!(
        "  spans received: {spans} ({:.1} per attempt exported)",
        spans as f64 / (2 * attempts) as f64
    );
}
