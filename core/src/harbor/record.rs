//! A Harbor trial result as the attempt of an akbench run record: the imported trial gets a
//! `run_record.json` like a trial akbench ran (one attempt, the outcome the import decided,
//! the tokens and cost Harbor reported), so `run compare`, `run report` and `view` open an
//! imported run. The attempt's transition log walks akbench's lifecycle to the phase where
//! its end can happen (the agent's outcomes after `executing`, a verifier failure after
//! `evaluating`, a verdict through `finalizing`), timed by Harbor's `started_at` and
//! `finished_at`. A multi-step trial's `step_results` become the attempt's `steps`.

use super::TrialResult;
use crate::accounting::Observation;
use crate::ids::attempt_key;
use crate::lifecycle::{State, CHAIN};
use crate::record::{
    AttemptRecord, Grade, Identity, Observations, Provenance, Transition, WorkspaceFacts,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The worker id of an imported attempt (Harbor ran it, not an akbench worker).
pub const HARBOR_WORKER: &str = "harbor";

/// The states an attempt ending in `end` passes through, `end` included.
pub fn path_to(end: State) -> Vec<State> {
    let last = match end {
        State::Completed | State::NotGraded => State::Finalizing,
        State::EvaluationError => State::Evaluating,
        State::Failed | State::Timeout | State::InvalidConfiguration => State::Executing,
        _ => State::Pending,
    };
    let i = CHAIN.iter().position(|s| *s == last).unwrap_or(0);
    let mut states = CHAIN[..=i].to_vec();
    states.push(end);
    states
}

/// The attempt record of Harbor result `r`, imported as observation `o` (its state, verdict
/// and score) of trial `trial_key`. `now` times a result that carries no timestamps. A
/// multi-step trial's steps are its `step_results` over the task's `planned` step names,
/// judged by `pass_threshold` (`super::steps`).
#[allow(clippy::too_many_arguments)]
pub fn attempt(
    r: &TrialResult,
    o: &Observation,
    planned: &[String],
    pass_threshold: f64,
    trial_key: &str,
    attempt_id: Uuid,
    tests_digest: &str,
    now: DateTime<Utc>,
) -> AttemptRecord {
    let started = r.started_at.or(r.finished_at).unwrap_or(now);
    let finished = r.finished_at.unwrap_or(started).max(started);
    let states = path_to(o.state);
    let n = states.len();
    let cause = r
        .exception_info
        .as_ref()
        .map(|e| format!("harbor: {}", e.exception_type));
    let transitions = states
        .into_iter()
        .enumerate()
        .map(|(i, state)| Transition {
            seq: u32::try_from(i).unwrap_or(u32::MAX),
            state,
            at: if i + 1 == n { finished } else { started },
            note: (i + 1 == n).then(|| format!("imported from Harbor trial {}", r.trial_name)),
        })
        .collect();
    let spend = super::spend(r).unwrap_or_default();
    let grade = (o.state == State::Completed).then(|| Grade {
        ok: o.ok == Some(true),
        score: o.score.unwrap_or(0.0),
        source: "harbor".into(),
        exit_code: None,
        tests: Vec::new(),
        report: format!("Harbor's verifier reward, trial {}", r.trial_name),
        report_truncated: false,
        tests_digest: tests_digest.to_string(),
        graded_at: finished,
        duration_ms: 0,
        runtime: None,
        cause: None,
        tampered: false,
        tripwire: None,
        withheld: Vec::new(),
        ended_by: None,
        environment: None,
    });
    let duration = u64::try_from((finished - started).num_milliseconds()).unwrap_or(0);
    AttemptRecord {
        services: Vec::new(),
        attempt: Identity {
            id: attempt_id,
            key: attempt_key(trial_key, 1),
        },
        number: 1,
        transitions,
        state: o.state,
        cause,
        workspace: WorkspaceFacts::default(),
        agent_process: None,
        observations: Observations {
            input_tokens: spend.input_tokens,
            cached_input_tokens: spend.cached_input_tokens,
            output_tokens: spend.output_tokens,
            cost_usd: spend.cost_usd,
            cost_computed: false,
            model: r
                .agent_info
                .as_ref()
                .and_then(|a| a.model_info.as_ref())
                .map(|m| m.name.clone()),
            reported_error: r.exception_info.as_ref().map(|_| true),
            error_text: r
                .exception_info
                .as_ref()
                .and_then(|e| e.exception_message.clone()),
            ..Observations::default()
        },
        timings_ms: [(State::Executing, duration)].into_iter().collect(),
        grade,
        artifacts_dir: "a1".into(),
        graded_from: None,
        redacted: Vec::new(),
        steps: super::steps::steps(r, planned, pass_threshold),
        provenance: Some(Provenance {
            worker_id: HARBOR_WORKER.into(),
            host: format!("harbor:{}", r.trial_name),
            adapter: r.agent_info.as_ref().map(|a| a.name.clone()),
            adapter_version: r.agent_info.as_ref().and_then(|a| a.version.clone()),
            agent_cli_version: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::{validate_path, ALL_STATES};

    #[test]
    fn every_terminal_state_has_a_valid_path() {
        for s in ALL_STATES.into_iter().filter(|s| s.is_terminal()) {
            let p = path_to(s);
            assert_eq!(p.last(), Some(&s));
            validate_path(&p).unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }
}
