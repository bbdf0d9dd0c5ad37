//! Shared helpers of the scheduler, session and control-plane tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

pub mod control_plane;

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::scheduler::test_support::{seed_run, SeededRun};
use akbench_coordinator::scheduler::{Caps, RetryPolicy, Scheduler};
use akbench_coordinator::store::Store;
use akbench_coordinator::workers_service::{WorkersConfig, WorkersService};
use akbench_core::digest::{canonical_json, digest_bytes};
use akbench_core::dispatch::Backoff;
use akbench_core::lifecycle::State;
use akbench_proto::v1::{
    coordinator_message::Body as Out, worker_message::Body as In, CoordinatorMessage, Hello,
    Welcome, WorkerMessage,
};
use akbench_proto::workers_client::WorkersClient;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use uuid::Uuid;

/// A scheduler on a fresh migrated database, re-queueing retries at once (no backoff: the
/// tests that are not about backoff claim a re-queued item right away).
pub async fn scheduler() -> Scheduler {
    scheduler_with(RetryPolicy::with_backoff(Backoff::NONE)).await
}

/// A scheduler on a fresh migrated database with `retry`.
pub async fn scheduler_with(retry: RetryPolicy) -> Scheduler {
    let store = Store::connect(&test_support::fresh_database().await)
        .await
        .expect("connects");
    store.migrate().await.expect("migrates");
    Scheduler::new(store).with_retry(retry)
}

/// [`scheduler`] on a clock the test moves: a test that reaps "past the TTL" advances
/// this clock instead of passing a future instant, so that what the reaper re-queues is
/// ready by the same clock the next claim reads (docs/testing.md, "Clocks").
pub async fn clocked() -> (Scheduler, std::sync::Arc<akbench_core::clock::ManualClock>) {
    let base = scheduler().await;
    let clock = std::sync::Arc::new(akbench_core::clock::ManualClock::new(chrono::Utc::now()));
    let s =
        Scheduler::with_clock(base.store().clone(), clock.clone()).with_retry(base.retry().clone());
    (s, clock)
}

/// Seeds a run of `n` trials of agent "oracle" and enqueues them with `budget`.
pub async fn enqueued(s: &Scheduler, n: usize, budget: i32, caps: &Caps) -> SeededRun {
    let run = seed_run(s.store(), n, "oracle", caps).await.expect("seeds");
    s.enqueue(run.run_id, &run.items("oracle", budget))
        .await
        .expect("enqueues");
    run
}

/// One count per table, to show that refused messages change nothing.
pub async fn counts(s: &Scheduler) -> Vec<(String, i64)> {
    let c = s.store().client().await.unwrap();
    let mut out = Vec::new();
    for q in [
        "SELECT count(*) FROM attempts",
        "SELECT count(*) FROM leases",
        "SELECT count(*) FROM transitions",
        "SELECT count(*) FROM submissions",
        "SELECT count(*) FROM quarantine",
        "SELECT count(*) FROM work_items WHERE state = 'ready'",
        "SELECT count(*) FROM work_items WHERE state = 'done'",
        "SELECT count(*) FROM attempts WHERE finished_at IS NOT NULL",
        "SELECT coalesce(sum(last_seq), 0)::bigint FROM attempts",
    ] {
        out.push((q.to_string(), c.query_one(q, &[]).await.unwrap().get(0)));
    }
    out
}

/// A scalar query.
pub async fn scalar<T: for<'a> tokio_postgres::types::FromSql<'a>>(s: &Scheduler, q: &str) -> T {
    s.store()
        .client()
        .await
        .unwrap()
        .query_one(q, &[])
        .await
        .unwrap()
        .get(0)
}

/// The chain through `not_graded`: 11 states.
pub fn chain() -> Vec<State> {
    use State::*;
    vec![
        Pending,
        Preparing,
        Validating,
        ConfiguringRuntime,
        CreatingWorkspace,
        StartingAgent,
        Executing,
        Collecting,
        Evaluating,
        Finalizing,
        NotGraded,
    ]
}

/// A valid attempt record (canonical JSON) and its digest; `note` varies the content.
pub fn record(attempt_id: Uuid, note: &str) -> (String, String) {
    let transitions: Vec<_> = chain()
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"seq": i, "state": s, "at": "2026-01-01T00:00:00Z"}))
        .collect();
    let value = json!({
        "attempt": {"id": attempt_id, "key": format!("attempt-{attempt_id}")},
        "number": 1,
        "transitions": transitions,
        "state": "not_graded",
        "cause": note,
        "workspace": {"kept": false},
        "agent_process": null,
        "observations": {},
        "timings_ms": {},
        "grade": null,
        "artifacts_dir": "a",
    });
    let json = canonical_json(&value);
    let digest = digest_bytes(json.as_bytes());
    (json, digest)
}

/// A coordinator serving `Workers` on loopback.
pub async fn serve(s: &Scheduler, ttl: Duration) -> (WorkersService, SocketAddr) {
    let service = WorkersService::new(
        s.clone(),
        WorkersConfig {
            lease_ttl: ttl,
            poll_interval: Duration::from_millis(100),
            max_slots: 64,
            heartbeat_interval: None,
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = service.clone().into_server();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(server)
            .serve_with_incoming(akbench_coordinator::server::accepted(listener))
            .await
            .unwrap();
    });
    (service, addr)
}

/// A test worker speaking the real protocol.
pub struct Worker {
    pub tx: mpsc::Sender<WorkerMessage>,
    pub rx: tonic::Streaming<CoordinatorMessage>,
}

impl Worker {
    /// Opens a session; returns the worker and its `Welcome`. A `Hello` without an
    /// instance id gets `test-<worker id>`: the sessions of one worker id in a test are one
    /// worker process reconnecting, unless the test gives them instance ids of their own.
    pub async fn connect(addr: SocketAddr, hello: Hello) -> (Self, Welcome) {
        match Self::try_connect(addr, hello).await {
            Ok(opened) => opened,
            Err(status) => panic!("session refused: {status:?}"),
        }
    }

    /// Opens a session like [`Worker::connect`]; `Err` with the status when it is refused.
    pub async fn try_connect(
        addr: SocketAddr,
        mut hello: Hello,
    ) -> Result<(Self, Welcome), tonic::Status> {
        if hello.instance_id.is_empty() {
            hello.instance_id = format!("test-{}", hello.worker_id);
        }
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = WorkersClient::new(channel);
        let (tx, rx) = mpsc::channel(1024);
        tx.send(WorkerMessage {
            body: Some(In::Hello(hello)),
        })
        .await
        .unwrap();
        let mut rx = client.session(ReceiverStream::new(rx)).await?.into_inner();
        let first = tokio::time::timeout(Duration::from_secs(10), rx.message())
            .await
            .expect("an answer to the Hello within 10 s")?
            .and_then(|m| m.body);
        match first {
            Some(Out::Welcome(welcome)) => Ok((Self { tx, rx }, welcome)),
            other => panic!("expected Welcome, got {other:?}"),
        }
    }

    /// A worker with `slots` and no held leases.
    pub async fn simple(addr: SocketAddr, id: &str, slots: u32) -> Self {
        let hello = Hello {
            worker_id: id.into(),
            slots,
            ..Default::default()
        };
        Self::connect(addr, hello).await.0
    }

    pub async fn send(&self, body: In) {
        self.tx
            .send(WorkerMessage { body: Some(body) })
            .await
            .unwrap();
    }

    /// The next message (bounded wait: the server acts by itself).
    pub async fn next(&mut self) -> Out {
        tokio::time::timeout(Duration::from_secs(10), self.rx.message())
            .await
            .expect("a message within 10 s")
            .expect("stream ok")
            .expect("stream open")
            .body
            .expect("a body")
    }
}

/// A batch of `states` of assignment `a`'s attempt, numbered from `from`.
pub fn batch(a: &akbench_proto::v1::Assignment, states: &[State], from: u32) -> In {
    In::Transitions(akbench_proto::v1::TransitionBatch {
        attempt_id: a.attempt_id.clone(),
        epoch: a.epoch,
        transitions: states
            .iter()
            .enumerate()
            .map(|(i, s)| akbench_proto::v1::Transition {
                seq: from + i as u32,
                state: akbench_coordinator::workers_service::wire_state(*s) as i32,
                at_unix_ms: 1_767_225_600_000,
                note: String::new(),
            })
            .collect(),
        ..Default::default()
    })
}
