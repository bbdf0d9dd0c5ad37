//! The Harbor transport, pure halves: what an exported trial carries (its planned UUID is
//! the name of its task folder) and how a Harbor trial's `result.json` becomes an akbench
//! [`Observation`]: rewards to verdicts, Harbor's exception types to akbench's states.
//!
//! Harbor (the Terminal-Bench 2.0 harness) writes one `result.json` per trial
//! (`TrialResult`): `trial_name`, `task_name`, `config.task.path`, `verifier_result.rewards`
//! (a map of numbers), `exception_info.exception_type` and `agent_result` (tokens, cost).
//! Exception types are classified as Harbor 0.25's own error policy classifies them
//! ([`HARBOR_POLICY`]), then mapped to akbench's states (docs/harbor.md has the table): what
//! Harbor counts as the agent's outcome (its budget spent, the task refused) is graded by the
//! reward; an exception type Harbor does not classify is an infrastructure error (never the
//! agent's failure) and is named in the import's report.

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
    /// The task's steps (`[[steps]]` names, in order); empty for a one-step task. The
    /// import gives a step Harbor left no result for as `not_run`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
}

/// `akbench-harbor.json`: what an export holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportManifest {
    /// Always [`EXPORT_SCHEMA`].
    pub schema: String,
    /// The pinned image (`REF@sha256:DIGEST`) every environment exported from its baseline
    /// starts from (absent in exports made before it was recorded, and when every task was
    /// exported from its own image).
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
    /// What the agent spent, when it reported it.
    #[serde(default)]
    pub agent_result: Option<AgentResult>,
    /// The agent Harbor ran (name, version, model).
    #[serde(default)]
    pub agent_info: Option<AgentInfo>,
    /// When the trial started.
    #[serde(default)]
    pub started_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When the trial ended.
    #[serde(default)]
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A multi-step trial's steps (`[[steps]]`): Harbor records their spend and their
    /// failures there, not at the top level.
    #[serde(default)]
    pub step_results: Option<Vec<StepResult>>,
}

/// One of `step_results` (Harbor's `StepResult`, harbor/models/trial/result.py).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StepResult {
    /// The step's name.
    pub step_name: String,
    /// What the step's agent spent.
    #[serde(default)]
    pub agent_result: Option<AgentResult>,
    /// The step's rewards, when it was graded.
    #[serde(default)]
    pub verifier_result: Option<VerifierResult>,
    /// The exception that ended the step, when one did.
    #[serde(default)]
    pub exception_info: Option<ExceptionInfo>,
    /// When the step's agent ran.
    #[serde(default)]
    pub agent_execution: Option<TimingInfo>,
    /// When the step was graded.
    #[serde(default)]
    pub verifier: Option<TimingInfo>,
}

/// Harbor's `TimingInfo`: when a phase started and finished.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TimingInfo {
    /// Start.
    #[serde(default)]
    pub started_at: Option<chrono::DateTime<chrono::Utc>>,
    /// End.
    #[serde(default)]
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The exception that decides a trial's failure: the trial's own, else the first step's in
/// step order (`TrialResult._recorded_exceptions` and `failure_cause`: a multi-step trial
/// records its handled failures on the step).
pub fn exception(r: &TrialResult) -> Option<&ExceptionInfo> {
    r.exception_info.as_ref().or_else(|| {
        r.step_results
            .iter()
            .flatten()
            .find_map(|s| s.exception_info.as_ref())
    })
}

/// `agent_info`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AgentInfo {
    /// Harbor's agent name.
    pub name: String,
    /// Its version.
    #[serde(default)]
    pub version: Option<String>,
    /// The model it drove.
    #[serde(default)]
    pub model_info: Option<ModelInfo>,
}

/// `agent_info.model_info`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModelInfo {
    /// The model's name.
    pub name: String,
}

/// `agent_result` (Harbor's `AgentContext`): tokens and cost.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AgentResult {
    /// Input tokens, the cached ones included.
    #[serde(default)]
    pub n_input_tokens: Option<u64>,
    /// Cached input tokens.
    #[serde(default)]
    pub n_cache_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default)]
    pub n_output_tokens: Option<u64>,
    /// Cost in US dollars.
    #[serde(default)]
    pub cost_usd: Option<f64>,
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

/// Who or what ended a Harbor trial: Harbor 0.25's own classification of exception types
/// (`harbor.models.trial.error_policy.FailureCause`), mirrored exactly by [`cause_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCause {
    /// The environment (sandbox) failed: not graded.
    SandboxFailed,
    /// The model provider failed.
    ModelProviderFailed,
    /// Harbor itself failed.
    HarborFailed,
    /// Not classified (`NonZeroAgentExitCodeError`, and every type Harbor does not list).
    Unclassified,
    /// The agent spent its budget (time, context, output): its reward is a valid measurement.
    AgentExhaustedBudget,
    /// The agent refused the task: its reward is a valid measurement.
    AgentRefusedTask,
    /// The verifier failed.
    VerifierFailed,
    /// Cancelled.
    Cancelled,
}

/// Harbor 0.25's exception types and their causes (`_POLICY_GROUPS` in
/// `harbor/models/trial/error_policy.py`); `scripts/check-harbor-export` checks this table
/// against Harbor's own.
pub const HARBOR_POLICY: &[(&str, FailureCause)] = {
    use FailureCause::*;
    &[
        ("EnvironmentStartTimeoutError", SandboxFailed),
        ("SandboxBuildFailedError", SandboxFailed),
        ("AgentSetupTimeoutError", SandboxFailed),
        ("HealthcheckError", SandboxFailed),
        ("SandboxLikelyOutOfMemoryError", SandboxFailed),
        ("MemoryLimitExceededError", SandboxFailed),
        ("SSHAccessError", SandboxFailed),
        ("GKEExecStreamClosedError", SandboxFailed),
        ("GKEPodNotFoundError", SandboxFailed),
        ("RuntimeRequestError", SandboxFailed),
        ("AddTestsDirError", SandboxFailed),
        ("DownloadVerifierDirError", SandboxFailed),
        ("ApiError", ModelProviderFailed),
        ("ApiRateLimitError", ModelProviderFailed),
        ("ApiInternalServerError", ModelProviderFailed),
        ("ApiOverloadedError", ModelProviderFailed),
        ("ApiConnectionClosedError", ModelProviderFailed),
        ("ApiResponseStalledError", ModelProviderFailed),
        ("UnknownApiError", ModelProviderFailed),
        ("NetworkConnectionError", ModelProviderFailed),
        ("ApiConnectionError", ModelProviderFailed),
        ("ApiUsageLimitError", ModelProviderFailed),
        ("RateLimitError", ModelProviderFailed),
        ("InternalServerError", ModelProviderFailed),
        ("ServiceUnavailableError", ModelProviderFailed),
        ("APIConnectionError", ModelProviderFailed),
        ("APIError", ModelProviderFailed),
        ("Timeout", ModelProviderFailed),
        ("BadRequestError", ModelProviderFailed),
        ("UnprocessableEntityError", ModelProviderFailed),
        ("UnsupportedParamsError", ModelProviderFailed),
        ("APIResponseValidationError", ModelProviderFailed),
        ("BudgetExceededError", ModelProviderFailed),
        ("AgentAuthenticationError", ModelProviderFailed),
        ("ModelNotFoundError", ModelProviderFailed),
        ("ApiProviderResourceNotFoundError", ModelProviderFailed),
        ("AuthenticationError", ModelProviderFailed),
        ("PermissionDeniedError", ModelProviderFailed),
        ("NotFoundError", ModelProviderFailed),
        ("ServiceOperationsUnsupportedError", HarborFailed),
        ("VercelScopeError", HarborFailed),
        ("DspyImportError", HarborFailed),
        ("MissingExtraError", HarborFailed),
        ("RegradeError", HarborFailed),
        ("NonZeroAgentExitCodeError", Unclassified),
        ("AgentTimeoutError", AgentExhaustedBudget),
        ("ContextWindowExceededError", AgentExhaustedBudget),
        ("OutputTokenExceededError", AgentExhaustedBudget),
        ("ContextLengthExceededError", AgentExhaustedBudget),
        ("OutputLengthExceededError", AgentExhaustedBudget),
        ("AgentSafetyRefusalError", AgentRefusedTask),
        ("ContentPolicyViolationError", AgentRefusedTask),
        ("VerifierTimeoutError", VerifierFailed),
        ("RewardFileNotFoundError", VerifierFailed),
        ("RewardFileEmptyError", VerifierFailed),
        ("VerifierOutputParseError", VerifierFailed),
        ("CancelledError", Cancelled),
    ]
};

/// Harbor's cause of an exception type (`policy_for`: a type it does not list is
/// unclassified).
pub fn cause_of(exception_type: &str) -> FailureCause {
    HARBOR_POLICY
        .iter()
        .find(|(t, _)| *t == exception_type)
        .map_or(FailureCause::Unclassified, |(_, c)| *c)
}

/// The model-provider failures that name a model or resource the provider does not have:
/// the run's configuration is wrong, not the provider down.
const NOT_FOUND: &[&str] = &[
    "ModelNotFoundError",
    "ApiProviderResourceNotFoundError",
    "NotFoundError",
];

/// How an exception ends a trial in akbench: `Some(state)`, or `None` when Harbor counts the
/// reward as the agent's valid outcome (the budget spent or the task refused: the verdict
/// comes from the reward, `failed` without one); with why.
pub fn state_of_exception(exception_type: &str) -> (Option<State>, &'static str) {
    use FailureCause::*;
    match (exception_type, cause_of(exception_type)) {
        ("AgentTimeoutError", _) => (Some(State::Timeout), "agent timeout"),
        (_, AgentExhaustedBudget) => (None, "the agent exhausted its budget"),
        (_, AgentRefusedTask) => (None, "the agent refused the task"),
        ("NonZeroAgentExitCodeError", _) => (Some(State::Failed), "the agent failed"),
        (_, VerifierFailed) => (Some(State::EvaluationError), "verifier failure"),
        (_, Cancelled) => (Some(State::Cancelled), "cancelled"),
        (t, ModelProviderFailed) if NOT_FOUND.contains(&t) => {
            (Some(State::InvalidConfiguration), "model not found")
        }
        (_, ModelProviderFailed) => (Some(State::InfrastructureError), "provider failure"),
        (_, SandboxFailed) => (
            Some(State::InfrastructureError),
            "environment or setup failure",
        ),
        (_, HarborFailed) => (Some(State::InfrastructureError), "harbor failure"),
        (_, Unclassified) => (Some(State::InfrastructureError), "unmapped exception type"),
    }
}

/// What a Harbor trial's agent spent: its `agent_result`, or for a multi-step trial the sum
/// of its steps' (`TrialResult.compute_token_cost_totals`: a total is absent when no step
/// reported it). Harbor's `n_input_tokens` includes the cached ones, akbench's
/// `input_tokens` does not.
pub fn spend(r: &TrialResult) -> Option<crate::spend::Spend> {
    let contexts: Vec<&AgentResult> = match (&r.agent_result, &r.step_results) {
        (Some(a), _) => vec![a],
        (None, Some(steps)) => steps
            .iter()
            .filter_map(|s| s.agent_result.as_ref())
            .collect(),
        (None, None) => Vec::new(),
    };
    if contexts.is_empty() {
        return None;
    }
    let sum = |f: fn(&AgentResult) -> Option<u64>| {
        contexts
            .iter()
            .filter_map(|a| f(a))
            .fold(None, |acc: Option<u64>, n| {
                Some(acc.unwrap_or(0).saturating_add(n))
            })
    };
    let n_input = sum(|a| a.n_input_tokens);
    let n_cache = sum(|a| a.n_cache_tokens);
    let cost = contexts
        .iter()
        .filter_map(|a| a.cost_usd)
        .fold(None, |acc: Option<f64>, c| Some(acc.unwrap_or(0.0) + c));
    let s = crate::spend::Spend {
        input_tokens: n_input.map(|n| n.saturating_sub(n_cache.unwrap_or(0))),
        cached_input_tokens: n_cache,
        output_tokens: sum(|a| a.n_output_tokens),
        cost_usd: cost.filter(|c| c.is_finite()),
    };
    (s != crate::spend::Spend::default()).then_some(s)
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
    let (state, ok, score, why) = match (exception(r), rewards.and_then(reward)) {
        (Some(e), x) => match state_of_exception(&e.exception_type) {
            (Some(s), why) => (s, None, None, why),
            (None, why) => match x.filter(|x| x.is_finite()) {
                Some(x) => (State::Completed, Some(x >= pass_threshold), Some(x), why),
                None => (State::Failed, None, None, why),
            },
        },
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

pub mod layout_toml;
pub mod record;
pub mod steps;

#[cfg(test)]
mod tests;
