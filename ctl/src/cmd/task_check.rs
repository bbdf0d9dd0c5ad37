//! `akbench task check DIR`: validates a task folder on this host (the two grading runs are
//! `akbench_worker::task_check`, the rule `akbench_core::task_check::judge`), and keeps the
//! result by the task's digest (and its image's, under `container`) in the cache folder's
//! `task-checks/`, reused until the task changes or `--recheck`.

use crate::cli::TaskCheckArgs;
use crate::cmd::shared::inputs::{check_runtime, load_task, pin_task, usable_cache_root};
use crate::cmd::shared::task_checks::{check_file, check_now, keep, read_cached};
use crate::exit::{self, InputError};
use akbench_core::clock::SystemClock;
use akbench_core::manifest::Runtime;
use akbench_core::task::{self, TASK_FILE};
use akbench_core::task_check::TaskCheck;
use akbench_worker::orchestrator::Orchestrator;
use std::sync::Arc;

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
    // A multi-step task is checked step by step, under `container` only (where its steps
    // run); each step needs a solution, its own or the task's.
    if !task.steps.is_empty() {
        if let Some(s) = task
            .steps
            .iter()
            .find(|s| s.solution_dir.is_none() && task.reference.is_none())
        {
            return Err(InputError(format!(
                "failed to check task `{}`: step `{}` has no reference solution (steps/{}/solution/solve.sh, or the task's solution/solve.sh); fix: add one, which the check runs and the step's tests must then solve",
                task.release.id, s.config.name, s.config.name
            ))
            .into());
        }
    } else if task.reference.is_none() || !dir.join("solution/solve.sh").is_file() {
        // The check applies solution/solve.sh: without it there is nothing to check, which
        // is the task's fault (exit 2), never a "not valid" verdict kept in the cache.
        return Err(InputError(format!(
            "failed to check task `{}`: it has no reference solution ({}); fix: add solution/solve.sh, which the check applies and the tests must then solve",
            task.release.id,
            dir.join("solution/solve.sh").display()
        ))
        .into());
    }
    let runtime =
        crate::cmd::shared::inputs::runtime_for(args.runtime.as_deref(), &task, args.json);
    let cache = usable_cache_root(args.cache.as_deref())?;
    let orch = Orchestrator::new(&cache, Arc::new(SystemClock));
    check_runtime(&task, runtime)?;
    if runtime == Runtime::Container {
        pin_task(&orch, &mut task)?;
    }
    let image_digest = task.image.as_ref().and_then(|i| i.digest.clone());
    let file = check_file(
        &cache,
        &task.release.digest,
        runtime,
        image_digest.as_deref(),
    );
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
        keep(&file, &check)?;
    }
    print(&check, &task, &file, was_cached, args.json);
    Ok(if check.valid {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}

fn print(check: &TaskCheck, task: &task::Task, file: &std::path::Path, cached: bool, json: bool) {
    if json {
        let mut v = serde_json::to_value(check).expect("a check serializes");
        v["cached"] = cached.into();
        v["cache_file"] = file.display().to_string().into();
        v["fields"] = serde_json::to_value(&task.fields).expect("fields serialize");
        v["network"] = serde_json::to_value(&task.network).expect("networks serialize");
        if let Some(n) = &task.harbor_name {
            v["harbor_name"] = n.clone().into();
        }
        if let Some(w) = &task.world {
            v["services"] = serde_json::to_value(w.summary()).expect("services serialize");
        }
        if !task.mcp_servers.is_empty() {
            v["mcp_servers"] = task::mcp::servers_value(&task.mcp_servers);
        }
        outln!("{v}");
        return;
    }
    let side = |s| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
    };
    outln!(
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
        outln!("  - {p}");
    }
    for line in task.world.iter().flat_map(|w| w.summary_lines()) {
        outln!("  service {line}");
    }
    for server in &task.mcp_servers {
        outln!("  mcp server {}", server.summary_line());
    }
    if let Some(t) = &check.tripwire {
        outln!("  tripwire: {t}");
    }
    for s in &check.steps {
        outln!(
            "  step {}: {}; reference {}, baseline {}{}",
            s.name,
            if s.valid { "valid" } else { "NOT valid" },
            side(s.reference).unwrap_or_default(),
            side(s.baseline).unwrap_or_default(),
            s.tripwire
                .as_deref()
                .map(|t| format!("; tripwire: {t}"))
                .unwrap_or_default()
        );
    }
    if let Some(g) = &check.grading {
        outln!(
            "  graded {}",
            if g == "shared" {
                "in the agent's environment (shared), as Harbor grades it"
            } else {
                "in a fresh sandbox (separate)"
            }
        );
    }
    if let Some(m) = &check.separate {
        outln!(
            "  in a fresh sandbox (a run's `execution.grading_environment: separate`): {}; reference {}, baseline {}",
            if m.valid { "valid too" } else { "NOT valid" },
            side(m.reference).unwrap_or_default(),
            side(m.baseline).unwrap_or_default()
        );
        for p in &m.problems {
            outln!("    - {p}");
        }
    }
    print_fields(task);
}

/// The task's Harbor keys: those kept as ignored (with why), and the network of each phase.
fn print_fields(task: &task::Task) {
    let net = |m: &akbench_core::egress::NetworkMode| {
        serde_json::to_value(m)
            .ok()
            .and_then(|v| v.get("mode").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_default()
    };
    outln!(
        "  network: agent {}, verifier {}",
        net(&task.network.agent),
        net(&task.network.verifier)
    );
    for u in task.fields.iter().filter(|u| u.handling == "ignored") {
        outln!("  ignored: {}: {}", u.field, u.why);
    }
}
