//! `akbench task check DIR`: validates a task folder on this host (the two grading runs are
//! `akbench_worker::task_check`, the rule `akbench_core::task_check::judge`), and keeps the
//! result by the task's digest (and its image's, under `container`) in the cache folder's
//! `task-checks/`, reused until the task changes or `--recheck`.

use crate::cli::TaskCheckArgs;
use crate::cmd::shared::inputs::{cache_root, load_task, pin_task};
use crate::exit::{self, InputError};
use akbench_core::bounded_read::{read, Links};
use akbench_core::clock::SystemClock;
use akbench_core::manifest::Runtime;
use akbench_core::task::{self, TASK_FILE};
use akbench_core::task_check::{cache_name, judge, TaskCheck};
use akbench_worker::image::{for_task, Store};
use akbench_worker::orchestrator::{write_json_atomic, Orchestrator};
use akbench_worker::process::CancelToken;
use std::path::PathBuf;
use std::sync::Arc;

/// The folder of cached checks under the cache root.
pub const CHECKS_DIR: &str = "task-checks";

/// Runs the check (or reads it from the cache); exit 0 valid, 1 not valid.
pub fn run(args: TaskCheckArgs) -> anyhow::Result<i32> {
    let dir = task::absolute(&args.dir);
    if !dir.join(TASK_FILE).is_file() {
        return Err(InputError(format!(
            "failed to check {}: there is no task.toml in it; fix: give a task folder",
            dir.display()
        ))
        .into());
    }
    let mut task = load_task(&dir.display().to_string(), &dir)?;
    if task.reference.is_none() {
        return Err(InputError(format!(
            "failed to check task `{}`: it has no reference solution ({}); fix: add solution/solve.sh, which the check applies and the tests must then solve",
            task.release.id,
            dir.join("solution/solve.sh").display()
        ))
        .into());
    }
    let runtime = match args.runtime.as_str() {
        "direct" => Runtime::Direct,
        "container" => Runtime::Container,
        _ => Runtime::Sandbox,
    };
    let cache = cache_root(args.cache.as_deref());
    let orch = Orchestrator::new(&cache, Arc::new(SystemClock));
    if runtime == Runtime::Container {
        pin_task(&orch, &mut task)?;
    }
    let image_digest = task.image.as_ref().and_then(|i| i.digest.clone());
    let file = cache.join(CHECKS_DIR).join(cache_name(
        &task.release.digest,
        runtime.as_str(),
        image_digest
            .as_deref()
            .filter(|_| runtime == Runtime::Container),
    ));
    let cached = if args.recheck {
        None
    } else {
        read_cached(&file, &task.release.digest)
    };
    let (check, was_cached) = match cached {
        Some(c) => (c, true),
        None => (check_now(&orch, &task, runtime)?, false),
    };
    if !was_cached {
        std::fs::create_dir_all(file.parent().expect("has a parent"))?;
        write_json_atomic(&file, &check)
            .map_err(|e| anyhow::anyhow!("failed to write {}: {e}", file.display()))?;
    }
    print(&check, &file, was_cached, args.json);
    Ok(if check.valid {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}

/// The cached check in `file` when it is one of the task release `digest`.
fn read_cached(file: &std::path::Path, digest: &str) -> Option<TaskCheck> {
    let bytes = read(file, 1 << 20, Links::Refuse).ok()?;
    serde_json::from_slice::<TaskCheck>(&bytes)
        .ok()
        .filter(|c| c.digest == digest)
}

fn check_now(
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
    let scratch: PathBuf = orch
        .work_root
        .join(format!("task-check-{}", uuid::Uuid::now_v7()));
    let runs = akbench_worker::task_check::run(
        orch,
        task,
        runtime,
        held.as_ref().map(|(_, i)| i),
        &scratch,
        &CancelToken::new(),
    );
    let _ = std::fs::remove_dir_all(&scratch);
    let runs =
        runs.map_err(|e| anyhow::anyhow!("failed to check task `{}`: {e}", task.release.id))?;
    let (valid, mut problems) = judge(runs.reference, runs.baseline);
    if !valid {
        problems.extend(runs.notes);
    }
    Ok(TaskCheck {
        task: task.release.id.clone(),
        version: task.release.version.clone(),
        digest: task.release.digest.clone(),
        runtime: runtime.as_str().to_string(),
        image: held.as_ref().map(|(_, i)| i.pinned.clone()),
        checked_at: orch.clock.now(),
        reference: runs.reference,
        baseline: runs.baseline,
        valid,
        problems,
    })
}

fn print(check: &TaskCheck, file: &std::path::Path, cached: bool, json: bool) {
    if json {
        let mut v = serde_json::to_value(check).expect("a check serializes");
        v["cached"] = cached.into();
        v["cache_file"] = file.display().to_string().into();
        println!("{v}");
        return;
    }
    let side = |s| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
    };
    println!(
        "task {} {} ({}): {} under {}{}; reference {}, baseline {}{}",
        check.task,
        check.version,
        check.digest,
        if check.valid { "valid" } else { "NOT valid" },
        check.runtime,
        check
            .image
            .as_deref()
            .map(|i| format!(" ({i})"))
            .unwrap_or_default(),
        side(check.reference).unwrap_or_default(),
        side(check.baseline).unwrap_or_default(),
        if cached {
            format!(" (cached, checked {})", check.checked_at.to_rfc3339())
        } else {
            String::new()
        }
    );
    for p in &check.problems {
        println!("  - {p}");
    }
}
