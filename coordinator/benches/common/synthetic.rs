//! The synthetic worker the dispatch benches share (`dispatch`, `dispatch_export`, `sessions`,
//! `fair_share`; `status` takes only its [`env`]): a worker session over real gRPC and the reports of a no-op attempt (one
//! batch of its transitions, its record, its finish), as a real worker sends them. What a
//! bench counts or waits for stays in the bench.

use std::net::SocketAddr;

use akbench_core::digest::{canonical_json, digest_bytes};
use akbench_core::lifecycle::{self, State};
use akbench_proto::state::wire_state;
use akbench_proto::v1::{
    worker_message::Body as In, AttemptFinished, CoordinatorMessage, Hello, RecordUpload,
    Transition, TransitionBatch, WorkerMessage,
};
use akbench_proto::workers_client::WorkersClient;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// The variable `name` as a whole number, `default` when unset. A value that is not one
/// stops the bench saying so: a mistyped knob (`PAIRS=three`) must not run the defaults
/// silently.
pub fn env(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            panic!("{name}={v:?} is not a whole number; fix: set it to one (default {default}) or unset it")
        }),
    }
}

/// An ungraded no-op attempt's path: the lifecycle chain up to FINALIZING, then NOT_GRADED.
pub static PATH: std::sync::LazyLock<Vec<State>> = std::sync::LazyLock::new(|| {
    let mut p = lifecycle::CHAIN[..10].to_vec();
    p.push(State::NotGraded);
    p
});

/// What a worker sends for a no-op attempt it was assigned: its transitions in one batch,
/// its record, its finish; each carrying `traceparent` (empty: none).
pub fn messages(attempt_id: &str, epoch: i64, traceparent: &str) -> [WorkerMessage; 3] {
    let now = chrono::Utc::now().timestamp_millis();
    let transitions = PATH
        .iter()
        .enumerate()
        .map(|(i, s)| Transition {
            seq: i as u32 + 1,
            state: wire_state(*s) as i32,
            at_unix_ms: now,
            note: String::new(),
        })
        .collect();
    let record = json!({
        "attempt": {"id": attempt_id, "key": format!("attempt-{attempt_id}")},
        "number": 1,
        "transitions": PATH.iter().enumerate()
            .map(|(i, s)| json!({"seq": i, "state": s, "at": "2026-01-01T00:00:00Z"}))
            .collect::<Vec<_>>(),
        "state": "not_graded", "cause": null, "workspace": {"kept": false},
        "agent_process": null, "observations": {}, "timings_ms": {}, "grade": null,
        "artifacts_dir": "a",
    });
    let record_json = canonical_json(&record);
    let digest = digest_bytes(record_json.as_bytes());
    let m = |body| WorkerMessage { body: Some(body) };
    [
        m(In::Transitions(TransitionBatch {
            attempt_id: attempt_id.into(),
            epoch,
            transitions,
            traceparent: traceparent.into(),
        })),
        m(In::Record(RecordUpload {
            attempt_id: attempt_id.into(),
            epoch,
            record_json,
            digest,
            traceparent: traceparent.into(),
        })),
        m(In::Finished(AttemptFinished {
            attempt_id: attempt_id.into(),
            epoch,
            terminal_state: wire_state(State::NotGraded) as i32,
            cause: String::new(),
            traceparent: traceparent.into(),
        })),
    ]
}

/// Opens worker `id`'s session with `slots` slots on the coordinator at `addr` (plain gRPC):
/// where to send its messages, and what the coordinator sends it; or why it failed to open
/// (the connection, or the `Session` call).
pub async fn session(
    addr: SocketAddr,
    id: String,
    slots: u32,
) -> Result<
    (
        mpsc::Sender<WorkerMessage>,
        tonic::Streaming<CoordinatorMessage>,
    ),
    String,
> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let (tx, rx) = mpsc::channel(4096);
    tx.send(WorkerMessage {
        body: Some(In::Hello(Hello {
            worker_id: id,
            slots,
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let inbound = WorkersClient::new(channel)
        .session(ReceiverStream::new(rx))
        .await
        .map_err(|e| format!("session: {e:?}"))?
        .into_inner();
    Ok((tx, inbound))
}
