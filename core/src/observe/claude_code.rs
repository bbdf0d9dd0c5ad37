//! Claude Code: `claude -p ... --output-format stream-json --verbose`.
//!
//! Documentation followed (as published for Claude Code 2.x):
//! - CLI reference (docs.anthropic.com/en/docs/claude-code/cli-reference): `-p/--print`,
//!   `--output-format stream-json` (which needs `--verbose` with `-p`), `--model`,
//!   `--max-turns` ("limit the number of agentic turns in non-interactive mode") and
//!   `--permission-mode` with the modes `default`, `acceptEdits`, `plan`, `dontAsk`,
//!   `bypassPermissions`. `--dangerously-skip-permissions` is the same as
//!   `--permission-mode bypassPermissions`; the explicit mode is used here. Claude Code
//!   refuses bypass mode as root outside a recognised sandbox.
//! - Headless mode / Agent SDK message types (docs.anthropic.com/en/docs/claude-code/sdk):
//!   the stream starts with a `system`/`init` message (carrying `model`), then `assistant`
//!   and `user` messages (the Messages API `message`, with `usage` on assistant ones), and
//!   ends with one `result` message: `subtype` `success` or `error_max_turns`,
//!   `error_during_execution`, `error_max_budget_usd`, ...; `is_error`, `num_turns`,
//!   `result` (success only), `total_cost_usd`, `usage` (the run's totals).
//!
//! Token mapping. Anthropic's `usage.input_tokens` excludes both cache reads and cache
//! writes. `cache_read_input_tokens` becomes `cached_input_tokens`. Cache *creation* tokens
//! were not served from a cache (the model processed them in full, billed above the base
//! rate), so they count as uncached input: `input_tokens = input_tokens +
//! cache_creation_input_tokens`. Thus input + cached is the whole prompt, as for Codex.
//!
//! Stream quirks handled: one API response is streamed as several `assistant` lines (one
//! per content block) that share `message.id` and repeat the response's `usage`, so usage is
//! counted once per message id (the last copy wins). Messages of sub-agents carry a
//! non-null `parent_tool_use_id`: their tokens count, but not as turns and not as the final
//! message. Claude Code reports API failures as assistant messages of model `<synthetic>`,
//! which is never taken as the model.

use super::provider::{FailureRun, ProviderErrorKind};
use super::Observations;
use super::{check_parameters, check_program_and_model, count, json_objects, sum_present};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Parameters the `claude-code` adapter accepts.
pub const PARAMETERS: &[&str] = &["max_turns"];

/// The non-interactive launch of Claude Code:
///
/// ```text
/// <program> -p --output-format stream-json --verbose [--model M] [--max-turns N]
///     --permission-mode bypassPermissions <extra_args...> -- <instruction>
/// ```
///
/// Parameters: `max_turns`, a positive integer. Anything else is an error naming it.
pub fn claude_code_argv(
    program: &str,
    model: Option<&str>,
    instruction: &str,
    parameters: &BTreeMap<String, Value>,
    extra_args: &[String],
) -> Result<Vec<String>, String> {
    check_program_and_model("claude-code", program, model)?;
    check_parameters("claude-code", parameters, PARAMETERS)?;
    let max_turns = match parameters.get("max_turns") {
        None => None,
        Some(v) => Some(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            format!(
                "the claude-code adapter's parameter `max_turns` is {v}; fix: give a positive integer such as 30"
            )
        })?),
    };
    let mut argv: Vec<String> = [program, "-p", "--output-format", "stream-json", "--verbose"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(m) = model {
        argv.extend(["--model".to_string(), m.to_string()]);
    }
    if let Some(n) = max_turns {
        argv.extend(["--max-turns".to_string(), n.to_string()]);
    }
    argv.extend([
        "--permission-mode".to_string(),
        "bypassPermissions".to_string(),
    ]);
    argv.extend(extra_args.iter().cloned());
    argv.extend(["--".to_string(), instruction.to_string()]);
    Ok(argv)
}

/// Token counts as Anthropic reports them.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    input: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
}

impl Usage {
    fn read(v: Option<&Value>) -> Option<Usage> {
        let u = v?.as_object()?;
        Some(Usage {
            input: count(u.get("input_tokens")),
            cache_creation: count(u.get("cache_creation_input_tokens")),
            cache_read: count(u.get("cache_read_input_tokens")),
            output: count(u.get("output_tokens")),
        })
    }

    /// Uncached input: fresh input plus cache writes (see the module documentation).
    fn uncached_input(&self) -> Option<u64> {
        sum_present([self.input, self.cache_creation])
    }
}

/// One API response seen in the stream.
#[derive(Debug)]
struct Message {
    id: Option<String>,
    main_thread: bool,
    usage: Option<Usage>,
}

/// Reads Claude Code's `stream-json` output.
///
/// With a `result` event (the last one, should there be several), its `num_turns`,
/// `usage`, `total_cost_usd`, `result` and `is_error`/`subtype` are used. Without one (the
/// agent was killed), turns are the main thread's assistant messages, tokens are summed over
/// all assistant messages, and cost and `reported_error` stay unknown. Any total missing
/// from the `result` event falls back the same way. The final message falls back to the
/// text of the last main-thread assistant message that had text.
pub fn parse_claude_code(stdout: &str) -> Observations {
    let mut init_model: Option<String> = None;
    let mut message_model: Option<String> = None;
    let mut messages: Vec<Message> = Vec::new();
    let mut last_text: Option<String> = None;
    let mut result: Option<Map<String, Value>> = None;
    let mut provider = FailureRun::default();
    let mut answered = false;
    let mut api_error_text: Option<String> = None;

    for event in json_objects(stdout) {
        match event.get("type").and_then(Value::as_str) {
            Some("system") if event.get("subtype").and_then(Value::as_str) == Some("init") => {
                if let Some(m) = event.get("model").and_then(Value::as_str) {
                    init_model = Some(m.to_string());
                }
            }
            Some("system") if event.get("subtype").and_then(Value::as_str) == Some("api_retry") => {
                let status = status_of(event.get("error_status"));
                let error = event
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                if let Some(kind) = failure_kind(status, Some(error)) {
                    provider.fail(kind, status, error.to_string());
                }
            }
            Some("assistant") => {
                let Some(message) = event.get("message").and_then(Value::as_object) else {
                    continue;
                };
                let synthetic = message.get("model").and_then(Value::as_str) == Some("<synthetic>");
                if synthetic {
                    // An API error Claude Code reports as a message of its own.
                    let text = text_of(message.get("content"));
                    if event.get("is_api_error_message").and_then(Value::as_bool) == Some(true) {
                        let status = status_of(event.get("api_error_status"));
                        let error = event.get("api_error").and_then(Value::as_str);
                        if let Some(kind) = failure_kind(status, error) {
                            provider.settle(kind, status, text.clone().unwrap_or_default());
                        }
                    }
                    api_error_text = text.or(api_error_text);
                } else {
                    answered = true;
                    provider.recover();
                }
                let main_thread = event.get("parent_tool_use_id").is_none_or(Value::is_null);
                let id = message
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let usage = Usage::read(message.get("usage"));
                match messages.iter_mut().find(|m| id.is_some() && m.id == id) {
                    Some(seen) => seen.usage = usage.or(seen.usage),
                    None => messages.push(Message {
                        id,
                        main_thread,
                        usage,
                    }),
                }
                if !main_thread {
                    continue;
                }
                if let Some(m) = message.get("model").and_then(Value::as_str) {
                    if m != "<synthetic>" {
                        message_model = Some(m.to_string());
                    }
                }
                if let Some(text) = text_of(message.get("content")) {
                    last_text = Some(text);
                }
            }
            Some("result") => result = Some(event),
            _ => {}
        }
    }

    let summed = |f: fn(&Usage) -> Option<u64>| {
        sum_present(messages.iter().map(|m| m.usage.as_ref().and_then(f)))
    };
    let streamed_turns = messages.iter().filter(|m| m.main_thread).count() as u64;
    let mut obs = Observations {
        turns: (!messages.is_empty()).then_some(streamed_turns),
        input_tokens: summed(Usage::uncached_input),
        cached_input_tokens: summed(|u| u.cache_read),
        output_tokens: summed(|u| u.output),
        cost_usd: None,
        cost_computed: false,
        final_message: last_text,
        model: init_model.or(message_model),
        reported_error: None,
        error_text: None,
        provider_error: None,
    };
    if let Some(r) = result {
        if let Some(n) = count(r.get("num_turns")) {
            obs.turns = Some(n);
        }
        if let Some(u) = Usage::read(r.get("usage")) {
            obs.input_tokens = u.uncached_input().or(obs.input_tokens);
            obs.cached_input_tokens = u.cache_read.or(obs.cached_input_tokens);
            obs.output_tokens = u.output.or(obs.output_tokens);
        }
        obs.cost_usd = r
            .get("total_cost_usd")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0);
        if let Some(text) = r.get("result").and_then(Value::as_str) {
            obs.final_message = Some(text.to_string());
        }
        let is_error = r.get("is_error").and_then(Value::as_bool);
        let subtype = r.get("subtype").and_then(Value::as_str);
        obs.reported_error = match (is_error, subtype) {
            (None, None) => None,
            (e, s) => Some(e == Some(true) || s.is_some_and(|s| s != "success")),
        };
        let text = r.get("result").and_then(Value::as_str).unwrap_or_default();
        // Older releases give the status only in the text: "API Error: 529 {...}".
        let status = status_of(r.get("api_error_status")).or_else(|| {
            let rest = text.strip_prefix("API Error: ")?;
            rest.get(..3)?.parse::<u16>().ok()
        });
        let error = r.get("api_error").and_then(Value::as_str);
        if is_error == Some(true) {
            if let Some(kind) = failure_kind(status, error) {
                provider.settle(kind, status, text.to_string());
            }
        }
        if obs.reported_error == Some(true) {
            obs.error_text = r
                .get("result")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| api_error_text.clone())
                .or_else(|| subtype.map(str::to_string));
        }
    }
    if !answered {
        // No model response arrived: Claude Code's zeros are not measurements.
        let zero_to_none = |v: &mut Option<u64>| {
            if *v == Some(0) {
                *v = None;
            }
        };
        zero_to_none(&mut obs.input_tokens);
        zero_to_none(&mut obs.cached_input_tokens);
        zero_to_none(&mut obs.output_tokens);
        if obs.cost_usd == Some(0.0) {
            obs.cost_usd = None;
        }
        if obs.final_message.is_some() && obs.final_message == obs.error_text {
            obs.final_message = None;
        }
    }
    obs.provider_error = provider.finish();
    if obs.provider_error.is_some() && obs.error_text.is_none() {
        obs.error_text = obs.provider_error.as_ref().map(|e| e.message.clone());
    }
    obs
}

/// An HTTP status field (`null` or absent: none).
fn status_of(v: Option<&Value>) -> Option<u16> {
    v.and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
}

/// The provider failure an API error stands for: by HTTP status, or, without one, a
/// connection failure (`api_error: "connection_failed"`, retry `error: "unknown"`).
fn failure_kind(status: Option<u16>, error: Option<&str>) -> Option<ProviderErrorKind> {
    match status {
        Some(s) => ProviderErrorKind::of_status(s),
        None => match error {
            Some("connection_failed" | "unknown" | "connection_error" | "timeout") => {
                Some(ProviderErrorKind::Unreachable)
            }
            Some("server_error" | "overloaded") => Some(ProviderErrorKind::ServerError),
            Some("rate_limit") => Some(ProviderErrorKind::RateLimited),
            Some("authentication_failed") => Some(ProviderErrorKind::Unauthorized),
            _ => None,
        },
    }
}

/// The text blocks of a message's content, joined by newlines; `None` when it has none.
fn text_of(content: Option<&Value>) -> Option<String> {
    let texts: Vec<&str> = match content? {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => return None,
    };
    let text = texts.join("\n");
    (!text.trim().is_empty()).then_some(text)
}
