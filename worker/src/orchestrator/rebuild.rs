//! Grading workspaces rebuilt from an attempt's record: the clean room (the task's pinned
//! commit, its mutation and the agent's recorded diff, checked against both recorded tree
//! fingerprints, with the paths that steer the grader withheld), the reference check's
//! baseline with the task's reference solution applied, and a fresh environment of the task's
//! image where the reference solution ran ([`reference_env`]). The attempt grades through
//! [`Rebuilder`] as it runs; `crate::regrade` grades a recorded attempt later through the same
//! pieces (it re-exports them), so the orchestrator never reaches up into the regrade.

use super::Orchestrator;
use crate::evaluator::{grading_limits, FreshWorkspace, Workspaces};
use crate::process::CancelToken;
use crate::runtime::container::Image;
use crate::runtime::RuntimeKind;
use crate::workspace::Workspace;
use akbench_core::bounded_read::Links;
use akbench_core::grading::{
    diff_paths, is_runner_config_file, runner_config_changed, split_withheld,
};
use akbench_core::task::Task;
use std::path::Path;

/// The note of an EVALUATING step that did not grade.
pub const NOT_REQUESTED: &str = "grading not requested";

/// What a grade is computed from: the recorded fingerprints and the agent's diff.
#[derive(Debug, Clone, Copy)]
pub struct RecordedWork<'a> {
    /// Git tree id of the agent's starting point (after the mutation).
    pub tree_after_mutation: &'a str,
    /// Git tree id of what the agent left.
    pub tree_after_agent: &'a str,
    /// The agent's diff against the starting point, as recorded (digest already checked).
    pub diff: &'a [u8],
}

/// Why a workspace could not be rebuilt from a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RebuildError {
    /// The host could not set it up (scratch folder, mirror, worktree): may work elsewhere.
    #[error("failed to rebuild the workspace: {0}")]
    Setup(String),
    /// It was rebuilt but does not reproduce the recorded trees: grading it would score
    /// something other than what the agent left.
    #[error("failed to rebuild the workspace faithfully: {0}")]
    Mismatch(String),
}

/// Rebuilds, under `scratch`, the workspace the agent left: the task's pinned commit, its
/// mutation when `mutation_applied`, then the recorded diff; checks both recorded tree
/// fingerprints. The caller grades it and removes it with [`Workspace::remove`].
pub fn rebuild(
    orch: &Orchestrator,
    task: &Task,
    mutation_applied: bool,
    work: &RecordedWork<'_>,
    scratch: &Path,
    image: Option<&Image>,
) -> Result<Workspace, RebuildError> {
    rebuild_for_grading(orch, task, mutation_applied, work, scratch, image).map(|(w, _)| w)
}

/// [`rebuild`], then the clean room: the changes of the diff to paths that steer the grader
/// ([`akbench_core::grading::is_withheld`], the task's `verifier.protected_paths`) are taken
/// back. Returns the workspace and the withheld paths.
pub fn rebuild_for_grading(
    orch: &Orchestrator,
    task: &Task,
    mutation_applied: bool,
    work: &RecordedWork<'_>,
    scratch: &Path,
    image: Option<&Image>,
) -> Result<(Workspace, Vec<String>), RebuildError> {
    let setup = |e: &dyn std::fmt::Display| RebuildError::Setup(e.to_string());
    std::fs::create_dir_all(scratch)
        .map_err(|e| RebuildError::Setup(format!("cannot create {}: {e}", scratch.display())))?;
    let w = Workspace::create(
        &orch.cache,
        task,
        &scratch.join("rebuild"),
        mutation_applied,
        image,
    )
    .map_err(|e| setup(&e))?;
    let checked = (|| {
        // The starting text of each runner configuration file the diff changes, read
        // before the diff goes on, to tell a change of its test settings from another.
        let configs: Vec<(String, FileText)> = diff_paths(work.diff)
            .into_iter()
            .filter(|p| is_runner_config_file(p))
            .map(|p| {
                let before = read_in(&w.worktree, &p);
                (p, before)
            })
            .collect();
        if w.tree_after_mutation != work.tree_after_mutation {
            return Err(RebuildError::Mismatch(format!(
                "the rebuilt starting tree {} differs from the recorded {}",
                w.tree_after_mutation, work.tree_after_mutation
            )));
        }
        if !work.diff.is_empty() {
            let path = scratch.join("recorded.diff");
            std::fs::write(&path, work.diff).map_err(|e| {
                RebuildError::Setup(format!("cannot write {}: {e}", path.display()))
            })?;
            w.apply_diff(&path).map_err(|e| {
                RebuildError::Mismatch(format!("the recorded diff does not apply: {e}"))
            })?;
        }
        // Only the tree is compared: a diff over the recorded one's size is not read.
        let cap = u64::try_from(work.diff.len()).unwrap_or(u64::MAX);
        let now = w.collect(cap).map_err(|e| setup(&e))?.tree_after_agent;
        if now != work.tree_after_agent {
            return Err(RebuildError::Mismatch(format!(
                "the rebuilt workspace (tree {now}) does not match the recorded fingerprint {}",
                work.tree_after_agent
            )));
        }
        let steering: Vec<String> = configs
            .into_iter()
            .filter(|(p, before)| match (before, read_in(&w.worktree, p)) {
                (Ok(b), Ok(a)) => runner_config_changed(p, b.as_deref(), a.as_deref()),
                // A link, a folder or an oversized file where pytest looks: withheld.
                _ => true,
            })
            .map(|(p, _)| p)
            .collect();
        let (_, held, paths) =
            split_withheld(work.diff, &task.file.verifier.protected_paths, &steering);
        if !held.is_empty() {
            let path = scratch.join("withheld.diff");
            std::fs::write(&path, &held).map_err(|e| {
                RebuildError::Setup(format!("cannot write {}: {e}", path.display()))
            })?;
            w.unapply_diff(&path).map_err(|e| {
                RebuildError::Mismatch(format!("the withheld paths cannot be taken back: {e}"))
            })?;
        }
        Ok(paths)
    })();
    match checked {
        Ok(paths) => Ok((w, paths)),
        Err(e) => {
            let _ = w.remove(&orch.cache);
            Err(e)
        }
    }
}

/// A file's bytes as [`read_in`] reads them.
type FileText = Result<Option<Vec<u8>>, ()>;

/// The bytes of the regular file `rel` (a diff path, `/`-separated) under `root`, without
/// following a link at its end, up to 1 MiB; `Ok(None)` when absent, `Err` when it is there
/// and not such a file (a link, a folder, larger, unreadable).
fn read_in(root: &Path, rel: &str) -> FileText {
    use akbench_core::bounded_read::read;
    let path = root.join(rel);
    if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(None);
    }
    read(&path, 1 << 20, Links::Refuse)
        .map(Some)
        .map_err(|_| ())
}

/// The note of a verdict: `solved (score 1, from reward_txt)`, with the grade's cause.
pub fn verdict_note(g: &akbench_core::record::Grade) -> String {
    let mut s = format!(
        "{} (score {}, from {})",
        if g.ok { "solved" } else { "not solved" },
        g.score,
        g.source
    );
    if let Some(c) = &g.cause {
        s.push_str(": ");
        s.push_str(c);
    }
    s
}

/// Fresh grading workspaces made from a task release and the agent's recorded work: the
/// clean room of every grading run, the tripwire run's copy, and the reference check's
/// baseline with the reference solution applied.
pub struct Rebuilder<'a> {
    /// Its mirror cache and work root.
    pub orch: &'a Orchestrator,
    /// The task release.
    pub task: &'a Task,
    /// Whether the agent's starting point had the mutation.
    pub mutation_applied: bool,
    /// The agent's recorded work.
    pub work: RecordedWork<'a>,
    /// The runtime the reference solution runs in.
    pub runtime: RuntimeKind,
    /// Under `container`, the image the reference solution runs in (the one the agent ran in).
    pub image: Option<&'a Image>,
}

impl std::fmt::Debug for Rebuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rebuilder")
            .field("task", &self.task.release.id)
            .finish()
    }
}

/// `w` as a grading workspace: removed (from `orch`'s cache) when dropped.
pub(crate) fn fresh(orch: &Orchestrator, w: Workspace, withheld: Vec<String>) -> FreshWorkspace {
    let cache = orch.cache.clone();
    let path = w.worktree.clone();
    FreshWorkspace::new(
        path,
        withheld,
        Box::new(move || {
            let _ = w.remove(&cache);
        }),
    )
}

impl Rebuilder<'_> {
    /// The clean room: the agent's work rebuilt under `dir`, grader-steering paths withheld.
    pub fn clean_room(&self, dir: &Path) -> Result<FreshWorkspace, RebuildError> {
        let (w, withheld) = rebuild_for_grading(
            self.orch,
            self.task,
            self.mutation_applied,
            &self.work,
            dir,
            self.image,
        )?;
        Ok(fresh(self.orch, w, withheld))
    }
}

impl Workspaces for Rebuilder<'_> {
    fn agent_copy(&self, dir: &Path) -> Result<FreshWorkspace, String> {
        self.clean_room(dir).map_err(|e| e.to_string())
    }

    fn reference(&self, dir: &Path, cancel: &CancelToken) -> Result<FreshWorkspace, String> {
        let Some((solution, _)) = &self.task.reference else {
            return Err("the task has no reference solution".into());
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let w = Workspace::create(
            &self.orch.cache,
            self.task,
            &dir.join("ws"),
            self.mutation_applied,
            self.image,
        )
        .map_err(|e| e.to_string())?;
        let home = w.home.clone();
        let f = fresh(self.orch, w, Vec::new());
        run_solution(
            solution,
            &f.path,
            &home,
            dir,
            self.task,
            (self.runtime, self.image),
            cancel,
        )?;
        Ok(f)
    }

    fn reference_env(
        &self,
        dir: &Path,
        cancel: &CancelToken,
    ) -> Result<crate::evaluator::ReferenceEnv, String> {
        let Some(image) = self.image else {
            return Err("the attempt ran in no task image to start an environment of".into());
        };
        reference_env(
            self.orch,
            self.task,
            image,
            dir,
            (self.mutation_applied, true),
            cancel,
        )?
        .map_err(|e| format!("the task's reference solution did not run to its end: {e}"))
    }
}

/// Runs the task's `solution/solve.sh` in `worktree` (as the oracle does), confined by
/// `runtime` (under `container`, over a fresh view of `image`).
pub(crate) fn run_solution(
    solution: &Path,
    worktree: &Path,
    home: &Path,
    dir: &Path,
    task: &Task,
    (runtime, image): (RuntimeKind, Option<&Image>),
    cancel: &CancelToken,
) -> Result<(), String> {
    // The solution runs as the agent, here in a fresh container.
    if let Some(i) = image {
        crate::runtime::container::phase_users(i, task, false)?;
    }
    let (spec, exposure) = solution_launch(solution, worktree, home, dir, task, image)?;
    let prepared = crate::runtime::prepare(runtime, spec, &exposure, grading_limits(task))
        .map_err(|e| e.to_string())?;
    wait_solution(prepared, cancel)
}

/// The process of the task's `solution/solve.sh` in `worktree` and what it is exposed to
/// (the agent's network; under `container`, a view of `image` with `/solution`).
pub(crate) fn solution_launch(
    solution: &Path,
    worktree: &Path,
    home: &Path,
    dir: &Path,
    task: &Task,
    image: Option<&Image>,
) -> Result<(crate::process::ProcessSpec, crate::runtime::Exposure), String> {
    let mut env = crate::process::base_env(home);
    env.insert(
        "AKBENCH_SOLUTION_DIR".into(),
        solution.display().to_string(),
    );
    env.insert("AKBENCH_WORKSPACE".into(), worktree.display().to_string());
    env.insert("AKBENCH_TASK_ID".into(), task.release.id.clone());
    env.extend(task.solution_env.clone());
    let spec = crate::process::ProcessSpec {
        argv: vec![
            "bash".into(),
            solution.join("solve.sh").display().to_string(),
        ],
        cwd: worktree.to_path_buf(),
        env,
        stdout_path: dir.join("solve.stdout.log"),
        stderr_path: dir.join("solve.stderr.log"),
        output_cap: 1024 * 1024,
        timeout: std::time::Duration::from_secs_f64(task.agent_timeout_sec),
        grace: std::time::Duration::from_secs(5),
        tag: format!("reference-{}", uuid::Uuid::now_v7()),
        hooks: Default::default(),
    };
    let (git_rw, git_ro) = crate::runtime::linked_git_dirs(worktree);
    let exposure = crate::runtime::Exposure {
        hosts: Vec::new(),
        budget: None,
        // The reference solution stands in for an agent: the agent's network.
        egress: Some(crate::runtime::egress::Policy::for_phase(
            task.network.agent.clone(),
        )?),
        disk_roots: [
            vec![worktree.to_path_buf(), home.to_path_buf()],
            git_rw.clone(),
        ]
        .concat(),
        writable: [vec![worktree.to_path_buf(), home.to_path_buf()], git_rw].concat(),
        readable: [vec![solution.to_path_buf()], git_ro].concat(),
        endpoints: Vec::new(),
        scratch: dir.join("runtime"),
        container: image.map(|i| crate::runtime::container::View {
            workspace: true,
            image: i.clone(),
            mounts: Vec::new(),
            // Harbor's place of the solution, as its solve.sh files name it.
            ro_mounts: vec![(solution.to_path_buf(), "/solution".into())],
            tools: Vec::new(),
        }),
    };
    Ok((spec, exposure))
}

/// Runs a prepared `solution/solve.sh` to its end; `Err` says how it failed.
pub(crate) fn wait_solution(
    prepared: crate::runtime::Prepared,
    cancel: &CancelToken,
) -> Result<(), String> {
    let running = match crate::process::spawn(prepared.spec) {
        Ok(r) => r,
        Err(e) => {
            prepared.guard.finish();
            return Err(e.to_string());
        }
    };
    let end = running.wait(cancel);
    prepared.guard.finish();
    match (end.exit_code, end.signal, end.timed_out) {
        (Some(0), _, _) => Ok(()),
        (_, _, true) => Err("solution/solve.sh did not finish in its time limit".into()),
        (Some(code), _, _) => Err(format!("solution/solve.sh exited {code}")),
        (None, Some(sig), _) => Err(format!("solution/solve.sh was killed by signal {sig}")),
        (None, None, _) => Err("solution/solve.sh ended without an exit status".into()),
    }
}

/// A fresh environment of `task`'s image over a fresh starting point under `dir` (with the
/// task's mutation when `mutation_applied`), its healthcheck polled as before an agent, and
/// the task's reference solution run in it as the agent when `solution`: where a grade
/// made in the agent's environment grades the reference. For a step's view (`Task::step_of`)
/// the steps before it are replayed first with their solutions, then its own part before
/// the agent (`orchestrator::container::stage::replay`). `Ok(Err(why))`: the solution did
/// not run to its end (the environment is ended); `Err`: the workspace or the environment
/// could not be made here.
pub(crate) fn reference_env(
    orch: &Orchestrator,
    task: &Task,
    image: &Image,
    dir: &Path,
    (mutation_applied, solution): (bool, bool),
    cancel: &CancelToken,
) -> Result<Result<crate::evaluator::ReferenceEnv, String>, String> {
    let Some((script, _)) = &task.reference else {
        return Ok(Err("the task has no reference solution".into()));
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ws = Workspace::create(
        &orch.cache,
        task,
        &dir.join("work"),
        mutation_applied,
        Some(image),
    )
    .map_err(|e| format!("failed to make the workspace: {e}"))?;
    let home = ws.home.clone();
    let fresh = fresh(orch, ws, Vec::new());
    let (spec, mut exposure) = solution_launch(script, &fresh.path, &home, dir, task, Some(image))?;
    // A step's reference: the steps before it replayed first, each step's solution at its
    // own path and in turn at `/solution` (a folder refilled per step).
    let replay = task.step_of.as_ref().map(|s| s.replay.as_slice());
    let solution_folder = dir.join("solution");
    if let Some(steps) = replay {
        exposure
            .readable
            .extend(steps.iter().filter_map(|s| s.solution_dir.clone()));
        if let Some(view) = exposure.container.as_mut() {
            view.ro_mounts = vec![(solution_folder.clone(), "/solution".into())];
        }
        crate::orchestrator::container::stage::refill(&solution_folder, None)?;
    }
    let trust = crate::runtime::shared::phases_trust(
        exposure.egress.as_ref(),
        task.network.verifier.clone(),
    )?;
    // A task with sidecar services is graded with a world of its own (fresh services).
    let ctx = crate::world_env::WorldCtx {
        images: &orch.images,
        scratch: &dir.join("world"),
        facts: Default::default(),
        clock: &*orch.clock,
        // A reference solution's services: their output goes with the scratch folder.
        logs: None,
    };
    let env = crate::world_env::start(
        spec.clone(),
        &exposure,
        grading_limits(task),
        trust,
        task.world.as_ref(),
        &ctx,
        cancel,
    )
    .map_err(|e| match e {
        crate::world_env::WorldEnvError::Refused(e)
        | crate::world_env::WorldEnvError::Failed(e) => {
            format!("failed to start the environment: {e}")
        }
    })?;
    // Docker's healthcheck, polled before the solution runs, as before a trial's agent: an
    // environment that never becomes healthy cannot be graded in here.
    if let Err(why) = crate::orchestrator::container::healthcheck(&env, task, &spec, dir, cancel) {
        env.finish();
        return Err(format!("the environment did not become healthy: {why}"));
    }
    // Who a solution runs as (the task's `[agent] user`), asked only when one runs.
    let ids = match solution || replay.is_some() {
        true => Some(crate::runtime::container::phase_users(image, task, true)?.agent),
        false => None,
    };
    let solve = |spec: crate::process::ProcessSpec| {
        env.exec_as(
            spec,
            crate::runtime::shared::ExecAs::Agent,
            exposure.egress.clone(),
            ids,
            &exposure.written(),
        )
        .map_err(|e| e.to_string())
        .and_then(|p| wait_solution(p, cancel))
    };
    // A step's: the steps before it replayed with their solutions and its own part before
    // the agent, whether or not its own solution runs next.
    let replayed = match replay {
        None => Ok(()),
        Some(steps) => {
            let mut template = spec.clone();
            template.tag = format!("{}-replay", spec.tag);
            let place = crate::orchestrator::container::stage::Place {
                env: &env,
                template: &template,
                scratch: dir,
                cancel,
            };
            crate::orchestrator::container::stage::replay(
                &place,
                steps,
                &image.workdir,
                &solution_folder,
                &|step, solution| {
                    // An earlier step's solution: launched as the step's own is, with its
                    // folder and time limit.
                    let (mut s, _) =
                        solution_launch(solution, &fresh.path, &home, dir, task, Some(image))?;
                    s.timeout = std::time::Duration::from_secs_f64(step.agent_timeout_sec);
                    solve(s)
                },
            )
        }
    };
    let solved = replayed.and_then(|()| if solution { solve(spec) } else { Ok(()) });
    if let Err(e) = solved {
        env.finish();
        return Ok(Err(e));
    }
    Ok(Ok(crate::evaluator::ReferenceEnv { env, fresh }))
}
