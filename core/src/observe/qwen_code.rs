//! Qwen Code: `qwen --output-format stream-json --approval-mode yolo --prompt=...`.
//!
//! Followed: `qwen --help` of `@qwen-code/qwen-code` 0.24.4 (`--output-format stream-json`,
//! `--approval-mode yolo`, `--auth-type openai|anthropic|gemini|...`, `-m/--model`; the
//! positional prompt does not take an argument after `--`, so the instruction is given as
//! `--prompt=<instruction>`, which also keeps an instruction starting with `-` a value) and
//! its output, recorded against akbench's fake provider: Qwen Code's `stream-json` is Claude
//! Code's format (`system`/`init` with `qwen_code_version` and `model`, `assistant` and
//! `user` messages with `tool_use` / `tool_result` blocks, one `result` with `num_turns`,
//! `usage`, `is_error`, `error.message`), so [`parse_claude_code`] reads it, with three
//! differences handled here:
//!
//! - Tokens follow OpenAI's convention: `usage.input_tokens` is the whole prompt, *including*
//!   `cache_read_input_tokens` (Chat Completions' `prompt_tokens`), so the uncached input is
//!   their difference.
//! - A provider failure is an ordinary assistant message plus an error `result` whose
//!   `error.message` quotes the provider (`[API Error: 401 ...]`, `[API Error: Connection
//!   error. (cause: connect ECONNREFUSED ...)]`). Qwen Code retries on its own without
//!   printing anything (seven attempts, about 100 s), then either reports it or replays the
//!   request, announced by a `system`/`retry` event: numbered (`data.attempt`,
//!   `data.maxRetries`; ten retries a minute apart) on its rate-limit path, which the parser
//!   reads as the provider rate limiting, unnumbered after a connection or stream failure,
//!   read as the provider unreachable.
//! - No cost is reported: `cost_usd` stays `None`.

use super::claude_code::parse_claude_code;
use super::gemini_cli::failure_of_message;
use super::provider::{FailureRun, ProviderErrorKind};
use super::Observations;
use super::{check_parameters, check_program_and_model, choice_parameter, count, json_objects};
use serde_json::Value;
use std::collections::BTreeMap;

/// Parameters the `qwen-code` adapter accepts.
pub const PARAMETERS: &[&str] = &["auth_type"];

/// Values of `auth_type` (the CLI's `--auth-type`) for a provider reached with a key.
pub const AUTH_TYPES: &[&str] = &["openai", "anthropic", "gemini", "vertex-ai"];

/// The non-interactive launch of Qwen Code:
///
/// ```text
/// <program> --output-format stream-json --approval-mode yolo --auth-type T [--model M]
///     <extra_args...> --prompt=<instruction>
/// ```
///
/// Parameter `auth_type` (default `openai`: `OPENAI_API_KEY`, `OPENAI_BASE_URL` and
/// `OPENAI_MODEL` from the environment).
pub fn qwen_code_argv(
    program: &str,
    model: Option<&str>,
    instruction: &str,
    parameters: &BTreeMap<String, Value>,
    extra_args: &[String],
) -> Result<Vec<String>, String> {
    check_program_and_model("qwen-code", program, model)?;
    check_parameters("qwen-code", parameters, PARAMETERS)?;
    let auth = choice_parameter("qwen-code", parameters, "auth_type", AUTH_TYPES, "openai")?;
    let mut argv: Vec<String> = [
        program,
        "--output-format",
        "stream-json",
        "--approval-mode",
        "yolo",
        "--auth-type",
        auth,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(m) = model {
        argv.extend(["--model".to_string(), m.to_string()]);
    }
    argv.extend(extra_args.iter().cloned());
    argv.push(format!("--prompt={instruction}"));
    Ok(argv)
}

/// Reads Qwen Code's `stream-json` output (see the module documentation for what differs
/// from Claude Code's).
pub fn parse_qwen_code(stdout: &str) -> Observations {
    let mut obs = parse_claude_code(stdout);
    // Uncached input: the parser took `input_tokens` as uncached (Anthropic's convention).
    if let (Some(i), Some(c)) = (obs.input_tokens, obs.cached_input_tokens) {
        obs.input_tokens = Some(i.saturating_sub(c));
    }
    let mut provider = FailureRun::default();
    let mut answered = false;
    let mut result_error: Option<String> = None;
    for event in json_objects(stdout) {
        let s = |k: &str| event.get(k).and_then(Value::as_str);
        match (s("type"), s("subtype")) {
            (Some("system"), Some("retry")) => {
                let data = event.get("data");
                let attempt = data.and_then(|d| count(d.get("attempt")));
                let max = data.and_then(|d| count(d.get("maxRetries")));
                match (attempt, max) {
                    // Only the rate-limit path numbers its retries.
                    (Some(a), Some(m)) => provider.fail(
                        ProviderErrorKind::RateLimited,
                        None,
                        format!("Qwen Code retries a rate-limited request (retry {a} of {m})"),
                    ),
                    // A replayed attempt after the connection or the stream failed.
                    _ => provider.fail(
                        ProviderErrorKind::Unreachable,
                        None,
                        "Qwen Code retries the request after the connection or stream failed"
                            .into(),
                    ),
                }
            }
            (Some("assistant"), _) => {
                let text = event
                    .get("message")
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array)
                    .map(|blocks| {
                        blocks
                            .iter()
                            .filter_map(|b| b.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                if !text.starts_with("[API Error") {
                    answered = true;
                    provider.recover();
                }
            }
            (Some("result"), _) => {
                result_error = event
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            _ => {}
        }
    }
    if obs.reported_error == Some(true) {
        if let Some(m) = &result_error {
            if let Some((kind, status)) = failure_of_message(m) {
                provider.settle(kind, status, m.clone());
            }
            obs.error_text = Some(m.clone());
        }
    }
    obs.provider_error = provider.finish().or(obs.provider_error);
    if !answered {
        // The error message is not an answer, and Qwen Code's zeros are not measurements.
        if obs
            .final_message
            .as_deref()
            .is_some_and(|m| m.starts_with("[API Error"))
        {
            obs.final_message = None;
        }
        for v in [
            &mut obs.input_tokens,
            &mut obs.cached_input_tokens,
            &mut obs.output_tokens,
        ] {
            if *v == Some(0) {
                *v = None;
            }
        }
    }
    if obs.provider_error.is_some() && obs.error_text.is_none() {
        obs.error_text = obs.provider_error.as_ref().map(|e| e.message.clone());
    }
    obs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s1","cwd":"/w","tools":["run_shell_command"],"model":"qwen3-coder-plus","qwen_code_version":"0.24.4"}"#;
    const SOLVED: &str = r#"{"type":"assistant","session_id":"s1","parent_tool_use_id":null,"message":{"id":"m1","type":"message","role":"assistant","model":"qwen3-coder-plus","content":[{"type":"tool_use","id":"call_1","name":"run_shell_command","input":{"command":"echo 42 > value.txt"}}],"stop_reason":"tool_use","usage":{"input_tokens":100,"output_tokens":10,"cache_read_input_tokens":20,"total_tokens":110}}}
{"type":"user","session_id":"s1","parent_tool_use_id":null,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","is_error":false,"content":"Exit Code: 0"}]}}
{"type":"assistant","session_id":"s1","parent_tool_use_id":null,"message":{"id":"m2","type":"message","role":"assistant","model":"qwen3-coder-plus","content":[{"type":"text","text":"Done."}],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":10,"cache_read_input_tokens":20,"total_tokens":110}}}
{"type":"result","subtype":"success","session_id":"s1","is_error":false,"duration_ms":2130,"num_turns":2,"result":"Done.","usage":{"input_tokens":200,"output_tokens":20,"cache_read_input_tokens":40,"total_tokens":220}}"#;

    #[test]
    fn argv_and_parameters() {
        let none = BTreeMap::new();
        let argv = qwen_code_argv("qwen", Some("q"), "-x", &none, &[]).unwrap();
        assert_eq!(
            argv,
            [
                "qwen",
                "--output-format",
                "stream-json",
                "--approval-mode",
                "yolo",
                "--auth-type",
                "openai",
                "--model",
                "q",
                "--prompt=-x"
            ]
        );
        let p: BTreeMap<String, Value> = [("auth_type".to_string(), json!("anthropic"))].into();
        assert_eq!(
            qwen_code_argv("q", None, "x", &p, &[]).unwrap()[6],
            "anthropic"
        );
        let bad: BTreeMap<String, Value> = [("auth_type".to_string(), json!("oauth"))].into();
        let e = qwen_code_argv("q", None, "x", &bad, &[]).unwrap_err();
        assert!(e.contains("`auth_type`") && e.contains("fix:"), "{e}");
        assert!(qwen_code_argv("q", Some(""), "x", &none, &[]).is_err());
    }

    #[test]
    fn a_solved_run_with_openai_token_convention() {
        let o = parse_qwen_code(&format!("{INIT}\n{SOLVED}\n"));
        assert_eq!(o.turns, Some(2));
        assert_eq!(o.input_tokens, Some(160));
        assert_eq!(o.cached_input_tokens, Some(40));
        assert_eq!(o.output_tokens, Some(20));
        assert_eq!(o.cost_usd, None);
        assert_eq!(o.final_message.as_deref(), Some("Done."));
        assert_eq!(o.model.as_deref(), Some("qwen3-coder-plus"));
        assert_eq!(o.reported_error, Some(false));
        assert_eq!(o.provider_error, None);
    }

    fn failed(text: &str) -> String {
        let msg = json!({"type": "assistant", "session_id": "s1", "parent_tool_use_id": null,
            "message": {"id": "e1", "type": "message", "role": "assistant", "model": "qwen3-coder-plus",
                "content": [{"type": "text", "text": text}], "usage": {"input_tokens": 0, "output_tokens": 0}}});
        let result = json!({"type": "result", "subtype": "error_during_execution", "is_error": true,
            "num_turns": 1, "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0},
            "error": {"message": text}});
        format!("{INIT}\n{msg}\n{result}\n")
    }

    /// A provider failure's kind and status.
    type Kind = (ProviderErrorKind, Option<u16>);

    #[test]
    fn provider_failures_by_kind() {
        use ProviderErrorKind::*;
        let retry = r#"{"type":"system","subtype":"retry","session_id":"s1","data":{"reason":"retry","attempt":1,"maxRetries":10,"delayMs":60000}}"#;
        let replay = r#"{"type":"system","subtype":"retry","session_id":"s1","data":{"reason":"retry","discardedToolCalls":0,"preserveText":false}}"#;
        let cases: Vec<(String, Option<Kind>)> = vec![
            (
                failed("[API Error: 401 Incorrect API key provided]"),
                Some((Unauthorized, Some(401))),
            ),
            (
                failed("[API Error: 500 internal server error]"),
                Some((ServerError, Some(500))),
            ),
            (
                failed("[API Error: Connection error. (cause: connect ECONNREFUSED 127.0.0.1:9)]"),
                Some((Unreachable, None)),
            ),
            (format!("{INIT}\n{retry}\n"), Some((RateLimited, None))),
            (format!("{INIT}\n{replay}\n"), Some((Unreachable, None))),
            // Rate limited, then answered: recovered.
            (format!("{INIT}\n{retry}\n{SOLVED}\n"), None),
            // The agent's own outcome.
            (
                failed("[API Error: This model's maximum context length is 131072 tokens]"),
                None,
            ),
        ];
        for (text, want) in cases {
            let o = parse_qwen_code(&text);
            let got = o.provider_error.as_ref().map(|e| (e.kind, e.status));
            assert_eq!(got, want, "{text}");
            if want.is_some() {
                assert!(o.error_text.is_some());
                assert_eq!((o.output_tokens, o.final_message.as_deref()), (None, None));
            }
        }
        let o = parse_qwen_code(&failed("[API Error: 401 x]"));
        assert_eq!(o.reported_error, Some(true));
        assert_eq!(o.error_text.as_deref(), Some("[API Error: 401 x]"));
    }
}
