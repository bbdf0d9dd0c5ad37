//! Turning a planned trial into the task and agent the orchestrator runs.
//!
//! The plan pins exact task releases and agent conditions; a trial only runs against the
//! very same ones. The task is loaded from the tasks root and must carry the planned release
//! digest; the agent's descriptor must carry the planned descriptor digest; the manifest's
//! overrides (label, model, parameters) and the planned compute limits are applied on top.

use akbench_core::agent::Agent;
use akbench_core::plan::PlannedTrial;
use akbench_core::spec::{ResolvedRunSpec, SpecAgent};
use akbench_core::task::{load_by_id, Task};
use std::path::Path;

/// What a planned trial runs.
#[derive(Debug, Clone)]
pub struct PreparedTrial {
    /// The task, with the planned time limits.
    pub task: Task,
    /// The agent, with the planned overrides.
    pub agent: Agent,
}

/// Why a planned trial cannot run here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to prepare trial {key}: {reason}")]
pub struct PrepareError {
    /// Trial key.
    pub key: String,
    /// What is wrong and what to do.
    pub reason: String,
}

/// The spec's agent condition for `trial`.
pub fn spec_agent<'a>(spec: &'a ResolvedRunSpec, trial: &PlannedTrial) -> Option<&'a SpecAgent> {
    spec.condition
        .agents
        .iter()
        .find(|a| a.label == trial.agent.label)
}

/// Loads and checks the task and agent of `trial`.
pub fn prepare(
    trial: &PlannedTrial,
    agent_condition: &SpecAgent,
    tasks_root: &Path,
    agents_root: &Path,
) -> Result<PreparedTrial, PrepareError> {
    let err = |reason: String| PrepareError {
        key: trial.key.clone(),
        reason,
    };
    let mut task = load_by_id(tasks_root, &trial.task.id).map_err(|e| err(e.to_string()))?;
    if task.release != trial.task {
        return Err(err(format!(
            "task `{}` changed since the run was planned (now {} {}, planned {} {}); re-plan the run or restore the task",
            trial.task.id, task.release.version, task.release.digest, trial.task.version, trial.task.digest
        )));
    }
    if let Some(planned) = &trial.task_source.image {
        // The image the plan resolved the task's tag to (docs/container.md).
        let pinned = akbench_core::image::ImageRef::parse(planned)
            .ok()
            .and_then(|p| p.digest)
            .ok_or_else(|| {
                err(format!(
                    "the plan's image `{planned}` is not pinned to a digest; re-plan the run"
                ))
            })?;
        task.pin_image(&pinned).map_err(err)?;
    }
    task.agent_timeout_sec = trial.compute.agent_timeout_sec;
    task.verifier_timeout_sec = trial.compute.verifier_timeout_sec;
    let mut agent = Agent::load(agents_root, &agent_condition.descriptor.name)
        .map_err(|e| err(e.to_string()))?;
    if agent.condition.descriptor_digest != agent_condition.descriptor.descriptor_digest {
        return Err(err(format!(
            "agent descriptor `{}` changed since the run was planned; re-plan the run or restore it",
            agent.name
        )));
    }
    agent.name = agent_condition.label.clone();
    agent.descriptor.model = agent_condition.model.clone();
    agent.descriptor.parameters = agent_condition.parameters.clone();
    agent.condition.name = agent_condition.label.clone();
    agent.condition.model = agent_condition.model.clone();
    agent.condition.digest = agent_condition.digest.clone();
    Ok(PreparedTrial { task, agent })
}
