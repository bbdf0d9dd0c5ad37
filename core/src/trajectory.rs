//! Agent trajectories in Harbor's ATIF (Agent Trajectory Interchange Format): the model, the
//! converters from each adapter's captured stdout, and a schema check.
//!
//! Version followed: **ATIF-v1.8**, as published in the `harbor` 0.25.0 package
//! (`harbor/models/trajectories/*.py`, pydantic models with `extra = "forbid"`). Field names,
//! required fields and the cross-field rules of those models are reproduced here; optional
//! fields akbench never fills (multimodal content parts, token ids, logprobs, subagent
//! trajectories, tool definitions, `llm_call_count`) are left out of the Rust model, and
//! [`validate`] refuses them only where Harbor does.
//!
//! What each converter fills (the pure functions below; none fails or panics, each skips
//! what it does not understand, as the parsers in [`crate::observe`] do):
//! - [`from_claude_code`]: one `agent` step per API response (its text, thinking as
//!   `reasoning_content`, `tool_use` blocks as `tool_calls`, its `usage` as metrics), the
//!   `tool_result` blocks of the following `user` message as that step's observation (matched
//!   by `tool_use_id`), the run's cost from the `result` event.
//! - [`from_codex`]: one `agent` step per completed item (messages, reasoning, command
//!   executions, file changes, MCP tool calls, web searches, each tool with its output), each
//!   turn's tokens on the turn's last agent step.
//! - [`from_gemini_cli`]: one `agent` step per model response (its text, tool calls and
//!   their results), the session's token totals as the final metrics.
//! - [`from_opencode`]: one `agent` step per model request (text, reasoning, tool calls
//!   with their results, tokens and opencode's own cost).
//! - [`from_mini_swe_agent`]: the trajectory mini-swe-agent saved (printed after its run):
//!   one `agent` step per assistant message with its tool calls, their results and usage.
//! - [`from_aider`]: aider's chat history and analytics log (printed after its run): one
//!   `agent` step per answer, each file it changed from it as an `edit_file` tool call.
//! - [`from_qwen_code`]: Claude Code's converter (the format is the same), with OpenAI's
//!   token convention.
//! - [`from_scripted`]: the agent says nothing structured, so its trajectory is the
//!   instruction and one `agent` step holding the tail of its stdout.
//!
//! Every converter starts with a `user` step holding the instruction (when given). A
//! trajectory always has at least one step (Harbor requires it): when nothing was seen, a
//! `system` step says so.

mod aider;
mod claude_code;
mod codex;
mod gemini_cli;
mod mini_swe_agent;
mod opencode;
mod qwen_code;
mod validate;

pub use aider::from_aider;
pub use claude_code::from_claude_code;
pub use codex::from_codex;
pub use gemini_cli::from_gemini_cli;
pub use mini_swe_agent::from_mini_swe_agent;
pub use opencode::from_opencode;
pub use qwen_code::from_qwen_code;
pub use validate::validate;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The ATIF version the converters write.
pub const SCHEMA_VERSION: &str = "ATIF-v1.8";

/// The file name of a stored trajectory, beside the attempt's agent logs.
pub const FILE_NAME: &str = "trajectory.json";

/// How much of a scripted agent's stdout its `agent` step keeps (the end of it).
pub const SCRIPTED_TAIL_BYTES: usize = 16 * 1024;

/// A whole trajectory (Harbor's `Trajectory`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trajectory {
    pub schema_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub agent: Agent,
    pub steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_metrics: Option<FinalMetrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// The agent system (Harbor's `Agent`); `version` is required by ATIF, `"unknown"` when the
/// output does not say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// Who a step comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    System,
    User,
    Agent,
}

/// One step (Harbor's `Step`). `model_name`, `reasoning_content`, `tool_calls` and `metrics`
/// belong to `agent` steps only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub step_id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// A tool call of an agent step (Harbor's `ToolCall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub function_name: String,
    pub arguments: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// What the environment answered (Harbor's `Observation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    pub results: Vec<ObservationResult>,
}

/// One result; `source_call_id` names a tool call of the same step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// Per-step LLM usage (Harbor's `Metrics`): `prompt_tokens` include the cached ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// Totals of the trajectory (Harbor's `FinalMetrics`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinalMetrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

impl Step {
    /// A step with only a source and a message (its id is set by [`Builder::push`]).
    pub fn new(source: Source, message: impl Into<String>) -> Self {
        Step {
            step_id: 0,
            timestamp: None,
            source,
            model_name: None,
            message: message.into(),
            reasoning_content: None,
            tool_calls: None,
            observation: None,
            metrics: None,
            extra: None,
        }
    }
}

/// The converter for an adapter: `claude-code`, `codex`, `gemini-cli`, `qwen-code`, `opencode`,
/// `mini-swe-agent`, `aider`, anything else as a scripted agent.
/// `version` is the agent CLI's version when the worker knows it (the output may say better).
pub fn convert(
    adapter: &str,
    stdout: &str,
    instruction: Option<&str>,
    version: Option<&str>,
) -> Trajectory {
    let mut t = match adapter {
        "claude-code" => from_claude_code(stdout, instruction),
        "codex" => from_codex(stdout, instruction),
        "gemini-cli" => from_gemini_cli(stdout, instruction),
        "qwen-code" => from_qwen_code(stdout, instruction),
        "opencode" => from_opencode(stdout, instruction),
        "mini-swe-agent" => from_mini_swe_agent(stdout, instruction),
        "aider" => from_aider(stdout, instruction),
        other => from_scripted(other, stdout, instruction),
    };
    if t.agent.version == UNKNOWN {
        if let Some(v) = version.map(str::trim).filter(|v| !v.is_empty()) {
            t.agent.version = v.to_string();
        }
    }
    t
}

/// The agent version when nothing says it.
pub const UNKNOWN: &str = "unknown";

/// A scripted agent (`command`, `scripted`, ...): the instruction, then one `agent` step with
/// the last [`SCRIPTED_TAIL_BYTES`] of its stdout (when it printed anything).
pub fn from_scripted(agent_name: &str, stdout: &str, instruction: Option<&str>) -> Trajectory {
    let mut b = Builder::new(instruction);
    let text = stdout.trim_end();
    if !text.trim().is_empty() {
        let (tail, cut) = tail(text, SCRIPTED_TAIL_BYTES);
        let mut step = Step::new(Source::Agent, tail);
        if cut {
            step.extra = Some(object([("stdout_truncated_to_tail", Value::Bool(true))]));
        }
        b.push(step);
    }
    b.finish(
        Agent {
            name: agent_name.to_string(),
            version: UNKNOWN.to_string(),
            model_name: None,
            extra: None,
        },
        None,
    )
}

/// The last `max` bytes of `s` (on a character boundary) and whether anything was cut.
fn tail(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    (&s[start..], true)
}

/// A JSON object from pairs.
fn object<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Collects steps in order and numbers them.
#[derive(Debug, Default)]
struct Builder {
    steps: Vec<Step>,
}

impl Builder {
    /// Starts with the instruction as a `user` step, when given.
    fn new(instruction: Option<&str>) -> Self {
        let mut b = Builder::default();
        if let Some(i) = instruction {
            b.push(Step::new(Source::User, i));
        }
        b
    }

    /// Appends a step and returns its index.
    fn push(&mut self, mut step: Step) -> usize {
        step.step_id = self.steps.len() as u64 + 1;
        self.steps.push(step);
        self.steps.len() - 1
    }

    /// The trajectory; `totals` are the run's own totals when the output states them (else
    /// the sums of the steps' metrics).
    fn finish(mut self, agent: Agent, totals: Option<FinalMetrics>) -> Trajectory {
        if self.steps.is_empty() {
            self.push(Step::new(
                Source::System,
                "the agent's output holds no step akbench could read",
            ));
        }
        let sum = |f: fn(&Metrics) -> Option<u64>| {
            crate::observe::sum_present(self.steps.iter().map(|s| s.metrics.as_ref().and_then(f)))
        };
        let mut fm = totals.unwrap_or_default();
        fm.total_prompt_tokens = fm.total_prompt_tokens.or(sum(|m| m.prompt_tokens));
        fm.total_completion_tokens = fm.total_completion_tokens.or(sum(|m| m.completion_tokens));
        fm.total_cached_tokens = fm.total_cached_tokens.or(sum(|m| m.cached_tokens));
        fm.total_steps = Some(self.steps.len() as u64);
        Trajectory {
            schema_version: SCHEMA_VERSION.to_string(),
            session_id: None,
            agent,
            steps: self.steps,
            notes: None,
            final_metrics: Some(fm),
            extra: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_keeps_the_instruction_and_the_stdout_tail() {
        let t = from_scripted("command", "line 1\nfinal words\n", Some("fix it"));
        assert_eq!(t.steps.len(), 2);
        assert_eq!(t.steps[0].source, Source::User);
        assert_eq!(t.steps[0].message, "fix it");
        assert_eq!(t.steps[1].source, Source::Agent);
        assert_eq!(t.steps[1].message, "line 1\nfinal words");
        assert_eq!(t.steps[1].step_id, 2);
        assert_eq!(t.agent.name, "command");
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
    }

    #[test]
    fn scripted_output_is_cut_to_its_tail_on_a_char_boundary() {
        let long = format!("{}é{}", "a".repeat(10), "b".repeat(SCRIPTED_TAIL_BYTES - 1));
        let t = from_scripted("command", &long, None);
        assert_eq!(t.steps.len(), 1);
        assert_eq!(t.steps[0].message, "b".repeat(SCRIPTED_TAIL_BYTES - 1));
        assert!(t.steps[0].extra.is_some());
    }

    #[test]
    fn nothing_said_still_gives_one_valid_step() {
        for t in [
            from_scripted("command", "  \n", None),
            from_claude_code("", None),
            from_codex("not json\n", None),
        ] {
            assert_eq!(t.steps.len(), 1);
            assert_eq!(t.steps[0].source, Source::System);
            validate(&serde_json::to_value(&t).unwrap()).unwrap();
        }
    }

    #[test]
    fn convert_picks_the_converter_and_fills_a_known_version() {
        let t = convert("command", "done", Some("x"), Some("1.2.3\n"));
        assert_eq!(t.agent.version, "1.2.3");
        let t = convert("claude-code", "", None, None);
        assert_eq!(t.agent.name, "claude-code");
        assert_eq!(t.agent.version, UNKNOWN);
        let t = convert("codex", "", None, Some(" "));
        assert_eq!(t.agent.name, "codex");
        assert_eq!(t.agent.version, UNKNOWN);
    }
}
