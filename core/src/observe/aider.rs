//! aider: `aider --yes-always --no-stream ... --message=<instruction>` (PyPI `aider-chat`
//! 0.86.2), one request of the user's, answered by file edits written in the model's text
//! (no tool calls: whole files or SEARCH/REPLACE blocks, by edit format).
//!
//! aider prints its chat as plain text (`--no-pretty`): the model's answer, then `Tokens: N
//! sent, M received.` (rounded above 999: `1.2k`) and `Applied edit to <file>` lines. Its
//! exact figures are in its analytics log (`--analytics-log FILE`, written even with
//! `--no-analytics`): one `message_send` event per answer `{prompt_tokens,
//! completion_tokens, cost, total_cost}`, an `exit` event at the end. Its chat history
//! (`--chat-history-file FILE`, Markdown) tells the model's text (plain lines) from the
//! user's (`#### `) and aider's own (`> `). The adapter's wrapper joins stderr to stdout and,
//! once aider exits, prints [`ANALYTICS_MARKER`] and the analytics log, then
//! [`HISTORY_MARKER`] and the chat history, so everything is in the one stream the worker
//! reads.
//!
//! Provider failures: aider prints litellm's exception (`litellm.RateLimitError: ...`) and
//! retries (`Retrying in 0.5 seconds...`, doubling up to 60 s, then it gives up); the class
//! names the failure ([`failure_of_exception`]); a `Tokens:` line afterwards means the model
//! answered. A refused credential is not retried.
//!
//! Tokens: `prompt_tokens` as the provider reports them (OpenAI's include the cached ones;
//! aider reads no cached count from an OpenAI-style usage), so `input_tokens` is what aider
//! sent and `cached_input_tokens` is unknown. Cost: aider's own computation with litellm's
//! price table; 0 (a model without a price) is taken as unknown.

use super::mini_swe_agent::failure_of_exception;
use super::provider::{FailureRun, ProviderErrorKind};
use super::Observations;
use super::{check_parameters, check_program_and_model, choice_parameter, count, json_objects};
use serde_json::Value;
use std::collections::BTreeMap;

/// Parameters the `aider` adapter accepts.
pub const PARAMETERS: &[&str] = &["edit_format"];

/// The edit formats `edit_format` takes (aider picks one by model when unset).
pub const EDIT_FORMATS: &[&str] = &[
    "whole",
    "diff",
    "diff-fenced",
    "udiff",
    "architect",
    "editor-whole",
    "editor-diff",
];

/// The line the wrapper prints before the analytics log.
pub const ANALYTICS_MARKER: &str = "@@akbench: aider analytics@@";

/// The line the wrapper prints before the chat history.
pub const HISTORY_MARKER: &str = "@@akbench: aider chat history@@";

/// The flags that make aider run one request unattended and leave only its edits behind:
/// every question answered yes, no commits, no `.gitignore` change, no update check,
/// analytics or release notes, no URL scraping, plain unstreamed output (the provider's own
/// usage, not a local token count).
const FLAGS: &[&str] = &[
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--no-check-update",
    "--no-analytics",
    "--no-show-model-warnings",
    "--no-show-release-notes",
    "--no-detect-urls",
    "--no-pretty",
    "--no-stream",
    "--no-fancy-input",
];

/// The non-interactive launch of aider (the wrapper adds the log files):
///
/// ```text
/// <program> <FLAGS...> [--model M] [--edit-format F] <extra_args...> --message=<instruction>
/// ```
pub fn aider_argv(
    program: &str,
    model: Option<&str>,
    instruction: &str,
    parameters: &BTreeMap<String, Value>,
    extra_args: &[String],
) -> Result<Vec<String>, String> {
    check_program_and_model("aider", program, model)?;
    check_parameters("aider", parameters, PARAMETERS)?;
    let mut argv = vec![program.to_string()];
    argv.extend(FLAGS.iter().map(|f| f.to_string()));
    if let Some(m) = model {
        argv.extend(["--model".to_string(), m.to_string()]);
    }
    if parameters.contains_key("edit_format") {
        let f = choice_parameter("aider", parameters, "edit_format", EDIT_FORMATS, "")?;
        argv.extend(["--edit-format".to_string(), f.to_string()]);
    }
    argv.extend(extra_args.iter().cloned());
    argv.push(format!("--message={instruction}"));
    Ok(argv)
}

/// The wrapper's output in three parts: aider's own output, the analytics log and the chat
/// history (empty when absent).
pub(crate) fn split(stdout: &str) -> (&str, &str, &str) {
    let Some(i) = stdout.rfind(ANALYTICS_MARKER) else {
        return (stdout, "", "");
    };
    let rest = &stdout[i + ANALYTICS_MARKER.len()..];
    match rest.find(HISTORY_MARKER) {
        Some(j) => (&stdout[..i], &rest[..j], &rest[j + HISTORY_MARKER.len()..]),
        None => (&stdout[..i], rest, ""),
    }
}

/// True when aider started its chat (its chat history has a line): a launch it refused (an
/// unknown flag) writes none.
pub fn started(stdout: &str) -> bool {
    !split(stdout).2.trim().is_empty()
}

/// One `message_send` event: an answer of the model's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Send {
    pub prompt: Option<u64>,
    pub completion: Option<u64>,
    /// This answer's cost, when above 0.
    pub cost: Option<f64>,
    /// Epoch seconds.
    pub time: Option<i64>,
}

/// What the analytics log says.
#[derive(Debug, Default)]
pub(crate) struct Analytics {
    pub sends: Vec<Send>,
    /// The session's cost, when above 0.
    pub total_cost: Option<f64>,
    pub edit_format: Option<String>,
    /// The `exit` event's reason.
    pub exit: Option<String>,
    /// `message_send_exception` events' texts.
    pub exceptions: Vec<String>,
}

/// A cost above 0 (0 is a model without a price: unknown, not free).
fn positive(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c > 0.0)
}

/// Reads the analytics log (JSON lines; anything else skipped).
pub(crate) fn analytics(log: &str) -> Analytics {
    let mut a = Analytics::default();
    for e in json_objects(log) {
        let p = e.get("properties").and_then(Value::as_object);
        let get = |k: &str| p.and_then(|p| p.get(k));
        match e.get("event").and_then(Value::as_str) {
            Some("message_send") => {
                a.sends.push(Send {
                    prompt: count(get("prompt_tokens")),
                    completion: count(get("completion_tokens")),
                    cost: positive(get("cost")),
                    time: e.get("time").and_then(Value::as_i64),
                });
                a.total_cost = positive(get("total_cost")).or(a.total_cost);
                if let Some(f) = get("edit_format").and_then(Value::as_str) {
                    a.edit_format = Some(f.to_string());
                }
            }
            Some("message_send_exception") => {
                let text = get("exception").and_then(Value::as_str).unwrap_or_default();
                a.exceptions.push(text.to_string());
            }
            Some("exit") => {
                a.exit = Some(get("reason").and_then(Value::as_str).unwrap_or("").into());
            }
            _ => {}
        }
    }
    a
}

/// A part of the chat history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A request (`#### ` lines).
    User(String),
    /// The model's text.
    Assistant(String),
    /// One of aider's own lines (`> `).
    Note(String),
}

/// The chat history's entries after its first request (the start banner is left out).
pub(crate) fn history(md: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = vec![];
    let mut text: Vec<&str> = vec![];
    let flush = |text: &mut Vec<&str>, out: &mut Vec<Entry>| {
        let t = text.join("\n");
        text.clear();
        if !t.trim().is_empty() && !out.is_empty() {
            out.push(Entry::Assistant(t.trim().to_string()));
        }
    };
    for line in md.lines() {
        if let Some(u) = line.strip_prefix("####") {
            flush(&mut text, &mut out);
            let u = u.strip_prefix(' ').unwrap_or(u).trim_end();
            match out.last_mut() {
                Some(Entry::User(prev)) => {
                    prev.push('\n');
                    prev.push_str(u);
                }
                _ => out.push(Entry::User(u.to_string())),
            }
        } else if let Some(n) = line.strip_prefix('>') {
            flush(&mut text, &mut out);
            if !out.is_empty() {
                out.push(Entry::Note(n.trim().to_string()));
            }
        } else if line.starts_with("# aider chat started at ") {
            flush(&mut text, &mut out);
        } else {
            text.push(line);
        }
    }
    flush(&mut text, &mut out);
    out
}

/// The provider failure an aider output line reports (`litellm.<Class>: ...`).
pub fn failure_of_line(line: &str) -> Option<(ProviderErrorKind, Option<u16>)> {
    let rest = line.trim().strip_prefix("litellm.")?;
    let (class, _) = rest.split_once(':')?;
    let failure = failure_of_exception(class)?;
    // litellm reports a refused connection as an InternalServerError.
    if line.contains("Connection error") || class == "APIConnectionError" {
        return Some((ProviderErrorKind::Unreachable, None));
    }
    Some(failure)
}

/// The model aider says it uses (`Model: M with whole edit format`).
fn model_of(log: &str) -> Option<String> {
    log.lines().find_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("Model: ")
            .or_else(|| l.strip_prefix("Main model: "))?;
        let (m, _) = rest.split_once(" with ")?;
        Some(m.trim().to_string())
    })
}

/// Reads the wrapper's output (see the module documentation).
pub fn parse_aider(stdout: &str) -> Observations {
    let (log, events, md) = split(stdout);
    let mut provider = FailureRun::default();
    let mut answers: u64 = 0;
    for line in log.lines() {
        let l = line.trim();
        if l.starts_with("Tokens: ") {
            answers += 1;
            provider.recover();
        } else if let Some((kind, status)) = failure_of_line(l) {
            provider.fail(kind, status, l.to_string());
        }
    }
    let a = analytics(events);
    let mut obs = Observations {
        turns: (answers > 0).then_some(answers),
        model: model_of(log),
        ..Observations::default()
    };
    if !a.sends.is_empty() {
        obs.turns = Some(a.sends.len() as u64);
        obs.input_tokens = super::sum_present(a.sends.iter().map(|s| s.prompt));
        obs.output_tokens = super::sum_present(a.sends.iter().map(|s| s.completion));
        obs.cost_usd = a.total_cost;
    }
    obs.final_message = history(md).into_iter().rev().find_map(|e| match e {
        Entry::Assistant(t) => Some(t),
        _ => None,
    });
    obs.provider_error = provider.finish();
    if let Some(e) = &obs.provider_error {
        obs.reported_error = Some(true);
        obs.error_text = Some(e.message.clone());
    } else if let Some(x) = a.exceptions.last() {
        obs.reported_error = Some(true);
        obs.error_text = Some(x.clone());
    } else if a.exit.is_some() {
        obs.reported_error = Some(false);
    }
    obs
}

/// The analytics log, the chat history and the model of the wrapper's output, for the
/// trajectory.
pub(crate) fn answers(stdout: &str) -> (Analytics, Vec<Entry>, Option<String>) {
    let (log, events, md) = split(stdout);
    (analytics(events), history(md), model_of(log))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use ProviderErrorKind::*;

    const HISTORY: &str = "\n# aider chat started at 2026-12-06 16:45:17\n\n> Aider v0.86.2  \n> Model: openai/m1 with whole edit format  \n\n#### value.txt should hold the answer.  \n> value.txt  \n> Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y  \n\nI will write it.\n\nvalue.txt\n```\n42\n```\n\n> Tokens: 100 sent, 10 received.  \n> Applied edit to value.txt  \n";

    fn events(cost: f64) -> String {
        [
            json!({"event": "launched", "properties": {}, "time": 1}),
            json!({"event": "message_send", "properties": {"edit_format": "whole",
                "prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
                "cost": cost, "total_cost": cost}, "time": 1796575521}),
            json!({"event": "exit", "properties": {"reason": "Completed --message"}, "time": 2}),
        ]
        .iter()
        .map(|e| e.to_string() + "\n")
        .collect()
    }

    fn output(log: &str, events: &str, md: &str) -> String {
        format!("{log}\n{ANALYTICS_MARKER}\n{events}\n{HISTORY_MARKER}\n{md}")
    }

    #[test]
    fn argv() {
        let none = BTreeMap::new();
        let a = aider_argv("aider", Some("openai/m1"), "-x", &none, &["--y".into()]).unwrap();
        assert_eq!(a[0], "aider");
        assert!(a.contains(&"--yes-always".to_string()));
        assert_eq!(
            &a[a.len() - 4..],
            ["--model", "openai/m1", "--y", "--message=-x"]
        );
        let p: BTreeMap<String, Value> = [("edit_format".to_string(), json!("diff"))].into();
        let a = aider_argv("aider", None, "x", &p, &[]).unwrap();
        assert_eq!(&a[a.len() - 3..], ["--edit-format", "diff", "--message=x"]);
        let p: BTreeMap<String, Value> = [("edit_format".to_string(), json!("bogus"))].into();
        let e = aider_argv("aider", None, "x", &p, &[]).unwrap_err();
        assert!(e.contains("edit_format") && e.contains("\"whole\""), "{e}");
        let p: BTreeMap<String, Value> = [("sandbox".to_string(), json!("x"))].into();
        assert!(aider_argv("aider", None, "x", &p, &[]).is_err());
        assert!(aider_argv(" ", None, "x", &none, &[]).is_err());
    }

    #[test]
    fn solved_run() {
        let log = "Aider v0.86.2\nModel: openai/m1 with whole edit format\nTokens: 100 sent, 10 received.\nApplied edit to value.txt\n";
        let o = parse_aider(&output(log, &events(0.0), HISTORY));
        assert_eq!(o.turns, Some(1));
        assert_eq!(
            (o.input_tokens, o.cached_input_tokens, o.output_tokens),
            (Some(100), None, Some(10))
        );
        assert_eq!(o.cost_usd, None, "0 is no price, not free");
        assert_eq!(o.model.as_deref(), Some("openai/m1"));
        assert_eq!(
            o.final_message.as_deref(),
            Some("I will write it.\n\nvalue.txt\n```\n42\n```")
        );
        assert_eq!(o.reported_error, Some(false));
        assert_eq!(o.provider_error, None);
        let o = parse_aider(&output(log, &events(0.25), HISTORY));
        assert_eq!(o.cost_usd, Some(0.25));
        assert!(started(&output(log, "", HISTORY)));
        assert!(!started(&output(
            "aider: error: unrecognized arguments: -x",
            "",
            "\n"
        )));
    }

    #[test]
    fn failures_by_class() {
        let cases = [
            ("litellm.RateLimitError: RateLimitError: OpenAIException - x", Some((RateLimited, Some(429)))),
            ("litellm.InternalServerError: InternalServerError: OpenAIException - x", Some((ServerError, None))),
            ("litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.", Some((Unreachable, None))),
            ("litellm.APIConnectionError: APIConnectionError: x", Some((Unreachable, None))),
            ("litellm.AuthenticationError: AuthenticationError: OpenAIException - x", Some((Unauthorized, None))),
            ("litellm.ContextWindowExceededError: x", None),
            ("litellm.ContentPolicyViolationError: x", None),
            ("Tokens: 100 sent, 10 received.", None),
        ];
        for (line, want) in cases {
            assert_eq!(failure_of_line(line), want, "{line}");
        }
    }

    #[test]
    fn a_failing_provider_then_an_answer() {
        let failing = "value.txt\nlitellm.RateLimitError: RateLimitError: OpenAIException - slow down\nThe API provider has rate limited you.\nRetrying in 0.2 seconds...\nlitellm.RateLimitError: RateLimitError: OpenAIException - slow down\n";
        // Still failing (killed by the worker's watch: no analytics printed yet).
        let o = parse_aider(failing);
        let e = o.provider_error.unwrap();
        assert_eq!((e.kind, e.status, e.failures), (RateLimited, Some(429), 2));
        assert_eq!(o.reported_error, Some(true));
        assert_eq!(o.output_tokens, None);
        // It recovered.
        let o = parse_aider(&format!("{failing}Tokens: 100 sent, 10 received.\n"));
        assert_eq!(o.provider_error, None);
        assert_eq!(o.turns, Some(1));
    }

    #[test]
    fn history_entries() {
        let h = history(HISTORY);
        assert_eq!(
            h[0],
            Entry::User("value.txt should hold the answer.".into())
        );
        assert_eq!(h[1], Entry::Note("value.txt".into()));
        assert!(matches!(&h[3], Entry::Assistant(t) if t.starts_with("I will write it.")));
        assert_eq!(h[5], Entry::Note("Applied edit to value.txt".into()));
        assert_eq!(h.len(), 6);
        assert!(history("").is_empty());
    }

    #[test]
    fn junk_is_skipped() {
        let o = parse_aider(&output(
            "\u{feff}garbage\n",
            "{\"event\":\n[1]\n",
            "no header",
        ));
        assert_eq!(o, Observations::default());
    }
}
