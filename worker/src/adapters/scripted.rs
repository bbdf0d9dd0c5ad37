//! `scripted`: runs a script from the descriptor's folder with bash; for tests and demos.

use super::{common_env, Adapter, Launch, LaunchContext};

/// Runs `script = "..."` (relative to the descriptor's folder).
#[derive(Debug)]
pub struct ScriptedAdapter;

impl Adapter for ScriptedAdapter {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String> {
        let script = ctx.agent.descriptor.script.as_deref().unwrap_or_default();
        let path = akbench_core::task::inside(&ctx.agent.dir, script)
            .ok_or_else(|| format!("field `script`: `{script}` leaves the descriptor's folder"))?;
        Ok(Launch {
            argv: vec!["bash".into(), path.display().to_string()],
            env: common_env(ctx)?,
            readable: vec![path],
        })
    }
}
