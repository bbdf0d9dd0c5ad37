//! Gemini CLI: `gemini --output-format stream-json --approval-mode yolo --prompt ...`.
//!
//! Followed: the CLI's `--help` of `@google/gemini-cli` 0.61.0 (`-p/--prompt` runs headless,
//! `-o/--output-format text|json|stream-json`, `--approval-mode yolo` approves every tool,
//! `-m/--model`) and its bundled source (`JsonStreamEventType`): the stream is JSON Lines
//! of `init {session_id, model}`, `message {role, content, delta}` (an assistant answer
//! streamed as several `delta` pieces), `tool_use {tool_name, tool_id, parameters}`,
//! `tool_result {tool_id, status, output, error}`, `error {severity, message}` (a warning or
//! a non-fatal error) and one `result {status: success|error, error {type, message},
//! stats}` whose `stats` are the session's totals: `input_tokens` (the whole prompt,
//! cached included, Gemini's `promptTokenCount`), `cached`, `input` (uncached),
//! `output_tokens`, `tool_calls`, `duration_ms`, and `models` (the same per model).
//!
//! Provider failures are not in the JSON stream: the CLI retries on its own (ten attempts,
//! backoff up to 30 s) and says so on **stderr** only: `Attempt 2 failed with status 429.
//! Retrying with backoff... _ApiError: {...}`, `Attempt 1 failed. Retrying with backoff...
//! Error: exception TypeError: fetch failed sending request`. The adapter therefore runs the
//! CLI with stderr joined to stdout (one stream, so a retry line and the answer that ends
//! the failure keep their order), and the parser reads both: JSON lines as events, the
//! other lines as the CLI's log. When retries are exhausted, or the provider refused the
//! request outright (401), the `result` is an error whose message holds the provider's
//! answer (`[API Error: {"error":{"code":401,...}}]`).
//!
//! Gemini CLI reports no cost: `cost_usd` stays `None`.

use super::provider::{status_in, FailureRun, ProviderErrorKind};
use super::Observations;
use super::{check_parameters, check_program_and_model, choice_parameter, count};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Parameters the `gemini-cli` adapter accepts.
pub const PARAMETERS: &[&str] = &["approval_mode"];

/// Values of `approval_mode` (the CLI's `--approval-mode`); `plan` is read-only.
pub const APPROVAL_MODES: &[&str] = &["yolo", "auto_edit", "plan"];

/// The non-interactive launch of Gemini CLI:
///
/// ```text
/// <program> --output-format stream-json --approval-mode A [--model M] <extra_args...>
///     --prompt <instruction>
/// ```
///
/// `--prompt` takes the instruction as its value, so an instruction starting with `-` is
/// never read as an option. Parameter `approval_mode` (default `yolo`: headless runs cannot
/// answer a confirmation, and an unconfirmed tool call is refused).
pub fn gemini_cli_argv(
    program: &str,
    model: Option<&str>,
    instruction: &str,
    parameters: &BTreeMap<String, Value>,
    extra_args: &[String],
) -> Result<Vec<String>, String> {
    check_program_and_model("gemini-cli", program, model)?;
    check_parameters("gemini-cli", parameters, PARAMETERS)?;
    let mode = choice_parameter(
        "gemini-cli",
        parameters,
        "approval_mode",
        APPROVAL_MODES,
        "yolo",
    )?;
    let mut argv: Vec<String> = [
        program,
        "--output-format",
        "stream-json",
        "--approval-mode",
        mode,
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

/// Counts model requests from the events: the first assistant output (text or a tool call)
/// after the start or after tool results begins one. Tool calls answered together count as
/// one request, so the count is exact for one call per response and a lower bound otherwise.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    pub(crate) count: u64,
    in_response: bool,
}

impl Requests {
    /// An assistant message piece or a tool call: part of a model response.
    pub(crate) fn output(&mut self) -> bool {
        let new = !self.in_response;
        if new {
            self.count += 1;
            self.in_response = true;
        }
        new
    }

    /// A tool result: the next output is the answer to a new request.
    pub(crate) fn tool_result(&mut self) {
        self.in_response = false;
    }
}

/// Reads Gemini CLI's `stream-json` output joined with its stderr (see the module docs).
///
/// - `turns`: model requests ([`Requests`]) once any event was seen.
/// - tokens: the `result`'s `stats` (uncached `input`, else `input_tokens - cached`);
///   unknown without a `result`.
/// - `final_message`: the last assistant message (its `delta` pieces joined).
/// - `model`: the only model of `stats.models` when there is exactly one (the model that
///   answered, after any fallback), else the `init` event's.
/// - `reported_error`: the `result`'s `status` is not `success`; `error_text` its message.
/// - `provider_error`: see [`failure_of_line`] and [`failure_of_message`]; a model answer
///   afterwards clears it.
pub fn parse_gemini_cli(stdout: &str) -> Observations {
    let mut seen = false;
    let mut requests = Requests::default();
    let mut init_model: Option<String> = None;
    let mut message: Option<String> = None;
    let mut last_message: Option<String> = None;
    let mut result: Option<Map<String, Value>> = None;
    let mut provider = FailureRun::default();

    for line in stdout.lines() {
        let trimmed = line.trim().trim_start_matches('\u{feff}');
        let event = match trimmed.starts_with('{') {
            true => match serde_json::from_str::<Value>(trimmed) {
                Ok(Value::Object(map)) => Some(map),
                _ => None,
            },
            false => None,
        };
        let Some(event) = event else {
            if let Some((kind, status)) = failure_of_line(trimmed) {
                provider.fail(kind, status, trimmed.to_string());
            }
            continue;
        };
        let s = |k: &str| event.get(k).and_then(Value::as_str);
        match s("type") {
            Some("init") => {
                seen = true;
                init_model = s("model").map(str::to_string).or(init_model);
            }
            Some("message") if s("role") == Some("assistant") => {
                seen = true;
                provider.recover();
                if requests.output() {
                    message = None;
                }
                let piece = s("content").unwrap_or_default();
                let delta = event.get("delta").and_then(Value::as_bool) == Some(true);
                match (&mut message, delta) {
                    (Some(m), true) => m.push_str(piece),
                    (m, _) => *m = Some(piece.to_string()),
                }
                last_message = message.clone();
            }
            Some("tool_use") => {
                seen = true;
                provider.recover();
                if requests.output() {
                    message = None;
                }
            }
            Some("tool_result") => {
                seen = true;
                requests.tool_result();
                message = None;
            }
            Some("result") => {
                seen = true;
                result = Some(event);
            }
            Some(_) => seen = true,
            None => {}
        }
    }

    let mut obs = Observations {
        turns: seen.then_some(requests.count),
        final_message: last_message.filter(|m| !m.trim().is_empty()),
        model: init_model,
        ..Observations::default()
    };
    if let Some(r) = result {
        if let Some(stats) = r.get("stats").and_then(Value::as_object) {
            let prompt = count(stats.get("input_tokens"));
            let cached = count(stats.get("cached"));
            obs.cached_input_tokens = cached;
            obs.input_tokens = count(stats.get("input"))
                .or_else(|| prompt.map(|p| p.saturating_sub(cached.unwrap_or(0))));
            obs.output_tokens = count(stats.get("output_tokens"));
            if let Some(models) = stats.get("models").and_then(Value::as_object) {
                if models.len() == 1 {
                    obs.model = models.keys().next().cloned().or(obs.model);
                }
            }
        }
        let status = r.get("status").and_then(Value::as_str);
        obs.reported_error = status.map(|s| s != "success");
        if obs.reported_error == Some(true) {
            let text = r
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some((kind, status)) = text.as_deref().and_then(failure_of_message) {
                provider.settle(kind, status, text.clone().unwrap_or_default());
            }
            obs.error_text = text.or_else(|| status.map(str::to_string));
        }
    }
    obs.provider_error = provider.finish();
    if obs.provider_error.is_some() {
        // No answer was measured: the CLI's zeros are not measurements.
        for v in [
            &mut obs.input_tokens,
            &mut obs.cached_input_tokens,
            &mut obs.output_tokens,
        ] {
            if *v == Some(0) {
                *v = None;
            }
        }
        if obs.error_text.is_none() {
            obs.error_text = obs.provider_error.as_ref().map(|e| e.message.clone());
        }
    }
    obs
}

/// The provider failure a retry line of the CLI's log stands for: `Attempt N failed with
/// status 429`, `... with 429 error`, `... with 5xx error`, or a connection failure
/// (`fetch failed`, `ECONNREFUSED`, ...). Other lines (warnings, stack frames) are `None`.
pub fn failure_of_line(line: &str) -> Option<(ProviderErrorKind, Option<u16>)> {
    let l = line.trim_start();
    if !(l.starts_with("Attempt ") && l.contains(" failed")) {
        return None;
    }
    if let Some(s) = status_in(l) {
        return ProviderErrorKind::of_status(s).map(|k| (k, Some(s)));
    }
    if l.contains("with 429 error") {
        return Some((ProviderErrorKind::RateLimited, Some(429)));
    }
    if l.contains("with 5xx error") {
        return Some((ProviderErrorKind::ServerError, None));
    }
    unreachable_text(l).then_some((ProviderErrorKind::Unreachable, None))
}

/// The provider failure a final error message stands for: the HTTP code it quotes
/// (`"code":429`, `API Error: 401`, `status 503`) or a connection failure. A message that
/// names none (context too long, content blocked, a turn limit) is the agent's own outcome.
pub fn failure_of_message(message: &str) -> Option<(ProviderErrorKind, Option<u16>)> {
    if let Some(code) = quoted_code(message).or_else(|| status_in(message)) {
        return ProviderErrorKind::of_status(code).map(|k| (k, Some(code)));
    }
    unreachable_text(message).then_some((ProviderErrorKind::Unreachable, None))
}

/// Connection failures as Node's fetch and the SDKs word them.
pub(crate) fn unreachable_text(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "fetch failed",
        "econnrefused",
        "econnreset",
        "etimedout",
        "enotfound",
        "eai_again",
        "socket hang up",
        "connection error",
        "connection refused",
        "network error",
    ]
    .iter()
    .any(|w| t.contains(w))
}

/// An HTTP code quoted as `"code":NNN` (Google's error body) or after `API Error: `.
pub(crate) fn quoted_code(text: &str) -> Option<u16> {
    let three = |rest: &str| -> Option<u16> {
        let digits: String = rest
            .trim_start_matches([' ', '\\', '"', ':'])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        (digits.len() == 3)
            .then(|| digits.parse::<u16>().ok())
            .flatten()
            .filter(|n| (100..600).contains(n))
    };
    for marker in ["\"code\"", "\\\"code\\\"", "API Error: "] {
        let mut rest = text;
        while let Some(i) = rest.find(marker) {
            rest = &rest[i + marker.len()..];
            if let Some(n) = three(rest) {
                return Some(n);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SOLVED: &str = r#"{"type":"init","timestamp":"2026-12-06T13:01:48.813Z","session_id":"s1","model":"gemini-2.5-pro"}
{"type":"message","timestamp":"2026-12-06T13:01:48.814Z","role":"user","content":"write 42 to value.txt"}
Warning: 256-color support not detected.
{"type":"tool_use","timestamp":"2026-12-06T13:01:48.917Z","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"echo 42 > value.txt"}}
{"type":"tool_result","timestamp":"2026-12-06T13:01:48.959Z","tool_id":"t1","status":"success","output":""}
{"type":"message","timestamp":"2026-12-06T13:01:48.968Z","role":"assistant","content":"Done: value.txt ","delta":true}
{"type":"message","timestamp":"2026-12-06T13:01:48.969Z","role":"assistant","content":"now holds the answer.","delta":true}
{"type":"result","timestamp":"2026-12-06T13:01:48.970Z","status":"success","stats":{"total_tokens":220,"input_tokens":200,"output_tokens":20,"cached":40,"input":160,"duration_ms":158,"tool_calls":1,"models":{"gemini-fake":{"total_tokens":220,"input_tokens":200,"output_tokens":20,"cached":40,"input":160}}}}
"#;

    #[test]
    fn argv_and_parameters() {
        let none = BTreeMap::new();
        let argv = gemini_cli_argv("gemini", Some("gemini-2.5-pro"), "-fix", &none, &[]).unwrap();
        assert_eq!(
            argv,
            [
                "gemini",
                "--output-format",
                "stream-json",
                "--approval-mode",
                "yolo",
                "--model",
                "gemini-2.5-pro",
                "--prompt=-fix"
            ]
        );
        let p: BTreeMap<String, Value> = [("approval_mode".to_string(), json!("plan"))].into();
        let argv = gemini_cli_argv("g", None, "x", &p, &["--debug".into()]).unwrap();
        assert_eq!(argv[4], "plan");
        assert_eq!(argv[5], "--debug");
        let bad: BTreeMap<String, Value> = [("approval_mode".to_string(), json!("ask"))].into();
        let e = gemini_cli_argv("g", None, "x", &bad, &[]).unwrap_err();
        assert!(e.contains("`approval_mode`") && e.contains("fix:"), "{e}");
        let e =
            gemini_cli_argv("g", None, "x", &[("max".into(), json!(1))].into(), &[]).unwrap_err();
        assert!(e.contains("`max`"), "{e}");
        assert!(gemini_cli_argv(" ", None, "x", &none, &[]).is_err());
    }

    #[test]
    fn a_solved_run() {
        let o = parse_gemini_cli(SOLVED);
        assert_eq!(o.turns, Some(2));
        assert_eq!(o.input_tokens, Some(160));
        assert_eq!(o.cached_input_tokens, Some(40));
        assert_eq!(o.output_tokens, Some(20));
        assert_eq!(o.cost_usd, None);
        assert_eq!(
            o.final_message.as_deref(),
            Some("Done: value.txt now holds the answer.")
        );
        assert_eq!(o.model.as_deref(), Some("gemini-fake"));
        assert_eq!(o.reported_error, Some(false));
        assert_eq!(o.error_text, None);
        assert_eq!(o.provider_error, None);
    }

    #[test]
    fn killed_before_its_result() {
        let cut: String = SOLVED.lines().take(5).map(|l| format!("{l}\n")).collect();
        let o = parse_gemini_cli(&cut);
        assert_eq!(o.turns, Some(1));
        assert_eq!((o.input_tokens, o.output_tokens), (None, None));
        assert_eq!(o.reported_error, None);
        assert_eq!(o.model.as_deref(), Some("gemini-2.5-pro"));
        assert_eq!(parse_gemini_cli("").turns, None);
    }

    /// A provider failure's kind and status and failures.
    type Failure = (ProviderErrorKind, Option<u16>, u32);

    #[test]
    fn provider_failures_by_kind() {
        use ProviderErrorKind::*;
        let init = r#"{"type":"init","session_id":"s","model":"m"}"#;
        let cases: &[(&str, Option<Failure>)] = &[
            (
                "Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {\"error\":{\"code\":429}}\n  status: 429\n}\nAttempt 2 failed with status 429. Retrying with backoff...",
                Some((RateLimited, Some(429), 2)),
            ),
            (
                "Attempt 1 failed with status 500. Retrying with backoff... _ApiError: x",
                Some((ServerError, Some(500), 1)),
            ),
            (
                "Attempt 3 failed with 5xx error. Retrying with backoff...",
                Some((ServerError, None, 1)),
            ),
            (
                "Attempt 1 failed. Retrying with backoff... Error: exception TypeError: fetch failed sending request",
                Some((Unreachable, None, 1)),
            ),
            (
                r#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":401,\"message\":\"API key not valid\",\"status\":\"UNAUTHENTICATED\"}}]"},"stats":{"input_tokens":0,"output_tokens":0,"cached":0,"input":0}}"#,
                Some((Unauthorized, Some(401), 1)),
            ),
            // The agent's own outcome: no provider failure.
            (
                r#"{"type":"result","status":"error","error":{"type":"unknown","message":"The input token count exceeds the maximum number of tokens allowed (1048576)."}}"#,
                None,
            ),
            ("Attempt to read the config failed badly", None),
            ("Ripgrep is not available. Falling back to GrepTool.", None),
        ];
        for (tail, want) in cases {
            let o = parse_gemini_cli(&format!("{init}\n{tail}\n"));
            let got = o
                .provider_error
                .as_ref()
                .map(|e| (e.kind, e.status, e.failures));
            assert_eq!(got, *want, "{tail}");
            if want.is_some() {
                assert!(o.error_text.is_some(), "{tail}");
                assert_eq!(o.output_tokens, None, "{tail}");
            }
        }
    }

    #[test]
    fn a_failure_the_cli_recovered_from_is_dropped() {
        let text = format!(
            "{}\nAttempt 1 failed with status 503. Retrying with backoff...\n{}",
            r#"{"type":"init","session_id":"s","model":"m"}"#,
            SOLVED.lines().skip(3).collect::<Vec<_>>().join("\n")
        );
        let o = parse_gemini_cli(&text);
        assert_eq!(o.provider_error, None);
        assert_eq!(o.reported_error, Some(false));
    }

    #[test]
    fn codes_quoted_in_messages() {
        for (text, want) in [
            (
                r#"[API Error: {"error":{"code":429,"message":"x"}}]"#,
                Some(429),
            ),
            (r#"{\"error\":{\"code\":503}}"#, Some(503)),
            ("[API Error: 401 rate limit exceeded]", Some(401)),
            ("code 4290", None),
            (r#""code":42"#, None),
        ] {
            assert_eq!(quoted_code(text), want, "{text}");
        }
    }
}
