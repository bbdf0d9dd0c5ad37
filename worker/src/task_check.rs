//! Validating a task on this host (`akbench task check`): two grading runs with the task's
//! own grader, in the runtime (and image) its runs use: the starting point the agent gets
//! (pinned commit plus mutation) with the reference solution (`solution/solve.sh`) applied,
//! and the same starting point unchanged. The verdict rule is
//! `akbench_core::task_check::judge`; caching is the caller's.

use crate::evaluator::{evaluate, EvalPlace, EvalResult};
use crate::orchestrator::Orchestrator;
use crate::process::CancelToken;
use crate::runtime::container::Image;
use crate::runtime::RuntimeKind;
use crate::workspace::Workspace;
use akbench_core::task::Task;
use akbench_core::task_check::Side;
use std::path::Path;

/// How the two runs ended, with the graders' causes for a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runs {
    /// The reference solution applied, then graded.
    pub reference: Side,
    /// The unchanged starting point, graded.
    pub baseline: Side,
    /// What each run said when it had no verdict or the solution failed (`reference: ...`).
    pub notes: Vec<String>,
}

/// Runs both grading runs of `task` under `runtime` (over `image` under `container`),
/// with scratch folders and the evaluator's logs under `dir`. `Err`: a workspace could not
/// be made here (an infrastructure problem, not the task's).
pub fn run(
    orch: &Orchestrator,
    task: &Task,
    runtime: RuntimeKind,
    image: Option<&Image>,
    dir: &Path,
    cancel: &CancelToken,
) -> Result<Runs, String> {
    let Some((solution, _)) = &task.reference else {
        return Err(format!(
            "task `{}` has no reference solution (solution/solve.sh)",
            task.release.id
        ));
    };
    let mut notes = Vec::new();
    let mut side = |name: &str, with_solution: bool| -> Result<Side, String> {
        let root = dir.join(name);
        let _ = std::fs::remove_dir_all(&root);
        let ws = Workspace::create(&orch.cache, task, &root.join("work"), true, image)
            .map_err(|e| format!("failed to make the {name} workspace: {e}"))?;
        let graded = (|| {
            if with_solution {
                if let Err(e) = crate::regrade::run_solution(
                    solution,
                    &ws.worktree,
                    &ws.home,
                    &root,
                    task,
                    (runtime, image),
                    cancel,
                ) {
                    notes.push(format!("{name}: {e}"));
                    return Side::NotSolved;
                }
            }
            let verdict = evaluate(
                task,
                &EvalPlace {
                    workspace: &ws.worktree,
                    eval_root: &root.join("eval"),
                    artifacts_dir: &root,
                    log_prefix: "",
                    runtime,
                    workspaces: None,
                    withheld: &[],
                    image,
                },
                orch.clock.as_ref(),
                cancel,
            );
            match verdict {
                EvalResult::Graded(g) if g.ok => Side::Solved,
                EvalResult::Graded(g) => {
                    if let Some(c) = g.cause {
                        notes.push(format!("{name}: {c}"));
                    }
                    Side::NotSolved
                }
                EvalResult::Broken { cause, .. } => {
                    notes.push(format!("{name}: {cause}"));
                    Side::NoVerdict
                }
                EvalResult::Cancelled => Side::NoVerdict,
            }
        })();
        let _ = ws.remove(&orch.cache);
        Ok(graded)
    };
    let reference = side("reference", true)?;
    let baseline = side("baseline", false)?;
    Ok(Runs {
        reference,
        baseline,
        notes,
    })
}
