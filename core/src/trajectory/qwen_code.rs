//! Qwen Code's `stream-json` output to ATIF. Its format is Claude Code's (see
//! [`crate::observe::qwen_code`]), so [`from_claude_code`] converts it, then:
//!
//! - the agent is `qwen-code`, its version the `init` event's `qwen_code_version`;
//! - token counts follow OpenAI's convention (`input_tokens` already include the cached
//!   ones), so the cache reads Claude Code's conversion adds to `prompt_tokens` are taken
//!   off again, per step and in the totals;
//! - a provider failure Qwen Code reports as an assistant message (`[API Error: ...]`) is a
//!   `system` step marked `extra.api_error`, as Claude Code's `<synthetic>` messages are.
//!
//! Qwen Code reports no cost.

use super::{from_claude_code, object, Source, Trajectory};
use crate::observe::json_objects;
use serde_json::Value;

/// Converts Qwen Code's captured stdout; `instruction` becomes the first `user` step.
pub fn from_qwen_code(stdout: &str, instruction: Option<&str>) -> Trajectory {
    let mut t = from_claude_code(stdout, instruction);
    t.agent.name = "qwen-code".into();
    let version = json_objects(stdout).find_map(|e| {
        (e.get("subtype").and_then(Value::as_str) == Some("init"))
            .then(|| {
                e.get("qwen_code_version")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .flatten()
    });
    if let Some(v) = version {
        t.agent.version = v;
    }
    for step in &mut t.steps {
        if let Some(m) = step.metrics.as_mut() {
            m.prompt_tokens = m
                .prompt_tokens
                .map(|p| p.saturating_sub(m.cached_tokens.unwrap_or(0)));
        }
        if step.source == Source::Agent
            && step.message.starts_with("[API Error")
            && step.tool_calls.is_none()
        {
            step.source = Source::System;
            step.model_name = None;
            step.metrics = None;
            step.reasoning_content = None;
            step.extra = Some(object([("api_error", Value::Bool(true))]));
        }
    }
    if let Some(fm) = t.final_metrics.as_mut() {
        fm.total_prompt_tokens = fm
            .total_prompt_tokens
            .map(|p| p.saturating_sub(fm.total_cached_tokens.unwrap_or(0)));
        let answered = t.steps.iter().any(|s| s.source == Source::Agent);
        if !answered {
            for v in [
                &mut fm.total_prompt_tokens,
                &mut fm.total_cached_tokens,
                &mut fm.total_completion_tokens,
            ] {
                if *v == Some(0) {
                    *v = None;
                }
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::validate;

    const RUN: &str = r#"{"type":"system","subtype":"init","session_id":"s1","model":"qwen3-coder-plus","qwen_code_version":"0.24.4"}
{"type":"assistant","session_id":"s1","parent_tool_use_id":null,"message":{"id":"m1","type":"message","role":"assistant","model":"qwen3-coder-plus","content":[{"type":"tool_use","id":"call_1","name":"run_shell_command","input":{"command":"echo 42 > value.txt"}}],"usage":{"input_tokens":100,"output_tokens":10,"cache_read_input_tokens":20}}}
{"type":"user","session_id":"s1","parent_tool_use_id":null,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","is_error":false,"content":"Exit Code: 0"}]}}
{"type":"assistant","session_id":"s1","parent_tool_use_id":null,"message":{"id":"m2","type":"message","role":"assistant","model":"qwen3-coder-plus","content":[{"type":"text","text":"Done."}],"usage":{"input_tokens":100,"output_tokens":10,"cache_read_input_tokens":20}}}
{"type":"result","subtype":"success","session_id":"s1","is_error":false,"num_turns":2,"result":"Done.","usage":{"input_tokens":200,"output_tokens":20,"cache_read_input_tokens":40}}"#;

    #[test]
    fn a_solved_run_counts_prompt_tokens_once() {
        let t = from_qwen_code(RUN, Some("write 42"));
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(
            (t.agent.name.as_str(), t.agent.version.as_str()),
            ("qwen-code", "0.24.4")
        );
        let step = &t.steps[1];
        let m = step.metrics.as_ref().unwrap();
        assert_eq!((m.prompt_tokens, m.cached_tokens), (Some(100), Some(20)));
        let obs = step.observation.as_ref().unwrap();
        assert_eq!(obs.results[0].content.as_deref(), Some("Exit Code: 0"));
        let fm = t.final_metrics.unwrap();
        assert_eq!(
            (
                fm.total_prompt_tokens,
                fm.total_cached_tokens,
                fm.total_completion_tokens
            ),
            (Some(200), Some(40), Some(20))
        );
    }

    #[test]
    fn an_api_error_is_a_system_step() {
        let text = r#"{"type":"system","subtype":"init","session_id":"s1","model":"q","qwen_code_version":"0.24.4"}
{"type":"assistant","session_id":"s1","parent_tool_use_id":null,"message":{"id":"e1","type":"message","role":"assistant","model":"q","content":[{"type":"text","text":"[API Error: 401 bad key]"}],"usage":{"input_tokens":0,"output_tokens":0}}}
{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":1,"usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0},"error":{"message":"[API Error: 401 bad key]"}}"#;
        let t = from_qwen_code(text, Some("x"));
        validate(&serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(t.steps[1].source, Source::System);
        assert_eq!(t.steps[1].message, "[API Error: 401 bad key]");
        assert_eq!(t.final_metrics.unwrap().total_prompt_tokens, None);
    }
}
