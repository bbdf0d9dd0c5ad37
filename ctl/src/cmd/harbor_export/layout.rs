//! A multi-step task (`[[steps]]`) or a task with sidecar services
//! (`environment/docker-compose.yaml`) exported as Harbor reads it: such a task is already
//! in Harbor's layout and runs from its image (no `[source]`), so its folder travels as it
//! is (`steps/<name>/` with each step's instruction, tests, solution, `workdir/` and
//! `setup.sh`; `tests/`, `solution/`, `instruction.md`; `environment/` with the compose file
//! and each service's build folder), its `task.toml` with what the plan fixed written over
//! it (`akbench_core::harbor::layout_toml`), and `environment/Dockerfile` replaced by one
//! line `FROM` the task image the plan pinned by digest. The compose file's service images
//! are pinned by digest in the task itself (the compose file, or task.toml's
//! `[environment.service_images]` for a `build:` service, which Harbor builds from its
//! folder; the loader refuses a tag), and the export checked the task is the exact release
//! the plan holds, so they are the images the plan bound.

use super::copy_dir;
use crate::exit::InputError;
use akbench_core::harbor::layout_toml::{layout_toml, PlannedToml};
use akbench_core::image::ImageRef;
use akbench_core::plan::PlannedTrial;
use akbench_core::task::{Task, TASK_FILE};
use std::path::Path;

/// True when the task is exported in Harbor's own layout (it has steps or sidecars).
pub fn applies(task: &Task) -> bool {
    !task.steps.is_empty() || task.world.is_some()
}

/// What the task is, for messages.
fn what(task: &Task) -> String {
    match (task.steps.len(), &task.world) {
        (0, Some(_)) => "a task with sidecar services (environment/docker-compose.yaml)".into(),
        (n, None) => format!("a multi-step task ({n} `[[steps]]`)"),
        (n, Some(_)) => format!("a multi-step task ({n} `[[steps]]`) with sidecar services"),
    }
}

/// Refuses what cannot be written faithfully; the pinned task image the export starts from.
pub fn check(run_key: &str, task: &Task, t: &PlannedTrial) -> Result<String, InputError> {
    let id = &t.task.id;
    let what = what(task);
    if task.repo.is_some() {
        return Err(InputError(format!(
            "failed to export run {run_key}: task {id} is {what} with a `[source]` repository, which export-harbor does not write (it writes such tasks only as Harbor runs them, from their image); fix: leave it out of the exported run"
        )));
    }
    if task.file.verifier.command.is_some() {
        return Err(InputError(format!(
            "failed to export run {run_key}: task {id} is {what} with a `[verifier] command`, which Harbor does not read (it runs tests/test.sh); fix: leave it out of the exported run, or grade with tests/test.sh"
        )));
    }
    let Some(image) = &t.task_source.image else {
        return Err(InputError(format!(
            "failed to export run {run_key}: task {id} is {what} whose image the plan does not pin (its environment/Dockerfile is not built); fix: build and push it (`akbench image build TASK --push REGISTRY`, which writes the image into task.toml) and plan the run again"
        )));
    };
    match ImageRef::parse(image) {
        Ok(r) if r.digest.is_some() => Ok(image.clone()),
        _ => Err(InputError(format!(
            "failed to export run {run_key}: task {id}: the plan's image `{image}` is not pinned by digest; fix: plan the run again under `runtime: container`"
        ))),
    }
}

/// The exported environment's Dockerfile: the task image as the plan pinned it.
pub fn dockerfile(image: &str, workdir: Option<&str>) -> String {
    let mut s = format!(
        "# Written by akbench run export-harbor: the task's image, pinned by the plan.\nFROM {image}\n"
    );
    if let Some(w) = workdir {
        s.push_str(&format!("WORKDIR {w}\n"));
    }
    s
}

/// Writes one trial's Harbor task folder for a task in Harbor's layout.
pub fn write_task(
    dir: &Path,
    task: &Task,
    t: &PlannedTrial,
    run_key: &str,
    image: &str,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    for e in std::fs::read_dir(&task.dir)? {
        let e = e?;
        let name = e.file_name();
        if name == TASK_FILE {
            continue;
        }
        let ft = e.file_type()?;
        if ft.is_dir() {
            copy_dir(&e.path(), &dir.join(&name))?;
        } else if ft.is_file() {
            std::fs::copy(e.path(), dir.join(&name))?;
        } else {
            anyhow::bail!(
                "failed to export {}: not a regular file or folder",
                e.path().display()
            );
        }
    }
    let text = akbench_core::bounded_read::read_text(
        &task.dir.join(TASK_FILE),
        akbench_core::task::MAX_TASK_TOML_BYTES,
        akbench_core::bounded_read::Links::Follow,
    )
    .map_err(|e| anyhow::anyhow!("failed to read {}: {e}", task.dir.display()))?;
    let planned = PlannedToml {
        task_id: &t.task.id,
        version: &t.task.version,
        run_key,
        trial_id: t.trial_id.to_string(),
        trial_key: &t.key,
        task_digest: &t.task.digest,
        repetition: t.repetition,
        agent_timeout_sec: t.compute.agent_timeout_sec,
        verifier_timeout_sec: t.compute.verifier_timeout_sec,
        cpus: t.compute.cpus,
        memory_mb: t.compute.memory_mb,
    };
    let toml = layout_toml(&text, &planned).map_err(|e| {
        anyhow::anyhow!("failed to read {}: {e}", task.dir.join(TASK_FILE).display())
    })?;
    std::fs::write(dir.join(TASK_FILE), toml)?;
    std::fs::create_dir_all(dir.join("environment"))?;
    std::fs::write(
        dir.join("environment/Dockerfile"),
        dockerfile(image, task.image_workdir.as_deref()),
    )?;
    Ok(())
}
