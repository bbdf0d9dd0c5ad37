//! One assignment: decode and prepare the work item, run the attempt on a blocking thread,
//! forward its transitions as they happen, store its artifacts, and hand back the record and
//! the terminal state. Nothing here talks to the network; the session sends what it gets.

use super::artifacts::ArtifactStore;
use crate::orchestrator::{AttemptOptions, AttemptRequest, Observer, Orchestrator};
use crate::process::CancelToken;
use crate::trial::prepare;
use akbench_core::digest::{canonical_json, digest_of};
use akbench_core::ids;
use akbench_core::lifecycle::State;
use akbench_core::record::{
    wire, AttemptRecord, Identity, Observations, Transition, WorkspaceFacts,
};
use akbench_core::work::WorkItem;
use akbench_proto::state::wire_state;
use akbench_proto::v1 as pb;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;
use uuid::Uuid;

/// File name of the attempt record written beside the artifacts.
pub const ATTEMPT_RECORD_FILE: &str = "attempt_record.json";

/// What runners tell the session.
#[derive(Debug)]
pub(super) enum Event {
    /// A transition of a running attempt.
    Transition {
        attempt_id: String,
        transition: pb::Transition,
        /// W3C trace context of the attempt's span (empty when not exporting).
        traceparent: String,
    },
    /// The attempt ended; its record and finish are owed to the coordinator.
    Done {
        attempt_id: String,
        record_json: String,
        digest: String,
        terminal: pb::AttemptState,
        cause: String,
        traceparent: String,
    },
}

/// What every runner shares.
#[derive(Debug)]
pub(super) struct Context {
    pub orchestrator: Orchestrator,
    pub tasks_root: PathBuf,
    pub agents_root: PathBuf,
    pub out_root: PathBuf,
    pub artifacts: Option<ArtifactStore>,
    pub metrics: std::sync::Arc<super::metrics::WorkerMetrics>,
    /// This worker's id (a span attribute).
    pub worker_id: String,
    /// The caches' collection (after attempts end).
    pub collector: super::collect::Collector,
}

/// The longest transition note sent to the coordinator, in bytes (the record keeps it whole).
pub const WIRE_NOTE_BYTES: usize = 4096;

/// The wire form of a recorded transition (wire seqs start at 1, record seqs at 0).
pub(super) fn wire_transition(t: &Transition) -> pb::Transition {
    let mut note = t.note.clone().unwrap_or_default();
    if note.len() > WIRE_NOTE_BYTES {
        let mut keep = WIRE_NOTE_BYTES;
        while !note.is_char_boundary(keep) {
            keep -= 1;
        }
        let total = note.len();
        note.truncate(keep);
        note.push_str(&format!(
            "\n[truncated by akbench: {keep} of {total} bytes kept]"
        ));
    }
    pb::Transition {
        seq: t.seq.saturating_add(1),
        state: wire_state(t.state) as i32,
        at_unix_ms: t.at.timestamp_millis(),
        note,
    }
}

/// Forwards every transition to the session the moment it is recorded, and makes each
/// lifecycle phase a span (a child of the attempt's span, entered on the attempt's thread
/// so that the agent's process and the evaluator nest under their phase).
pub(super) struct Forward {
    attempt_id: String,
    events: UnboundedSender<Event>,
    spans: super::spans::Phases,
}

impl Observer for Forward {
    fn transition(&self, _: &Identity, _: u32, t: &Transition) {
        self.spans.enter_phase(t.state);
        let _ = self.events.send(Event::Transition {
            attempt_id: self.attempt_id.clone(),
            transition: wire_transition(t),
            traceparent: self.spans.traceparent().to_string(),
        });
    }
}

/// Where a finished attempt's artifacts are, to be stored.
pub(super) struct Artifacts {
    pub dir: PathBuf,
    pub key: String,
}

/// Runs an assignment to its end and sends its events.
pub(super) async fn run(
    ctx: std::sync::Arc<Context>,
    a: pb::Assignment,
    cancel: CancelToken,
    events: UnboundedSender<Event>,
    slots: std::sync::Arc<tokio::sync::Semaphore>,
) {
    // A prefetched assignment (leased while every slot was busy) waits here for a slot; its
    // lease is renewed by the heartbeats meanwhile, like a running one's, and a cancel or a
    // lost lease ends it at once when it starts. The slot is given back as soon as the
    // attempt's work on this host is done, before its record is delivered. A drain closes
    // the slots: what has not started by then never starts and goes back to the coordinator
    // at once as the host's doing (retried elsewhere), instead of running inside the grace.
    let Ok(slot) = slots.acquire_owned().await else {
        end_unstarted(
            &ctx.worker_id,
            &a,
            State::InfrastructureError,
            format!(
                "worker {} began draining before a slot freed for this prefetched attempt; \
                 it was not started",
                ctx.worker_id
            ),
            &events,
            &ctx.metrics,
        );
        return;
    };
    let started = Instant::now();
    let attempt_id = a.attempt_id.clone();
    let labels = metric_labels(&a);
    ctx.metrics.started();
    let attempt_span = super::spans::attempt(&a, &ctx.worker_id);
    let traceparent = akbench_telemetry::traceparent(&attempt_span);
    let fwd = Forward {
        attempt_id: attempt_id.clone(),
        events: events.clone(),
        spans: super::spans::Phases::new(attempt_span.clone(), traceparent.clone()),
    };
    let ctx2 = ctx.clone();
    let blocking = tokio::task::spawn_blocking(move || {
        let out = fwd.spans.in_attempt(|| execute(&ctx2, &a, &cancel, &fwd));
        fwd.spans.close();
        out
    })
    .await;
    drop(slot);
    let (record, artifacts) = match blocking {
        Ok(r) => r,
        Err(e) => {
            // The orchestrator never fails; a panic is a bug, reported as the host's failure.
            tracing::error!(attempt = %attempt_id, "the attempt's thread failed: {e}");
            let record = synthetic_record(
                &ctx.worker_id,
                &attempt_id,
                &format!("attempt-{attempt_id}"),
                1,
                State::InfrastructureError,
                format!("the worker's attempt thread failed: {e}"),
            );
            for t in &record.transitions {
                let _ = events.send(Event::Transition {
                    attempt_id: attempt_id.clone(),
                    transition: wire_transition(t),
                    traceparent: traceparent.clone(),
                });
            }
            (record, None)
        }
    };
    if let (Some(store), Some(art)) = (&ctx.artifacts, artifacts) {
        store_artifacts(store, &ctx.out_root, &art).await;
    }
    tracing::info!(
        attempt = %record.attempt.key,
        attempt_id = %attempt_id,
        state = %record.state,
        cause = record.cause.as_deref().unwrap_or(""),
        secs = started.elapsed().as_secs_f64(),
        "assignment finished"
    );
    ctx.metrics.ended(&record, &labels);
    super::spans::finished(&attempt_span, &record);
    drop(attempt_span);
    done(&events, attempt_id, &record, traceparent);
    // The caches' collection (a walk of the caches, at most once a minute) runs after the
    // record and finish are on their way, never between the attempt's end and its record.
    let ctx3 = ctx.clone();
    let _ =
        tokio::task::spawn_blocking(move || ctx3.collector.after_attempt(&ctx3.orchestrator)).await;
}

/// The agent and provider route of an assignment, for metric labels (empty when the work
/// item does not parse).
fn metric_labels(a: &pb::Assignment) -> super::metrics::AttemptLabelsIn {
    match serde_json::from_str::<WorkItem>(&a.work_item_json) {
        Ok(w) => super::metrics::AttemptLabelsIn {
            agent: w.agent.label,
            provider_route: w.agent.provider_route.unwrap_or_default(),
        },
        Err(_) => super::metrics::AttemptLabelsIn::default(),
    }
}

/// Ends an assignment without running it (`state` is a terminal reachable from pending).
pub(super) fn end_unstarted(
    worker_id: &str,
    a: &pb::Assignment,
    state: State,
    cause: String,
    events: &UnboundedSender<Event>,
    metrics: &super::metrics::WorkerMetrics,
) {
    let key = key_of(a);
    let record = synthetic_record(
        worker_id,
        &a.attempt_id,
        &key,
        a.attempt_number.max(1),
        state,
        cause,
    );
    for t in &record.transitions {
        let _ = events.send(Event::Transition {
            attempt_id: a.attempt_id.clone(),
            transition: wire_transition(t),
            traceparent: String::new(),
        });
    }
    tracing::info!(attempt = %key, attempt_id = %a.attempt_id, state = %record.state,
        cause = record.cause.as_deref().unwrap_or(""), "assignment not started");
    metrics.observe(&record, &metric_labels(a));
    done(events, a.attempt_id.clone(), &record, String::new());
}

fn done(
    events: &UnboundedSender<Event>,
    attempt_id: String,
    record: &AttemptRecord,
    traceparent: String,
) {
    // The session's messages have a size limit: an oversized record is cut to fit (the full
    // one is `attempt_record.json` in the attempt's artifacts), never re-sent forever.
    let full_copy = format!("{}/{ATTEMPT_RECORD_FILE}", record.attempt.key);
    let (wire, cut) = wire::for_wire(record, wire::WIRE_RECORD_BYTES, &full_copy);
    if cut {
        tracing::warn!(attempt = %record.attempt.key, full = %full_copy,
            "the record is larger than a session message allows: its long texts were cut for the coordinator");
    }
    let _ = events.send(Event::Done {
        attempt_id,
        record_json: canonical_json(&wire),
        digest: digest_of(&wire),
        terminal: wire_state(wire.state),
        cause: wire.cause.clone().unwrap_or_default(),
        traceparent,
    });
}

/// The attempt key: from the work item when it parses, else from the trial id.
fn key_of(a: &pb::Assignment) -> String {
    let n = a.attempt_number.max(1);
    match serde_json::from_str::<WorkItem>(&a.work_item_json) {
        Ok(w) => ids::attempt_key(&w.trial.key, n),
        Err(_) => ids::attempt_key(&a.trial_id, n),
    }
}

/// A trial key is used as a relative path: every component must be a plain name.
pub(super) fn safe_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.split('/').all(|c| {
            !c.is_empty() && c != "." && c != ".." && !c.contains('\0') && !c.contains('\\')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "trial key {key:?} cannot name an artifact folder (empty, `.` or `..` components)"
        ))
    }
}

fn execute(
    ctx: &Context,
    a: &pb::Assignment,
    cancel: &CancelToken,
    fwd: &Forward,
) -> (AttemptRecord, Option<Artifacts>) {
    let number = a.attempt_number.max(1);
    let invalid = |cause: String| {
        let key = key_of(a);
        tracing::info!(attempt = %key, attempt_id = %a.attempt_id, "assignment started");
        ended_before_start(
            &ctx.worker_id,
            a,
            &key,
            State::InvalidConfiguration,
            cause,
            fwd,
        )
    };
    let kind = pb::WorkKind::try_from(a.kind).unwrap_or(pb::WorkKind::Unspecified);
    if !matches!(kind, pb::WorkKind::Execute | pb::WorkKind::Grade) {
        return invalid(format!(
            "work kind {} is not one this worker runs (EXECUTE or GRADE)",
            a.kind
        ));
    }
    let Ok(attempt_uuid) = Uuid::parse_str(&a.attempt_id) else {
        return invalid(format!("attempt_id {:?} is not a UUID", a.attempt_id));
    };
    let work = match WorkItem::decode(&a.work_item_json, &a.work_item_digest) {
        Ok(w) => w,
        Err(e) => return invalid(format!("invalid work item: {e}")),
    };
    if work.trial.trial_id.to_string() != a.trial_id {
        return invalid(format!(
            "the work item is trial {}, the assignment says {}",
            work.trial.trial_id, a.trial_id
        ));
    }
    if let Err(e) = safe_key(&work.trial.key) {
        return invalid(e);
    }
    match (kind, &work.grade) {
        (pb::WorkKind::Grade, Some(source)) => {
            return super::grade::grade(ctx, a, &work, source, attempt_uuid, cancel, fwd)
        }
        (pb::WorkKind::Grade, None) => {
            return invalid("a GRADE assignment without the attempt to grade (work item `grade` is missing)".into())
        }
        (_, Some(_)) => {
            return invalid("an EXECUTE assignment carrying an attempt to grade; the coordinator sent a grade work item as EXECUTE".into())
        }
        _ => {}
    }
    let prepared = match prepare(&work.trial, &work.agent, &ctx.tasks_root, &ctx.agents_root) {
        Ok(p) => p,
        Err(e) => return invalid(e.to_string()),
    };
    let key = ids::attempt_key(&work.trial.key, number);
    tracing::info!(attempt = %key, attempt_id = %a.attempt_id, epoch = a.epoch, "assignment started");
    let rel = format!("a{number}");
    let artifacts_dir = ctx.out_root.join(&work.trial.key).join(&rel);
    let record = ctx.orchestrator.run_attempt(
        &AttemptRequest {
            task: &prepared.task,
            agent: &prepared.agent,
            attempt: Identity {
                id: attempt_uuid,
                key: key.clone(),
            },
            number,
            artifacts_dir: artifacts_dir.clone(),
            artifacts_rel: rel.clone(),
            options: AttemptOptions {
                grade: work.trial.evaluation.grade,
                ..AttemptOptions::default()
            }
            .with_compute(&work.trial.compute),
        },
        fwd,
        cancel,
    );
    if let Err(e) =
        crate::orchestrator::write_json_atomic(&artifacts_dir.join(ATTEMPT_RECORD_FILE), &record)
    {
        tracing::warn!(attempt = %key, "failed to write {ATTEMPT_RECORD_FILE}: {e}");
    }
    let art = Artifacts {
        dir: artifacts_dir,
        key: format!("{}/{rel}", work.trial.key),
    };
    (record, Some(art))
}

/// The attempt ends in `state` before anything ran (pending, then `state`); its transitions
/// are forwarded as for any attempt.
pub(super) fn ended_before_start(
    worker_id: &str,
    a: &pb::Assignment,
    key: &str,
    state: State,
    cause: String,
    fwd: &Forward,
) -> (AttemptRecord, Option<Artifacts>) {
    let number = a.attempt_number.max(1);
    let record = synthetic_record(worker_id, &a.attempt_id, key, number, state, cause);
    for t in &record.transitions {
        fwd.transition(&record.attempt, number, t);
    }
    (record, None)
}

/// Copies the attempt's artifacts to the store and removes the local copy; on failure the
/// local copy stays (the verdict stands either way).
async fn store_artifacts(store: &ArtifactStore, out_root: &Path, art: &Artifacts) {
    if !art.dir.is_dir() {
        return;
    }
    // A local store over the output folder itself already holds them.
    if let (Some(root), Ok(out)) = (store.local_root(), out_root.canonicalize()) {
        if root == out {
            return;
        }
    }
    match store.put_dir(&art.dir, &art.key).await {
        Ok(n) => {
            tracing::debug!(key = %art.key, files = n, store = store.url(), "artifacts stored");
            if let Err(e) = std::fs::remove_dir_all(&art.dir) {
                tracing::warn!("failed to remove {}: {e}", art.dir.display());
            }
        }
        Err(e) => tracing::warn!(key = %art.key, "artifacts kept locally: {e}"),
    }
}

/// The record of an attempt that ended before anything ran: pending, then `state`.
pub(super) fn synthetic_record(
    worker_id: &str,
    attempt_id: &str,
    key: &str,
    number: u32,
    state: State,
    cause: String,
) -> AttemptRecord {
    let now = chrono::Utc::now();
    AttemptRecord {
        services: Vec::new(),
        attempt: Identity {
            id: Uuid::parse_str(attempt_id).unwrap_or(Uuid::nil()),
            key: key.to_string(),
        },
        number,
        transitions: vec![
            Transition {
                seq: 0,
                state: State::Pending,
                at: now,
                note: None,
            },
            Transition {
                seq: 1,
                state,
                at: now,
                note: Some(cause.clone()),
            },
        ],
        state,
        cause: Some(cause),
        workspace: WorkspaceFacts::default(),
        agent_process: None,
        observations: Observations::default(),
        timings_ms: Default::default(),
        grade: None,
        artifacts_dir: format!("a{number}"),
        graded_from: None,
        redacted: Vec::new(),
        steps: Vec::new(),
        provenance: Some(crate::provenance::here(worker_id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::lifecycle::validate_path;

    #[test]
    fn synthetic_records_are_valid_paths() {
        for s in [State::InvalidConfiguration, State::InfrastructureError] {
            let r = synthetic_record("w", &Uuid::now_v7().to_string(), "k/a1", 1, s, "why".into());
            let states: Vec<_> = r.transitions.iter().map(|t| t.state).collect();
            validate_path(&states).unwrap();
            assert_eq!(wire_transition(&r.transitions[0]).seq, 1);
        }
    }

    #[test]
    fn trial_keys_must_be_plain_relative_paths() {
        assert!(safe_key("run-1/task/agent/r1").is_ok());
        for bad in ["", "/abs", "a/../b", "a//b", "./a", "a/.."] {
            assert!(safe_key(bad).is_err(), "{bad}");
        }
    }
}
