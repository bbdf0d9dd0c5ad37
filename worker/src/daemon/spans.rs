//! The spans of one assignment: `attempt` (continuing the `traceparent` the coordinator put
//! in the assignment, so one attempt is one trace across both processes), one `phase` span
//! per lifecycle phase as its child, in order, and the final state, cause, tokens and cost
//! recorded on `attempt` when it ends. Attribute names follow the OpenTelemetry semantic
//! conventions where one exists (`gen_ai.request.model`, `gen_ai.usage.*_tokens`); the rest
//! are `akbench.*`.

use std::sync::Mutex;

use akbench_core::lifecycle::State;
use akbench_core::record::AttemptRecord;
use akbench_core::work::WorkItem;
use akbench_proto::v1 as pb;
use tracing::Span;

/// The span of an assignment (a root, or the child of the assignment's `traceparent`).
pub(super) fn attempt(a: &pb::Assignment, worker_id: &str) -> Span {
    let work = serde_json::from_str::<WorkItem>(&a.work_item_json).ok();
    let trial = work.as_ref().map(|w| &w.trial);
    let agent = work.as_ref().map(|w| &w.agent);
    let span = tracing::info_span!(
        parent: None,
        "attempt",
        // One name for every attempt (the trial key is an attribute): a span name per trial
        // would make one metric series per trial in a trace backend.
        otel.name = "attempt.run",
        otel.kind = "consumer",
        akbench.run.id = %trial.map(|t| t.run_id.to_string()).unwrap_or_default(),
        akbench.trial.key = trial.map_or("", |t| t.key.as_str()),
        akbench.attempt.id = a.attempt_id.as_str(),
        // i64: the exporter sends unsigned integers as strings.
        akbench.attempt.number = i64::from(a.attempt_number),
        akbench.lease.epoch = a.epoch,
        akbench.task.release = %trial.map(|t| format!("{}@{}", t.task.id, t.task.version)).unwrap_or_default(),
        akbench.agent = agent.map_or("", |g| g.label.as_str()),
        gen_ai.request.model = agent.and_then(|g| g.model.as_deref()).unwrap_or(""),
        akbench.provider.route = agent.and_then(|g| g.provider_route.as_deref()).unwrap_or(""),
        akbench.worker.id = worker_id,
        akbench.attempt.state = tracing::field::Empty,
        akbench.attempt.cause = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        akbench.cost.usd = tracing::field::Empty,
    );
    akbench_telemetry::set_parent(&span, &a.traceparent);
    span
}

/// Records how the attempt ended on its span.
pub(super) fn finished(span: &Span, record: &AttemptRecord) {
    span.record("akbench.attempt.state", record.state.as_str());
    span.record(
        "akbench.attempt.cause",
        record.cause.as_deref().unwrap_or(""),
    );
    let o = &record.observations;
    // i64: the exporter sends unsigned integers as strings (docs/observability.md: int).
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    if let Some(n) = o.input_tokens {
        span.record("gen_ai.usage.input_tokens", int(n));
    }
    if let Some(n) = o.output_tokens {
        span.record("gen_ai.usage.output_tokens", int(n));
    }
    if let Some(c) = o.cost_usd {
        span.record("akbench.cost.usd", c);
    }
}

/// The attempt's span and its current phase span (entered on the attempt's thread).
pub(super) struct Phases {
    attempt: Span,
    traceparent: String,
    current: Mutex<Option<Span>>,
}

impl Phases {
    pub(super) fn new(attempt: Span, traceparent: String) -> Self {
        Self {
            attempt,
            traceparent,
            current: Mutex::new(None),
        }
    }

    /// The attempt span's `traceparent` (empty when not exporting).
    pub(super) fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// Runs `f` inside the attempt's span.
    pub(super) fn in_attempt<T>(&self, f: impl FnOnce() -> T) -> T {
        self.attempt.in_scope(f)
    }

    /// Ends the current phase span and, unless `state` is terminal, starts (and enters, on
    /// this thread) the span of the phase `state` begins.
    pub(super) fn enter_phase(&self, state: State) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(prev) = current.take() {
            prev.with_subscriber(|(id, d)| d.exit(id));
        }
        if state.is_terminal() || self.attempt.is_disabled() {
            return;
        }
        let span = tracing::info_span!(
            parent: &self.attempt,
            "phase",
            otel.name = state.as_str(),
            akbench.phase = state.as_str(),
        );
        span.with_subscriber(|(id, d)| d.enter(id));
        *current = Some(span);
    }

    /// Ends the current phase span (call on the thread that ran the phases).
    pub(super) fn close(&self) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(prev) = current.take() {
            prev.with_subscriber(|(id, d)| d.exit(id));
        }
    }
}
