//! Task images at plan time: a tag is resolved to the digest of its manifest for the
//! workers' platform once, when a run is planned (or a single trial starts), so every
//! attempt and record of the run names the same image (docs/container.md).

use crate::exit::InputError;
use akbench_core::clock::Clock;
use akbench_core::manifest::Runtime;
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::task::Task;
use akbench_worker::image::Store;
use akbench_worker::orchestrator::Orchestrator;

fn store(orch_images: std::path::PathBuf) -> anyhow::Result<Store> {
    Store::from_env(orch_images).map_err(|e| InputError(e).into())
}

/// Pins `task`'s image to the digest its tag names now (kept when already pinned).
pub fn pin_task(orch: &Orchestrator, task: &mut Task) -> anyhow::Result<()> {
    let Some(image) = task.image.clone() else {
        return Err(InputError(format!(
            "task `{}` names no image (`environment.image` in {}), and `--runtime container` runs a task in its image; fix: name one, or use --runtime sandbox",
            task.release.id,
            task.dir.join(akbench_core::task::TASK_FILE).display()
        ))
        .into());
    };
    if image.digest.is_some() {
        return Ok(());
    }
    let digest = store(orch.images.clone())?
        .resolve(&image)
        .map_err(|e| InputError(format!("task `{}`: {e}", task.release.id)))?;
    task.pin_image(&digest).map_err(InputError)?;
    Ok(())
}

/// The spec with its tasks' image tags pinned, for a run under the `container` runtime
/// (other runtimes do not use the image: the spec keeps it as written).
pub fn pin_spec(spec: ResolvedRunSpec, clock: &dyn Clock) -> anyhow::Result<ResolvedRunSpec> {
    if spec.condition.execution.runtime != Runtime::Container {
        return Ok(spec);
    }
    let store = store(std::env::temp_dir().join("akbench-resolve"))?;
    spec.pin_images(|r| store.resolve(r).map_err(|e| e.to_string()), clock)
        .map_err(|e| InputError(e).into())
}
