//! The agent registry: adapters turn a descriptor into a launch and the agent's output into
//! observations. The orchestrator only talks to the [`Adapter`] trait.
//!
//! Whether a descriptor is valid has one rule, core's plan-time check
//! ([`akbench_core::agent::adapters::check`]): [`Registry::resolve`] applies it and nothing
//! else, so a descriptor `run plan` refuses is refused here with the same message. What only
//! the worker can know (the task's files on this machine) is each adapter's
//! [`Adapter::check_task`], run separately.

mod cli_agents;
mod command;
mod oracle;
mod scripted;

use akbench_core::agent::{adapters, Agent, AgentError};
use akbench_core::observe::ProviderError;
use akbench_core::record::Observations;
use akbench_core::task::Task;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Everything an adapter may use to build a launch.
#[derive(Debug)]
pub struct LaunchContext<'a> {
    /// The task.
    pub task: &'a Task,
    /// The agent.
    pub agent: &'a Agent,
    /// The worktree (the agent's cwd).
    pub workspace: &'a Path,
    /// The private HOME.
    pub home: &'a Path,
    /// The instruction, written to a file in HOME.
    pub instruction_file: &'a Path,
}

/// What to start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Launch {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Extra environment (no secrets: credentials are added by the orchestrator).
    pub env: BTreeMap<String, String>,
    /// Host files or folders the agent must read (its script, the oracle's solution): the
    /// `sandbox` runtime exposes them read-only, and nothing else outside the workspace.
    pub readable: Vec<std::path::PathBuf>,
}

/// An agent adapter.
pub trait Adapter: Send + Sync + std::fmt::Debug {
    /// Its name in descriptors (`adapter = "..."`).
    fn name(&self) -> &'static str;
    /// The worker's runtime-only check: whether this machine's copy of the task lets the
    /// adapter run it (the oracle needs `solution/solve.sh`). Never a descriptor rule: those
    /// are core's, applied by [`Registry::resolve`].
    fn check_task(&self, _task: &Task) -> Result<(), String> {
        Ok(())
    }
    /// Makes what the agent needs on this worker before it can be launched (an agent
    /// installed by akbench: its cache entry, [`crate::agents`]). `Err` is this worker's
    /// problem (a registry unreachable, a full disk), never the agent's nor its
    /// descriptor's (those are refused by core's check first): the attempt ends
    /// `infrastructure_error` and is retried.
    fn prepare(&self, _agent: &Agent) -> Result<(), String> {
        Ok(())
    }
    /// Builds the launch.
    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String>;
    /// The command that makes the agent's CLI print its version, asked just before `launch`
    /// runs (recorded as `provenance.agent_cli_version`); `None` for adapters whose agent
    /// has no CLI of its own.
    fn version_argv(&self, _launch: &Launch) -> Option<Vec<String>> {
        None
    }
    /// Reads observations from the agent's (redacted) output.
    fn observe(&self, _stdout: &str, _stderr: &str) -> Observations {
        Observations::default()
    }
    /// The model provider failure the agent's stdout so far ends in (polled while the agent
    /// runs); `None` for agents whose output says nothing about a provider.
    fn provider_failure(&self, _stdout: &str) -> Option<ProviderError> {
        None
    }
    /// Why the agent refused to start, when its output shows it never started working (it
    /// exited with an error before emitting any event: root, bad flags, a broken install).
    fn refused_to_start(&self, _stdout: &str, _stderr: &str) -> Option<String> {
        None
    }
}

/// Adapters by name.
#[derive(Debug, Clone)]
pub struct Registry {
    adapters: BTreeMap<&'static str, Arc<dyn Adapter>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Registry {
    /// The built-in adapters: command, scripted, oracle, claude-code, codex, gemini-cli,
    /// qwen-code, opencode, mini-swe-agent, aider.
    pub fn builtin() -> Self {
        let mut r = Registry {
            adapters: BTreeMap::new(),
        };
        r.register(Arc::new(command::CommandAdapter));
        r.register(Arc::new(scripted::ScriptedAdapter));
        r.register(Arc::new(oracle::OracleAdapter));
        r.register(Arc::new(cli_agents::claude_code()));
        r.register(Arc::new(cli_agents::codex()));
        r.register(Arc::new(cli_agents::gemini_cli()));
        r.register(Arc::new(cli_agents::qwen_code()));
        r.register(Arc::new(cli_agents::opencode()));
        r.register(Arc::new(cli_agents::mini_swe_agent()));
        r.register(Arc::new(cli_agents::aider()));
        r
    }

    /// Adds or replaces an adapter.
    pub fn register(&mut self, adapter: Arc<dyn Adapter>) {
        self.adapters.insert(adapter.name(), adapter);
    }

    /// The adapter for `agent`, its descriptor (with the trial's effective model and
    /// parameters, see [`crate::trial::prepare`]) checked by core's plan-time rule, so the
    /// error is the one `run plan` prints for the same descriptor. An adapter registered
    /// only here (by a program embedding the worker) has no core rule and is taken as is.
    pub fn resolve(&self, agent: &Agent) -> Result<Arc<dyn Adapter>, String> {
        let name = agent.descriptor.adapter.as_str();
        let invalid = |problem: String| {
            AgentError::Invalid {
                file: agent.file.clone(),
                problem,
            }
            .to_string()
        };
        let adapter = self.adapters.get(name);
        if adapter.is_none() || adapters::ADAPTERS.contains(&name) {
            adapters::check(
                &agent.descriptor,
                agent.descriptor.model.as_deref(),
                &agent.descriptor.parameters,
            )
            .map_err(invalid)?;
        }
        adapter.cloned().ok_or_else(|| {
            invalid(format!(
                "field `adapter`: the `{name}` adapter is not available on this worker; fix: use one of {}",
                self.names().join(", ")
            ))
        })
    }

    /// Registered adapter names.
    pub fn names(&self) -> Vec<&'static str> {
        self.adapters.keys().copied().collect()
    }
}

/// Substitutes `{instruction}`, `{instruction_file}`, `{workspace}`, `{home}` and `{model}`
/// in an argv template. Unknown placeholders are an error.
pub fn expand_template(
    template: &[String],
    ctx: &LaunchContext<'_>,
) -> Result<Vec<String>, String> {
    let model = ctx.agent.descriptor.model.clone().unwrap_or_default();
    let vars = [
        ("instruction", ctx.task.instruction.clone()),
        (
            "instruction_file",
            ctx.instruction_file.display().to_string(),
        ),
        ("workspace", ctx.workspace.display().to_string()),
        ("home", ctx.home.display().to_string()),
        ("model", model),
    ];
    template.iter().map(|arg| substitute(arg, &vars)).collect()
}

fn substitute(arg: &str, vars: &[(&str, String)]) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &after[..end];
        match vars.iter().find(|(k, _)| *k == name) {
            Some((_, v)) => out.push_str(v),
            None => {
                return Err(format!(
                    "unknown placeholder `{{{name}}}` in `{arg}`; fix: use {{instruction}}, {{instruction_file}}, {{workspace}}, {{home}} or {{model}}"
                ))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The environment every adapter gives its agent: the task's `[environment] env` (its
/// `${VAR}` references resolved from the worker's environment; an unset one without a
/// default is the error), under the descriptor's `env` and akbench's variables; the task's
/// `skills_dir` as `AKBENCH_SKILLS_DIR`; its MCP servers as `AKBENCH_MCP_SERVERS`.
pub fn common_env(ctx: &LaunchContext<'_>) -> Result<BTreeMap<String, String>, String> {
    let mut env = task_env(ctx.task)?;
    env.extend(ctx.agent.descriptor.env.clone());
    if let Some(dir) = &ctx.task.skills_dir {
        env.insert("AKBENCH_SKILLS_DIR".into(), dir.clone());
    }
    // The task's MCP servers (`akbench_core::task::mcp`), for any agent; their header values
    // are credentials, added with the agent's own by the attempt.
    if let Some(json) = akbench_core::task::mcp::servers_json(&ctx.task.mcp_servers) {
        env.insert("AKBENCH_MCP_SERVERS".into(), json);
    }
    env.insert(
        "AKBENCH_INSTRUCTION_FILE".into(),
        ctx.instruction_file.display().to_string(),
    );
    env.insert(
        "AKBENCH_WORKSPACE".into(),
        ctx.workspace.display().to_string(),
    );
    env.insert("AKBENCH_TASK_ID".into(), ctx.task.release.id.clone());
    if let Some(m) = &ctx.agent.descriptor.model {
        env.insert("AKBENCH_MODEL".into(), m.clone());
    }
    Ok(env)
}

/// The task's `[environment] env`, resolved from this worker's environment (Harbor's
/// `resolve_env_vars`): what every process of the task gets, the agent's, the solution's
/// and the grader's.
pub fn task_env(task: &akbench_core::task::Task) -> Result<BTreeMap<String, String>, String> {
    akbench_core::task::resolve_env(&task.environment_env, |name| std::env::var(name).ok())
}
