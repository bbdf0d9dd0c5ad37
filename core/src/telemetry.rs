//! Pure helpers of telemetry shared by the binaries: bounded metric labels
//! ([`cause_class`], [`CAUSE_CLASSES`]), the trace contexts of a run and of a trial
//! ([`run_context`], [`trial_context`]) and the Prometheus text form of `prometheus-client`'s OpenMetrics
//! output ([`openmetrics_to_text`]).

/// OpenMetrics text (what `prometheus-client` writes) as Prometheus text 0.0.4: a counter
/// family's `# HELP`/`# TYPE` lines name its `_total` samples, and `# EOF`/`# UNIT` go.
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) && !name.ends_with("_total") {
                    "_total"
                } else {
                    ""
                };
                out.push_str(prefix);
                out.push_str(name);
                out.push_str(suffix);
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Every value [`cause_class`] returns, in the order its rules are tried (the `cause`
/// label of the attempt metrics; docs/observability.md has the table).
pub const CAUSE_CLASSES: [&str; 27] = [
    "none",
    "lease_expired",
    "session_broke",
    "lease_revoked",
    "budget",
    "route_paused",
    "drain",
    "interrupted",
    "cancelled",
    "provider_credential",
    "provider_error",
    "grading_tampered",
    "grading_refused",
    "no_verdict",
    "timeout",
    "limit_disk",
    "limit_memory",
    "limit_pids",
    "diff_too_large",
    "agent_refused_start",
    "agent_exit",
    "agent_error",
    "sandbox",
    "configuration",
    "grading_broken",
    "infrastructure",
    "other",
];

/// The bounded class of an attempt's end, from its terminal `state` (as stored: `failed`,
/// `infrastructure_error`, ...) and its free-text `cause`, for the `cause` label of the
/// coordinator's and the worker's attempt metrics. The cause is matched against the phrases
/// its producers write (`dispatch::Loss::cause`, `dispatch::Hold::cause`,
/// `dispatch::Stop::end`, the worker's agent, limit, provider and grading causes); a cause
/// none of them matches falls back on the state (`invalid_configuration` is
/// `configuration`, `evaluation_error` is `grading_broken`, `infrastructure_error` is
/// `infrastructure`, `timeout`, `cancelled`), else `other`. Always one of
/// [`CAUSE_CLASSES`].
pub fn cause_class(state: &str, cause: &str) -> &'static str {
    let c = cause.trim().to_ascii_lowercase();
    if c.is_empty() {
        return "none";
    }
    let starts = |p: &str| c.starts_with(p);
    let has = |p: &str| c.contains(p);
    let rules: [(bool, &'static str); 23] = [
        (starts("lease expired"), "lease_expired"),
        (
            starts("lease released") || starts("session broke"),
            "session_broke",
        ),
        (starts("lease revoked"), "lease_revoked"),
        (has("budget is spent"), "budget"),
        (has("provider route") && has("paused"), "route_paused"),
        (
            starts("interrupted by its worker") && has("drained"),
            "drain",
        ),
        (starts("interrupted by its worker"), "interrupted"),
        (starts("cancelled"), "cancelled"),
        (
            starts("provider:") && has("refused the agent's credential"),
            "provider_credential",
        ),
        (starts("provider:"), "provider_error"),
        (starts("grading tampered"), "grading_tampered"),
        (starts("cannot grade"), "grading_refused"),
        (has("while the agent's code ran"), "no_verdict"),
        (has("ran out of time"), "timeout"),
        (has("disk limit"), "limit_disk"),
        (has("memory limit"), "limit_memory"),
        (has("processes at once"), "limit_pids"),
        (starts("diff_too_large"), "diff_too_large"),
        (starts("the agent refused to start"), "agent_refused_start"),
        (
            starts("the agent exited with code")
                || starts("the agent was killed by signal")
                || starts("the agent ended without an exit status"),
            "agent_exit",
        ),
        (starts("the agent reported an error"), "agent_error"),
        (
            has("sandbox") || has("bubblewrap") || has("bwrap"),
            "sandbox",
        ),
        (has("credential") && has("not set"), "configuration"),
    ];
    if let Some((_, class)) = rules.iter().find(|(hit, _)| *hit) {
        return class;
    }
    match state {
        "invalid_configuration" => "configuration",
        "evaluation_error" => "grading_broken",
        "infrastructure_error" => "infrastructure",
        "timeout" => "timeout",
        "cancelled" => "cancelled",
        _ => "other",
    }
}

/// A W3C trace context (16-byte trace id, 8-byte span id) derived from `key` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivedContext {
    /// The trace id (never all zero).
    pub trace_id: [u8; 16],
    /// The span id (never all zero).
    pub span_id: [u8; 8],
}

impl DerivedContext {
    /// The trace id as 32 lowercase hex digits, as trace UIs show it.
    pub fn trace_hex(&self) -> String {
        hex::encode(self.trace_id)
    }
}

fn derived(kind: &str, key: &str) -> DerivedContext {
    use sha2::{Digest as _, Sha256};
    let h = Sha256::digest(format!("akbench/{kind}/{key}").as_bytes());
    let mut trace_id = [0u8; 16];
    let mut span_id = [0u8; 8];
    trace_id.copy_from_slice(&h[..16]);
    span_id.copy_from_slice(&h[16..24]);
    // All-zero ids are invalid in W3C trace context: (practically never) nudged.
    if trace_id == [0; 16] {
        trace_id[15] = 1;
    }
    if span_id == [0; 8] {
        span_id[7] = 1;
    }
    DerivedContext { trace_id, span_id }
}

/// The context every attempt of the trial `trial_key` links to (its `attempt.assign` span
/// has a span link to it and `akbench.trial.trace_id`): the same on every replica and for
/// every retry, with no span kept open across retries (a trial can wait for hours).
pub fn trial_context(trial_key: &str) -> DerivedContext {
    derived("trial", trial_key)
}

/// The context every attempt of the run `run_id` (its UUID) links to, as [`trial_context`].
pub fn run_context(run_id: &str) -> DerivedContext {
    derived("run", run_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_producer_has_its_class() {
        use crate::dispatch::{Hold, Loss, Stop};
        let ie = "infrastructure_error";
        let produced = [
            (ie, Loss::WentSilent.cause("w1"), "lease_expired"),
            (ie, Loss::SessionBroke.cause("w1"), "session_broke"),
            (ie, Loss::RevokedAtReconnect.cause("w1"), "lease_revoked"),
            ("cancelled", Hold::BudgetSpent.cause(), "budget"),
            (
                "cancelled",
                Hold::RoutePaused("anthropic".into()).cause(),
                "route_paused",
            ),
            (
                ie,
                Stop::Interrupted("worker w1 drained and its grace of 30s ran out".into())
                    .end("while the agent ran")
                    .1,
                "drain",
            ),
            (
                ie,
                Stop::Interrupted("shutdown".into()).end("").1,
                "interrupted",
            ),
            (
                "cancelled",
                Stop::Cancelled.end("while grading").1,
                "cancelled",
            ),
        ];
        for (state, cause, class) in produced {
            assert_eq!(cause_class(state, &cause), class, "{state} {cause:?}");
        }
        // The worker's and the coordinator's own phrases (worker::orchestrator, runtime,
        // evaluator, daemon::grade; coordinator::workers_service).
        for (state, cause, class) in [
            ("completed", "", "none"),
            ("failed", "   ", "none"),
            (ie, "lease expired", "lease_expired"),
            (ie, "session broke", "session_broke"),
            ("cancelled", "cancelled while the agent ran", "cancelled"),
            ("invalid_configuration", "provider: the model provider refused the agent's credential: 401; fix: check", "provider_credential"),
            (ie, "provider: 503 service unavailable; the agent was stopped after 60s of provider failures", "provider_error"),
            (ie, "provider: the model provider kept failing", "provider_error"),
            ("completed", "grading tampered: tests/test_a.py was changed", "grading_tampered"),
            ("invalid_configuration", "cannot grade: no diff", "grading_refused"),
            ("completed", "the grader timed out while the agent's code ran; the same grader solves the task's reference solution, so this is the agent's failure", "no_verdict"),
            ("timeout", "the agent ran out of time after 600s and was stopped", "timeout"),
            ("failed", "the agent wrote more than its disk limit (disk_mb = 10) and was stopped", "limit_disk"),
            ("failed", "the agent went over its memory limit (memory_mb = 512): the kernel killed 1 process(es)", "limit_memory"),
            ("failed", "the agent tried to run more than 64 processes at once (3 fork(s) refused)", "limit_pids"),
            ("failed", "diff_too_large: the agent left a diff over its limit (diff_mb = 1)", "diff_too_large"),
            ("invalid_configuration", "the agent refused to start: bad flag; fix: check the descriptor's program", "agent_refused_start"),
            ("failed", "the agent exited with code 1", "agent_exit"),
            ("failed", "the agent was killed by signal 9", "agent_exit"),
            ("failed", "the agent ended without an exit status", "agent_exit"),
            ("failed", "the agent reported an error", "agent_error"),
            ("invalid_configuration", "failed to set up the sandbox's cgroups: permission denied", "sandbox"),
            ("invalid_configuration", "credential `ANTHROPIC_API_KEY` declared by agent `claude` is not set in the launching environment", "configuration"),
            ("invalid_configuration", "failed to load agent descriptor x.toml", "configuration"),
            ("evaluation_error", "the grader crashed", "grading_broken"),
            (ie, "failed to collect the agent's work: disk full", "infrastructure"),
            ("timeout", "something new", "timeout"),
            ("cancelled", "something new", "cancelled"),
            ("failed", "the", "other"),
            ("completed", "Failed to do a thing", "other"),
        ] {
            assert_eq!(cause_class(state, cause), class, "{state} {cause:?}");
        }
    }

    #[test]
    fn cause_classes_are_the_listed_bounded_set() {
        let states = [
            "completed",
            "failed",
            "timeout",
            "cancelled",
            "invalid_configuration",
            "evaluation_error",
            "infrastructure_error",
            "",
        ];
        let causes = [
            "",
            "x",
            "lease expired",
            "provider: 5",
            "sandbox",
            "é ∞",
            &"y".repeat(10_000),
        ];
        for s in states {
            for c in causes {
                let class = cause_class(s, c);
                assert!(CAUSE_CLASSES.contains(&class), "{class} not listed");
                assert!(
                    class.len() <= 32 && class.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                    "{class}"
                );
            }
        }
        let mut sorted = CAUSE_CLASSES.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), CAUSE_CLASSES.len(), "a class is listed twice");
    }

    #[test]
    fn the_documented_cause_classes_are_the_listed_ones() {
        let doc = include_str!("../../docs/observability.md");
        let start = doc
            .find("<!-- cause-classes -->")
            .expect("docs/observability.md has the cause table");
        let documented: Vec<&str> = doc[start..]
            .lines()
            .skip(3)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.split('`').nth(1))
            .collect();
        assert_eq!(
            documented,
            CAUSE_CLASSES.to_vec(),
            "docs/observability.md's cause table"
        );
    }

    #[test]
    fn a_trials_context_depends_on_its_key_only() {
        let a = trial_context("r/t/oracle/r1");
        assert_eq!(a, trial_context("r/t/oracle/r1"));
        assert_ne!(a.trace_id, trial_context("r/t/oracle/r2").trace_id);
        assert_ne!(a.trace_id, run_context("r/t/oracle/r1").trace_id);
        assert_eq!(a.trace_hex().len(), 32);
        assert_ne!(a.trace_id, [0; 16]);
        assert_ne!(a.span_id, [0; 8]);
    }

    #[test]
    fn openmetrics_becomes_text_0_0_4() {
        let om = "# HELP a_b Help.\n# TYPE a_b counter\n# UNIT a_b x\na_b_total 1\n\
                  # HELP g G.\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP a_b_total Help.\n# TYPE a_b_total counter\na_b_total 1\n\
             # HELP g G.\n# TYPE g gauge\ng 2\n"
        );
    }
}
