//! mini-swe-agent's saved trajectory (printed by the adapter's wrapper after [`MARKER`]) to
//! ATIF (the format is described in [`crate::observe::mini_swe_agent`]).
//!
//! - Each assistant message is one `agent` step: its content as the message, its
//!   `tool_calls` as tool calls (the JSON `arguments` string parsed), and the `tool` messages
//!   answering them as the step's observation; its response's usage as metrics
//!   (`prompt_tokens` include the cached ones), its `extra.cost` when above 0, its
//!   `extra.timestamp` (epoch seconds) in ISO 8601, `model_name` from the response.
//! - A run that did not end `Submitted` gets a last `system` step naming its exit status.
//! - `final_metrics.total_cost_usd` is `model_stats.instance_cost` when above 0 (litellm's
//!   price table), `extra.exit_status` and `extra.api_calls` are kept.
//! - The system prompt and mini's own user messages (format errors) are not steps; the
//!   instruction is the first `user` step as for every agent.
//! - Without a saved trajectory (the agent was killed), the output's tail is kept as a
//!   scripted agent's.
//!
//! [`MARKER`]: crate::observe::mini_swe_agent::MARKER

use super::{from_scripted, object, Builder, FinalMetrics, Metrics, Observation};
use super::{Agent, ObservationResult, Source, Step, ToolCall, Trajectory, UNKNOWN};
use crate::observe::mini_swe_agent::{split, usage_of};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Converts the wrapper's output; `instruction` becomes the first `user` step.
pub fn from_mini_swe_agent(stdout: &str, instruction: Option<&str>) -> Trajectory {
    let (_, Some(saved)) = split(stdout) else {
        return from_scripted("mini-swe-agent", stdout, instruction);
    };
    let mut b = Builder::new(instruction);
    let mut by_call: HashMap<String, usize> = HashMap::new();
    let messages = saved
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut model = None;
    for m in messages.iter().filter_map(Value::as_object) {
        let s = |k: &str| m.get(k).and_then(Value::as_str);
        match s("role") {
            Some("assistant") => {
                let mut step = Step::new(Source::Agent, s("content").unwrap_or_default());
                let extra = m.get("extra");
                step.timestamp = extra
                    .and_then(|e| e.get("timestamp"))
                    .and_then(Value::as_f64)
                    .and_then(|t| chrono::DateTime::from_timestamp_millis((t * 1000.0) as i64))
                    .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                step.model_name = extra
                    .and_then(|e| e.get("response"))
                    .and_then(|r| r.get("model"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                model = step.model_name.clone().or(model);
                if let Some((prompt, cached, completion)) = usage_of(m) {
                    step.metrics = Some(Metrics {
                        prompt_tokens: prompt,
                        completion_tokens: completion,
                        cached_tokens: cached,
                        cost_usd: extra
                            .and_then(|e| e.get("cost"))
                            .and_then(Value::as_f64)
                            .filter(|c| c.is_finite() && *c > 0.0),
                        extra: None,
                    });
                }
                let calls: Vec<ToolCall> = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|cs| {
                        cs.iter()
                            .enumerate()
                            .map(|(i, c)| {
                                let f = c.get("function");
                                let args = f
                                    .and_then(|f| f.get("arguments"))
                                    .and_then(Value::as_str)
                                    .map(|a| match serde_json::from_str::<Value>(a) {
                                        Ok(Value::Object(o)) => o,
                                        _ => object([("arguments", Value::from(a))]),
                                    })
                                    .unwrap_or_default();
                                ToolCall {
                                    tool_call_id: c
                                        .get("id")
                                        .and_then(Value::as_str)
                                        .map(str::to_string)
                                        .unwrap_or_else(|| format!("call_{}", i + 1)),
                                    function_name: f
                                        .and_then(|f| f.get("name"))
                                        .and_then(Value::as_str)
                                        .unwrap_or("unknown")
                                        .to_string(),
                                    arguments: args,
                                    extra: None,
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let ids: Vec<String> = calls.iter().map(|c| c.tool_call_id.clone()).collect();
                if !calls.is_empty() {
                    step.tool_calls = Some(calls);
                }
                let i = b.push(step);
                for id in ids {
                    by_call.insert(id, i);
                }
            }
            Some("tool") => {
                let id = s("tool_call_id").map(str::to_string);
                let Some(&i) = id.as_ref().and_then(|id| by_call.get(id)) else {
                    continue;
                };
                let rc = m.get("extra").and_then(|e| e.get("returncode")).cloned();
                b.steps[i]
                    .observation
                    .get_or_insert_with(|| Observation { results: vec![] })
                    .results
                    .push(ObservationResult {
                        source_call_id: id,
                        content: s("content").map(str::to_string),
                        extra: rc.map(|rc| object([("returncode", rc)])),
                    });
            }
            _ => {}
        }
    }
    let info = saved.get("info");
    let exit = info
        .and_then(|i| i.get("exit_status"))
        .and_then(Value::as_str);
    if let Some(e) = exit.filter(|e| *e != "Submitted") {
        let mut step = Step::new(Source::System, format!("exit status: {e}"));
        step.extra = Some(object([("exit_status", Value::from(e))]));
        b.push(step);
    }
    let stats = info.and_then(|i| i.get("model_stats"));
    let mut extra = Map::new();
    if let Some(e) = exit {
        extra.insert("exit_status".into(), Value::from(e));
    }
    if let Some(n) = stats
        .and_then(|s| s.get("api_calls"))
        .filter(|v| !v.is_null())
    {
        extra.insert("api_calls".into(), n.clone());
    }
    let totals = FinalMetrics {
        total_cost_usd: stats
            .and_then(|s| s.get("instance_cost"))
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c > 0.0),
        extra: (!extra.is_empty()).then_some(extra),
        ..FinalMetrics::default()
    };
    let agent = Agent {
        name: "mini-swe-agent".into(),
        version: UNKNOWN.into(),
        model_name: model,
        extra: None,
    };
    b.finish(agent, Some(totals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::mini_swe_agent::MARKER;
    use crate::trajectory::validate;
    use serde_json::json;

    #[test]
    fn steps_with_tool_results_tokens_and_exit() {
        let usage = json!({"prompt_tokens": 100, "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 20}});
        let t = json!({"info": {"exit_status": "LimitsExceeded", "model_stats": {"instance_cost": 0.5, "api_calls": 1}},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "assistant", "content": "plan", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}],
             "extra": {"response": {"model": "m1", "usage": usage}, "cost": 0.5, "timestamp": 1796564917.5}},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt", "extra": {"returncode": 0}}
        ]});
        let text = format!(
            "log\n{MARKER}\n{}",
            serde_json::to_string_pretty(&t).unwrap()
        );
        let tr = from_mini_swe_agent(&text, Some("x"));
        validate(&serde_json::to_value(&tr).unwrap()).unwrap();
        assert_eq!(tr.steps.len(), 3);
        let s = &tr.steps[1];
        assert_eq!(s.message, "plan");
        assert_eq!(s.timestamp.as_deref(), Some("2026-12-06T13:48:37.500Z"));
        assert_eq!(s.tool_calls.as_ref().unwrap()[0].arguments["command"], "ls");
        let r = &s.observation.as_ref().unwrap().results[0];
        assert_eq!(r.content.as_deref(), Some("a.txt"));
        let m = s.metrics.as_ref().unwrap();
        assert_eq!(
            (m.prompt_tokens, m.cached_tokens, m.cost_usd),
            (Some(100), Some(20), Some(0.5))
        );
        assert_eq!(tr.steps[2].source, Source::System);
        assert_eq!(tr.final_metrics.unwrap().total_cost_usd, Some(0.5));
        // Killed before it saved anything: the output's tail.
        let tr = from_mini_swe_agent("mini-swe-agent (step 1, $0.00):\n", Some("x"));
        validate(&serde_json::to_value(&tr).unwrap()).unwrap();
        assert_eq!(tr.agent.name, "mini-swe-agent");
    }
}
