//! `akbench run evaluate <run_dir>`: grades a recorded run later and writes the grade back.

use crate::cli::EvaluateArgs;
use crate::cmd::single::{cache_root, verdict};
use crate::exit::{self, InputError};
use akbench_core::clock::SystemClock;
use akbench_core::lifecycle::State;
use akbench_worker::orchestrator::Orchestrator;
use akbench_worker::process::CancelToken;
use akbench_worker::regrade::{regrade, RegradeError, WorkspaceMode};
use std::sync::Arc;

/// Grades the run directory.
pub fn run(args: EvaluateArgs) -> anyhow::Result<i32> {
    let orch = Orchestrator::new(&cache_root(args.cache.as_deref()), Arc::new(SystemClock));
    let mode = match (args.copy, args.in_place) {
        (true, _) => WorkspaceMode::Copy,
        (_, true) => WorkspaceMode::InPlace,
        _ => WorkspaceMode::Auto,
    };
    let done = match regrade(
        &orch,
        &args.run_dir,
        &args.tasks_root,
        mode,
        &CancelToken::new(),
    ) {
        Ok(d) => d,
        Err(e @ RegradeError::Cancelled { .. }) => return Err(e.into()),
        Err(e) => return Err(InputError(e.to_string()).into()),
    };
    let o = &done.record.outcome;
    let last = done.record.attempts.last().expect("validated");
    if args.json {
        crate::cmd::print_json(&serde_json::json!({
            "trial": done.record.trial,
            "state": o.state,
            "ok": o.ok,
            "score": o.score,
            "verdict": verdict(o.state, o.ok),
            "cause": last.cause,
            "workspace_used": done.workspace_used,
            "record": done.record_path,
            "pre_grade_record": done.backup_path,
        }))?;
    } else {
        println!(
            "{}: {}{} (graded {})",
            o.state,
            verdict(o.state, o.ok),
            o.score
                .map(|s| format!(" (score {s:.2})"))
                .unwrap_or_default(),
            done.workspace_used.replace('_', " ")
        );
        if let Some(c) = &last.cause {
            println!("cause: {c}");
        }
        println!("record: {}", done.record_path.display());
        println!("before grading: {}", done.backup_path.display());
    }
    Ok(if o.state == State::Completed && o.ok == Some(true) {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}
