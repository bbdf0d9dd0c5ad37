//! Validating a task on this host (`akbench task check`): two grades with the task's own
//! grader, made exactly as a trial's grade is made (the same runtime and image, the tripwire
//! twin and every tampering check included, fresh copies made for each grading run): the
//! starting point the agent gets (pinned commit plus mutation) with the reference solution
//! (`solution/solve.sh`) applied, and the same starting point unchanged. A reference that
//! grading flags as tampering makes the task not valid: no honest solution of it could be
//! graded solved. A task graded in the agent's environment (`shared`, Harbor's default for
//! a task in its layout) is checked there under `container`: the reference runs in the
//! environment as the agent would, then the grader, then the tripwire twin in the same
//! environment (evaluator::tripwire). The verdict rule is
//! `akbench_core::task_check::judge`; caching is the caller's.

use crate::evaluator::{evaluate, EvalPlace, EvalResult, FreshWorkspace, ReferenceEnv, Workspaces};
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
    /// The reference's grade's tripwire result (`grade.tripwire.result`): whether the twin
    /// held, or why the task is graded without one.
    pub tripwire: Option<String>,
}

/// The fresh workspaces of one side of a check: the starting point, with the reference
/// solution applied when `with_solution`, for every grading run (the tripwire twin's copy
/// of "the agent's work" is one more such copy).
struct Sides<'a> {
    orch: &'a Orchestrator,
    task: &'a Task,
    runtime: RuntimeKind,
    image: Option<&'a Image>,
    with_solution: bool,
}

/// Why a side's workspace was not made.
enum Unmade {
    /// The workspace itself (this host's problem, not the task's).
    Workspace(String),
    /// The reference solution did not run to the end (the task's).
    Solution(String),
}

impl Unmade {
    fn text(self) -> String {
        match self {
            Unmade::Workspace(e) | Unmade::Solution(e) => e,
        }
    }
}

impl Sides<'_> {
    fn make(
        &self,
        dir: &Path,
        solution: bool,
        cancel: &CancelToken,
    ) -> Result<FreshWorkspace, Unmade> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Unmade::Workspace(format!("cannot create {}: {e}", dir.display())))?;
        let ws = Workspace::create(
            &self.orch.cache,
            self.task,
            &dir.join("work"),
            true,
            self.image,
        )
        .map_err(|e| Unmade::Workspace(e.to_string()))?;
        let home = ws.home.clone();
        let fresh = crate::orchestrator::rebuild::fresh(self.orch, ws, Vec::new());
        if solution {
            let Some((script, _)) = &self.task.reference else {
                return Err(Unmade::Solution(
                    "the task has no reference solution".into(),
                ));
            };
            crate::orchestrator::rebuild::run_solution(
                script,
                &fresh.path,
                &home,
                dir,
                self.task,
                (self.runtime, self.image),
                cancel,
            )
            .map_err(Unmade::Solution)?;
        }
        Ok(fresh)
    }
}

impl Workspaces for Sides<'_> {
    fn agent_copy(&self, dir: &Path) -> Result<FreshWorkspace, String> {
        self.make(dir, self.with_solution, &CancelToken::new())
            .map_err(Unmade::text)
    }

    fn reference(&self, dir: &Path, cancel: &CancelToken) -> Result<FreshWorkspace, String> {
        self.make(dir, true, cancel).map_err(Unmade::text)
    }

    fn reference_env(&self, dir: &Path, cancel: &CancelToken) -> Result<ReferenceEnv, String> {
        let Some(image) = self.image else {
            return Err("the check runs in no task image to start an environment of".into());
        };
        crate::orchestrator::rebuild::reference_env(
            self.orch,
            self.task,
            image,
            dir,
            (true, true),
            cancel,
        )?
        .map_err(|e| format!("the task's reference solution did not run to its end: {e}"))
    }
}

/// Runs both grading runs of `task` under `runtime` (over `image` under `container`),
/// with scratch folders and the evaluator's logs under `dir`, graded where an attempt of a
/// run asking `grading` would be ([`akbench_core::grading_env::decide`]). `Err`: a
/// workspace could not be made here (an infrastructure problem, not the task's).
pub fn run(
    orch: &Orchestrator,
    task: &Task,
    (runtime, grading): (RuntimeKind, akbench_core::grading_env::GradingEnvironment),
    image: Option<&Image>,
    dir: &Path,
    cancel: &CancelToken,
) -> Result<Runs, String> {
    if task.reference.is_none() {
        return Err(format!(
            "task `{}` has no reference solution (solution/solve.sh)",
            task.release.id
        ));
    };
    let mut notes = Vec::new();
    let mut tripwire = None;
    // A task graded in the agent's environment (Harbor's default for its layout) is
    // checked there: the reference runs in the environment, then the grader.
    let shared = runtime == RuntimeKind::Container
        && akbench_core::grading_env::decide(
            task.file.verifier.environment_mode.as_deref(),
            task.file.source.is_some(),
            grading,
        )
        .shared();
    let mut side = |name: &str, with_solution: bool| -> Result<Side, String> {
        let root = dir.join(name);
        let _ = std::fs::remove_dir_all(&root);
        if let (true, Some(image)) = (shared, image) {
            let (side, note, twin) = shared_side(orch, task, image, &root, with_solution, cancel)?;
            notes.extend(note.map(|n| format!("{name}: {n}")));
            if with_solution {
                tripwire = twin;
            }
            return Ok(side);
        }
        let sides = Sides {
            orch,
            task,
            runtime,
            image,
            with_solution,
        };
        let ws = match sides.make(&root, with_solution, cancel) {
            Ok(ws) => ws,
            Err(Unmade::Solution(e)) => {
                // The solution did not run to the end: the reference is not solved.
                notes.push(format!("{name}: {e}"));
                return Ok(Side::NotSolved);
            }
            Err(Unmade::Workspace(e)) => {
                return Err(format!("failed to make the {name} workspace: {e}"))
            }
        };
        let verdict = evaluate(
            task,
            &EvalPlace {
                workspace: &ws.path,
                eval_root: &root.join("eval"),
                artifacts_dir: &root,
                log_prefix: "",
                runtime,
                workspaces: Some(&sides),
                withheld: &[],
                image,
                shared: None,
            },
            orch.clock.as_ref(),
            cancel,
        );
        drop(ws);
        if with_solution {
            if let EvalResult::Graded(g) = &verdict {
                tripwire = g.tripwire.as_ref().map(|t| t.result.clone());
            }
        }
        let (side, note) = judged(verdict);
        notes.extend(note.map(|n| format!("{name}: {n}")));
        Ok(side)
    };
    let reference = side("reference", true)?;
    let baseline = side("baseline", false)?;
    Ok(Runs {
        reference,
        baseline,
        notes,
        tripwire,
    })
}

/// Checks each step of the multi-step task `task` (`[[steps]]`) as its trial grades it:
/// [`run`] on the step's view (`Task::step_view`, its tests merged under `dir`), in the
/// agent's environment under `container`, where the reference environment replays the steps
/// before it (`orchestrator::rebuild::reference_env`): the reference side with the step's solution, the
/// baseline without. Returns each step's name and runs, in order. `Err`: a workspace or an
/// environment could not be made here, or a step has no solution (the task's problem).
pub fn run_steps(
    orch: &Orchestrator,
    task: &Task,
    image: &Image,
    dir: &Path,
    cancel: &CancelToken,
) -> Result<Vec<(String, Runs)>, String> {
    let views = crate::orchestrator::container::stage::views(task, dir)?;
    let mut out = Vec::new();
    for (view, step) in views.iter().zip(&task.steps) {
        let name = &step.config.name;
        let runs = run(
            orch,
            view,
            (
                RuntimeKind::Container,
                akbench_core::grading_env::GradingEnvironment::Task,
            ),
            Some(image),
            &dir.join("check").join(name),
            cancel,
        )
        .map_err(|e| format!("step `{name}`: {e}"))?;
        out.push((name.clone(), runs));
    }
    Ok(out)
}

/// A grading run's verdict as a side of the check, and what its grader said.
fn judged(verdict: EvalResult) -> (Side, Option<String>) {
    match verdict {
        EvalResult::Graded(g) => (
            match (g.ok, g.tampered) {
                (_, true) => Side::Tampered,
                (true, false) => Side::Solved,
                (false, false) => Side::NotSolved,
            },
            g.cause,
        ),
        EvalResult::Broken { cause, .. } | EvalResult::FetchFailed { cause, .. } => {
            (Side::NoVerdict, Some(cause))
        }
        EvalResult::Cancelled => (Side::NoVerdict, None),
    }
}

/// One side of the check of a task graded in the agent's environment, as a trial's
/// attempt makes it: a fresh environment of its image (its ENTRYPOINT running), the reference solution run inside it as the agent (when `with_solution`),
/// then the grader inside it, its solved grade checked by the tripwire twin as a trial's
/// is (after the graded run, in the same environment; the reference on the twin in another
/// fresh one). `Err`: the workspace or the environment could not be made here.
fn shared_side(
    orch: &Orchestrator,
    task: &Task,
    image: &Image,
    root: &Path,
    with_solution: bool,
    cancel: &CancelToken,
) -> Result<(Side, Option<String>, Option<String>), String> {
    let made = crate::orchestrator::rebuild::reference_env(
        orch,
        task,
        image,
        root,
        (true, with_solution),
        cancel,
    )?;
    let r = match made {
        Ok(r) => r,
        Err(e) => return Ok((Side::NotSolved, Some(e), None)),
    };
    let sides = Sides {
        orch,
        task,
        runtime: RuntimeKind::Container,
        image: Some(image),
        with_solution,
    };
    let verdict = evaluate(
        task,
        &EvalPlace {
            workspace: &r.fresh.path,
            eval_root: &root.join("eval"),
            artifacts_dir: root,
            log_prefix: "",
            runtime: RuntimeKind::Container,
            workspaces: Some(&sides),
            withheld: &[],
            image: Some(image),
            shared: Some(&r.env),
        },
        orch.clock.as_ref(),
        cancel,
    );
    drop(r);
    let tripwire = match &verdict {
        EvalResult::Graded(g) => g.tripwire.as_ref().map(|t| t.result.clone()),
        _ => None,
    };
    let (side, note) = judged(verdict);
    Ok((side, note, tripwire))
}
