//! `command`: any CLI, launched from an argv template.

use super::{common_env, expand_template, Adapter, Launch, LaunchContext};
use akbench_core::agent::Agent;

/// Runs `command = [...]` from the descriptor.
#[derive(Debug)]
pub struct CommandAdapter;

impl Adapter for CommandAdapter {
    fn name(&self) -> &'static str {
        "command"
    }

    fn validate(&self, agent: &Agent) -> Result<(), String> {
        match &agent.descriptor.command {
            Some(c) if !c.is_empty() && !c[0].trim().is_empty() => Ok(()),
            _ => Err("field `command`: the command adapter needs an argv template; fix: add e.g. command = [\"my-agent\", \"--prompt-file\", \"{instruction_file}\"]".into()),
        }
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String> {
        let template = ctx.agent.descriptor.command.clone().unwrap_or_default();
        Ok(Launch {
            argv: expand_template(&template, ctx)?,
            env: common_env(ctx),
            readable: Vec::new(),
        })
    }
}
