//! Spans of the `Workers` service (built only while traces are exported, see
//! [`akbench_telemetry::enabled`]). One attempt is one trace: its root is the coordinator's
//! `attempt.assign` span, whose `traceparent` travels in the `Assignment`; the worker's
//! spans continue it, and each report the worker sends back carries the worker's
//! `traceparent`, which the coordinator's `attempt.report` span continues. The scheduler's
//! transactions are `db.transaction` spans (statement name, rows).

use tracing::Span;

use crate::scheduler::{Assignment, Report};

/// The root span of an assigned attempt and its `traceparent` (empty when not exporting).
pub(super) fn assign(a: &Assignment, worker_id: &str) -> (Span, String) {
    if !akbench_telemetry::enabled() {
        return (Span::none(), String::new());
    }
    let text = |k: &str| a.document.get(k).and_then(|v| v.as_str()).unwrap_or("");
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
        akbench.trial.key = text("key"),
        akbench.attempt.id = %a.attempt_id,
        akbench.attempt.number = a.number,
        akbench.lease.epoch = a.epoch,
        akbench.work.kind = a.kind.as_str(),
        akbench.agent = agent_label,
        akbench.worker.id = worker_id,
    );
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

/// Records a terminal state on an `attempt.report` span.
pub(super) fn outcome(span: &Span, outcome: &str) {
    span.record("akbench.report.outcome", outcome);
}
