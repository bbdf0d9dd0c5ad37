//! Launch lines and output parsers for the `claude-code`, `codex`, `gemini-cli`,
//! `qwen-code`, `opencode`, `mini-swe-agent` and `aider` adapters.
//!
//! Each adapter has two pure halves: an argv builder that turns a descriptor's model,
//! parameters and extra arguments into the non-interactive launch of the agent, and a
//! parser that reads the agent's captured stdout (JSON Lines) into [`Observations`].
//!
//! Parsers never fail and never panic: a line that is not a JSON object, an event type
//! they do not know, or a field of the wrong shape is skipped. A fact the output does not
//! state stays `None` (never a made-up zero), so a run killed before its final event still
//! yields what was seen up to that point.
//!
//! The instruction always comes last, after `--`: both CLIs have options taking several
//! values (`claude --allowedTools a b`, `codex --image a b`) that would otherwise swallow
//! it from `extra_args`, and an instruction starting with `-` would be read as an option.
//! On Linux one argument may not exceed 128 KiB (`MAX_ARG_STRLEN`); longer instructions
//! must reach the agent another way.
//!
//! Layer: a leaf: imports nothing from the crate. [`Observations`] lives here
//! (`observe::observations`, re-exported by `record`), so `agent`, `record`, `budget` and
//! `spend` take it from below. Checked with the rest by `core/tests/import_layers.rs`.

pub mod aider;
pub mod claude_code;
pub mod codex;
pub mod gemini_cli;
pub mod mini_swe_agent;
mod observations;
pub mod opencode;
pub mod provider;
pub mod qwen_code;

pub use aider::{aider_argv, parse_aider};
pub use claude_code::{claude_code_argv, parse_claude_code};
pub use codex::{codex_argv, parse_codex};
pub use gemini_cli::{gemini_cli_argv, parse_gemini_cli};
pub use mini_swe_agent::{mini_swe_agent_argv, parse_mini_swe_agent};
pub use observations::Observations;
pub use opencode::{opencode_argv, parse_opencode};
pub use provider::{watch, ProviderError, ProviderErrorKind, Watch};
pub use qwen_code::{parse_qwen_code, qwen_code_argv};

use serde_json::Value;
use std::collections::BTreeMap;

/// A CLI agent's argv builder: `(program, model, instruction, parameters, extra_args)`.
pub type ArgvBuilder = fn(
    &str,
    Option<&str>,
    &str,
    &BTreeMap<String, Value>,
    &[String],
) -> Result<Vec<String>, String>;

/// True when `stdout` holds at least one JSON event (the agent started working).
pub fn emits_events(stdout: &str) -> bool {
    json_objects(stdout).next().is_some()
}

/// The JSON objects of a JSON Lines text, in order; anything else (blank lines, log lines,
/// a truncated last line, arrays, scalars) is skipped. A byte-order mark is ignored.
pub(crate) fn json_objects(
    stdout: &str,
) -> impl Iterator<Item = serde_json::Map<String, Value>> + '_ {
    stdout.lines().filter_map(|line| {
        let line = line.trim().trim_start_matches('\u{feff}');
        if !line.starts_with('{') {
            return None;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        }
    })
}

/// A non-negative integer token or turn count; integral floats (`12.0`) are accepted.
pub(crate) fn count(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
            .map(|f| f as u64)
    })
}

/// The sum of the present values; `None` when none is present.
pub(crate) fn sum_present(values: impl IntoIterator<Item = Option<u64>>) -> Option<u64> {
    values
        .into_iter()
        .flatten()
        .fold(None, |acc: Option<u64>, v| {
            Some(acc.unwrap_or(0).saturating_add(v))
        })
}

/// Rejects parameters an adapter does not support, naming them and the supported ones.
fn check_parameters(
    adapter: &str,
    parameters: &BTreeMap<String, Value>,
    supported: &[&str],
) -> Result<(), String> {
    let unknown: Vec<&str> = parameters
        .keys()
        .map(String::as_str)
        .filter(|k| !supported.contains(k))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let names = unknown
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let plural = if unknown.len() == 1 { "" } else { "s" };
    Err(format!(
        "the {adapter} adapter does not support parameter{plural} {names}; fix: use only the supported parameters: {}",
        supported
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// A parameter that takes one of `allowed` strings, `default` when unset; the error names
/// the adapter, the parameter, the value given and the allowed ones.
fn choice_parameter<'a>(
    adapter: &str,
    parameters: &'a BTreeMap<String, Value>,
    name: &str,
    allowed: &[&str],
    default: &'a str,
) -> Result<&'a str, String> {
    let Some(v) = parameters.get(name) else {
        return Ok(default);
    };
    v.as_str().filter(|s| allowed.contains(s)).ok_or_else(|| {
        format!(
            "the {adapter} adapter's parameter `{name}` is {v}; fix: give one of {}",
            allowed
                .iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Checks the program and model every argv builder takes.
fn check_program_and_model(
    adapter: &str,
    program: &str,
    model: Option<&str>,
) -> Result<(), String> {
    if program.trim().is_empty() {
        return Err(format!(
            "the {adapter} adapter was given an empty program; fix: set `program` or leave it out"
        ));
    }
    if model.is_some_and(|m| m.trim().is_empty()) {
        return Err(format!(
            "the {adapter} adapter was given an empty model; fix: set `model` to a model name or leave it out"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_objects_skips_everything_but_objects() {
        let text = "\u{feff}{\"z\":0}\n{\"a\":1}\r\nnot json\n[1,2]\n42\n  {\"b\":2}  \n{\"c\":";
        let got: Vec<Value> = json_objects(text).map(Value::Object).collect();
        assert_eq!(got, vec![json!({"z": 0}), json!({"a": 1}), json!({"b": 2})]);
    }

    #[test]
    fn count_reads_integers_only() {
        assert_eq!(count(Some(&json!(7))), Some(7));
        assert_eq!(count(Some(&json!(7.0))), Some(7));
        assert_eq!(count(Some(&json!(7.5))), None);
        assert_eq!(count(Some(&json!(-1))), None);
        assert_eq!(count(Some(&json!("7"))), None);
        assert_eq!(count(None), None);
    }

    #[test]
    fn sum_present_keeps_absence() {
        assert_eq!(sum_present([None, None]), None);
        assert_eq!(sum_present([None, Some(0)]), Some(0));
        assert_eq!(sum_present([Some(2), None, Some(3)]), Some(5));
        assert_eq!(sum_present([Some(u64::MAX), Some(1)]), Some(u64::MAX));
    }
}
