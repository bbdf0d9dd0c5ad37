//! The work item a coordinator hands a worker: one planned trial plus the exact agent
//! condition it runs under (the plan's trial carries only the agent's label and digest; the
//! spec holds the model and parameter overrides). Travels as canonical JSON with its digest.
//!
//! A grade work item also carries the accepted record of the attempt to grade: the worker
//! rebuilds that attempt's workspace from the record (pinned commit, mutation, the agent's
//! stored diff) and grades it; it never runs the agent.

use crate::digest::digest_of;
use crate::lifecycle::{apply, Event};
use crate::plan::PlannedTrial;
use crate::record::AttemptRecord;
use crate::spec::SpecAgent;
use serde::{Deserialize, Serialize};

pub use crate::lifecycle::WorkKind;

/// What a worker runs for one assignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkItem {
    /// The planned trial.
    pub trial: PlannedTrial,
    /// The agent condition of the trial (label, descriptor condition, model, parameters).
    pub agent: SpecAgent,
    /// For a grade work item: the executed attempt to grade. Absent for execute work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<GradeSource>,
}

/// The recorded attempt a grade work item grades.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradeSource {
    /// The accepted record of the attempt, as the coordinator stored it.
    pub attempt: AttemptRecord,
}

impl GradeSource {
    /// Checks that the recorded attempt can be graded: a valid transition log ending in a
    /// state grading may leave (`not_graded`, `completed`, `evaluation_error`), with the
    /// fingerprints and the diff that rebuild its workspace, numbered before `number` (the
    /// grading attempt's own number).
    pub fn check(&self, number: u32) -> Result<(), String> {
        let a = &self.attempt;
        let states: Vec<_> = a.transitions.iter().map(|t| t.state).collect();
        crate::lifecycle::validate_path(&states)
            .map_err(|e| format!("the recorded attempt {}: {e}", a.attempt.key))?;
        if states.last() != Some(&a.state) {
            return Err(format!(
                "the recorded attempt {}: state {} is not the end of its transition log",
                a.attempt.key, a.state
            ));
        }
        if apply(a.state, Event::Regrade).is_err() {
            return Err(format!(
                "the recorded attempt {} ended `{}`: only an executed attempt (not_graded, completed, evaluation_error) can be graded",
                a.attempt.key, a.state
            ));
        }
        if a.number >= number {
            return Err(format!(
                "the recorded attempt {} is number {}, not before the grading attempt {number}",
                a.attempt.key, a.number
            ));
        }
        if a.workspace.recorded_change().is_none() {
            return Err(format!(
                "the recorded attempt {} has no fingerprints or diff to rebuild its workspace from",
                a.attempt.key
            ));
        }
        Ok(())
    }
}

impl WorkItem {
    /// Canonical JSON and its digest.
    pub fn encode(&self) -> (String, String) {
        (crate::digest::canonical_json(self), digest_of(self))
    }

    /// Parses a work item and checks its digest and that the agent matches the trial.
    pub fn decode(json: &str, digest: &str) -> Result<WorkItem, String> {
        let w: WorkItem =
            serde_json::from_str(json).map_err(|e| format!("the work item does not parse: {e}"))?;
        if digest_of(&w) != digest {
            return Err("the work item does not match its digest".into());
        }
        if w.agent.label != w.trial.agent.label {
            return Err(format!(
                "the work item's agent `{}` is not the trial's `{}`",
                w.agent.label, w.trial.agent.label
            ));
        }
        if let Some(g) = &w.grade {
            if g.attempt.graded_from.is_some() {
                return Err(format!(
                    "the attempt to grade, {}, is itself a grading attempt; grade the executed attempt",
                    g.attempt.attempt.key
                ));
            }
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::State;
    use crate::record::{Identity, Observations, Transition, WorkspaceFacts};
    use chrono::Utc;
    use uuid::Uuid;

    /// An attempt numbered 1 that took `path` (from pending), with a recorded diff.
    fn attempt(path: &[State]) -> AttemptRecord {
        let at = Utc::now();
        AttemptRecord {
            services: Vec::new(),
            attempt: Identity {
                id: Uuid::now_v7(),
                key: "run/t/a/r1/a1".into(),
            },
            number: 1,
            transitions: path
                .iter()
                .enumerate()
                .map(|(i, s)| Transition {
                    seq: i as u32,
                    state: *s,
                    at,
                    note: None,
                })
                .collect(),
            state: *path.last().unwrap(),
            cause: None,
            workspace: WorkspaceFacts {
                tree_after_mutation: Some("t0".into()),
                tree_after_agent: Some("t1".into()),
                diff_path: Some("a1/agent.diff".into()),
                diff_digest: Some("sha256:00".into()),
                ..WorkspaceFacts::default()
            },
            agent_process: None,
            observations: Observations::default(),
            timings_ms: Default::default(),
            grade: None,
            artifacts_dir: "a1".into(),
            graded_from: None,
            redacted: Vec::new(),
            steps: Vec::new(),
            provenance: None,
        }
    }

    /// The happy path up to EXECUTING, then `tail`.
    fn executed(tail: &[State]) -> AttemptRecord {
        // CHAIN[..7]: pending .. executing.
        let mut p = crate::lifecycle::CHAIN[..7].to_vec();
        p.extend_from_slice(tail);
        attempt(&p)
    }

    #[test]
    fn only_executed_attempts_with_a_diff_are_gradable() {
        use State::*;
        let ungraded = executed(&[Collecting, Evaluating, Finalizing, NotGraded]);
        let cases: Vec<(&str, AttemptRecord, bool)> = vec![
            ("not graded", ungraded.clone(), true),
            (
                "evaluation error",
                executed(&[Collecting, Evaluating, EvaluationError]),
                true,
            ),
            ("agent failed", executed(&[Failed]), false),
            ("timed out", executed(&[Timeout]), false),
            ("cancelled", executed(&[Cancelled]), false),
            ("infrastructure", executed(&[InfrastructureError]), false),
            (
                "never started",
                attempt(&[Pending, InvalidConfiguration]),
                false,
            ),
            (
                "no diff",
                {
                    let mut a = ungraded.clone();
                    a.workspace.diff_path = None;
                    a
                },
                false,
            ),
            (
                "log does not end in its state",
                {
                    let mut a = ungraded.clone();
                    a.state = Completed;
                    a
                },
                false,
            ),
            (
                "invalid log",
                {
                    let mut a = ungraded.clone();
                    a.transitions.remove(3);
                    a
                },
                false,
            ),
        ];
        for (name, a, ok) in cases {
            let got = GradeSource { attempt: a }.check(2);
            assert_eq!(got.is_ok(), ok, "{name}: {got:?}");
        }
        // The grading attempt comes after the one it grades.
        let err = GradeSource { attempt: ungraded }.check(1).unwrap_err();
        assert!(err.contains("not before"), "{err}");
    }

    #[test]
    fn a_work_item_never_grades_a_grading_attempt() {
        let spec = crate::testkit::synthetic_spec(1, 1, 1, &crate::clock::SystemClock);
        let trial = crate::plan::plan(&spec, &crate::clock::SystemClock).trials[0].clone();
        let agent = spec.condition.agents[0].clone();
        let mut source = executed(&[
            State::Collecting,
            State::Evaluating,
            State::Finalizing,
            State::NotGraded,
        ]);
        let plain = WorkItem {
            trial: trial.clone(),
            agent: agent.clone(),
            grade: None,
        };
        let (json, digest) = plain.encode();
        assert!(
            !json.contains("\"grade\":{"),
            "execute work carries no grade field"
        );
        assert_eq!(WorkItem::decode(&json, &digest).unwrap(), plain);
        source.graded_from = Some(source.attempt.clone());
        let w = WorkItem {
            trial,
            agent,
            grade: Some(GradeSource { attempt: source }),
        };
        let (json, digest) = w.encode();
        let err = WorkItem::decode(&json, &digest).unwrap_err();
        assert!(err.contains("itself a grading attempt"), "{err}");
    }
}
