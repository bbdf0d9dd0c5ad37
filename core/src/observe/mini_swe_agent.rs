//! mini-swe-agent: `mini --yolo --exit-immediately --model M --task=<instruction>` (PyPI
//! `mini-swe-agent` 2.4.6; without `--exit-immediately` it asks for a new task when the
//! model submits, and fails reading it from an empty stdin).
//!
//! mini-swe-agent prints a human transcript (`mini-swe-agent (step N, $C):` before each
//! model answer) and its log on stderr, and saves its trajectory as JSON (`-o FILE`):
//! `{info {exit_status, submission, model_stats {instance_cost, api_calls}}, messages
//! [{role, content, tool_calls, extra {response {model, usage {prompt_tokens,
//! completion_tokens, prompt_tokens_details {cached_tokens}}}, cost, timestamp}}]}`. The
//! adapter's wrapper joins stderr to stdout, and once mini exits, prints [`MARKER`] and the
//! saved trajectory, so everything is in the one stream the worker reads.
//!
//! Provider failures: litellm's exceptions, retried by mini (tenacity, ten attempts) with a
//! log line `Retrying <unknown> in 4 seconds as it raised RateLimitError: ...`; the class
//! names the failure ([`failure_of_exception`]); a step header afterwards means the model
//! answered. When retries run out, the trajectory's `exit_status` is the exception's class.
//!
//! Tokens follow OpenAI's convention (`prompt_tokens` include the cached ones). Cost:
//! `model_stats.instance_cost`, which mini computes with litellm's price table; 0 (a model
//! litellm has no price for, with `MSWEA_COST_TRACKING=ignore_errors`) is taken as unknown.

use super::provider::{FailureRun, ProviderErrorKind};
use super::Observations;
use super::{check_parameters, check_program_and_model, count, sum_present};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Parameters the `mini-swe-agent` adapter accepts (none yet).
pub const PARAMETERS: &[&str] = &[];

/// The line the wrapper prints before the saved trajectory.
pub const MARKER: &str = "@@akbench: mini-swe-agent trajectory@@";

/// The non-interactive launch of mini-swe-agent (the wrapper adds `-o <file>`):
///
/// ```text
/// <program> --yolo --exit-immediately [--model M] <extra_args...> --task=<instruction>
/// ```
pub fn mini_swe_agent_argv(
    program: &str,
    model: Option<&str>,
    instruction: &str,
    parameters: &BTreeMap<String, Value>,
    extra_args: &[String],
) -> Result<Vec<String>, String> {
    check_program_and_model("mini-swe-agent", program, model)?;
    check_parameters("mini-swe-agent", parameters, PARAMETERS)?;
    let mut argv = vec![
        program.to_string(),
        "--yolo".to_string(),
        "--exit-immediately".to_string(),
    ];
    if let Some(m) = model {
        argv.extend(["--model".to_string(), m.to_string()]);
    }
    argv.extend(extra_args.iter().cloned());
    argv.push(format!("--task={instruction}"));
    Ok(argv)
}

/// The provider failure a litellm exception class stands for.
pub fn failure_of_exception(class: &str) -> Option<(ProviderErrorKind, Option<u16>)> {
    use ProviderErrorKind::*;
    Some(match class {
        "RateLimitError" => (RateLimited, Some(429)),
        "InternalServerError" | "ServiceUnavailableError" | "BadGatewayError" => {
            (ServerError, None)
        }
        "APIConnectionError" | "Timeout" | "APITimeoutError" => (Unreachable, None),
        "AuthenticationError" | "PermissionDeniedError" => (Unauthorized, None),
        _ => return None,
    })
}

/// The log part and the saved trajectory of the wrapper's output.
pub(crate) fn split(stdout: &str) -> (&str, Option<Map<String, Value>>) {
    match stdout.rfind(MARKER) {
        None => (stdout, None),
        Some(i) => {
            let json = match serde_json::from_str::<Value>(stdout[i + MARKER.len()..].trim()) {
                Ok(Value::Object(m)) => Some(m),
                _ => None,
            };
            (&stdout[..i], json)
        }
    }
}

/// The assistant messages of a saved trajectory.
pub(crate) fn assistant_messages(t: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    t.get("messages")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .filter_map(Value::as_object)
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .collect()
        })
        .unwrap_or_default()
}

/// A message's usage: (prompt including cached, cached, completion).
pub(crate) fn usage_of(m: &Map<String, Value>) -> Option<(Option<u64>, Option<u64>, Option<u64>)> {
    let u = m.get("extra")?.get("response")?.get("usage")?;
    Some((
        count(u.get("prompt_tokens")),
        count(
            u.get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
        count(u.get("completion_tokens")),
    ))
}

/// Reads the wrapper's output (see the module documentation).
pub fn parse_mini_swe_agent(stdout: &str) -> Observations {
    let (log, saved) = split(stdout);
    let mut provider = FailureRun::default();
    let mut steps: u64 = 0;
    for line in log.lines() {
        let l = line.trim();
        if l.starts_with("mini-swe-agent (step ") {
            steps += 1;
            provider.recover();
        } else if let Some(rest) = l.strip_prefix("Retrying ") {
            let class = rest
                .split_once(" as it raised ")
                .map(|(_, c)| c.split(':').next().unwrap_or_default().trim());
            // litellm reports a refused connection as an InternalServerError.
            let connection = l.contains("Connection error") || l.contains("APIConnectionError");
            let failure = match class.and_then(failure_of_exception) {
                Some(_) if connection => Some((ProviderErrorKind::Unreachable, None)),
                other => other,
            };
            if let Some((kind, status)) = failure {
                provider.fail(kind, status, l.to_string());
            }
        }
    }
    let mut obs = Observations {
        turns: (steps > 0).then_some(steps),
        ..Observations::default()
    };
    if let Some(t) = saved {
        let info = t.get("info");
        let messages = assistant_messages(&t);
        let usages: Vec<_> = messages.iter().filter_map(|m| usage_of(m)).collect();
        let prompt = sum_present(usages.iter().map(|u| u.0));
        let cached = sum_present(usages.iter().map(|u| u.1));
        obs.cached_input_tokens = cached;
        obs.input_tokens = prompt.map(|p| p.saturating_sub(cached.unwrap_or(0)));
        obs.output_tokens = sum_present(usages.iter().map(|u| u.2));
        let stats = info.and_then(|i| i.get("model_stats"));
        obs.turns = stats.and_then(|s| count(s.get("api_calls"))).or(obs.turns);
        obs.cost_usd = stats
            .and_then(|s| s.get("instance_cost"))
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c > 0.0);
        obs.final_message = messages.iter().rev().find_map(|m| {
            m.get("content")
                .and_then(Value::as_str)
                .filter(|c| !c.trim().is_empty())
                .map(str::to_string)
        });
        obs.model = messages.iter().rev().find_map(|m| {
            m.get("extra")?
                .get("response")?
                .get("model")?
                .as_str()
                .map(str::to_string)
        });
        let exit = info
            .and_then(|i| i.get("exit_status"))
            .and_then(Value::as_str);
        obs.reported_error = exit.map(|e| e != "Submitted");
        if obs.reported_error == Some(true) {
            let submission = info
                .and_then(|i| i.get("submission"))
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty());
            let exit = exit.unwrap_or_default();
            obs.error_text = Some(match submission {
                Some(s) => format!("{exit}: {s}"),
                None => exit.to_string(),
            });
            if let Some((kind, status)) = failure_of_exception(exit) {
                provider.settle(kind, status, obs.error_text.clone().unwrap_or_default());
            }
        } else if exit == Some("Submitted") {
            provider.recover();
        }
    }
    obs.provider_error = provider.finish();
    if obs.provider_error.is_some() {
        if obs.error_text.is_none() {
            obs.error_text = obs.provider_error.as_ref().map(|e| e.message.clone());
        }
        if obs.output_tokens == Some(0) || messages_empty(stdout) {
            obs.input_tokens = None;
            obs.cached_input_tokens = None;
            obs.output_tokens = None;
        }
    }
    obs
}

/// True when the saved trajectory (if any) holds no assistant message.
fn messages_empty(stdout: &str) -> bool {
    split(stdout)
        .1
        .is_none_or(|t| assistant_messages(&t).is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn saved(exit: &str, cost: f64) -> String {
        let usage = json!({"prompt_tokens": 100, "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 20}});
        let t = json!({"info": {"exit_status": exit, "submission": "",
            "model_stats": {"instance_cost": cost, "api_calls": 2}},
        "messages": [
            {"role": "system", "content": "You are..."},
            {"role": "user", "content": "Please solve this issue: x"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "bash", "arguments": "{\"command\": \"echo 42 > value.txt\"}"}}],
             "extra": {"response": {"model": "m1", "usage": usage}, "cost": 0.0, "timestamp": 1796564917.4}},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"returncode\": 0, \"output\": \"\"}"},
            {"role": "assistant", "content": "Done.", "tool_calls": [{"id": "c2", "type": "function",
                "function": {"name": "bash", "arguments": "{\"command\": \"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\"}"}}],
             "extra": {"response": {"model": "m1", "usage": usage}, "timestamp": 1796564918.4}},
            {"role": "exit", "content": "", "extra": {"exit_status": exit}}
        ]});
        format!(
            "mini-swe-agent (step 1, $0.00):\nmini-swe-agent (step 2, $0.00):\nExit:\n\n{MARKER}\n{}\n",
            serde_json::to_string_pretty(&t).unwrap()
        )
    }

    #[test]
    fn argv() {
        let none = BTreeMap::new();
        assert_eq!(
            mini_swe_agent_argv("mini", Some("openai/m1"), "-x", &none, &[]).unwrap(),
            [
                "mini",
                "--yolo",
                "--exit-immediately",
                "--model",
                "openai/m1",
                "--task=-x"
            ]
        );
        let p: BTreeMap<String, Value> = [("sandbox".to_string(), json!("x"))].into();
        assert!(mini_swe_agent_argv("mini", None, "x", &p, &[]).is_err());
    }

    #[test]
    fn a_submitted_run() {
        let o = parse_mini_swe_agent(&saved("Submitted", 0.0));
        assert_eq!(o.turns, Some(2));
        assert_eq!(
            (o.input_tokens, o.cached_input_tokens, o.output_tokens),
            (Some(160), Some(40), Some(20))
        );
        assert_eq!(o.cost_usd, None, "0 is no price, not free");
        assert_eq!(o.final_message.as_deref(), Some("Done."));
        assert_eq!(o.model.as_deref(), Some("m1"));
        assert_eq!(o.reported_error, Some(false));
        assert_eq!(o.provider_error, None);
        assert_eq!(
            parse_mini_swe_agent(&saved("Submitted", 0.25)).cost_usd,
            Some(0.25)
        );
    }

    #[test]
    fn provider_failures_by_kind() {
        use ProviderErrorKind::*;
        let retry = |class: &str| {
            format!("Retrying <unknown> in 4 seconds as it raised {class}: litellm.{class}: x\n")
        };
        let cases = [
            (retry("RateLimitError"), Some(RateLimited)),
            (retry("InternalServerError"), Some(ServerError)),
            (retry("APIConnectionError"), Some(Unreachable)),
            (
                "Retrying <unknown> in 4 seconds as it raised InternalServerError: litellm.InternalServerError: OpenAIException - Connection error..\n".to_string(),
                Some(Unreachable),
            ),
            (retry("ContextWindowExceededError"), None),
            (
                format!(
                    "{}mini-swe-agent (step 1, $0.00):\n",
                    retry("RateLimitError")
                ),
                None,
            ),
            (saved("AuthenticationError", 0.0), Some(Unauthorized)),
            (saved("LimitsExceeded", 0.0), None),
        ];
        for (text, want) in cases {
            let o = parse_mini_swe_agent(&text);
            assert_eq!(o.provider_error.as_ref().map(|e| e.kind), want, "{text}");
            if want.is_some() {
                assert!(o.error_text.is_some());
            }
        }
        let o = parse_mini_swe_agent(&saved("LimitsExceeded", 0.0));
        assert_eq!(o.reported_error, Some(true));
        assert_eq!(o.error_text.as_deref(), Some("LimitsExceeded"));
    }
}
