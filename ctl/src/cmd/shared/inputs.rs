//! A local run's inputs: the per-host cache root, a task named by id or by path, and task
//! images pinned to their digests at plan time (docs/container.md): a tag is resolved to the
//! digest of its manifest for the workers' platform once, when a run is planned (or a
//! single trial starts), so every attempt and record of the run names the same image.

use crate::exit::InputError;
use akbench_core::clock::Clock;
use akbench_core::manifest::Runtime;
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::task::requirements::{self, Offered};
use akbench_core::task::{self, Task};
use akbench_worker::image::Store;
use akbench_worker::orchestrator::Orchestrator;
use std::path::{Path, PathBuf};

/// Loads a task given as an id under `tasks_root` or as a path to its folder.
pub fn load_task(spec: &str, tasks_root: &Path) -> anyhow::Result<Task> {
    let as_path = Path::new(spec);
    if spec.contains('/') && as_path.join(task::TASK_FILE).is_file() {
        // A task given by path anchors its repository at its own folder's parent (the tasks
        // root it lives in), not at --tasks-root, which names another folder of tasks.
        let dir = task::absolute(as_path);
        let root = dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.clone());
        return Ok(Task::load(&dir, &root)?);
    }
    Ok(task::load_by_id(tasks_root, spec)?)
}

/// The per-host cache root: the flag, else `$XDG_CACHE_HOME/akbench`, else
/// `~/.cache/akbench`, else a folder in the temp dir.
pub fn cache_root(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return task::absolute(p);
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("akbench");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h).join(".cache").join("akbench");
    }
    std::env::temp_dir().join("akbench-cache")
}

/// [`cache_root`], refused as the user's input (exit 2, naming the flag) when it, or the
/// nearest of its parents that exists, is not a folder: the cache could never be made there.
pub fn usable_cache_root(flag: Option<&Path>) -> Result<PathBuf, InputError> {
    let root = cache_root(flag);
    if let Some((p, m)) = root
        .ancestors()
        .find_map(|p| std::fs::metadata(p).ok().map(|m| (p, m)))
    {
        if !m.is_dir() {
            return Err(InputError(format!(
                "failed to use the cache folder {} (--cache / AKBENCH_CACHE): {} is a {}, not a folder; fix: give a folder for --cache (it is made when missing)",
                root.display(),
                p.display(),
                akbench_core::bounded_read::kind_name(&m.file_type()),
            )));
        }
    }
    Ok(root)
}

fn store(orch_images: std::path::PathBuf) -> anyhow::Result<Store> {
    Store::from_env(orch_images).map_err(|e| InputError(e).into())
}

/// The image store a tag is resolved to its digest through when nothing is pulled (a plan,
/// `image build`'s pushed tag), its registry settings from the environment.
pub fn resolver() -> anyhow::Result<Store> {
    store(std::env::temp_dir().join("akbench-resolve"))
}

/// Refuses a runtime `task` cannot run under (an image-only task outside `container`),
/// as bad input naming the task and the fix.
pub fn check_runtime(task: &Task, runtime: Runtime) -> anyhow::Result<()> {
    task.check_runtime(runtime == Runtime::Container)
        .map_err(|e| InputError(e).into())
}

/// What a run of `task` alone (`run single`) gives it: the defaults of a manifest naming
/// no compute, raised to the task's `[environment] cpus` and `memory_mb`; refused when the
/// task asks for more disk than an attempt may write.
pub fn single_compute(task: &Task) -> anyhow::Result<Offered> {
    let offered = Offered {
        cpus: u64::from(akbench_core::spec::DEFAULT_CPUS),
        memory_mb: akbench_core::spec::DEFAULT_MEMORY_MB,
        disk_mb: requirements::DISK_MB,
    }
    .raised_to(&task.requirements);
    requirements::check(&task.release.id, &task.requirements, &offered).map_err(InputError)?;
    Ok(offered)
}

/// Pins `task`'s image to the digest its tag names now (kept when already pinned).
pub fn pin_task(orch: &Orchestrator, task: &mut Task) -> anyhow::Result<()> {
    let Some(image) = task.image.clone() else {
        return Err(InputError(format!(
            "task `{}` names no image (`environment.image` in {}), and `--runtime container` runs a task in its image; fix: name one, or use --runtime sandbox",
            task.release.id,
            task.dir.join(task::TASK_FILE).display()
        ))
        .into());
    };
    if image.digest.is_some() {
        return Ok(());
    }
    let digest = store(orch.images.clone())?
        .resolve(&image)
        .map_err(|e| match e {
            // The registry's trouble, not the task's: exit 3 (README, "Exit codes").
            akbench_worker::image::ImageError::Unavailable { .. } => {
                anyhow::anyhow!("task `{}`: {e}", task.release.id)
            }
            _ => InputError(format!("task `{}`: {e}", task.release.id)).into(),
        })?;
    task.pin_image(&digest).map_err(InputError)?;
    Ok(())
}

/// The spec with its tasks' image tags pinned, for a run under the `container` runtime
/// (other runtimes do not use the image: the spec keeps it as written).
pub fn pin_spec(spec: ResolvedRunSpec, clock: &dyn Clock) -> anyhow::Result<ResolvedRunSpec> {
    if spec.condition.execution.runtime != Runtime::Container {
        return Ok(spec);
    }
    let store = resolver()?;
    spec.pin_images(|r| store.resolve(r), clock)
        .map_err(|e| match e.cause {
            // The registry's trouble, not the plan's: exit 3 (README, "Exit codes").
            Some(akbench_worker::image::ImageError::Unavailable { .. }) => {
                anyhow::anyhow!("{}", e.message)
            }
            _ => InputError(e.message).into(),
        })
}
