//! `command`: any CLI, launched from an argv template.

use super::{common_env, expand_template, Adapter, Launch, LaunchContext};

/// Runs `command = [...]` from the descriptor.
#[derive(Debug)]
pub struct CommandAdapter;

impl Adapter for CommandAdapter {
    fn name(&self) -> &'static str {
        "command"
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String> {
        let template = ctx.agent.descriptor.command.clone().unwrap_or_default();
        Ok(Launch {
            argv: expand_template(&template, ctx)?,
            env: common_env(ctx)?,
            readable: Vec::new(),
        })
    }
}
