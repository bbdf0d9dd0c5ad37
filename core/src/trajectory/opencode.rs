//! opencode's `--format json` output (joined with its log) to ATIF (the event format is
//! described in [`crate::observe::opencode`]).
//!
//! - `sessionID` gives the session id; the version is the worker's `--version` probe and the
//!   model is not in the events.
//! - Each model request (`step_start` .. `step_finish`) is one `agent` step: its `text`
//!   parts joined as the message, `reasoning` parts as `reasoning_content`, its `tool_use`
//!   parts as tool calls (`tool` as the name, `callID` as the id, `state.input` as the
//!   arguments) with `state.output` (or `state.error`) as the observation (`status` in
//!   `extra`), and the `step_finish` tokens as metrics (`prompt_tokens` = input + cache
//!   writes + cache reads, `cached_tokens` = cache reads, `completion_tokens` = output +
//!   reasoning) and its `cost` when above 0 (opencode's own price table). The timestamp is
//!   the `step_start`'s (epoch milliseconds, written in ISO 8601).
//! - An `error` event is a `system` step. Log lines are not steps.

use super::{object, Agent, Builder, FinalMetrics, Metrics, Observation, ObservationResult};
use super::{Source, Step, ToolCall, Trajectory, UNKNOWN};
use crate::observe::json_objects;
use crate::observe::opencode::Tokens;
use serde_json::{Map, Value};

/// Converts opencode's captured output; `instruction` becomes the first `user` step.
pub fn from_opencode(stdout: &str, instruction: Option<&str>) -> Trajectory {
    let mut b = Builder::new(instruction);
    let mut session_id = None;
    let mut current: Option<usize> = None;
    let mut cost = 0.0;

    for event in json_objects(stdout) {
        let timestamp = event
            .get("timestamp")
            .and_then(Value::as_i64)
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        if session_id.is_none() {
            session_id = event
                .get("sessionID")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        let empty = Map::new();
        let part = event
            .get("part")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let ps = |k: &str| part.get(k).and_then(Value::as_str).map(str::to_string);
        let kind = event.get("type").and_then(Value::as_str);
        if matches!(kind, Some("text" | "reasoning" | "tool_use" | "step_start"))
            && current.is_none()
        {
            let mut step = Step::new(Source::Agent, "");
            step.timestamp = timestamp.clone();
            current = Some(b.push(step));
        }
        match kind {
            Some("text") => {
                let step = &mut b.steps[current.expect("set above")];
                let text = ps("text").unwrap_or_default();
                if !step.message.is_empty() && !text.is_empty() {
                    step.message.push('\n');
                }
                step.message.push_str(&text);
            }
            Some("reasoning") => {
                let step = &mut b.steps[current.expect("set above")];
                let text = ps("text").unwrap_or_default();
                match &mut step.reasoning_content {
                    Some(r) => {
                        r.push('\n');
                        r.push_str(&text);
                    }
                    None => step.reasoning_content = Some(text),
                }
            }
            Some("tool_use") => {
                let step = &mut b.steps[current.expect("set above")];
                let state = part.get("state").and_then(Value::as_object);
                let id = ps("callID")
                    .or_else(|| ps("id"))
                    .unwrap_or_else(|| "call".into());
                let arguments = match state.and_then(|s| s.get("input")) {
                    Some(Value::Object(m)) => m.clone(),
                    Some(Value::Null) | None => Map::new(),
                    Some(other) => object([("input", other.clone())]),
                };
                step.tool_calls.get_or_insert_with(Vec::new).push(ToolCall {
                    tool_call_id: id.clone(),
                    function_name: ps("tool").unwrap_or_else(|| "unknown".into()),
                    arguments,
                    extra: None,
                });
                let s = |k: &str| state.and_then(|st| st.get(k)).and_then(Value::as_str);
                let content = s("output").or_else(|| s("error")).map(str::to_string);
                let status = s("status").map(|st| object([("status", Value::from(st))]));
                step.observation
                    .get_or_insert_with(|| Observation { results: vec![] })
                    .results
                    .push(ObservationResult {
                        source_call_id: Some(id),
                        content,
                        extra: status,
                    });
            }
            Some("step_finish") => {
                if let Some(i) = current.take() {
                    let t = Tokens::read(part).unwrap_or_default();
                    let c = part
                        .get("cost")
                        .and_then(Value::as_f64)
                        .filter(|c| c.is_finite() && *c > 0.0);
                    cost += c.unwrap_or(0.0);
                    b.steps[i].metrics = Some(Metrics {
                        prompt_tokens: crate::observe::sum_present([t.uncached(), t.cache_read]),
                        completion_tokens: t.produced(),
                        cached_tokens: t.cache_read,
                        cost_usd: c,
                        extra: ps("reason").map(|r| object([("finish_reason", Value::from(r))])),
                    });
                }
            }
            Some("error") => {
                current = None;
                let e = event.get("error");
                let message = e
                    .and_then(|e| e.get("data"))
                    .and_then(|d| d.get("message"))
                    .and_then(Value::as_str)
                    .or_else(|| e.and_then(|e| e.get("name")).and_then(Value::as_str))
                    .unwrap_or("error");
                let mut step = Step::new(Source::System, message);
                step.timestamp = timestamp;
                step.extra = Some(object([("error", Value::Bool(true))]));
                b.push(step);
            }
            _ => {}
        }
    }
    let agent = Agent {
        name: "opencode".into(),
        version: UNKNOWN.into(),
        model_name: None,
        extra: None,
    };
    let totals = FinalMetrics {
        total_cost_usd: (cost > 0.0).then_some(cost),
        ..FinalMetrics::default()
    };
    let mut t = b.finish(agent, Some(totals));
    t.session_id = session_id;
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::validate;

    const RUN: &str = r#"{"type":"step_start","timestamp":1796563771004,"sessionID":"ses_1","part":{"id":"p1","type":"step-start"}}
{"type":"reasoning","timestamp":1796563771005,"sessionID":"ses_1","part":{"id":"p0","type":"reasoning","text":"think"}}
{"type":"tool_use","timestamp":1796563771861,"sessionID":"ses_1","part":{"type":"tool","tool":"bash","callID":"call_1","state":{"status":"completed","input":{"command":"echo 42 > value.txt"},"output":"(no output)"}}}
{"type":"step_finish","timestamp":1796563772511,"sessionID":"ses_1","part":{"reason":"tool-calls","tokens":{"input":80,"output":10,"reasoning":2,"cache":{"write":0,"read":20}},"cost":0.0015}}
level=ERROR message="stream error" small=false agent=build error.error="AI_APICallError: x"
{"type":"step_start","timestamp":1796563774874,"sessionID":"ses_1","part":{"type":"step-start"}}
{"type":"text","timestamp":1796563774874,"sessionID":"ses_1","part":{"type":"text","text":"Done."}}
{"type":"step_finish","timestamp":1796563777019,"sessionID":"ses_1","part":{"reason":"stop","tokens":{"input":80,"output":10,"reasoning":0,"cache":{"write":0,"read":20}},"cost":0}}
{"type":"error","timestamp":1796563777020,"sessionID":"ses_1","error":{"name":"APIError","data":{"message":"boom","statusCode":500}}}"#;

    #[test]
    fn steps_tools_tokens_and_cost() {
        let t = from_opencode(RUN, Some("write 42"));
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(t.session_id.as_deref(), Some("ses_1"));
        assert_eq!(t.steps.len(), 4);
        let s = &t.steps[1];
        assert_eq!(s.timestamp.as_deref(), Some("2026-12-06T13:29:31.004Z"));
        assert_eq!(s.reasoning_content.as_deref(), Some("think"));
        assert_eq!(s.tool_calls.as_ref().unwrap()[0].function_name, "bash");
        let r = &s.observation.as_ref().unwrap().results[0];
        assert_eq!(r.content.as_deref(), Some("(no output)"));
        let m = s.metrics.as_ref().unwrap();
        assert_eq!(
            (
                m.prompt_tokens,
                m.cached_tokens,
                m.completion_tokens,
                m.cost_usd
            ),
            (Some(100), Some(20), Some(12), Some(0.0015))
        );
        assert_eq!(t.steps[2].message, "Done.");
        assert_eq!(t.steps[2].metrics.as_ref().unwrap().cost_usd, None);
        assert_eq!(t.steps[3].source, Source::System);
        let fm = t.final_metrics.unwrap();
        assert_eq!(
            (
                fm.total_prompt_tokens,
                fm.total_completion_tokens,
                fm.total_cost_usd
            ),
            (Some(200), Some(22), Some(0.0015))
        );
    }
}
