//! `akbench run aggregate <dir>`: rebuilds the summary from the run records under a folder.
//!
//! Every `run_record.json` found is read and validated; a record that fails validation is
//! refused (listed, never partly used) and makes the exit code 1. Records kept beside a
//! graded one (`run_record.execute.json`, `run_record.pre-grade-*.json`) are history and are
//! not counted. Runs with multi-step tasks get a steps section after the tables (JSON:
//! `steps`, absent otherwise: [`akbench_core::report::steps`]).

use crate::cli::AggregateArgs;
use crate::cmd::shared::records::{find_records, read};
use crate::exit::{self, InputError};
use akbench_core::accounting::Observation;
use akbench_core::grading::integrity::GradeFlags;
use akbench_core::report::{summarize, to_junit, ReportTrial};
use akbench_core::spend::Spend;

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
            // A device or FIFO is refused before any work, as the writer would.
            akbench_core::output::check(p)?;
        }
    }
    let mut files = Vec::new();
    find_records(&args.dir, &mut files);
    files.sort();
    let mut trials = Vec::new();
    let mut refused = Vec::new();
    let mut entries = Vec::new();
    // Each trial's task and its last attempt's steps, for the steps section.
    let mut steps = Vec::new();
    for f in &files {
        match read(f).inspect(|r| entries.push(akbench_core::candidates::Entry::of_record(r))) {
            Ok(r) => {
                steps.push((
                    r.task.release.id.clone(),
                    r.attempts
                        .last()
                        .map(|a| a.steps.clone())
                        .unwrap_or_default(),
                ));
                trials.push(ReportTrial {
                    key: r.trial.key.clone(),
                    agent: r.agent.name.clone(),
                    task: r.task.release.id.clone(),
                    cause: r.cause(),
                    spend: Spend::of_record(&r),
                    attempts: r.outcome.attempts,
                    grading: GradeFlags::of_record(&r),
                    network: akbench_core::report::network::TrialNetwork::of_record(&r),
                    observation: Observation {
                        trial_id: r.trial.id,
                        state: r.outcome.state,
                        ok: r.outcome.ok,
                        score: r.outcome.score,
                        attempt_id: r.attempts.last().map(|a| a.attempt.id),
                        source: Some(f.display().to_string()),
                    },
                })
            }
            Err(e) => refused.push((f.clone(), e)),
        }
    }
    let summary = summarize(&trials);
    // Records of best-of-N candidates, grouped under their planned trials.
    let candidates = akbench_core::candidates::account_entries(entries);
    let markdown = summary.to_markdown();
    let steps = akbench_core::report::steps::task_steps(
        &steps
            .iter()
            .map(|(task, steps)| akbench_core::report::steps::TrialSteps { task, steps })
            .collect::<Vec<_>>(),
    );
    if let Some(p) = &args.markdown {
        akbench_core::output::write(p, markdown.as_bytes())?;
    }
    if let Some(p) = &args.junit {
        akbench_core::output::write(p, to_junit(&trials).as_bytes())?;
    }
    if args.json {
        let mut doc = serde_json::json!({
            "records": trials.len(),
            "refused": refused.iter().map(|(f, e)| serde_json::json!({"file": f, "reason": e})).collect::<Vec<_>>(),
            "summary": summary,
            "candidates": candidates,
            "trials": trials,
        });
        if !steps.is_empty() {
            doc["steps"] = serde_json::to_value(&steps)?;
        }
        crate::cmd::shared::common::print_json(&doc)?;
    } else {
        outln!("{} records under {}\n", trials.len(), args.dir.display());
        out!("{markdown}");
        out!("\n{}", summary.network_markdown());
        if !steps.is_empty() {
            out!("\n{}", akbench_core::report::steps::to_markdown(&steps));
        }
        if let Some(c) = &candidates {
            outln!("\n{c}");
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
