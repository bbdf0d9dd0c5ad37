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
        let w = &a.workspace;
        if w.tree_after_mutation.is_none()
            || w.tree_after_agent.is_none()
            || w.diff_path.is_none()
            || w.diff_digest.is_none()
        {
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
