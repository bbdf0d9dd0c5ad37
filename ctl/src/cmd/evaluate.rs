//! `akbench run evaluate <run_dir>`: grades a recorded run later and writes the grade back;
//! `--all` grades every run directory below a folder whose trial owes a grade.

use crate::cli::EvaluateArgs;
use crate::cmd::shared::inputs::usable_cache_root;
use crate::cmd::shared::records::{find_records, verdict};
use crate::exit::{self, InputError};
use akbench_core::clock::SystemClock;
use akbench_core::grading::owes_grade;
use akbench_core::work::WorkKind;
use akbench_worker::orchestrator::Orchestrator;
use akbench_worker::process::CancelToken;
use akbench_worker::regrade::{read_record, regrade, RegradeError, WorkspaceMode};
use std::sync::Arc;

/// Grades the run directory (or, with `--all`, every one below it that owes a grade).
pub fn run(args: EvaluateArgs) -> anyhow::Result<i32> {
    let orch = Orchestrator::new(
        &usable_cache_root(args.cache.as_deref())?,
        Arc::new(SystemClock),
    );
    let mode = match (args.copy, args.in_place) {
        (true, _) => WorkspaceMode::Copy,
        (_, true) => WorkspaceMode::InPlace,
        _ => WorkspaceMode::Auto,
    };
    if args.all {
        return run_all(&args, &orch, mode);
    }
    precheck(&args.run_dir, &args.tasks_root).map_err(InputError)?;
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
    let cause = done.record.attempts.last().and_then(|a| a.cause.clone());
    if args.json {
        crate::cmd::shared::common::print_json(&serde_json::json!({
            "trial": done.record.trial,
            "state": o.state,
            "ok": o.ok,
            "score": o.score,
            "verdict": verdict(o.state, o.ok),
            "cause": cause,
            "workspace_used": done.workspace_used,
            "record": done.record_path,
            "pre_grade_record": done.backup_path,
        }))?;
    } else {
        outln!(
            "{}: {}{} (graded {})",
            o.state,
            verdict(o.state, o.ok),
            o.score
                .map(|s| format!(" (score {s:.2})"))
                .unwrap_or_default(),
            done.workspace_used.replace('_', " ")
        );
        if let Some(c) = &cause {
            outln!("cause: {c}");
        }
        outln!("record: {}", done.record_path.display());
        outln!("before grading: {}", done.backup_path.display());
    }
    Ok(exit::of_answer(akbench_core::grading::answer(
        o.state, o.ok, true,
    )))
}

/// `--all`: grades, in path order, every run directory below `args.run_dir` whose last
/// attempt owes a grade (core's `grading::owes_grade`: `not_graded`, or `evaluation_error`
/// when grading broke); the others (graded, failed, never ran) are left alone and
/// counted. A record that does not validate and a refusal (task changed, diff tampered) are
/// reported and the next one graded.
fn run_all(args: &EvaluateArgs, orch: &Orchestrator, mode: WorkspaceMode) -> anyhow::Result<i32> {
    if !args.run_dir.is_dir() {
        return Err(InputError(format!(
            "failed to grade {}: not a folder; give the folder holding run directories (e.g. out/<run key>)",
            args.run_dir.display()
        ))
        .into());
    }
    let mut files = Vec::new();
    find_records(&args.run_dir, &mut files);
    files.sort();
    let (mut graded, mut refused, mut skipped) = (Vec::new(), Vec::new(), 0usize);
    let cancel = CancelToken::new();
    for f in &files {
        let dir = f.parent().unwrap_or(&args.run_dir);
        // Before the record is read: a FIFO in its place must not block the whole sweep.
        if let Err(e) = precheck(dir, &args.tasks_root) {
            if !args.json {
                eprintln!("refused {}: {e}", dir.display());
            }
            refused.push(serde_json::json!({"dir": dir, "reason": e}));
            continue;
        }
        match read_record(dir) {
            Ok((_, r)) if owes_grade(WorkKind::Execute, r.outcome.state) => {}
            Ok(_) => {
                skipped += 1;
                continue;
            }
            Err(e) => {
                if !args.json {
                    eprintln!("refused {}: {e}", dir.display());
                }
                refused.push(serde_json::json!({"dir": dir, "reason": e.to_string()}));
                continue;
            }
        }
        match regrade(orch, dir, &args.tasks_root, mode, &cancel) {
            Ok(d) => {
                let o = &d.record.outcome;
                if !args.json {
                    outln!(
                        "{}: {} {}{}",
                        d.record.trial.key,
                        o.state,
                        verdict(o.state, o.ok),
                        o.score
                            .map(|s| format!(" (score {s:.2})"))
                            .unwrap_or_default()
                    );
                }
                graded.push(serde_json::json!({
                    "trial": d.record.trial,
                    "state": o.state,
                    "ok": o.ok,
                    "score": o.score,
                    "record": d.record_path,
                }));
            }
            Err(e @ RegradeError::Cancelled { .. }) => return Err(e.into()),
            Err(e) => {
                if !args.json {
                    eprintln!("refused {}: {e}", dir.display());
                }
                refused.push(serde_json::json!({"dir": dir, "reason": e.to_string()}));
            }
        }
    }
    if args.json {
        crate::cmd::shared::common::print_json(&serde_json::json!({
            "graded": graded,
            "refused": refused,
            "left_alone": skipped,
        }))?;
    } else {
        outln!(
            "graded {} run directories under {}; {} refused; {} left alone (graded already, or the agent failed or never ran)",
            graded.len(),
            args.run_dir.display(),
            refused.len(),
            skipped
        );
    }
    Ok(if refused.is_empty() {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}

/// What is refused before a run directory is graded: a special file (FIFO, socket, device)
/// in the run folder or an attempt folder (the agent's kept `workspace` is not searched), so
/// no read blocks on one; and a record whose `base_commit` is not its task release's pinned
/// commit (an altered record must not be graded as if it were the release's).
fn precheck(run_dir: &std::path::Path, tasks_root: &std::path::Path) -> Result<(), String> {
    special_file(run_dir, 2).map_err(|(p, kind)| {
        format!(
            "failed to grade {}: {} is a {kind}; fix: a run directory holds only the files `run single` wrote, remove it",
            run_dir.display(),
            p.display()
        )
    })?;
    let Ok((_, record)) = read_record(run_dir) else {
        // regrade reports an unreadable record itself.
        return Ok(());
    };
    let Ok(task) = akbench_core::task::load_by_id(tasks_root, &record.task.release.id) else {
        return Ok(());
    };
    for a in &record.attempts {
        // An image-only task pins no commit: its start is checked by the tree fingerprint.
        if let Some(base) = a
            .workspace
            .base_commit
            .as_ref()
            .filter(|_| !task.image_only())
        {
            if !base.eq_ignore_ascii_case(&task.commit) {
                return Err(format!(
                    "failed to grade {}: the record's base_commit `{}` (attempt {}) is not the pinned commit {} of task {} {}; fix: the record was altered or belongs to another release: grade it against the tasks it ran with",
                    run_dir.display(),
                    akbench_core::limits::elide(base),
                    a.number,
                    task.commit,
                    task.release.id,
                    task.release.version
                ));
            }
        }
    }
    Ok(())
}

/// The first FIFO, socket or device under `dir` (`depth` levels, `workspace` and `.git`
/// folders not entered), with its kind.
fn special_file(
    dir: &std::path::Path,
    depth: u32,
) -> Result<(), (std::path::PathBuf, &'static str)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let name = e.file_name();
        if ft.is_dir() {
            if depth > 1 && name != "workspace" && name != ".git" {
                special_file(&e.path(), depth - 1)?;
            }
        } else if !ft.is_file() && !ft.is_symlink() {
            return Err((e.path(), akbench_core::bounded_read::kind_name(&ft)));
        }
    }
    Ok(())
}
