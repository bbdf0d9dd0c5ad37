//! What a step of a multi-step task (`[[steps]]`) does to its environment before the
//! agent's turn, in Harbor 0.25's order (`harbor/trial/multi_step.py`, `_run_step`): its
//! `workdir/` uploaded into the working folder, its `setup.sh` run there, its healthcheck
//! polled. One implementation for the attempt's environment (`orchestrator::attempt::steps`)
//! and for the fresh environment a step's reference solution is graded in
//! ([`replay`], used by `rebuild::reference_env`): the reference of step `k` is graded where
//! steps `1..k` ran first, each with its solution run as the agent.

use crate::process::{spawn, CancelToken, ProcessSpec};
use crate::runtime::shared::{Env, ExecAs};
use akbench_core::task::steps::test_sources;
use akbench_core::task::steps::Step;
use akbench_core::task::Task;
use std::path::Path;
use std::time::Duration;

/// Where a step's `workdir/` is bound, read-only, while it is copied in.
const WORKDIR_MOUNT: &str = "/.akbench-step-workdir";

/// Where the environment's own processes of a step run: the environment, the process
/// template (no credentials), the folder their logs go to, the cancel.
pub(crate) struct Place<'a> {
    /// The environment.
    pub(crate) env: &'a Env,
    /// The process template (environment variables, folder, tag).
    pub(crate) template: &'a ProcessSpec,
    /// Where the logs of these processes go.
    pub(crate) scratch: &'a Path,
    /// The attempt's (or the grade's) cancel.
    pub(crate) cancel: &'a CancelToken,
}

/// Runs `argv` at `place` as `who` (no network of its own): its exit code (`None`: killed or
/// timed out) and what it wrote, or why it could not run.
fn exec(
    place: &Place<'_>,
    who: ExecAs,
    argv: Vec<String>,
    name: &str,
    timeout: Duration,
) -> Result<(Option<i32>, String), String> {
    let mut spec = ProcessSpec::clone(place.template);
    spec.argv = argv;
    spec.stdout_path = place.scratch.join(format!("{name}.stdout.log"));
    spec.stderr_path = place.scratch.join(format!("{name}.stderr.log"));
    spec.timeout = timeout;
    spec.grace = Duration::from_secs(1);
    spec.output_cap = 64 * 1024;
    spec.tag = format!("{}-{name}", place.template.tag);
    let prepared = place
        .env
        .exec(spec.clone(), who, None)
        .map_err(|e| format!("failed to run {name}: {e}"))?;
    let guard = prepared.guard;
    let running = match spawn(prepared.spec) {
        Ok(r) => r,
        Err(e) => {
            guard.finish();
            return Err(format!("failed to run {name}: {e}"));
        }
    };
    let end = running.wait(place.cancel);
    guard.finish();
    if place.cancel.is_cancelled() {
        return Err(format!("cancelled while {name} ran"));
    }
    let said = [&spec.stdout_path, &spec.stderr_path]
        .iter()
        .map(|p| {
            akbench_core::bounded_read::ReadKind::Log
                .read_text(p, akbench_core::bounded_read::Links::Refuse)
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("");
    let code = if end.timed_out { None } else { end.exit_code };
    Ok((code, akbench_core::limits::elide(said.trim())))
}

/// Quotes `s` for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Uploads the step's `workdir/` into the working folder (Harbor's `upload_dir`: its files
/// over what is there), bound read-only for a copy made inside the environment.
pub(crate) fn upload(place: &Place<'_>, dir: &Path, workdir: &str) -> Result<(), String> {
    let who = ExecAs::Grader {
        mounts: vec![(dir.to_path_buf(), WORKDIR_MOUNT.into(), true)],
        writable: Vec::new(),
        limits: crate::runtime::Limits::default(),
    };
    let cmd = format!(
        "cp -R {}/. {}/",
        quote(WORKDIR_MOUNT),
        quote(workdir.trim_end_matches('/'))
    );
    let argv = vec!["sh".into(), "-c".into(), cmd];
    match exec(place, who, argv, "step-upload", Duration::from_secs(300))? {
        (Some(0), _) => Ok(()),
        (code, said) => Err(format!(
            "failed to upload its workdir/ ({}): {said}",
            code.map_or("killed or out of time".into(), |c| format!("exit {c}"))
        )),
    }
}

/// Runs the uploaded `setup.sh` with `bash` in the working folder, in the environment as
/// the agent's processes run (what it starts stays): `Ok(Some(why))` when it failed (the
/// step's failure, as in Harbor), `Err` when it could not run.
pub(crate) fn setup(place: &Place<'_>, workdir: &str) -> Result<Option<String>, String> {
    let script = format!("{}/setup.sh", workdir.trim_end_matches('/'));
    let argv = vec!["bash".into(), script];
    match exec(
        place,
        ExecAs::Agent,
        argv,
        "step-setup",
        Duration::from_secs(600),
    )? {
        (Some(0), _) => Ok(None),
        (Some(c), said) => Ok(Some(format!("exited with code {c}: {said}"))),
        (None, said) => Ok(Some(format!("was killed or ran out of time: {said}"))),
    }
}

/// Empties `folder` (made when missing) and copies `solution` into it. The folder itself
/// stays: it is bound at `/solution` in an environment, and a bind follows the folder, not
/// its path.
pub(crate) fn refill(folder: &Path, solution: Option<&Path>) -> Result<(), String> {
    std::fs::create_dir_all(folder)
        .map_err(|e| format!("failed to create {}: {e}", folder.display()))?;
    let entries = std::fs::read_dir(folder)
        .map_err(|e| format!("failed to read {}: {e}", folder.display()))?;
    for e in entries {
        let e = e.map_err(|e| format!("failed to read {}: {e}", folder.display()))?;
        let p = e.path();
        let gone = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
            _ => std::fs::remove_file(&p),
        };
        gone.map_err(|e| format!("failed to empty {}: {e}", p.display()))?;
    }
    if let Some(s) = solution {
        crate::evaluator::copy_tree(s, folder)
            .map_err(|e| format!("failed to copy the step's solution: {e}"))?;
    }
    Ok(())
}

/// What the step's own part before its agent did: `Ok(None)` the step may go on (its agent
/// runs next), `Ok(Some(why))` its `setup.sh` failed (the step fails, as in Harbor), `Err`
/// the infrastructure failed (the upload, a setup that could not run, the healthcheck).
pub(crate) fn before_agent(
    place: &Place<'_>,
    step: &Step,
    workdir: &str,
) -> Result<Option<String>, String> {
    let name = &step.config.name;
    if let Some(dir) = &step.workdir_dir {
        upload(place, dir, workdir).map_err(|e| format!("step `{name}`: {e}"))?;
    }
    if step.has_setup {
        if let Some(why) = setup(place, workdir).map_err(|e| format!("step `{name}`: {e}"))? {
            return Ok(Some(format!("setup.sh {why}")));
        }
    }
    if let Some(hc) = &step.config.healthcheck {
        super::poll(place.env, hc, place.template, place.scratch, place.cancel)
            .map_err(|why| format!("step `{name}` healthcheck: {why}"))?;
    }
    Ok(None)
}

/// The reference environment of the last of `steps` (a step's view's `StepOf::replay`):
/// for each step in order, its part before the agent ([`before_agent`]) with
/// `solution_folder` (bound at `/solution`) refilled with its solution, then, for every
/// step but the last, its solution run as the agent by `solve`. The last step's solution
/// is the caller's to run (it is the view's reference). `Err` says which step could not be
/// replayed and why: the reference cannot be graded here.
pub(crate) fn replay(
    place: &Place<'_>,
    steps: &[Step],
    workdir: &str,
    solution_folder: &Path,
    solve: &dyn Fn(&Step, &Path) -> Result<(), String>,
) -> Result<(), String> {
    for (i, step) in steps.iter().enumerate() {
        let name = &step.config.name;
        let solution = step.solution_dir.as_deref();
        refill(solution_folder, solution)?;
        if let Some(why) = before_agent(place, step, workdir)? {
            return Err(format!("step `{name}`: {why}"));
        }
        if i + 1 < steps.len() {
            let Some(solution) = solution else {
                return Err(format!(
                    "step `{name}` has no reference solution to replay before the later steps"
                ));
            };
            solve(step, solution)
                .map_err(|e| format!("step `{name}`'s reference solution: {e}"))?;
        }
    }
    Ok(())
}

/// Each step as the one-step task its part runs ([`Task::step_view`]), its tests merged
/// under `work_root` (`steps/<name>/tests`): the attempt's folder, or a task check's.
pub(crate) fn views(task: &Task, work_root: &Path) -> Result<Vec<Task>, String> {
    let mut out = Vec::new();
    for (i, step) in task.steps.iter().enumerate() {
        let merged = work_root
            .join("steps")
            .join(&step.config.name)
            .join("tests");
        for from in test_sources(&task.tests_dir, step) {
            crate::evaluator::copy_tree(&from, &merged).map_err(|e| {
                format!(
                    "failed to merge the tests of step `{}` from {}: {e}",
                    step.config.name,
                    from.display()
                )
            })?;
        }
        std::fs::create_dir_all(&merged)
            .map_err(|e| format!("failed to create {}: {e}", merged.display()))?;
        out.push(task.step_view(i, &merged).map_err(|e| e.to_string())?);
    }
    Ok(out)
}
