//! Task checks kept by the task's digest (`akbench task check`'s cache under the cache
//! root's `task-checks/`): one read, run and written here, and the plan-time rule that
//! records them in a run's spec ([`record_in_spec`]: every cached check recorded, missing
//! ones run with `--check-tasks`, an invalid task refusing the plan).

use super::inputs::{load_task, pin_task};
use crate::exit::InputError;
use akbench_core::bounded_read::{read, Links};
use akbench_core::clock::SystemClock;
use akbench_core::manifest::Runtime;
use akbench_core::task;
use akbench_core::task_check::{cache_name, judge, judge_steps, ModeCheck, StepCheck, TaskCheck};
use akbench_worker::image::{for_task, Store};
use akbench_worker::orchestrator::{write_json_atomic, Orchestrator};
use akbench_worker::process::CancelToken;
use std::path::PathBuf;
use std::sync::Arc;

/// The folder of cached checks under the cache root.
pub const CHECKS_DIR: &str = "task-checks";

/// Where the check of the task release `digest` on `runtime` is kept (under `container`, by
/// the pinned image's `image_digest` too; other runtimes ignore it).
pub fn check_file(
    cache: &std::path::Path,
    digest: &str,
    runtime: Runtime,
    image_digest: Option<&str>,
) -> PathBuf {
    let image = image_digest.filter(|_| runtime == Runtime::Container);
    cache
        .join(CHECKS_DIR)
        .join(cache_name(digest, runtime.as_str(), image))
}

/// Keeps `check` in `file` (written whole, then renamed).
pub fn keep(file: &std::path::Path, check: &TaskCheck) -> anyhow::Result<()> {
    std::fs::create_dir_all(file.parent().expect("has a parent"))?;
    write_json_atomic(file, check)
        .map_err(|e| anyhow::anyhow!("failed to write {}: {e}", file.display()))
}

/// The cached check in `file` when it is one of the task release `digest`.
pub fn read_cached(file: &std::path::Path, digest: &str) -> Option<TaskCheck> {
    let bytes = read(
        file,
        akbench_core::bounded_read::ReadKind::Config.cap(),
        Links::Refuse,
    )
    .ok()?;
    serde_json::from_slice::<TaskCheck>(&bytes)
        .ok()
        .filter(|c| c.digest == digest)
}

pub fn check_now(
    orch: &Orchestrator,
    task: &task::Task,
    runtime: Runtime,
) -> anyhow::Result<TaskCheck> {
    akbench_worker::runtime::check(runtime)
        .map_err(|e| anyhow::anyhow!("failed to check task `{}` here: {e}", task.release.id))?;
    let held =
        match runtime {
            Runtime::Container => {
                let store = Store::from_env(orch.images.clone()).map_err(InputError)?;
                Some(for_task(&store, task).map_err(|e| {
                    anyhow::anyhow!("failed to check task `{}`: {e}", task.release.id)
                })?)
            }
            _ => None,
        };
    use akbench_core::grading_env::{decide, GradingEnvironment};
    let image = held.as_ref().map(|(_, i)| i);
    // Where a run's attempts grade the task by default; a task graded in the agent's
    // environment is checked in the clean room too, which a run may ask for.
    let grade_in = decide(
        task.file.verifier.environment_mode.as_deref(),
        task.file.source.is_some(),
        GradingEnvironment::Task,
    );
    let shared = runtime == Runtime::Container && grade_in.shared();
    if !task.steps.is_empty() {
        let Some(image) = image else {
            return Err(InputError(format!(
                "failed to check task `{}`: it is a multi-step task, whose steps run in one environment of its image, under the container runtime only; fix: check it with `--runtime container`",
                task.release.id
            ))
            .into());
        };
        return check_steps(orch, task, image);
    }
    let checked = |grading: GradingEnvironment| {
        let scratch: PathBuf = orch
            .work_root
            .join(format!("task-check-{}", uuid::Uuid::now_v7()));
        let runs = akbench_worker::task_check::run(
            orch,
            task,
            (runtime, grading),
            image,
            &scratch,
            &CancelToken::new(),
        );
        let _ = std::fs::remove_dir_all(&scratch);
        let runs =
            runs.map_err(|e| anyhow::anyhow!("failed to check task `{}`: {e}", task.release.id))?;
        let (valid, mut problems) = judge(runs.reference, runs.baseline);
        if !valid {
            problems.extend(runs.notes.iter().cloned());
        }
        Ok::<_, anyhow::Error>((runs, valid, problems))
    };
    let (runs, valid, problems) = checked(GradingEnvironment::Task)?;
    let separate = match shared {
        false => None,
        true => {
            let (r, valid, problems) = checked(GradingEnvironment::Separate)?;
            Some(ModeCheck {
                reference: r.reference,
                baseline: r.baseline,
                valid,
                problems,
            })
        }
    };
    Ok(TaskCheck {
        task: task.release.id.clone(),
        version: task.release.version.clone(),
        digest: task.release.digest.clone(),
        runtime: runtime.as_str().to_string(),
        image: image.map(|i| i.pinned.clone()),
        checked_at: orch.clock.now(),
        reference: runs.reference,
        baseline: runs.baseline,
        valid,
        problems,
        tripwire: runs.tripwire,
        grading: Some(if shared { "shared" } else { "separate" }.to_string()),
        separate,
        steps: Vec::new(),
    })
}

/// The check of a multi-step task (under `container`, the only runtime its steps run in):
/// each step's two runs ([`akbench_worker::task_check::run_steps`]) judged, the task's from
/// theirs ([`judge_steps`]).
fn check_steps(
    orch: &Orchestrator,
    task: &task::Task,
    image: &akbench_worker::runtime::container::Image,
) -> anyhow::Result<TaskCheck> {
    let scratch: PathBuf = orch
        .work_root
        .join(format!("task-check-{}", uuid::Uuid::now_v7()));
    let runs =
        akbench_worker::task_check::run_steps(orch, task, image, &scratch, &CancelToken::new());
    let _ = std::fs::remove_dir_all(&scratch);
    let runs =
        runs.map_err(|e| anyhow::anyhow!("failed to check task `{}`: {e}", task.release.id))?;
    let steps: Vec<StepCheck> = runs
        .into_iter()
        .map(|(name, r)| {
            let mut c = StepCheck::judged(&name, r.reference, r.baseline, r.tripwire);
            if !c.valid {
                c.problems.extend(r.notes);
            }
            c
        })
        .collect();
    let (reference, baseline, valid, problems) = judge_steps(&steps);
    Ok(TaskCheck {
        task: task.release.id.clone(),
        version: task.release.version.clone(),
        digest: task.release.digest.clone(),
        runtime: Runtime::Container.as_str().to_string(),
        image: Some(image.pinned.clone()),
        checked_at: orch.clock.now(),
        reference,
        baseline,
        valid,
        problems,
        tripwire: None,
        grading: Some("shared".to_string()),
        separate: None,
        steps,
    })
}

/// What planning found of its tasks' checks ([`record_in_spec`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PlannedChecks {
    /// Task releases with a valid check on the run's runtime (cached or run now).
    pub valid: usize,
    /// Of those, the checks run now (`--check-tasks`).
    pub run_now: usize,
    /// Task releases without a check: not validated here (the worker still checks the
    /// reference solution whenever a grading run gives no verdict).
    pub unchecked: Vec<String>,
}

/// Records in the spec's provenance the check of each of its task releases on the run's
/// runtime: read from the cache (`akbench task check` wrote it), or run now when
/// `run_missing` (`--check-tasks`). A task whose check is not valid refuses the plan (exit
/// 2): every trial of it would be an evaluation error, or solved by doing nothing.
pub fn record_in_spec(
    spec: akbench_core::spec::ResolvedRunSpec,
    cache: &std::path::Path,
    run_missing: bool,
) -> anyhow::Result<(akbench_core::spec::ResolvedRunSpec, PlannedChecks)> {
    let runtime = spec.condition.execution.runtime;
    let clean_room = spec.condition.execution.grading_environment
        == akbench_core::grading_env::GradingEnvironment::Separate;
    let tasks_root = spec.provenance.tasks_root.clone().map(PathBuf::from);
    let orch = Orchestrator::new(cache, Arc::new(SystemClock));
    let mut checks = Vec::new();
    let mut tally = PlannedChecks::default();
    let mut refused = Vec::new();
    for t in &spec.condition.tasks {
        let image_digest = t
            .image
            .as_deref()
            .and_then(|i| akbench_core::image::ImageRef::parse(i).ok())
            .and_then(|r| r.digest);
        let file = check_file(cache, &t.release.digest, runtime, image_digest.as_deref());
        let check = match read_cached(&file, &t.release.digest) {
            Some(c) => c,
            None if run_missing => {
                let Some(root) = &tasks_root else {
                    return Err(InputError(
                        "failed to check the run's tasks: the spec names no tasks root; fix: give --tasks-root".into(),
                    )
                    .into());
                };
                let mut task = load_task(&t.release.id, root)?;
                if task.release.digest != t.release.digest {
                    return Err(InputError(format!(
                        "failed to check task `{}`: its folder changed while planning (digest {} now, {} planned); fix: plan again",
                        t.release.id, task.release.digest, t.release.digest
                    ))
                    .into());
                }
                if task.reference.is_none() {
                    tally.unchecked.push(t.release.id.clone());
                    continue;
                }
                if runtime == Runtime::Container {
                    pin_task(&orch, &mut task)?;
                }
                eprintln!(
                    "akbench: checking task {} {} under {} (reference solution, then the unchanged start)",
                    t.release.id,
                    t.release.version,
                    runtime.as_str()
                );
                let c = check_now(&orch, &task, runtime)?;
                keep(&file, &c)?;
                tally.run_now += 1;
                c
            }
            None => {
                tally.unchecked.push(t.release.id.clone());
                continue;
            }
        };
        // The run asks for the clean room: a task the check found graded wrongly there (a
        // service or files outside the working folder) refuses the plan too.
        let clean_room_wrong = check.separate.as_ref().filter(|m| clean_room && !m.valid);
        if let Some(m) = clean_room_wrong {
            refused.push(format!(
                "task `{}` {} (checked {} under {}) is not graded correctly in a fresh sandbox, which the run asks (`execution.grading_environment: separate`): {}; fix: leave the task out of this run, or remove `grading_environment: separate`",
                check.task,
                check.version,
                check.checked_at.to_rfc3339(),
                check.runtime,
                m.problems.join("; ")
            ));
        } else if check.valid {
            tally.valid += 1;
            checks.push(check);
        } else {
            refused.push(format!(
                "task `{}` {} (checked {} under {}): {}",
                check.task,
                check.version,
                check.checked_at.to_rfc3339(),
                check.runtime,
                check.problems.join("; ")
            ));
        }
    }
    if !refused.is_empty() {
        return Err(InputError(format!(
            "failed to plan: {} task(s) are not valid:\n  {}\nfix: repair the task (its reference solution must solve it and its unchanged start must not), or check it again with `akbench task check DIR --recheck` if it was fixed",
            refused.len(),
            refused.join("\n  ")
        ))
        .into());
    }
    Ok((spec.with_task_checks(checks), tally))
}

/// The plan output's line about the tasks' checks.
pub fn checks_line(c: &PlannedChecks) -> String {
    let mut s = format!("{} valid", c.valid);
    if c.run_now > 0 {
        s.push_str(&format!(" ({} checked now)", c.run_now));
    }
    if !c.unchecked.is_empty() {
        s.push_str(&format!(
            ", {} not checked ({}; `akbench task check DIR` or --check-tasks)",
            c.unchecked.len(),
            akbench_core::limits::elide(&c.unchecked.join(", "))
        ));
    }
    s
}
