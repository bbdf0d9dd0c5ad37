//! `akbench run aggregate <dir>`: rebuilds the summary from the run records under a folder.
//!
//! Every `run_record.json` found is read and validated; a record that fails validation is
//! refused (listed, never partly used) and makes the exit code 1. Records kept beside a
//! graded one (`run_record.execute.json`, `run_record.pre-grade-*.json`) are history and are
//! not counted.

use crate::cli::AggregateArgs;
use crate::exit::{self, InputError};
use akbench_core::accounting::Observation;
use akbench_core::grading::integrity::GradeFlags;
use akbench_core::record::{RunRecord, RECORD_FILE};
use akbench_core::report::{summarize, to_junit, ReportTrial};
use akbench_core::spend::Spend;
use std::path::{Path, PathBuf};

/// Summarizes the records under `args.dir`.
pub fn run(args: AggregateArgs) -> anyhow::Result<i32> {
    if !args.dir.is_dir() {
        return Err(InputError(format!(
            "failed to aggregate {}: not a folder; give the folder that holds run records (e.g. the --out of run single)",
            args.dir.display()
        ))
        .into());
    }
    for (flag, out) in [("--markdown", &args.markdown), ("--junit", &args.junit)] {
        if let Some(p) = out {
            if p.is_dir() {
                return Err(InputError(format!(
                    "failed to aggregate: {flag} {} is a folder; give a file path to write (e.g. {}/report.{})",
                    p.display(),
                    p.display(),
                    if flag == "--junit" { "xml" } else { "md" }
                ))
                .into());
            }
        }
    }
    let mut files = Vec::new();
    find_records(&args.dir, &mut files);
    files.sort();
    let mut trials = Vec::new();
    let mut refused = Vec::new();
    let mut entries = Vec::new();
    for f in &files {
        match read(f).inspect(|r| entries.push(akbench_core::candidates::Entry::of_record(r))) {
            Ok(r) => trials.push(ReportTrial {
                key: r.trial.key.clone(),
                agent: r.agent.name.clone(),
                task: r.task.release.id.clone(),
                cause: r.cause(),
                spend: Spend::of_record(&r),
                attempts: r.outcome.attempts,
                grading: GradeFlags::of_record(&r),
                observation: Observation {
                    trial_id: r.trial.id,
                    state: r.outcome.state,
                    ok: r.outcome.ok,
                    score: r.outcome.score,
                    attempt_id: r.attempts.last().map(|a| a.attempt.id),
                    source: Some(f.display().to_string()),
                },
            }),
            Err(e) => refused.push((f.clone(), e)),
        }
    }
    let summary = summarize(&trials);
    // Records of best-of-N candidates, grouped under their planned trials.
    let candidates = akbench_core::candidates::account_entries(entries);
    let markdown = summary.to_markdown();
    if let Some(p) = &args.markdown {
        std::fs::write(p, &markdown)?;
    }
    if let Some(p) = &args.junit {
        std::fs::write(p, to_junit(&trials))?;
    }
    if args.json {
        crate::cmd::print_json(&serde_json::json!({
            "records": trials.len(),
            "refused": refused.iter().map(|(f, e)| serde_json::json!({"file": f, "reason": e})).collect::<Vec<_>>(),
            "summary": summary,
            "candidates": candidates,
            "trials": trials,
        }))?;
    } else {
        println!("{} records under {}\n", trials.len(), args.dir.display());
        print!("{markdown}");
        if let Some(c) = &candidates {
            println!("\n{c}");
        }
        for (f, e) in &refused {
            eprintln!("refused {}: {e}", f.display());
        }
    }
    Ok(if refused.is_empty() {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}

/// Reads and validates one record (symlinks refused).
pub(crate) fn read(f: &Path) -> Result<RunRecord, String> {
    let meta = std::fs::symlink_metadata(f).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file (symlinks are refused)".into());
    }
    let bytes = akbench_core::bounded_read::read(
        f,
        akbench_core::record::MAX_RECORD_BYTES,
        akbench_core::bounded_read::Links::Refuse,
    )
    .map_err(|e| e.to_string())?;
    let r: RunRecord = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    r.validate()?;
    Ok(r)
}

/// Every `run_record.json` under `dir` (kept workspaces are not searched).
pub(crate) fn find_records(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            // Kept workspaces hold the agent's files, not records.
            if e.file_name() != "workspace" {
                find_records(&p, out);
            }
        } else if e.file_name() == RECORD_FILE {
            out.push(p);
        }
    }
}
