//! opencode: `opencode run --format json --auto --print-logs --log-level ERROR ... -- <instruction>`.
//!
//! Followed: `opencode run --help` of `opencode-ai` 1.18.33 (`--format json` prints raw
//! JSON events, `--auto` approves every permission not explicitly denied, `-m
//! provider/model`, `--print-logs` and `--log-level` send its log to stderr) and its
//! output, recorded against akbench's fake provider. The events are JSON Lines `{type,
//! timestamp (epoch ms), sessionID, part}`: `step_start`; `text {part.text}`; `reasoning
//! {part.text}`; `tool_use {part.tool, part.callID, part.state {status, input, output}}`
//! (emitted once the tool finished); `step_finish {part.reason, part.tokens {input, output,
//! reasoning, cache {read, write}}, part.cost}`, one per model request; and `error {error
//! {name, data {message, statusCode, isRetryable}}}` for a failure opencode gives up on.
//!
//! Provider failures opencode retries (429, 5xx, a refused connection) appear only in its
//! log, on stderr, without a status: `level=ERROR ... message="stream error" ... agent=build
//! ... error.error="AI_APICallError: <the provider's message>"`. The adapter joins stderr to
//! stdout (as for Gemini CLI) so the parser reads both in order. Such a line is read as the
//! provider unreachable when its message says so (`Cannot connect to API`), rate limited
//! when it names a rate limit, else a server error (opencode retries nothing else); lines of
//! side requests (`small=true`: session titles) are left out.
//!
//! Tokens: `input` is uncached (cache writes are added to it, as for Claude Code), `cache.read`
//! the cached input, `output + reasoning` the output. Cost: the sum of the steps' `cost`,
//! which opencode computes from its own price table (models.dev); a model it has no price
//! for costs 0 there, so a total of 0 is taken as unknown.

use super::gemini_cli::{quoted_code, unreachable_text};
use super::provider::{FailureRun, ProviderErrorKind};
use super::Observations;
use super::{check_parameters, check_program_and_model, count, sum_present};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Parameters the `opencode` adapter accepts (none yet).
pub const PARAMETERS: &[&str] = &[];

/// The non-interactive launch of opencode:
///
/// ```text
/// <program> run --format json --auto --print-logs --log-level ERROR [-m provider/model]
///     <extra_args...> -- <instruction>
/// ```
pub fn opencode_argv(
    program: &str,
    model: Option<&str>,
    instruction: &str,
    parameters: &BTreeMap<String, Value>,
    extra_args: &[String],
) -> Result<Vec<String>, String> {
    check_program_and_model("opencode", program, model)?;
    check_parameters("opencode", parameters, PARAMETERS)?;
    if let Some(m) = model {
        if !m.contains('/') {
            return Err(format!(
                "the opencode adapter's model `{m}` names no provider; fix: write it as provider/model, e.g. anthropic/claude-sonnet-4-5"
            ));
        }
    }
    let mut argv: Vec<String> = [
        program,
        "run",
        "--format",
        "json",
        "--auto",
        "--print-logs",
        "--log-level",
        "ERROR",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(m) = model {
        argv.extend(["-m".to_string(), m.to_string()]);
    }
    argv.extend(extra_args.iter().cloned());
    argv.extend(["--".to_string(), instruction.to_string()]);
    Ok(argv)
}

/// A step's token counts as opencode reports them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tokens {
    pub(crate) input: Option<u64>,
    pub(crate) output: Option<u64>,
    pub(crate) reasoning: Option<u64>,
    pub(crate) cache_read: Option<u64>,
    pub(crate) cache_write: Option<u64>,
}

impl Tokens {
    pub(crate) fn read(part: &Map<String, Value>) -> Option<Tokens> {
        let t = part.get("tokens")?.as_object()?;
        let cache = t.get("cache").and_then(Value::as_object);
        Some(Tokens {
            input: count(t.get("input")),
            output: count(t.get("output")),
            reasoning: count(t.get("reasoning")),
            cache_read: cache.and_then(|c| count(c.get("read"))),
            cache_write: cache.and_then(|c| count(c.get("write"))),
        })
    }
    pub(crate) fn uncached(&self) -> Option<u64> {
        sum_present([self.input, self.cache_write])
    }
    pub(crate) fn produced(&self) -> Option<u64> {
        sum_present([self.output, self.reasoning])
    }
}

/// The provider failure an opencode log line stands for (see the module documentation).
pub fn failure_of_log_line(line: &str) -> Option<(ProviderErrorKind, Option<u16>, String)> {
    if !(line.contains("message=\"stream error\"") && line.contains("level=ERROR"))
        || line.contains("small=true")
    {
        return None;
    }
    let message = line
        .split_once("error.error=\"")
        .map(|(_, rest)| rest.trim_end_matches('"').to_string())
        .unwrap_or_else(|| line.to_string());
    let lower = message.to_ascii_lowercase();
    let (kind, status) = if lower.contains("cannot connect to api") || unreachable_text(&lower) {
        (ProviderErrorKind::Unreachable, None)
    } else if ["rate limit", "too many requests", "429", "quota"]
        .iter()
        .any(|w| lower.contains(w))
    {
        (ProviderErrorKind::RateLimited, None)
    } else {
        (ProviderErrorKind::ServerError, None)
    };
    Some((kind, status, message))
}

/// Reads opencode's `--format json` output joined with its log (see the module docs).
///
/// - `turns`: the `step_finish` events (one per model request).
/// - tokens and cost: summed over the steps (see the module documentation).
/// - `final_message`: the last `text` part.
/// - `reported_error`: true after an `error` event; false once a step finished without one;
///   `error_text` the error's message.
/// - `provider_error`: a retried request's log line, or an `error` event with a provider
///   status (`statusCode` 401, 429, 5xx); a finished step afterwards clears it.
pub fn parse_opencode(stdout: &str) -> Observations {
    let mut steps: Vec<Tokens> = Vec::new();
    let mut costs: Vec<f64> = Vec::new();
    let mut last_text: Option<String> = None;
    let mut error: Option<String> = None;
    let mut seen = false;
    let mut provider = FailureRun::default();

    for line in stdout.lines() {
        let trimmed = line.trim();
        let event = match trimmed.starts_with('{') {
            true => match serde_json::from_str::<Value>(trimmed) {
                Ok(Value::Object(map)) => Some(map),
                _ => None,
            },
            false => None,
        };
        let Some(event) = event else {
            if let Some((kind, status, message)) = failure_of_log_line(trimmed) {
                provider.fail(kind, status, message);
            }
            continue;
        };
        let part = event.get("part").and_then(Value::as_object);
        match event.get("type").and_then(Value::as_str) {
            Some("step_start") => seen = true,
            Some("step_finish") => {
                seen = true;
                provider.recover();
                if let Some(p) = part {
                    steps.push(Tokens::read(p).unwrap_or_default());
                    if let Some(c) = p
                        .get("cost")
                        .and_then(Value::as_f64)
                        .filter(|c| c.is_finite() && *c >= 0.0)
                    {
                        costs.push(c);
                    }
                }
            }
            Some("text") => {
                seen = true;
                if let Some(t) = part.and_then(|p| p.get("text")).and_then(Value::as_str) {
                    if !t.trim().is_empty() {
                        last_text = Some(t.to_string());
                    }
                }
            }
            Some("error") => {
                seen = true;
                let e = event.get("error");
                let data = e.and_then(|e| e.get("data"));
                let message = data
                    .and_then(|d| d.get("message"))
                    .and_then(Value::as_str)
                    .or_else(|| e.and_then(|e| e.get("name")).and_then(Value::as_str))
                    .unwrap_or("error")
                    .to_string();
                let status = data
                    .and_then(|d| count(d.get("statusCode")))
                    .and_then(|s| u16::try_from(s).ok())
                    .or_else(|| quoted_code(&message));
                match status.and_then(ProviderErrorKind::of_status) {
                    Some(kind) => provider.settle(kind, status, message.clone()),
                    None if unreachable_text(&message)
                        || message.contains("Cannot connect to API") =>
                    {
                        provider.settle(ProviderErrorKind::Unreachable, None, message.clone())
                    }
                    None => {}
                }
                error = Some(message);
            }
            Some(_) => seen = true,
            None => {}
        }
    }
    let sum = |f: fn(&Tokens) -> Option<u64>| sum_present(steps.iter().map(f));
    let cost: f64 = costs.iter().sum();
    let mut obs = Observations {
        turns: seen.then_some(steps.len() as u64),
        input_tokens: sum(Tokens::uncached),
        cached_input_tokens: sum(|t| t.cache_read),
        output_tokens: sum(Tokens::produced),
        cost_usd: (cost > 0.0).then_some(cost),
        cost_computed: false,
        final_message: last_text,
        reported_error: if error.is_some() {
            Some(true)
        } else if !steps.is_empty() {
            Some(false)
        } else {
            None
        },
        error_text: error,
        ..Observations::default()
    };
    obs.provider_error = provider.finish();
    if obs.provider_error.is_some() && obs.error_text.is_none() {
        obs.error_text = obs.provider_error.as_ref().map(|e| e.message.clone());
    }
    obs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SOLVED: &str = r#"{"type":"step_start","timestamp":1796563771004,"sessionID":"ses_1","part":{"id":"p1","messageID":"m1","sessionID":"ses_1","type":"step-start"}}
{"type":"tool_use","timestamp":1796563771861,"sessionID":"ses_1","part":{"type":"tool","tool":"bash","callID":"call_1","state":{"status":"completed","input":{"command":"echo 42 > value.txt"},"output":"(no output)","metadata":{"exit":0}},"id":"p2","messageID":"m1"}}
{"type":"step_finish","timestamp":1796563772511,"sessionID":"ses_1","part":{"id":"p3","reason":"tool-calls","messageID":"m1","type":"step-finish","tokens":{"total":110,"input":80,"output":10,"reasoning":0,"cache":{"write":0,"read":20}},"cost":0.0015}}
timestamp=2026-12-06T13:33:56.038Z level=ERROR run=1 message="Failed to fetch models.dev"
{"type":"step_start","timestamp":1796563774874,"sessionID":"ses_1","part":{"id":"p4","messageID":"m2","type":"step-start"}}
{"type":"text","timestamp":1796563774874,"sessionID":"ses_1","part":{"id":"p5","messageID":"m2","type":"text","text":"Done."}}
{"type":"step_finish","timestamp":1796563777019,"sessionID":"ses_1","part":{"id":"p6","reason":"stop","messageID":"m2","type":"step-finish","tokens":{"total":110,"input":80,"output":10,"reasoning":0,"cache":{"write":0,"read":20}},"cost":0.0015}}"#;

    #[test]
    fn argv_and_parameters() {
        let none = BTreeMap::new();
        let argv = opencode_argv("opencode", Some("fake/m1"), "-x", &none, &[]).unwrap();
        assert_eq!(
            argv.join(" "),
            "opencode run --format json --auto --print-logs --log-level ERROR -m fake/m1 -- -x"
        );
        let e = opencode_argv("opencode", Some("m1"), "x", &none, &[]).unwrap_err();
        assert!(e.contains("provider/model") && e.contains("fix:"), "{e}");
        let p: BTreeMap<String, Value> = [("max_turns".to_string(), json!(3))].into();
        assert!(opencode_argv("opencode", None, "x", &p, &[])
            .unwrap_err()
            .contains("`max_turns`"));
    }

    #[test]
    fn a_solved_run() {
        let o = parse_opencode(SOLVED);
        assert_eq!(o.turns, Some(2));
        assert_eq!(o.input_tokens, Some(160));
        assert_eq!(o.cached_input_tokens, Some(40));
        assert_eq!(o.output_tokens, Some(20));
        assert_eq!(o.cost_usd, Some(0.003));
        assert_eq!(o.final_message.as_deref(), Some("Done."));
        assert_eq!(o.reported_error, Some(false));
        assert_eq!(o.provider_error, None);
        // A model opencode has no price for: 0 is unknown, not free.
        let free = SOLVED.replace("\"cost\":0.0015", "\"cost\":0");
        assert_eq!(parse_opencode(&free).cost_usd, None);
    }

    /// A provider failure's kind and status.
    type Kind = (ProviderErrorKind, Option<u16>);

    #[test]
    fn provider_failures_by_kind() {
        use ProviderErrorKind::*;
        let log = |m: &str, small: bool| {
            format!("timestamp=2026-12-06T13:33:28.716Z level=ERROR run=1 message=\"stream error\" providerID=fake modelID=m1 session.id=s small={small} agent=build mode=primary error.error=\"AI_APICallError: {m}\"")
        };
        let error_event = |code: u16, m: &str| {
            json!({"type": "error", "timestamp": 1, "sessionID": "s", "error": {"name": "APIError",
                "data": {"message": m, "statusCode": code, "isRetryable": false}}})
            .to_string()
        };
        let cases: Vec<(String, Option<Kind>)> = vec![
            (
                log("Cannot connect to API: Unable to connect.", false),
                Some((Unreachable, None)),
            ),
            (
                log("rate limit exceeded, slow down", false),
                Some((RateLimited, None)),
            ),
            (
                log("internal server error", false),
                Some((ServerError, None)),
            ),
            (log("internal server error", true), None),
            (
                error_event(401, "invalid x-api-key"),
                Some((Unauthorized, Some(401))),
            ),
            (error_event(400, "prompt is too long"), None),
            (
                format!("{}\n{SOLVED}", log("internal server error", false)),
                None,
            ),
        ];
        for (text, want) in cases {
            let o = parse_opencode(&text);
            let got = o.provider_error.as_ref().map(|e| (e.kind, e.status));
            assert_eq!(got, want, "{text}");
            if want.is_some() {
                assert!(o.error_text.is_some());
                assert_eq!(o.output_tokens, None);
            }
        }
        let o = parse_opencode(&error_event(400, "prompt is too long"));
        assert_eq!(o.reported_error, Some(true));
        assert_eq!(o.error_text.as_deref(), Some("prompt is too long"));
    }
}
