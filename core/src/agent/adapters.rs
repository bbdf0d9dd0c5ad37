//! The adapters akbench has and what each accepts, checked when a manifest is resolved (so
//! `run plan`, `sweep` and `sweep --local` refuse an unknown adapter, an empty or malformed
//! `command`, a `scripted` agent without a script, and parameters an adapter does not take
//! or of the wrong type, before anything is written, instead of failing every trial at run
//! time). The worker's adapters run the same argv builders ([`crate::observe`]), so a
//! descriptor that passes here launches there.

use super::AgentDescriptor;
use serde_json::Value;
use std::collections::BTreeMap;

/// The built-in adapters, sorted.
pub const ADAPTERS: &[&str] = &[
    "aider",
    "claude-code",
    "codex",
    "command",
    "gemini-cli",
    "mini-swe-agent",
    "opencode",
    "oracle",
    "qwen-code",
    "scripted",
];

/// The CLI agents: adapter name, default program, argv builder.
pub const CLI_AGENTS: &[(&str, &str, crate::observe::ArgvBuilder)] = &[
    ("claude-code", "claude", crate::observe::claude_code_argv),
    ("codex", "codex", crate::observe::codex_argv),
    ("gemini-cli", "gemini", crate::observe::gemini_cli_argv),
    ("qwen-code", "qwen", crate::observe::qwen_code_argv),
    ("opencode", "opencode", crate::observe::opencode_argv),
    (
        "mini-swe-agent",
        "mini",
        crate::observe::mini_swe_agent_argv,
    ),
    ("aider", "aider", crate::observe::aider_argv),
];

/// The placeholders of a `command` argv template.
pub const PLACEHOLDERS: &[&str] = &[
    "instruction",
    "instruction_file",
    "workspace",
    "home",
    "model",
];

/// Checks that `descriptor`'s adapter exists and accepts its fields, the effective `model`
/// and the effective `parameters` (the descriptor's merged with the manifest's). The error
/// names the field and the fix.
pub fn check(
    descriptor: &AgentDescriptor,
    model: Option<&str>,
    parameters: &BTreeMap<String, Value>,
) -> Result<(), String> {
    if let Some(p) = &descriptor.price {
        p.check()?;
    }
    let adapter = descriptor.adapter.as_str();
    if descriptor.install.is_some()
        && ADAPTERS.contains(&adapter)
        && super::install::known(adapter).is_none()
    {
        return super::install::resolve(adapter, &Default::default()).map(drop);
    }
    match adapter {
        _ if CLI_AGENTS.iter().any(|(name, _, _)| *name == adapter) => {
            let (_, default_program, argv) = CLI_AGENTS
                .iter()
                .find(|(name, _, _)| *name == adapter)
                .expect("just found");
            if let Some(spec) = &descriptor.install {
                if descriptor.program.is_some() {
                    return Err("field `program`: an installed agent (`[install]`) runs the program of its package; fix: remove `program` or `[install]`".into());
                }
                super::install::resolve(adapter, spec)?;
            }
            let program = descriptor.program.as_deref().unwrap_or(default_program);
            argv(program, model, "plan", parameters, &descriptor.extra_args).map(drop)
        }
        "command" => {
            no_parameters(adapter, parameters)?;
            let template = descriptor.command.as_deref().unwrap_or_default();
            if template.first().is_none_or(|p| p.trim().is_empty()) {
                return Err("field `command`: the command adapter needs an argv template whose first element is the program; fix: add e.g. command = [\"my-agent\", \"--prompt-file\", \"{instruction_file}\"]".into());
            }
            template.iter().try_for_each(|arg| check_placeholders(arg))
        }
        "scripted" => {
            no_parameters(adapter, parameters)?;
            match &descriptor.script {
                Some(s) if !s.trim().is_empty() => Ok(()),
                _ => Err("field `script`: the scripted adapter needs a script; fix: add script = \"scripts/name.sh\"".into()),
            }
        }
        "oracle" => no_parameters(adapter, parameters),
        other => Err(format!(
            "field `adapter`: unknown adapter `{other}`; fix: use one of {}",
            ADAPTERS.join(", ")
        )),
    }
}

fn no_parameters(adapter: &str, parameters: &BTreeMap<String, Value>) -> Result<(), String> {
    if parameters.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = parameters.keys().map(|k| format!("`{k}`")).collect();
    Err(format!(
        "the {adapter} adapter takes no parameters (given: {}); fix: remove them from the descriptor's `parameters` and the manifest's condition",
        names.join(", ")
    ))
}

/// Every `{name}` in `arg` is a known placeholder (a `{` without a closing `}` is literal,
/// as the worker expands it).
fn check_placeholders(arg: &str) -> Result<(), String> {
    match unknown_placeholder(arg, PLACEHOLDERS) {
        None => Ok(()),
        Some(name) => Err(format!(
            "field `command`: unknown placeholder `{{{name}}}` in `{}`; fix: use {}",
            crate::limits::elide(arg),
            list_placeholders(PLACEHOLDERS)
        )),
    }
}

/// The first `{name}` in `arg` that is not one of `known` (a `{` without a closing `}` is
/// literal, as the worker and the evaluator expand it). Shared by the agent's `command` and
/// the task's `verifier.command`.
pub fn unknown_placeholder<'a>(arg: &'a str, known: &[&str]) -> Option<&'a str> {
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let end = after.find('}')?;
        let name = &after[..end];
        if !known.contains(&name) {
            return Some(name);
        }
        rest = &after[end + 1..];
    }
    None
}

/// `{a}, {b}, ...` for a message.
pub fn list_placeholders(known: &[&str]) -> String {
    known
        .iter()
        .map(|p| format!("{{{p}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(toml_text: &str) -> AgentDescriptor {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn each_adapter_refuses_what_it_cannot_run() {
        let p = |json: &str| -> BTreeMap<String, Value> { serde_json::from_str(json).unwrap() };
        let none = p("{}");
        // (descriptor, effective parameters, the error names this; "" = accepted)
        let cases: &[(&str, BTreeMap<String, Value>, &str)] = &[
            ("adapter = \"oracle\"", none.clone(), ""),
            (
                "adapter = \"telepathy\"",
                none.clone(),
                "unknown adapter `telepathy`",
            ),
            ("adapter = \"\"", none.clone(), "unknown adapter ``"),
            ("adapter = \"command\"", none.clone(), "field `command`"),
            (
                "adapter = \"command\"\ncommand = []",
                none.clone(),
                "field `command`",
            ),
            (
                "adapter = \"command\"\ncommand = [\" \"]",
                none.clone(),
                "field `command`",
            ),
            (
                "adapter = \"command\"\ncommand = [\"a\", \"{instruction_file}\", \"{x\"]",
                none.clone(),
                "",
            ),
            (
                "adapter = \"command\"\ncommand = [\"a\", \"{prompt}\"]",
                none.clone(),
                "placeholder `{prompt}`",
            ),
            (
                "adapter = \"command\"\ncommand = [\"a\"]",
                p(r#"{"max_turns": 3}"#),
                "takes no parameters (given: `max_turns`)",
            ),
            ("adapter = \"scripted\"", none.clone(), "field `script`"),
            (
                "adapter = \"scripted\"\nscript = \"s.sh\"",
                none.clone(),
                "",
            ),
            (
                "adapter = \"oracle\"",
                p(r#"{"x": 1}"#),
                "takes no parameters",
            ),
            ("adapter = \"claude-code\"", p(r#"{"max_turns": 30}"#), ""),
            (
                "adapter = \"claude-code\"",
                p(r#"{"max_turnz": 30}"#),
                "`max_turnz`",
            ),
            (
                "adapter = \"claude-code\"",
                p(r#"{"max_turns": "many"}"#),
                "`max_turns` is \"many\"",
            ),
            (
                "adapter = \"claude-code\"",
                p(r#"{"max_turns": 0}"#),
                "`max_turns` is 0",
            ),
            (
                "adapter = \"claude-code\"\nprogram = \" \"",
                none.clone(),
                "empty program",
            ),
            ("adapter = \"codex\"", p(r#"{"sandbox": "bypass"}"#), ""),
            (
                "adapter = \"codex\"",
                p(r#"{"sandbox": true}"#),
                "`sandbox` is true",
            ),
            (
                "adapter = \"codex\"",
                p(r#"{"max_turns": 3}"#),
                "`max_turns`",
            ),
            ("adapter = \"gemini-cli\"", none.clone(), ""),
            (
                "adapter = \"gemini-cli\"",
                p(r#"{"approval_mode": "default"}"#),
                "`approval_mode` is \"default\"",
            ),
            (
                "adapter = \"qwen-code\"",
                p(r#"{"auth_type": "openai"}"#),
                "",
            ),
            (
                "adapter = \"qwen-code\"",
                p(r#"{"sandbox": "bypass"}"#),
                "`sandbox`",
            ),
            (
                "adapter = \"qwen-code\"\nprogram = \"\"",
                none.clone(),
                "empty program",
            ),
            ("adapter = \"aider\"\n[install]", none.clone(), ""),
            (
                "adapter = \"aider\"\n[install]\nversion = \"0.80.0\"",
                none.clone(),
                "",
            ),
            (
                "adapter = \"aider\"\n[install]\nversion = \">=0.80\"",
                none.clone(),
                "field `install.version`",
            ),
            (
                "adapter = \"aider\"\nprogram = \"/x/aider\"\n[install]",
                none.clone(),
                "field `program`",
            ),
            (
                "adapter = \"command\"\ncommand = [\"a\"]\n[install]",
                none.clone(),
                "field `install`",
            ),
            (
                "adapter = \"oracle\"\n[install]",
                none.clone(),
                "field `install`",
            ),
        ];
        for (text, parameters, want) in cases {
            let got = check(&descriptor(text), None, parameters);
            match (want.is_empty(), got) {
                (true, Ok(())) => {}
                (false, Err(e)) => assert!(e.contains(want), "{text:?}: {e}"),
                (_, got) => panic!("{text:?} {parameters:?}: want {want:?}, got {got:?}"),
            }
        }
        let empty_model = check(&descriptor("adapter = \"codex\""), Some(""), &none);
        assert!(empty_model.unwrap_err().contains("empty model"));
    }
}
