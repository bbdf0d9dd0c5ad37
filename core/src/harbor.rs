//! The Harbor transport, pure halves: what an exported trial carries (its planned UUID is
//! the name of its task folder) and how a Harbor trial's `result.json` becomes an akbench
//! [`Observation`]: rewards to verdicts, Harbor's exception types to akbench's states.
//!
//! Harbor (the Terminal-Bench 2.0 harness) writes one `result.json` per trial
//! (`TrialResult`): `trial_name`, `task_name`, `config.task.path`, `verifier_result.rewards`
//! (a map of numbers) and `exception_info.exception_type`. The mapping is documented in
//! docs/harbor.md; an exception type this table does not know is an infrastructure error
//! (never the agent's failure) and is named in the import's report.

use crate::accounting::Observation;
use crate::lifecycle::State;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// Schema tag of the export manifest (`akbench-harbor.json`).
pub const EXPORT_SCHEMA: &str = "akbench.harbor-export/v1";
/// File name of the export manifest.
pub const EXPORT_MANIFEST: &str = "akbench-harbor.json";

/// One exported trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedTrial {
    /// Planned trial UUID (also the name of its task folder).
    pub trial_id: Uuid,
    /// Trial key.
    pub key: String,
    /// Plan ordinal.
    pub ordinal: u64,
    /// Task id.
    pub task: String,
    /// Agent label.
    pub agent: String,
    /// Repetition.
    pub repetition: u32,
    /// Reward at or above which the trial counts as solved.
    pub pass_threshold: f64,
    /// Task folder, relative to the export folder (`trials/<uuid>`).
    pub path: String,
    /// Job configuration holding it, relative to the export folder.
    pub job: String,
}

/// `akbench-harbor.json`: what an export holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportManifest {
    /// Always [`EXPORT_SCHEMA`].
    pub schema: String,
    /// The pinned image (`REF@sha256:DIGEST`) every exported environment starts from (absent
    /// in exports made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
    /// Run key.
    pub run_key: String,
    /// Run UUID.
    pub run_id: Uuid,
    /// Digest of the ready plan exported.
    pub plan_digest: String,
    /// The trials, in plan order.
    pub trials: Vec<ExportedTrial>,
}

/// The parts of Harbor's `TrialResult` that the import reads (other fields are ignored).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TrialResult {
    /// Harbor's trial name (`<task>__<short id>`).
    pub trial_name: String,
    /// Task name from the task's `task.toml`.
    #[serde(default)]
    pub task_name: Option<String>,
    /// The trial configuration (`task.path` names the exported task folder).
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// The verifier's rewards, when it ran.
    #[serde(default)]
    pub verifier_result: Option<VerifierResult>,
    /// The exception that ended the trial, when one did.
    #[serde(default)]
    pub exception_info: Option<ExceptionInfo>,
}

/// `verifier_result`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VerifierResult {
    /// Reward name -> value.
    #[serde(default)]
    pub rewards: Option<BTreeMap<String, f64>>,
}

/// `exception_info`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ExceptionInfo {
    /// The exception's class name, e.g. `AgentTimeoutError`.
    pub exception_type: String,
    /// Its message.
    #[serde(default)]
    pub exception_message: Option<String>,
}

/// The planned trial UUID a result belongs to: the last component of `config.task.path`.
pub fn trial_id(r: &TrialResult) -> Result<Uuid, String> {
    let path = r
        .config
        .as_ref()
        .and_then(|c| c.get("task"))
        .and_then(|t| t.get("path"))
        .and_then(serde_json::Value::as_str)
        .ok_or("it has no `config.task.path`")?;
    let last = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    Uuid::parse_str(last).map_err(|_| {
        format!("its task path `{path}` does not end in a planned trial UUID (not exported by akbench run export-harbor)")
    })
}

/// How an exception type maps to a state, and why.
pub fn state_of_exception(exception_type: &str) -> (State, &'static str) {
    match exception_type {
        "AgentTimeoutError" => (State::Timeout, "agent timeout"),
        "VerifierTimeoutError"
        | "RewardFileNotFoundError"
        | "RewardFileEmptyError"
        | "VerifierOutputParseError" => (State::EvaluationError, "verifier failure"),
        "NonZeroAgentExitCodeError"
        | "ContextWindowExceededError"
        | "OutputTokenExceededError"
        | "AgentSafetyRefusalError" => (State::Failed, "the agent failed"),
        "CancelledError" => (State::Cancelled, "cancelled"),
        "ModelNotFoundError" => (State::InvalidConfiguration, "model not found"),
        "ApiRateLimitError"
        | "ApiUsageLimitError"
        | "ApiInternalServerError"
        | "ApiOverloadedError"
        | "AgentAuthenticationError"
        | "NetworkConnectionError" => (State::InfrastructureError, "provider failure"),
        t if t.contains("Environment")
            || t.contains("Setup")
            || t.contains("Healthcheck")
            || t.contains("Docker")
            || t.contains("Build") =>
        {
            (State::InfrastructureError, "environment or setup failure")
        }
        _ => (State::InfrastructureError, "unmapped exception type"),
    }
}

/// The single reward of a rewards map: `reward` when present, else the only value.
pub fn reward(rewards: &BTreeMap<String, f64>) -> Option<f64> {
    rewards.get("reward").copied().or_else(|| {
        let mut values = rewards.values();
        match (values.next(), values.next()) {
            (Some(v), None) => Some(*v),
            _ => None,
        }
    })
}

/// A Harbor result as an observation of `trial_id`, with a note saying why.
///
/// An exception decides the state (the verifier's rewards after an agent timeout or a
/// failed agent are not a verdict: the agent did not finish); without one, the reward is the
/// verdict (`ok` = reward >= `pass_threshold`); no reward, or several without one named
/// `reward`, is an evaluation error.
pub fn observation(
    r: &TrialResult,
    trial_id: Uuid,
    pass_threshold: f64,
) -> (Observation, &'static str) {
    let rewards = r.verifier_result.as_ref().and_then(|v| v.rewards.as_ref());
    let (state, ok, score, why) = match (&r.exception_info, rewards.and_then(reward)) {
        (Some(e), _) => {
            let (s, why) = state_of_exception(&e.exception_type);
            (s, None, None, why)
        }
        (None, Some(x)) if x.is_finite() => (
            State::Completed,
            Some(x >= pass_threshold),
            Some(x),
            "verdict from the reward",
        ),
        (None, _) => (
            State::EvaluationError,
            None,
            None,
            "no usable reward and no exception",
        ),
    };
    (
        Observation {
            trial_id,
            state,
            ok,
            score,
            attempt_id: None,
            source: Some(format!("harbor:{}", r.trial_name)),
        },
        why,
    )
}

#[cfg(test)]
mod tests;
