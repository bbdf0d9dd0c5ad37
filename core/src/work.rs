//! The work item a coordinator hands a worker: one planned trial plus the exact agent
//! condition it runs under (the plan's trial carries only the agent's label and digest; the
//! spec holds the model and parameter overrides). Travels as canonical JSON with its digest.

use crate::digest::digest_of;
use crate::plan::PlannedTrial;
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
        Ok(w)
    }
}
