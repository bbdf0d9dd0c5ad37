//! Gemini CLI's `stream-json` output (joined with its stderr) to ATIF (the event format is
//! described in [`crate::observe::gemini_cli`]).
//!
//! - `init` gives the session id and the model; the version is the worker's `--version`
//!   probe (the stream does not state it).
//! - Each model response is one `agent` step (the response boundaries are those of the
//!   parser's request count: a response starts with the first assistant output after the
//!   start or after tool results): its assistant `message` pieces joined as the message,
//!   its `tool_use` events as tool calls (`parameters` as the arguments, `tool_id` as the
//!   call id), and the `tool_result` of each call as the step's observation (`output`, or the
//!   error's message; `status` in the result's `extra`). The step's timestamp is its first
//!   event's.
//! - `error` events are `system` steps (`extra.severity`); an error `result` whose message
//!   no step already says is a last `system` step. The CLI's log lines are not steps.
//! - Tokens: the CLI reports only the session's totals (the `result`'s `stats`), so steps
//!   carry no metrics and `final_metrics` holds the totals (`total_prompt_tokens` include
//!   the cached ones, as Gemini's `promptTokenCount` does); `final_metrics.extra` keeps
//!   `status`, `duration_ms` and `tool_calls`. No cost is reported.

use super::{object, Agent, Builder, FinalMetrics, Observation, ObservationResult};
use super::{Source, Step, ToolCall, Trajectory, UNKNOWN};
use crate::observe::{count, json_objects};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Converts Gemini CLI's captured output; `instruction` becomes the first `user` step.
pub fn from_gemini_cli(stdout: &str, instruction: Option<&str>) -> Trajectory {
    let mut b = Builder::new(instruction);
    let mut agent = Agent {
        name: "gemini-cli".into(),
        version: UNKNOWN.into(),
        model_name: None,
        extra: None,
    };
    let mut session_id = None;
    // The agent step of the current response, and the step of each tool call.
    let mut current: Option<usize> = None;
    let mut by_call: HashMap<String, usize> = HashMap::new();
    let mut totals: Option<FinalMetrics> = None;
    let mut final_error: Option<String> = None;

    for event in json_objects(stdout) {
        let s = |k: &str| event.get(k).and_then(Value::as_str).map(str::to_string);
        let timestamp = s("timestamp");
        match s("type").as_deref() {
            Some("init") => {
                session_id = s("session_id").or(session_id);
                agent.model_name = s("model").or(agent.model_name.take());
            }
            Some("message") if s("role").as_deref() == Some("assistant") => {
                let i = response_step(&mut b, &mut current, &timestamp, &agent.model_name);
                let piece = s("content").unwrap_or_default();
                let delta = event.get("delta").and_then(Value::as_bool) == Some(true);
                let step = &mut b.steps[i];
                if delta || step.message.is_empty() {
                    step.message.push_str(&piece);
                } else {
                    step.message.push('\n');
                    step.message.push_str(&piece);
                }
            }
            Some("tool_use") => {
                let i = response_step(&mut b, &mut current, &timestamp, &agent.model_name);
                let id = s("tool_id").unwrap_or_else(|| format!("call_{}", by_call.len() + 1));
                let arguments = match event.get("parameters") {
                    Some(Value::Object(m)) => m.clone(),
                    Some(Value::Null) | None => Map::new(),
                    Some(other) => object([("parameters", other.clone())]),
                };
                b.steps[i]
                    .tool_calls
                    .get_or_insert_with(Vec::new)
                    .push(ToolCall {
                        tool_call_id: id.clone(),
                        function_name: s("tool_name").unwrap_or_else(|| "unknown".into()),
                        arguments,
                        extra: None,
                    });
                by_call.insert(id, i);
            }
            Some("tool_result") => {
                current = None;
                let id = s("tool_id");
                let content = s("output").filter(|o| !o.is_empty()).or_else(|| {
                    event
                        .get("error")
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                });
                let mut extra = Map::new();
                if let Some(st) = s("status") {
                    extra.insert("status".into(), Value::String(st));
                }
                let result = ObservationResult {
                    source_call_id: id.clone(),
                    content,
                    extra: (!extra.is_empty()).then_some(extra),
                };
                match id.as_ref().and_then(|i| by_call.get(i)) {
                    Some(&i) => b.steps[i]
                        .observation
                        .get_or_insert_with(|| Observation { results: vec![] })
                        .results
                        .push(result),
                    None => {
                        // A result of no known call: kept, on a system step of its own.
                        let mut step =
                            Step::new(Source::System, result.content.clone().unwrap_or_default());
                        step.timestamp = timestamp;
                        step.extra = Some(object([(
                            "orphan_tool_result",
                            id.map(Value::String).unwrap_or(Value::Null),
                        )]));
                        b.push(step);
                    }
                }
            }
            Some("error") => {
                current = None;
                let mut step = Step::new(Source::System, s("message").unwrap_or_default());
                step.timestamp = timestamp;
                if let Some(sev) = s("severity") {
                    step.extra = Some(object([("severity", Value::String(sev))]));
                }
                b.push(step);
            }
            Some("result") => {
                let stats = event.get("stats").and_then(Value::as_object);
                let c = |k: &str| stats.and_then(|st| count(st.get(k)));
                let mut extra = Map::new();
                for k in ["status"] {
                    if let Some(v) = event.get(k).filter(|v| !v.is_null()) {
                        extra.insert(k.into(), v.clone());
                    }
                }
                for k in ["duration_ms", "tool_calls"] {
                    if let Some(v) = stats.and_then(|st| st.get(k)).filter(|v| !v.is_null()) {
                        extra.insert(k.into(), v.clone());
                    }
                }
                totals = Some(FinalMetrics {
                    total_prompt_tokens: c("input_tokens"),
                    total_completion_tokens: c("output_tokens"),
                    total_cached_tokens: c("cached"),
                    extra: (!extra.is_empty()).then_some(extra),
                    ..FinalMetrics::default()
                });
                if s("status").as_deref() != Some("success") {
                    final_error = event
                        .get("error")
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
            }
            _ => {}
        }
    }
    if let Some(text) = final_error {
        if !b.steps.iter().any(|s| s.message == text) {
            let mut step = Step::new(Source::System, text);
            step.extra = Some(object([("result_error", Value::Bool(true))]));
            b.push(step);
        }
    }
    let mut t = b.finish(agent, totals);
    t.session_id = session_id;
    t
}

/// The agent step of the current model response, started when there is none.
fn response_step(
    b: &mut Builder,
    current: &mut Option<usize>,
    timestamp: &Option<String>,
    model: &Option<String>,
) -> usize {
    if let Some(i) = *current {
        return i;
    }
    let mut step = Step::new(Source::Agent, "");
    step.timestamp = timestamp.clone();
    step.model_name = model.clone();
    let i = b.push(step);
    *current = Some(i);
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::validate;

    const SOLVED: &str = r#"{"type":"init","timestamp":"2026-12-06T13:01:48.813Z","session_id":"s1","model":"gemini-2.5-pro"}
{"type":"message","timestamp":"2026-12-06T13:01:48.814Z","role":"user","content":"write 42"}
YOLO mode is enabled. All tool calls will be automatically approved.
{"type":"message","timestamp":"2026-12-06T13:01:48.900Z","role":"assistant","content":"I will write it.","delta":true}
{"type":"tool_use","timestamp":"2026-12-06T13:01:48.917Z","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"echo 42 > value.txt"}}
{"type":"tool_use","timestamp":"2026-12-06T13:01:48.918Z","tool_name":"read_file","tool_id":"t2","parameters":{"path":"x"}}
{"type":"tool_result","timestamp":"2026-12-06T13:01:48.959Z","tool_id":"t1","status":"success","output":""}
{"type":"tool_result","timestamp":"2026-12-06T13:01:48.960Z","tool_id":"t2","status":"error","error":{"type":"x","message":"no such file"}}
{"type":"error","timestamp":"2026-12-06T13:01:48.961Z","severity":"warning","message":"loop detected"}
{"type":"message","timestamp":"2026-12-06T13:01:48.968Z","role":"assistant","content":"Done: value.txt ","delta":true}
{"type":"message","timestamp":"2026-12-06T13:01:48.969Z","role":"assistant","content":"now holds the answer.","delta":true}
{"type":"result","timestamp":"2026-12-06T13:01:48.970Z","status":"success","stats":{"total_tokens":220,"input_tokens":200,"output_tokens":20,"cached":40,"input":160,"duration_ms":158,"tool_calls":2}}
"#;

    #[test]
    fn a_solved_run_is_steps_with_tool_calls_and_their_results() {
        let t = from_gemini_cli(SOLVED, Some("write 42"));
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(t.session_id.as_deref(), Some("s1"));
        assert_eq!(t.agent.model_name.as_deref(), Some("gemini-2.5-pro"));
        let sources: Vec<Source> = t.steps.iter().map(|s| s.source).collect();
        assert_eq!(
            sources,
            [Source::User, Source::Agent, Source::System, Source::Agent]
        );
        let first = &t.steps[1];
        assert_eq!(first.message, "I will write it.");
        assert_eq!(first.timestamp.as_deref(), Some("2026-12-06T13:01:48.900Z"));
        let calls = first.tool_calls.as_ref().unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].function_name, "run_shell_command");
        let results = &first.observation.as_ref().unwrap().results;
        assert_eq!(results.len(), 2);
        assert_eq!(results[1].content.as_deref(), Some("no such file"));
        assert_eq!(t.steps[3].message, "Done: value.txt now holds the answer.");
        let fm = t.final_metrics.unwrap();
        assert_eq!(
            (
                fm.total_prompt_tokens,
                fm.total_cached_tokens,
                fm.total_completion_tokens,
                fm.total_cost_usd,
                fm.total_steps
            ),
            (Some(200), Some(40), Some(20), None, Some(4))
        );
    }

    #[test]
    fn an_error_result_becomes_a_last_system_step() {
        let text = r#"{"type":"init","session_id":"s","model":"m"}
Attempt 1 failed with status 429. Retrying with backoff...
{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: 429]"},"stats":{"input_tokens":0}}"#;
        let t = from_gemini_cli(text, Some("x"));
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(t.steps.len(), 2);
        assert_eq!(t.steps[1].source, Source::System);
        assert_eq!(t.steps[1].message, "[API Error: 429]");
        let t = from_gemini_cli("", None);
        assert_eq!(t.steps.len(), 1);
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
    }
}
