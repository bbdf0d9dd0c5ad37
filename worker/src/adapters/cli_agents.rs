//! `claude-code` and `codex`: launch their non-interactive modes and read their JSON event
//! streams into observations. The argv builders and parsers are pure code in
//! `akbench_core::observe`, tested on recorded fixtures.

use super::{common_env, Adapter, Launch, LaunchContext};
use akbench_core::agent::Agent;
use akbench_core::observe;
use akbench_core::record::Observations;
use serde_json::Value;
use std::collections::BTreeMap;

type ArgvBuilder = fn(
    &str,
    Option<&str>,
    &str,
    &BTreeMap<String, Value>,
    &[String],
) -> Result<Vec<String>, String>;

/// A CLI agent that speaks JSON events on stdout.
#[derive(Debug)]
pub struct CliAgentAdapter {
    name: &'static str,
    default_program: &'static str,
    argv: ArgvBuilder,
    parse: fn(&str) -> Observations,
}

/// Claude Code (`claude -p --output-format stream-json`).
pub fn claude_code() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "claude-code",
        default_program: "claude",
        argv: observe::claude_code_argv,
        parse: observe::parse_claude_code,
    }
}

/// Codex (`codex exec --json`).
pub fn codex() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "codex",
        default_program: "codex",
        argv: observe::codex_argv,
        parse: observe::parse_codex,
    }
}

impl CliAgentAdapter {
    fn build(&self, agent: &Agent, instruction: &str) -> Result<Vec<String>, String> {
        let d = &agent.descriptor;
        (self.argv)(
            d.program.as_deref().unwrap_or(self.default_program),
            d.model.as_deref(),
            instruction,
            &d.parameters,
            &d.extra_args,
        )
    }
}

impl Adapter for CliAgentAdapter {
    fn name(&self) -> &'static str {
        self.name
    }

    fn validate(&self, agent: &Agent) -> Result<(), String> {
        self.build(agent, "validation").map(|_| ())
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String> {
        let argv = self.build(ctx.agent, &ctx.task.instruction)?;
        // A program given by path is exposed read-only in the sandbox (one on PATH is part
        // of the toolchain).
        let readable = argv
            .first()
            .filter(|p| p.starts_with('/'))
            .map(|p| vec![std::path::PathBuf::from(p)])
            .unwrap_or_default();
        Ok(Launch {
            argv,
            env: common_env(ctx),
            readable,
        })
    }

    fn observe(&self, stdout: &str, _stderr: &str) -> Observations {
        (self.parse)(stdout)
    }
}
