//! Claude Code's `stream-json` output to ATIF (the event format is described in
//! [`crate::observe::claude_code`]).
//!
//! - `system`/`init` gives the agent's version (`claude_code_version`), model and session id.
//! - Each API response (the `assistant` lines sharing one `message.id`) is one `agent` step:
//!   text blocks joined by newlines as the message, `thinking` blocks as
//!   `reasoning_content`, `tool_use` blocks as tool calls (`input` as the arguments), and its
//!   `usage` as metrics (the last copy wins, as in the parser): `prompt_tokens` = input +
//!   cache writes + cache reads, `cached_tokens` = cache reads, `completion_tokens` = output.
//!   Claude Code does not report a per-response cost.
//! - `tool_result` blocks of a `user` line become the observation of the step whose tool
//!   call has that id (`is_error` kept in the result's `extra`); a result naming no known
//!   call is kept on a `system` step. Other user text (a sub-agent's prompt) is a `user` step.
//! - A `<synthetic>` assistant message (an API error Claude Code reports) is a `system` step.
//! - Messages of sub-agents (non-null `parent_tool_use_id`) are steps too, marked with
//!   `extra.parent_tool_use_id`.
//! - The `result` event gives the totals (tokens as the parser counts them, `total_cost_usd`)
//!   and, when its text is not already a step's message (an error), a final `system` step.
//! - A step's `timestamp` is the event's own `timestamp` when the line has one.

use super::{object, Agent, Builder, FinalMetrics, Metrics, Observation, ObservationResult};
use super::{Source, Step, ToolCall, Trajectory, UNKNOWN};
use crate::observe::{count, json_objects, sum_present};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Converts Claude Code's captured stdout; `instruction` becomes the first `user` step.
pub fn from_claude_code(stdout: &str, instruction: Option<&str>) -> Trajectory {
    let mut b = Builder::new(instruction);
    let mut agent = Agent {
        name: "claude-code".into(),
        version: UNKNOWN.into(),
        model_name: None,
        extra: None,
    };
    let mut session_id = None;
    let mut by_message: HashMap<String, usize> = HashMap::new();
    let mut by_call: HashMap<String, usize> = HashMap::new();
    let mut result: Option<Map<String, Value>> = None;

    for event in json_objects(stdout) {
        let timestamp = event
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_string);
        let parent = event
            .get("parent_tool_use_id")
            .filter(|v| !v.is_null())
            .cloned();
        match event.get("type").and_then(Value::as_str) {
            Some("system") if event.get("subtype").and_then(Value::as_str) == Some("init") => {
                let s = |k: &str| event.get(k).and_then(Value::as_str).map(str::to_string);
                if let Some(v) = s("claude_code_version") {
                    agent.version = v;
                }
                agent.model_name = s("model").or(agent.model_name);
                session_id = s("session_id").or(session_id);
            }
            Some("assistant") => {
                let Some(message) = event.get("message").and_then(Value::as_object) else {
                    continue;
                };
                let blocks = blocks(message.get("content"));
                let model = message.get("model").and_then(Value::as_str);
                if model == Some("<synthetic>") {
                    let mut step = Step::new(Source::System, texts(&blocks, "text", "text"));
                    step.timestamp = timestamp;
                    step.extra = Some(object([("api_error", Value::Bool(true))]));
                    b.push(step);
                    continue;
                }
                let id = message
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let index = match id.as_ref().and_then(|i| by_message.get(i)) {
                    Some(&i) => i,
                    None => {
                        let mut step = Step::new(Source::Agent, "");
                        step.timestamp = timestamp;
                        step.model_name = model.map(str::to_string);
                        if let Some(p) = &parent {
                            step.extra = Some(object([("parent_tool_use_id", p.clone())]));
                        }
                        let i = b.push(step);
                        if let Some(id) = id {
                            by_message.insert(id, i);
                        }
                        i
                    }
                };
                let step = &mut b.steps[index];
                append(&mut step.message, &texts(&blocks, "text", "text"));
                let thinking = texts(&blocks, "thinking", "thinking");
                if !thinking.is_empty() {
                    let r = step.reasoning_content.get_or_insert_with(String::new);
                    append(r, &thinking);
                }
                for block in &blocks {
                    if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                        continue;
                    }
                    let Some(call_id) = block.get("id").and_then(Value::as_str) else {
                        continue;
                    };
                    if by_call.contains_key(call_id) {
                        // A block repeated by the stream: one call.
                        continue;
                    }
                    let arguments = match block.get("input") {
                        Some(Value::Object(m)) => m.clone(),
                        None | Some(Value::Null) => Map::new(),
                        Some(other) => object([("input", other.clone())]),
                    };
                    step.tool_calls.get_or_insert_with(Vec::new).push(ToolCall {
                        tool_call_id: call_id.to_string(),
                        function_name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown")
                            .to_string(),
                        arguments,
                        extra: None,
                    });
                    by_call.insert(call_id.to_string(), index);
                }
                if let Some(m) = metrics(message.get("usage")) {
                    step.metrics = Some(m);
                }
            }
            Some("user") => {
                let Some(message) = event.get("message").and_then(Value::as_object) else {
                    continue;
                };
                let blocks = blocks(message.get("content"));
                let text = texts(&blocks, "text", "text");
                if !text.is_empty() {
                    let mut step = Step::new(Source::User, text);
                    step.timestamp = timestamp.clone();
                    if let Some(p) = &parent {
                        step.extra = Some(object([("parent_tool_use_id", p.clone())]));
                    }
                    b.push(step);
                }
                let mut orphans = Vec::new();
                for block in &blocks {
                    if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                        continue;
                    }
                    let call_id = block.get("tool_use_id").and_then(Value::as_str);
                    let mut extra = Map::new();
                    if block.get("is_error").and_then(Value::as_bool) == Some(true) {
                        extra.insert("is_error".into(), Value::Bool(true));
                    }
                    let mut result = ObservationResult {
                        source_call_id: None,
                        content: Some(result_text(block.get("content"))),
                        extra: None,
                    };
                    match call_id.and_then(|id| by_call.get(id).map(|i| (id, *i))) {
                        Some((id, i)) => {
                            result.source_call_id = Some(id.to_string());
                            result.extra = (!extra.is_empty()).then_some(extra);
                            b.steps[i]
                                .observation
                                .get_or_insert_with(|| Observation { results: vec![] })
                                .results
                                .push(result);
                        }
                        None => {
                            if let Some(id) = call_id {
                                extra.insert("tool_use_id".into(), Value::String(id.into()));
                            }
                            result.extra = (!extra.is_empty()).then_some(extra);
                            orphans.push(result);
                        }
                    }
                }
                if !orphans.is_empty() {
                    let mut step = Step::new(Source::System, "tool results for unknown calls");
                    step.timestamp = timestamp;
                    step.observation = Some(Observation { results: orphans });
                    b.push(step);
                }
            }
            Some("result") => result = Some(event),
            _ => {}
        }
    }

    // A step's model is stated only where it differs from the agent's.
    for s in &mut b.steps {
        if s.model_name.is_some() && s.model_name == agent.model_name {
            s.model_name = None;
        }
    }
    if agent.model_name.is_none() {
        agent.model_name = b.steps.iter().rev().find_map(|s| s.model_name.clone());
    }
    let mut totals = None;
    if let Some(r) = result {
        let usage = metrics(r.get("usage")).unwrap_or_default();
        let mut extra = Map::new();
        for key in ["subtype", "is_error", "num_turns", "duration_ms"] {
            if let Some(v) = r.get(key).filter(|v| !v.is_null()) {
                extra.insert(key.into(), v.clone());
            }
        }
        totals = Some(FinalMetrics {
            total_prompt_tokens: usage.prompt_tokens,
            total_completion_tokens: usage.completion_tokens,
            total_cached_tokens: usage.cached_tokens,
            total_cost_usd: r
                .get("total_cost_usd")
                .and_then(Value::as_f64)
                .filter(|c| c.is_finite() && *c >= 0.0),
            total_steps: None,
            extra: (!extra.is_empty()).then_some(extra),
        });
        if let Some(text) = r.get("result").and_then(Value::as_str) {
            if !text.trim().is_empty() && !b.steps.iter().any(|s| s.message == text) {
                let mut step = Step::new(Source::System, text);
                step.timestamp = r
                    .get("timestamp")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                step.extra = Some(object([("result", Value::Bool(true))]));
                b.push(step);
            }
        }
    }
    if !b.steps.iter().any(|s| s.source == Source::Agent) {
        // No model response arrived: Claude Code's zeros are not measurements (as in the parser).
        if let Some(fm) = totals.as_mut() {
            for v in [
                &mut fm.total_prompt_tokens,
                &mut fm.total_cached_tokens,
                &mut fm.total_completion_tokens,
            ] {
                if *v == Some(0) {
                    *v = None;
                }
            }
            if fm.total_cost_usd == Some(0.0) {
                fm.total_cost_usd = None;
            }
        }
    }
    let mut t = b.finish(agent, totals);
    t.session_id = session_id;
    t
}

/// The content blocks of a message (a plain string is one text block).
fn blocks(content: Option<&Value>) -> Vec<Map<String, Value>> {
    match content {
        Some(Value::String(s)) => vec![object([
            ("type", Value::String("text".into())),
            ("text", Value::String(s.clone())),
        ])],
        Some(Value::Array(a)) => a.iter().filter_map(|b| b.as_object().cloned()).collect(),
        _ => Vec::new(),
    }
}

/// The `field` of the blocks of type `kind`, joined by newlines.
fn texts(blocks: &[Map<String, Value>], kind: &str, field: &str) -> String {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
        .filter_map(|b| b.get(field).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Appends `more` to `s` on a new line.
fn append(s: &mut String, more: &str) {
    if more.is_empty() {
        return;
    }
    if !s.is_empty() {
        s.push('\n');
    }
    s.push_str(more);
}

/// A tool result's content as text: a string, or its text blocks (other blocks named).
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                Some(other) => format!("[{other}]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Anthropic `usage` as ATIF metrics (`None` without a usage object).
fn metrics(usage: Option<&Value>) -> Option<Metrics> {
    let u = usage?.as_object()?;
    let input = count(u.get("input_tokens"));
    let writes = count(u.get("cache_creation_input_tokens"));
    let reads = count(u.get("cache_read_input_tokens"));
    Some(Metrics {
        prompt_tokens: sum_present([input, writes, reads]),
        completion_tokens: count(u.get("output_tokens")),
        cached_tokens: reads,
        cost_usd: None,
        extra: writes.map(|w| object([("cache_creation_input_tokens", Value::from(w))])),
    })
}
