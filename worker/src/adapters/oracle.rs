//! `oracle`: applies the task's reference solution (`solution/solve.sh`), so a task can be
//! shown to be solvable and its tests to accept a correct fix.

use super::{common_env, Adapter, Launch, LaunchContext};
use akbench_core::task::Task;

/// Runs the task's `solution/solve.sh` in the workspace.
#[derive(Debug)]
pub struct OracleAdapter;

impl Adapter for OracleAdapter {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn check_task(&self, task: &Task) -> Result<(), String> {
        match &task.reference {
            Some((dir, _)) if dir.join("solve.sh").is_file() => Ok(()),
            _ => Err(format!(
                "task `{}` has no reference solution (solution/solve.sh), so the oracle cannot run it; add one or choose another agent",
                task.release.id
            )),
        }
    }

    fn launch(&self, ctx: &LaunchContext<'_>) -> Result<Launch, String> {
        self.check_task(ctx.task)?;
        let (dir, _) = ctx.task.reference.as_ref().expect("checked above");
        let mut env = common_env(ctx)?;
        env.insert("AKBENCH_SOLUTION_DIR".into(), dir.display().to_string());
        // The task's `[solution] env`, as Harbor gives it to solve.sh.
        env.extend(ctx.task.solution_env.clone());
        Ok(Launch {
            argv: vec!["bash".into(), dir.join("solve.sh").display().to_string()],
            env,
            readable: vec![dir.clone()],
        })
    }
}
