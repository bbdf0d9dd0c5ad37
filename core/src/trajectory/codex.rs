//! `codex exec --json` events to ATIF (the event format is described in
//! [`crate::observe::codex`]).
//!
//! - `thread.started` gives the session id. Codex states neither its version nor its model
//!   in these events: the version is the worker's `--version` probe when known, the model
//!   stays unset.
//! - Each item is one `agent` step, placed where the item first appears (`item.started` or
//!   `item.completed`) and completed by later events of the same id:
//!   `agent_message` (the message), `reasoning` (`reasoning_content`), and the tools, each a
//!   tool call whose id is the item id, with its result as the observation:
//!   `command_execution` (`{command}` → `aggregated_output`, `exit_code` and `status` in
//!   `extra`), `file_change` (`{changes}` → `status`), `mcp_tool_call`
//!   (`server/tool`, its `arguments` → `result` or `error`), `web_search` (`{query}`).
//!   `todo_list` items (the agent's plan) are kept as a `todo_list` tool call without result.
//!   An `error` item, an `error` event and `turn.failed` are `system` steps.
//! - Tokens: `turn.completed` carries the thread's running totals, so a turn's own tokens are
//!   the difference from the previous totals; they are the metrics of the turn's last agent
//!   step, and the last totals are the final metrics (`prompt_tokens` include the cached
//!   ones, as in OpenAI's usage). Codex reports no cost.

use super::{object, Agent, Builder, FinalMetrics, Metrics, Observation, ObservationResult};
use super::{Source, Step, ToolCall, Trajectory, UNKNOWN};
use crate::observe::{count, json_objects};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Converts codex's captured stdout; `instruction` becomes the first `user` step.
pub fn from_codex(stdout: &str, instruction: Option<&str>) -> Trajectory {
    let mut b = Builder::new(instruction);
    let mut session_id = None;
    let mut by_item: HashMap<String, usize> = HashMap::new();
    let mut turn_start = b.steps.len();
    let mut previous = (0u64, 0u64, 0u64);
    let mut totals: Option<FinalMetrics> = None;

    for event in json_objects(stdout) {
        match event.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                session_id = event
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or(session_id);
            }
            Some("turn.started") => {
                turn_start = b.steps.len();
                by_item.clear();
            }
            Some("turn.completed") => {
                let Some(u) = event.get("usage").and_then(Value::as_object) else {
                    continue;
                };
                let input = count(u.get("input_tokens"));
                let cached = count(u.get("cached_input_tokens"));
                let output = count(u.get("output_tokens"));
                let now = (input.unwrap_or(0), cached.unwrap_or(0), output.unwrap_or(0));
                let turn = Metrics {
                    prompt_tokens: input.map(|_| now.0.saturating_sub(previous.0)),
                    cached_tokens: cached.map(|_| now.1.saturating_sub(previous.1)),
                    completion_tokens: output.map(|_| now.2.saturating_sub(previous.2)),
                    cost_usd: None,
                    extra: None,
                };
                previous = now;
                let last_agent = (turn_start..b.steps.len())
                    .rev()
                    .find(|&i| b.steps[i].source == Source::Agent);
                if let Some(i) = last_agent {
                    b.steps[i].metrics = Some(turn);
                }
                totals = Some(FinalMetrics {
                    total_prompt_tokens: input,
                    total_completion_tokens: output,
                    total_cached_tokens: cached,
                    ..FinalMetrics::default()
                });
            }
            Some("turn.failed") => {
                let text = event
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("turn failed");
                let mut step = Step::new(Source::System, text);
                step.extra = Some(object([("turn_failed", Value::Bool(true))]));
                b.push(step);
            }
            Some("error") => {
                if let Some(m) = event.get("message").and_then(Value::as_str) {
                    b.push(Step::new(Source::System, m));
                }
            }
            Some("item.started" | "item.updated" | "item.completed") => {
                let Some(item) = event.get("item").and_then(Value::as_object) else {
                    continue;
                };
                item_step(&mut b, &mut by_item, item);
            }
            _ => {}
        }
    }
    let agent = Agent {
        name: "codex".into(),
        version: UNKNOWN.into(),
        model_name: None,
        extra: None,
    };
    let mut t = b.finish(agent, totals);
    t.session_id = session_id;
    t
}

/// Creates or updates the step of one item.
fn item_step(b: &mut Builder, by_item: &mut HashMap<String, usize>, item: &Map<String, Value>) {
    let kind = item
        .get("type")
        .or_else(|| item.get("item_type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let s = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
    let id = s("id");
    let fresh = |source: Source| {
        let mut step = Step::new(source, "");
        if let Some(id) = &id {
            step.extra = Some(object([("item_id", Value::String(id.clone()))]));
        }
        step
    };
    // The step this item fills: its earlier one, or a new one.
    let mut step = match id.as_ref().and_then(|i| by_item.get(i)) {
        Some(&i) => b.steps[i].clone(),
        None => match kind {
            "agent_message" | "assistant_message" | "reasoning" | "command_execution"
            | "file_change" | "mcp_tool_call" | "web_search" | "todo_list" => fresh(Source::Agent),
            "error" => fresh(Source::System),
            _ => return,
        },
    };
    let call_id = id
        .clone()
        .unwrap_or_else(|| format!("call_{}", b.steps.len() + 1));
    let tool = |name: String, arguments: Map<String, Value>| ToolCall {
        tool_call_id: call_id.clone(),
        function_name: name,
        arguments,
        extra: None,
    };
    let result = |content: Option<String>, extra: Map<String, Value>| ObservationResult {
        source_call_id: Some(call_id.clone()),
        content,
        extra: (!extra.is_empty()).then_some(extra),
    };
    let pick = |keys: &[&str]| -> Map<String, Value> {
        keys.iter()
            .filter_map(|k| {
                item.get(*k)
                    .filter(|v| !v.is_null())
                    .map(|v| (k.to_string(), v.clone()))
            })
            .collect()
    };
    match kind {
        "agent_message" | "assistant_message" => step.message = s("text").unwrap_or_default(),
        "reasoning" => step.reasoning_content = s("text").filter(|t| !t.is_empty()),
        "error" => step.message = s("message").unwrap_or_default(),
        "command_execution" => {
            let args = pick(&["command"]);
            step.tool_calls = Some(vec![tool("command_execution".into(), args)]);
            let done = item.get("exit_code").is_some_and(|c| !c.is_null())
                || s("status").is_some_and(|st| st != "in_progress");
            if done {
                let r = result(s("aggregated_output"), pick(&["exit_code", "status"]));
                step.observation = Some(Observation { results: vec![r] });
            }
        }
        "file_change" => {
            step.tool_calls = Some(vec![tool("file_change".into(), pick(&["changes"]))]);
            if let Some(status) = s("status") {
                let r = result(Some(status), Map::new());
                step.observation = Some(Observation { results: vec![r] });
            }
        }
        "mcp_tool_call" => {
            let name = format!(
                "{}/{}",
                s("server").unwrap_or_default(),
                s("tool").unwrap_or_default()
            );
            let args = match item.get("arguments") {
                Some(Value::Object(m)) => m.clone(),
                Some(Value::Null) | None => Map::new(),
                Some(other) => object([("arguments", other.clone())]),
            };
            step.tool_calls = Some(vec![tool(name, args)]);
            let output = item
                .get("result")
                .filter(|v| !v.is_null())
                .or_else(|| item.get("error").filter(|v| !v.is_null()));
            if let Some(o) = output {
                let text = o
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| o.to_string());
                let r = result(Some(text), pick(&["status"]));
                step.observation = Some(Observation { results: vec![r] });
            }
        }
        "web_search" => {
            step.tool_calls = Some(vec![tool("web_search".into(), pick(&["query"]))]);
        }
        "todo_list" => {
            step.tool_calls = Some(vec![tool("todo_list".into(), pick(&["items"]))]);
        }
        _ => {}
    }
    match id.as_ref().and_then(|i| by_item.get(i)) {
        Some(&i) => {
            step.step_id = b.steps[i].step_id;
            b.steps[i] = step;
        }
        None => {
            let i = b.push(step);
            if let Some(id) = id {
                by_item.insert(id, i);
            }
        }
    }
}
