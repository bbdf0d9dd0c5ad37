//! `claude-code` and `codex`: launch their non-interactive modes and read their JSON event
//! streams into observations. The argv builders and parsers are pure code in
//! `akbench_core::observe`, tested on recorded fixtures.

use super::{common_env, Adapter, Launch, LaunchContext};
use akbench_core::agent::Agent;
use akbench_core::observe;
use akbench_core::observe::ProviderError;
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
    /// Environment set when the worker runs as root (unless the descriptor sets it).
    root_env: &'static [(&'static str, &'static str)],
}

/// Claude Code refuses `--permission-mode bypassPermissions` as root ("cannot be used with
/// root/sudo privileges") unless told it runs in a sandbox; akbench's attempts are isolated
/// (private HOME, own worktree, process group), so it sets `IS_SANDBOX=1` under root.
const CLAUDE_ROOT_ENV: &[(&str, &str)] = &[("IS_SANDBOX", "1")];

/// Claude Code (`claude -p --output-format stream-json`).
pub fn claude_code() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "claude-code",
        default_program: "claude",
        argv: observe::claude_code_argv,
        parse: observe::parse_claude_code,
        root_env: CLAUDE_ROOT_ENV,
    }
}

/// Codex (`codex exec --json`).
pub fn codex() -> CliAgentAdapter {
    CliAgentAdapter {
        name: "codex",
        default_program: "codex",
        argv: observe::codex_argv,
        parse: observe::parse_codex,
        root_env: &[],
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

    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String> {
        let argv = self.build(ctx.agent, &ctx.task.instruction)?;
        // A program given by path is exposed read-only in the sandbox (one on PATH is part
        // of the toolchain).
        let readable = argv
            .first()
            .filter(|p| p.starts_with('/'))
            .map(|p| vec![std::path::PathBuf::from(p)])
            .unwrap_or_default();
        let mut env = common_env(ctx)?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            for (k, v) in self.root_env {
                env.entry((*k).to_string())
                    .or_insert_with(|| (*v).to_string());
            }
        }
        Ok(Launch {
            argv,
            env,
            readable,
        })
    }

    fn version_argv(&self, launch: &Launch) -> Option<Vec<String>> {
        let program = launch.argv.first()?;
        Some(vec![program.clone(), "--version".into()])
    }

    fn observe(&self, stdout: &str, _stderr: &str) -> Observations {
        (self.parse)(stdout)
    }

    fn provider_failure(&self, stdout: &str) -> Option<ProviderError> {
        (self.parse)(stdout).provider_error
    }

    fn refused_to_start(&self, stdout: &str, stderr: &str) -> Option<String> {
        if observe::emits_events(stdout) {
            return None;
        }
        let line = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output at all");
        Some(format!("`{}` printed no event; it said: {line}", self.name))
    }
}
