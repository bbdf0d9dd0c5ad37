//! Codex CLI: `codex exec --json ...`.
//!
//! Documentation followed:
//! - "Non-interactive mode" (developers.openai.com/codex/noninteractive) and the CLI
//!   reference (developers.openai.com/codex/cli/reference): `codex exec [OPTIONS] [PROMPT]`,
//!   `--json` prints JSON Lines events to stdout, `-m/--model`, `-s/--sandbox read-only |
//!   workspace-write | danger-full-access`, `--dangerously-bypass-approvals-and-sandbox`
//!   (alias `--yolo`). `codex exec` never asks for approvals; it defaults to a read-only
//!   sandbox. `--full-auto` is deprecated (a warning, then a hidden compatibility flag in
//!   `codex-rs/exec/src/cli.rs`: "use `--sandbox workspace-write` instead"), so it is not used.
//! - The event schema in `codex-rs/exec/src/exec_events.rs` (openai/codex): `thread.started
//!   {thread_id}`, `turn.started`, `turn.completed {usage: {input_tokens,
//!   cached_input_tokens, output_tokens}}`, `turn.failed {error: {message}}`, `item.started`
//!   / `item.updated` / `item.completed {item: {id, type, ...}}` with item types
//!   `agent_message {text}`, `reasoning {text}`, `command_execution`, `file_change`,
//!   `mcp_tool_call`, `web_search`, `todo_list`, `error` (non-fatal), and `error {message}`.
//!
//! Token mapping. Codex follows OpenAI's convention: `input_tokens` *includes*
//! `cached_input_tokens` (codex's own `TokenUsage::non_cached_input` subtracts them), so
//! the uncached input is `input_tokens - cached_input_tokens`.
//!
//! Totals. `codex-rs/exec/src/event_processor_with_jsonl_output.rs` fills `turn.completed`'s
//! usage from the thread's running *total* (`ThreadTokenUsage.total`), not the turn's own
//! tokens. Summing over turns would count earlier turns again, so the tokens are those of
//! the last `turn.completed`. (`codex exec` runs one turn per process, where the two agree.)
//!
//! Codex reports no cost and no model in its JSONL events: both stay `None`.

use super::provider::{status_in, FailureRun, ProviderErrorKind};
use super::Observations;
use super::{check_parameters, check_program_and_model, choice_parameter, count, json_objects};
use serde_json::Value;
use std::collections::BTreeMap;

/// Parameters the `codex` adapter accepts.
pub const PARAMETERS: &[&str] = &["sandbox"];

/// Values of the `sandbox` parameter; `bypass` means
/// `--dangerously-bypass-approvals-and-sandbox`, for externally isolated runs.
pub const SANDBOX_MODES: &[&str] = &[
    "read-only",
    "workspace-write",
    "danger-full-access",
    "bypass",
];

/// The sandbox used when the descriptor sets none: edits inside the workspace, no network,
/// no approvals (the documented setting for unattended `codex exec` runs that edit code).
pub const DEFAULT_SANDBOX: &str = "workspace-write";

/// The non-interactive launch of Codex:
///
/// ```text
/// <program> exec --json [--model M] (--sandbox S | --dangerously-bypass-approvals-and-sandbox)
///     <extra_args...> -- <instruction>
/// ```
///
/// Parameters: `sandbox`, one of [`SANDBOX_MODES`] (default [`DEFAULT_SANDBOX`]).
/// Anything else is an error naming it.
pub fn codex_argv(
    program: &str,
    model: Option<&str>,
    instruction: &str,
    parameters: &BTreeMap<String, Value>,
    extra_args: &[String],
) -> Result<Vec<String>, String> {
    check_program_and_model("codex", program, model)?;
    check_parameters("codex", parameters, PARAMETERS)?;
    let sandbox = choice_parameter(
        "codex",
        parameters,
        "sandbox",
        SANDBOX_MODES,
        DEFAULT_SANDBOX,
    )?;
    let mut argv: Vec<String> = [program, "exec", "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(m) = model {
        argv.extend(["--model".to_string(), m.to_string()]);
    }
    if sandbox == "bypass" {
        argv.push("--dangerously-bypass-approvals-and-sandbox".to_string());
    } else {
        argv.extend(["--sandbox".to_string(), sandbox.to_string()]);
    }
    argv.extend(extra_args.iter().cloned());
    argv.extend(["--".to_string(), instruction.to_string()]);
    Ok(argv)
}

/// Reads `codex exec --json` output.
///
/// - `turns`: model requests (see [`Requests`]), once any Codex event was seen.
/// - `provider_error`: the provider failure the stream ends in (see [`classify`]); an item or
///   a completed turn afterwards means the model answered, which clears it.
/// - `error_text`: the message of the `turn.failed` or last `error` event, when reported.
/// - tokens: the usage of the last `turn.completed` (a running total, see the module
///   documentation); unknown when no turn completed.
/// - `final_message`: the text of the last completed `agent_message` item.
/// - `reported_error`: true after a `turn.failed`, or an `error` event not followed by a
///   `turn.completed` (Codex also emits `error` for a stream retry it then recovers from);
///   false once a turn completed cleanly; unknown when the stream stopped with neither.
///   Non-fatal `error` *items* (warnings, deprecation notices) do not count.
/// - `cost_usd`, `model`: never reported by Codex, always `None`.
///
/// Besides the current shape (`item.type`, `agent_message`), the earlier `--json` shape
/// (`item.item_type`, `assistant_message`) is read too.
pub fn parse_codex(stdout: &str) -> Observations {
    let mut seen = false;
    let mut completed: u64 = 0;
    let mut usage: Option<(Option<u64>, Option<u64>, Option<u64>)> = None;
    let mut final_message: Option<String> = None;
    let mut failed = false;
    let mut error_pending = false;
    let mut error_text: Option<String> = None;
    let mut provider = FailureRun::default();
    let mut requests = Requests::default();

    for event in json_objects(stdout) {
        let Some(kind) = event.get("type").and_then(Value::as_str) else {
            continue;
        };
        match kind {
            "turn.started" => {
                seen = true;
                requests.turn_started();
            }
            "thread.started" | "item.started" | "item.updated" => seen = true,
            "turn.completed" => {
                seen = true;
                completed += 1;
                error_pending = false;
                provider.recover();
                if let Some(u) = event.get("usage").and_then(Value::as_object) {
                    usage = Some((
                        count(u.get("input_tokens")),
                        count(u.get("cached_input_tokens")),
                        count(u.get("output_tokens")),
                    ));
                }
            }
            "turn.failed" => {
                seen = true;
                failed = true;
                let message = event
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str);
                if let Some(m) = message {
                    if let Some((kind, status)) = classify(m) {
                        provider.settle(kind, status, m.to_string());
                    }
                    error_text = Some(m.to_string());
                }
            }
            "error" => {
                seen = true;
                error_pending = true;
                if let Some(m) = event.get("message").and_then(Value::as_str) {
                    if let Some((kind, status)) = classify(m) {
                        provider.fail(kind, status, m.to_string());
                    }
                    error_text = Some(m.to_string());
                }
            }
            "item.completed" => {
                seen = true;
                let Some(item) = event.get("item") else {
                    continue;
                };
                let item_type = item
                    .get("type")
                    .or_else(|| item.get("item_type"))
                    .and_then(Value::as_str);
                if let Some(t) = item_type {
                    requests.item(t);
                    if t != "error" {
                        // The model answered.
                        provider.recover();
                    }
                }
                if matches!(item_type, Some("agent_message" | "assistant_message")) {
                    if let Some(text) = item.get("text").and_then(Value::as_str) {
                        final_message = Some(text.to_string());
                    }
                }
            }
            _ => {}
        }
    }

    let (input, cached, output) = usage.unwrap_or_default();
    let reported_error = if failed || error_pending {
        Some(true)
    } else if completed > 0 {
        Some(false)
    } else {
        None
    };
    Observations {
        turns: seen.then_some(requests.count),
        // Uncached input; when the cached count is missing, all input is taken as uncached.
        input_tokens: input.map(|i| i.saturating_sub(cached.unwrap_or(0))),
        cached_input_tokens: cached,
        output_tokens: output,
        cost_usd: None,
        cost_computed: false,
        final_message,
        model: None,
        reported_error,
        error_text: if reported_error == Some(true) {
            error_text
        } else {
            None
        },
        provider_error: provider.finish(),
    }
}

/// The provider failure a Codex error message stands for: the HTTP status it names
/// (`unexpected status 401 Unauthorized`, `last status: 429`), Codex's own wording for a
/// 5xx (`We're currently experiencing high demand`), or a connection failure
/// (`Reconnecting... waiting for network (Connection failed: ...)`).
fn classify(message: &str) -> Option<(ProviderErrorKind, Option<u16>)> {
    if let Some(status) = status_in(message) {
        return ProviderErrorKind::of_status(status).map(|k| (k, Some(status)));
    }
    let m = message.to_ascii_lowercase();
    if [
        "high demand",
        "overloaded",
        "internal server error",
        "server error",
    ]
    .iter()
    .any(|w| m.contains(w))
    {
        return Some((ProviderErrorKind::ServerError, None));
    }
    if [
        "connection failed",
        "error sending request",
        "waiting for network",
        "connection refused",
        "stream disconnected",
        "timed out",
    ]
    .iter()
    .any(|w| m.contains(w))
    {
        return Some((ProviderErrorKind::Unreachable, None));
    }
    None
}

/// Model requests, counted from the items: a turn's first output item starts one, and any
/// item after a run of tool items (the tools' results went back to the model) starts the
/// next. Consecutive tool items count as one request (parallel calls), so a response that
/// makes one tool call with no text before the next one is merged with it: the count is a
/// lower bound. Non-fatal `error` items (warnings) are not output.
#[derive(Debug, Default)]
struct Requests {
    count: u64,
    output_seen: bool,
    after_tools: bool,
}

impl Requests {
    fn turn_started(&mut self) {
        self.output_seen = false;
        self.after_tools = false;
    }

    fn item(&mut self, item_type: &str) {
        let tool = matches!(
            item_type,
            "command_execution" | "file_change" | "mcp_tool_call" | "web_search" | "todo_list"
        );
        match item_type {
            "error" => {}
            _ if tool => {
                if !self.output_seen {
                    self.count += 1;
                    self.output_seen = true;
                }
                self.after_tools = true;
            }
            _ => {
                if !self.output_seen || self.after_tools {
                    self.count += 1;
                }
                self.output_seen = true;
                self.after_tools = false;
            }
        }
    }
}
