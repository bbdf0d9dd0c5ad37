//! A trial's `run_record.json` assembled from what a coordinator stores: the resolved spec,
//! the planned trial, and each finished attempt either as its worker's accepted
//! [`AttemptRecord`] or, when that record never arrived (a lease that expired, a worker that
//! was lost), reconstructed from the transitions the coordinator stored and the terminal state
//! it decided. The result is the same document `run single` writes, so `run aggregate`,
//! `run evaluate` and reconciliation read exported runs like local ones.
//!
//! A `completed` attempt whose record has not arrived cannot be reconstructed (its grade is
//! in the record): the trial is refused until it arrives, never exported without it.

use crate::ids::attempt_key;
use crate::lifecycle::State;
use crate::plan::PlannedTrial;
use crate::record::{
    AttemptRecord, Identity, Observations, Provenance, RunOptions, RunRecord, TaskRef, Transition,
    WorkspaceFacts, SCHEMA_VERSION,
};
use crate::spec::ResolvedRunSpec;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One finished attempt of a trial as the coordinator stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAttempt {
    /// The attempt's UUID.
    pub id: Uuid,
    /// Its number, from 1.
    pub number: u32,
    /// The terminal state the coordinator decided.
    pub terminal: State,
    /// Why it ended so, when known.
    pub cause: Option<String>,
    /// When it finished.
    pub finished_at: DateTime<Utc>,
    /// The worker's accepted record, when it arrived.
    pub record: Option<AttemptRecord>,
    /// The transitions the coordinator stored (record numbering: from 0), used when there is
    /// no record.
    pub transitions: Vec<Transition>,
    /// The worker that held the attempt's lease, when the coordinator knows it.
    pub worker_id: Option<String>,
}

/// The host of a reconstructed attempt's worker: the coordinator does not know it.
pub const UNKNOWN_HOST: &str = "unknown (recorded by the coordinator)";

/// The note of a terminal transition the coordinator added to a reconstructed attempt.
pub const RECONSTRUCTED: &str = "recorded by the coordinator: the worker's record never arrived";

/// The attempt's record, or one reconstructed from the coordinator's own facts.
fn attempt_of(trial: &PlannedTrial, a: StoredAttempt) -> Result<AttemptRecord, String> {
    if let Some(r) = a.record {
        return Ok(r);
    }
    if a.terminal == State::Completed {
        return Err(format!(
            "attempt {} completed but its record (with the grade) has not arrived yet",
            a.number
        ));
    }
    let mut transitions = a.transitions;
    // The coordinator's log starts with an implicit `pending` (a worker may state it or not).
    if transitions.first().map(|t| t.state) != Some(State::Pending) {
        let at = transitions.first().map_or(a.finished_at, |t| t.at);
        transitions.insert(
            0,
            Transition {
                seq: 0,
                state: State::Pending,
                at,
                note: None,
            },
        );
        for (i, t) in transitions.iter_mut().enumerate() {
            t.seq = u32::try_from(i).unwrap_or(u32::MAX);
        }
    }
    if transitions.last().map(|t| t.state) != Some(a.terminal) {
        transitions.push(Transition {
            seq: u32::try_from(transitions.len()).unwrap_or(u32::MAX),
            state: a.terminal,
            at: a.finished_at,
            note: a.cause.clone(),
        });
    }
    // The terminal transition says the record is the coordinator's, not the worker's.
    if let Some(t) = transitions.last_mut() {
        t.note = Some(match t.note.take() {
            Some(n) if !n.is_empty() => format!("{n} ({RECONSTRUCTED})"),
            _ => RECONSTRUCTED.to_string(),
        });
    }
    Ok(AttemptRecord {
        services: Vec::new(),
        attempt: Identity {
            id: a.id,
            key: attempt_key(&trial.key, a.number),
        },
        number: a.number,
        transitions,
        state: a.terminal,
        cause: a.cause,
        workspace: WorkspaceFacts::default(),
        agent_process: None,
        observations: Observations::default(),
        timings_ms: Default::default(),
        grade: None,
        artifacts_dir: format!("a{}", a.number),
        graded_from: None,
        redacted: Vec::new(),
        steps: Vec::new(),
        // The coordinator knows which worker held the lease, not its host or what ran.
        provenance: a.worker_id.map(|worker_id| Provenance {
            worker_id,
            host: UNKNOWN_HOST.to_string(),
            ..Provenance::default()
        }),
    })
}

/// The trial's record: every finished attempt in order (numbered from 1 without gaps), the
/// task and agent condition from the spec, the options from the plan. Validated before it is
/// returned; an error says why the trial cannot be exported yet.
pub fn assemble(
    spec: &ResolvedRunSpec,
    trial: &PlannedTrial,
    attempts: Vec<StoredAttempt>,
    written_by: &str,
) -> Result<RunRecord, String> {
    build(spec, trial, attempts, None, written_by)
}

/// A trial its run cancelled (`reason`: `cancelled`, `budget`) at `at` before an attempt ran
/// to an end: exported too, `cancelled` with its reason and the attempts it had made (none
/// when it never started), so every planned trial of a cancelled run has its record.
pub fn assemble_cancelled(
    spec: &ResolvedRunSpec,
    trial: &PlannedTrial,
    attempts: Vec<StoredAttempt>,
    reason: &str,
    at: DateTime<Utc>,
    written_by: &str,
) -> Result<RunRecord, String> {
    build(spec, trial, attempts, Some((reason, at)), written_by)
}

fn build(
    spec: &ResolvedRunSpec,
    trial: &PlannedTrial,
    attempts: Vec<StoredAttempt>,
    cancelled: Option<(&str, DateTime<Utc>)>,
    written_by: &str,
) -> Result<RunRecord, String> {
    let task = spec
        .condition
        .tasks
        .iter()
        .find(|t| t.release == trial.task)
        .ok_or_else(|| format!("task release {} is not in the run's spec", trial.task.id))?;
    let agent = spec
        .condition
        .agents
        .iter()
        .find(|a| a.label == trial.agent.label)
        .ok_or_else(|| format!("agent `{}` is not in the run's spec", trial.agent.label))?;
    let attempts = attempts
        .into_iter()
        .map(|a| attempt_of(trial, a))
        .collect::<Result<Vec<_>, _>>()?;
    let first = attempts.first().and_then(|a| a.transitions.first());
    let last = attempts.last().and_then(|a| a.transitions.last());
    let (outcome, started_at, finished_at) = match cancelled {
        Some((reason, at)) => (
            crate::record::Outcome::cancelled(
                u32::try_from(attempts.len()).unwrap_or(u32::MAX),
                reason,
            ),
            first.map_or(at, |t| t.at),
            at,
        ),
        None => {
            let outcome = RunRecord::outcome_of(&attempts).ok_or("no attempt has finished")?;
            let (Some(started_at), Some(finished_at)) = (first.map(|t| t.at), last.map(|t| t.at))
            else {
                return Err("an attempt has no transitions".into());
            };
            (outcome, started_at, finished_at)
        }
    };
    let mut condition = agent.descriptor.clone();
    condition.name = agent.label.clone();
    condition.model = agent.model.clone();
    condition.digest = agent.digest.clone();
    let record = RunRecord {
        schema_version: SCHEMA_VERSION,
        run: Identity {
            id: spec.identity.run_id,
            key: spec.identity.run_key.clone(),
        },
        trial: Identity {
            id: trial.trial_id,
            key: trial.key.clone(),
        },
        task: TaskRef {
            release: task.release.clone(),
            family: task.family,
            repo: task.source_repo.clone(),
            commit: task.source_commit.clone(),
            mutation_digest: task.mutation_digest.clone(),
            // Workers always apply the task's mutation.
            mutation_applied: task.mutation_digest.is_some(),
            tests_digest: task.tests_digest.clone(),
            reference_digest: task.reference_digest.clone(),
            image: trial.task_source.image.clone(),
        },
        agent: condition,
        options: RunOptions {
            // What actually ran (observed by the worker), the plan's runtime only when no
            // agent process ran.
            runtime: attempts
                .iter()
                .rev()
                .find_map(|a| a.agent_process.as_ref()?.runtime.as_ref())
                .map(|r| r.name.clone())
                .unwrap_or_else(|| trial.compute.runtime.as_str().to_string()),
            infrastructure_retries: trial.attempt.infrastructure_retries,
            grade: trial.evaluation.grade,
            keep_workspace: false,
        },
        attempts,
        outcome,
        started_at,
        finished_at,
        written_by: written_by.to_string(),
        candidate: trial.candidate.clone(),
    };
    record.validate()?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::plan::plan;
    use crate::testkit::synthetic_spec;

    fn transitions(states: &[State]) -> Vec<Transition> {
        states
            .iter()
            .enumerate()
            .map(|(i, s)| Transition {
                seq: i as u32,
                state: *s,
                at: Utc::now(),
                note: None,
            })
            .collect()
    }

    fn stored(number: u32, terminal: State, states: &[State]) -> StoredAttempt {
        StoredAttempt {
            id: Uuid::now_v7(),
            number,
            terminal,
            cause: Some("lease expired".into()),
            finished_at: Utc::now(),
            record: None,
            transitions: transitions(states),
            worker_id: Some("w-lost".into()),
        }
    }

    #[test]
    fn a_lost_attempt_is_reconstructed_and_the_record_validates() {
        use State::*;
        let spec = synthetic_spec(1, 1, 1, &SystemClock);
        let trial = plan(&spec, &SystemClock).trials[0].clone();
        let lost = stored(
            1,
            InfrastructureError,
            &[Pending, Preparing, Validating, ConfiguringRuntime],
        );
        let mut failed = stored(2, Failed, &[]);
        let mut r = attempt_of(&trial, failed.clone()).unwrap();
        // pending .. executing, then the agent's failure.
        let mut path = crate::lifecycle::CHAIN[..7].to_vec();
        path.push(Failed);
        r.transitions = transitions(&path);
        failed.record = Some(r.clone());
        let record = assemble(&spec, &trial, vec![lost, failed], "test").unwrap();
        assert_eq!(record.attempts.len(), 2);
        let first = &record.attempts[0];
        assert_eq!(first.state, InfrastructureError);
        assert_eq!(
            first.transitions.len(),
            5,
            "the stored path plus the terminal"
        );
        let p = first.provenance.as_ref().unwrap();
        assert_eq!(
            (p.worker_id.as_str(), p.host.as_str()),
            ("w-lost", UNKNOWN_HOST)
        );
        assert_eq!(p.adapter, None, "nothing the coordinator did not see");
        let note = first.transitions[4].note.as_deref().unwrap();
        assert!(
            note.contains("lease expired") && note.contains(RECONSTRUCTED),
            "{note}"
        );
        // A stored log that already ends in the terminal state is marked, not extended.
        let ended = stored(1, InfrastructureError, &[Pending, InfrastructureError]);
        let marked = attempt_of(&trial, ended).unwrap();
        assert_eq!(marked.transitions.len(), 2);
        assert_eq!(marked.transitions[1].note.as_deref(), Some(RECONSTRUCTED));
        // A worker lost before it reported anything: the reaper's terminal transition alone.
        let silent = stored(1, InfrastructureError, &[InfrastructureError]);
        let rebuilt = attempt_of(&trial, silent).unwrap();
        let states: Vec<State> = rebuilt.transitions.iter().map(|t| t.state).collect();
        assert_eq!(states, [Pending, InfrastructureError]);
        assert_eq!(rebuilt.transitions[1].seq, 1);
        assert_eq!(record.attempts[1], r, "an accepted record is kept as it is");
        assert_eq!(record.outcome.state, Failed);
        assert_eq!(record.outcome.ok, None);
        assert_eq!(record.trial.key, trial.key);
        assert_eq!(record.agent.name, trial.agent.label);
    }

    /// For every state a worker's reports can leave an attempt in (each reached by its
    /// shortest path of worker steps, the coordinator's own check), the history the reaper
    /// writes when it takes the lease back ([`crate::dispatch::close_lost`]) and the history
    /// of a finish the coordinator accepts are both exported: the record assembly accepts
    /// every history the coordinator can write.
    #[test]
    fn every_history_the_coordinator_writes_is_exported() {
        use crate::dispatch::close_lost;
        use crate::lifecycle::{is_worker_step, ALL_STATES};
        let spec = synthetic_spec(1, 1, 1, &SystemClock);
        let trial = plan(&spec, &SystemClock).trials[0].clone();
        // Shortest worker path from the implicit start to each state.
        let mut paths: Vec<Vec<State>> = vec![vec![State::Pending]];
        let mut queue = std::collections::VecDeque::from([vec![State::Pending]]);
        while let Some(path) = queue.pop_front() {
            let at = *path.last().unwrap();
            for to in ALL_STATES {
                if is_worker_step(at, to) && !paths.iter().any(|p| p.last() == Some(&to)) {
                    let mut next = path.clone();
                    next.push(to);
                    paths.push(next.clone());
                    queue.push_back(next);
                }
            }
        }
        assert_eq!(paths.len(), ALL_STATES.len(), "every state is reachable");
        let export = |stored_states: &[State], terminal: State| {
            let mut a = stored(1, terminal, stored_states);
            a.cause = Some("lease expired".into());
            assemble(&spec, &trial, vec![a], "test")
        };
        for path in &paths {
            let state = *path.last().unwrap();
            // The reaper takes the lease back: its step is appended to what is stored.
            let close = close_lost(state);
            let mut reaped = path.clone();
            reaped.extend(close.step);
            let r = export(&reaped, close.terminal)
                .unwrap_or_else(|e| panic!("reaped after {path:?}: {e}"));
            assert_eq!(r.outcome.state, State::InfrastructureError);
            // What a reaper that appended nothing left (stored before this rule): exported
            // too, the terminal added by the assembly.
            export(path, close.terminal)
                .unwrap_or_else(|e| panic!("reaped (old) after {path:?}: {e}"));
            // A finish the coordinator accepts (the same state, or a worker step to it);
            // `completed` is exported with its record only, checked on its own below.
            for terminal in ALL_STATES.into_iter().filter(|t| t.is_terminal()) {
                if terminal == State::Completed {
                    continue;
                }
                if state == terminal || is_worker_step(state, terminal) {
                    let mut finished = path.clone();
                    if state != terminal {
                        finished.push(terminal);
                    }
                    export(&finished, terminal)
                        .unwrap_or_else(|e| panic!("{terminal} after {path:?}: {e}"));
                }
            }
        }
        // The case of the issue: `completed` reported, the worker killed before its record,
        // the lease reaped, a second attempt graded: the trial exports both attempts.
        let completed = paths
            .iter()
            .find(|p| p.last() == Some(&State::Completed))
            .unwrap();
        let mut lost = completed.clone();
        lost.extend(close_lost(State::Completed).step);
        let lost = stored(1, State::InfrastructureError, &lost);
        let mut second = stored(2, State::Completed, completed);
        second.record = Some(crate::testkit::attempt_record(
            second.id,
            &trial.key,
            2,
            State::Completed,
            Some(true),
        ));
        let r = assemble(&spec, &trial, vec![lost, second], "test").unwrap();
        let states: Vec<State> = r.attempts.iter().map(|a| a.state).collect();
        assert_eq!(states, [State::InfrastructureError, State::Completed]);
        assert_eq!(r.outcome.ok, Some(true));
    }

    #[test]
    fn a_completed_attempt_without_its_record_is_refused() {
        let spec = synthetic_spec(1, 1, 1, &SystemClock);
        let trial = plan(&spec, &SystemClock).trials[0].clone();
        let err = assemble(
            &spec,
            &trial,
            vec![stored(1, State::Completed, &[State::Pending])],
            "test",
        )
        .unwrap_err();
        assert!(err.contains("has not arrived"), "{err}");
        let err = assemble(&spec, &trial, vec![], "test").unwrap_err();
        assert!(err.contains("no attempt"), "{err}");
    }

    #[test]
    fn a_cancelled_trial_is_a_record_with_its_reason_and_no_attempt() {
        use State::*;
        let spec = synthetic_spec(1, 1, 1, &SystemClock);
        let trial = plan(&spec, &SystemClock).trials[0].clone();
        let at = Utc::now();
        let r = assemble_cancelled(&spec, &trial, vec![], "cancelled", at, "test").unwrap();
        assert!(r.attempts.is_empty());
        assert_eq!(r.outcome.state, Cancelled);
        assert_eq!(r.outcome.attempts, 0);
        assert_eq!(r.outcome.cancelled.as_deref(), Some("cancelled"));
        assert_eq!(r.cause().as_deref(), Some("cancelled"));
        assert_eq!((r.started_at, r.finished_at), (at, at));
        // It reads back and validates like any record.
        let back: RunRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        back.validate().unwrap();
        // Waiting for a retry when cancelled: its earlier attempt is kept, the outcome is
        // the cancellation's.
        let lost = stored(1, InfrastructureError, &[Pending, InfrastructureError]);
        let r = assemble_cancelled(&spec, &trial, vec![lost], "budget", at, "test").unwrap();
        assert_eq!(r.attempts.len(), 1);
        assert_eq!(r.outcome, crate::record::Outcome::cancelled(1, "budget"));
        assert_eq!(
            r.cause().as_deref(),
            Some("budget"),
            "the reason, not the attempt's"
        );
        let mut done = r.clone();
        done.outcome.cancelled = None;
        done.attempts[0].cause = Some("provider: 503".into());
        assert_eq!(done.cause().as_deref(), Some("provider: 503"));
        // Without the reason, an empty record stays refused.
        let mut bad = r.clone();
        bad.attempts.clear();
        bad.outcome.cancelled = None;
        bad.outcome.attempts = 0;
        assert!(bad.validate().unwrap_err().contains("no attempts"));
    }
}
