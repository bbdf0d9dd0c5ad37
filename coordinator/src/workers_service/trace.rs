//! Spans of the `Workers` service (built only while traces are exported, see
//! [`akbench_telemetry::enabled`]). One attempt is one trace: its root is the coordinator's
//! `attempt.assign` span, whose `traceparent` travels in the `Assignment`; the worker's
//! spans continue it, and each report the worker sends back carries the worker's
//! `traceparent`, which the coordinator's `attempt.report` span continues. The scheduler's
//! transactions are `db.transaction` spans (statement name, rows); the periodic ones
//! (`claim`, `heartbeat`, `reap`: [`poll`]) are `debug` spans, not exported by the default
//! `AKBENCH_TRACE_FILTER`, so that idle workers and an idle reaper export no trace per poll;
//! a claim that assigns work is recorded on each `attempt.assign` it makes ([`claimed`]).

use tracing::Span;

use crate::scheduler::{Assignment, Report};

/// The root span of an assigned attempt and its `traceparent` (empty when not exporting).
pub(super) fn assign(a: &Assignment, worker_id: &str) -> (Span, String) {
    if !akbench_telemetry::enabled() {
        return (Span::none(), String::new());
    }
    let trial_key = a
        .document
        .pointer("/trial/key")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let agent = a.document.get("agent");
    let agent_label = agent
        .and_then(|g| g.get("label"))
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let span = tracing::info_span!(
        parent: None,
        "attempt.assign",
        otel.kind = "producer",
        akbench.run.id = %a.run_id,
        akbench.trial.id = %a.trial_id,
        akbench.trial.key = trial_key,
        akbench.attempt.id = %a.attempt_id,
        akbench.attempt.number = a.number,
        akbench.lease.epoch = a.epoch,
        akbench.work.kind = a.kind.as_str(),
        akbench.agent = agent_label,
        akbench.worker.id = worker_id,
        akbench.claim.rows = tracing::field::Empty,
        akbench.claim.duration_ms = tracing::field::Empty,
        akbench.run.trace_id = tracing::field::Empty,
        akbench.trial.trace_id = tracing::field::Empty,
    );
    // The run and the trial as contexts derived from their keys, linked from every attempt
    // (and retry) of them: no span stays open across a trial's retries.
    let run = akbench_core::telemetry::run_context(&a.run_id.to_string());
    let trial = akbench_core::telemetry::trial_context(trial_key);
    span.record("akbench.run.trace_id", run.trace_hex());
    span.record("akbench.trial.trace_id", trial.trace_hex());
    akbench_telemetry::link(&span, run.trace_id, run.span_id);
    akbench_telemetry::link(&span, trial.trace_id, trial.span_id);
    let tp = akbench_telemetry::traceparent(&span);
    (span, tp)
}

/// The span of one report, continuing the worker's `traceparent`.
pub(super) fn report(r: &Report, traceparent: &str, worker_id: &str) -> Span {
    if !akbench_telemetry::enabled() {
        return Span::none();
    }
    let (subject, state, cause) = match r {
        Report::Transitions { transitions, .. } => (
            "transitions",
            transitions.last().map_or("", |t| t.state.as_str()),
            "",
        ),
        Report::Finished {
            terminal, cause, ..
        } => ("finished", terminal.as_str(), cause.as_str()),
        Report::Record { .. } => ("record", "", ""),
    };
    let span = tracing::info_span!(
        parent: None,
        "attempt.report",
        otel.name = %format!("attempt.report {subject}"),
        otel.kind = "consumer",
        akbench.attempt.id = %r.attempt_id(),
        akbench.report.subject = subject,
        akbench.attempt.state = state,
        akbench.attempt.cause = cause,
        akbench.worker.id = worker_id,
        akbench.report.outcome = tracing::field::Empty,
    );
    akbench_telemetry::set_parent(&span, traceparent);
    span
}

/// A scheduler transaction (`claim`, `report`, `heartbeat`, `reap`) as a database span
/// (OpenTelemetry database conventions); `rows` is recorded when it ends.
pub(super) fn db(operation: &'static str, parent: Option<&Span>) -> Span {
    if !akbench_telemetry::enabled() {
        return Span::none();
    }
    match parent {
        Some(p) => tracing::info_span!(
            parent: p,
            "db.transaction",
            otel.name = %format!("{operation} postgresql"),
            otel.kind = "client",
            db.system.name = "postgresql",
            db.operation.name = operation,
            db.response.returned_rows = tracing::field::Empty,
        ),
        None => tracing::info_span!(
            parent: None,
            "db.transaction",
            otel.name = %format!("{operation} postgresql"),
            otel.kind = "client",
            db.system.name = "postgresql",
            db.operation.name = operation,
            db.response.returned_rows = tracing::field::Empty,
        ),
    }
}

/// Records on an `attempt.assign` span the claim that made it: how many attempts the claim
/// assigned and how long it took (the claim's own span is a [`poll`]).
pub(super) fn claimed(span: &Span, rows: usize, took: std::time::Duration) {
    span.record("akbench.claim.rows", rows as i64);
    span.record("akbench.claim.duration_ms", took.as_secs_f64() * 1000.0);
}

/// A periodic scheduler transaction (`claim`, `heartbeat`, `reap`) as a root `debug`
/// database span: exported only when `AKBENCH_TRACE_FILTER` enables `debug` for this
/// crate, never by default (one trace per poll would be ~800k traces a day per idle pair
/// of workers).
pub(super) fn poll(operation: &'static str) -> Span {
    if !akbench_telemetry::enabled() {
        return Span::none();
    }
    tracing::debug_span!(
        parent: None,
        "db.transaction",
        otel.name = %format!("{operation} postgresql"),
        otel.kind = "client",
        db.system.name = "postgresql",
        db.operation.name = operation,
        db.response.returned_rows = tracing::field::Empty,
    )
}

/// Records a terminal state on an `attempt.report` span.
pub(super) fn outcome(span: &Span, outcome: &str) {
    span.record("akbench.report.outcome", outcome);
}
