//! A sweep's run (`akbench sweep experiment.yaml`) planned, checked and stored, and its
//! result shown.
//!
//! Planning ([`check_run`], [`plan_run`]) and the result ([`show_result`]) are shared by the
//! two executors: `local` (`--local`, in this process, dispatched by core's policy over
//! memory) and `embedded` (the default: a coordinator and local workers). Records land
//! in `<out>/<trial key>/run_record.json`; the accounting reconciles them against the exact
//! planned set and the results table prints rates through `Rates` ("n/a" when nothing was
//! graded).

use crate::cli::SweepArgs;
use crate::exit::InputError;
use akbench_core::evidence::{EvidenceStore, RunOutcome};
use akbench_core::plan::plan;
use akbench_core::report::{summarize, ReportTrial};
use akbench_worker::orchestrator::Orchestrator;
use akbench_worker::trial::{prepare, spec_agent, PreparedTrial};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A sweep's run, planned and stored, with every trial's task and agent checked.
#[derive(Debug)]
pub struct PlannedSweep {
    /// The stored spec.
    pub spec: akbench_core::spec::ResolvedRunSpec,
    /// The ready plan.
    pub ready: akbench_core::plan::RunPlan,
    /// The evidence store.
    pub store: EvidenceStore,
    /// Task and agent of each (task id, agent label).
    pub prepared: HashMap<(String, String), Arc<PreparedTrial>>,
}

/// A sweep's run resolved and planned, every trial's task and agent checked; nothing stored.
#[derive(Debug)]
pub struct CheckedRun {
    spec: akbench_core::spec::ResolvedRunSpec,
    draft: akbench_core::plan::RunPlan,
    /// Resolved tasks root.
    pub tasks_root: std::path::PathBuf,
    /// Resolved agents root.
    pub agents_root: std::path::PathBuf,
    prepared: HashMap<(String, String), Arc<PreparedTrial>>,
}

impl CheckedRun {
    /// The run key as planned (before the store picks a free one).
    pub fn planned_key(&self) -> &str {
        self.spec.run_key()
    }

    /// Stores the run under its key, or the first free `<key>-N` in the local store that
    /// `taken_elsewhere` does not name either (a coordinator's runs).
    pub fn store(
        self,
        args: &SweepArgs,
        taken_elsewhere: &dyn Fn(&str) -> bool,
    ) -> anyhow::Result<PlannedSweep> {
        let store = EvidenceStore::new(&args.store_root);
        let planned_key = self.spec.run_key().to_string();
        let spec = store.create_run_avoiding(self.spec, taken_elsewhere)?;
        // The run got a suffixed key when its key was taken: plan again only then.
        let draft = if spec.run_key() == planned_key {
            self.draft
        } else {
            plan(
                &spec,
                crate::cmd::shared::common::planning_clock()?.as_ref(),
            )
        };
        store.put_plan(&draft)?;
        let ready = draft.ready();
        store.put_plan(&ready)?;
        // `running` until show_result records the end: what `run list` and the viewer show.
        store.put_outcome(
            spec.run_key(),
            &RunOutcome::running(
                args.out.join(spec.run_key()).display().to_string(),
                chrono::Utc::now(),
            ),
        )?;
        Ok(PlannedSweep {
            spec,
            ready,
            store,
            prepared: self.prepared,
        })
    }
}

/// Resolves, checks and stores the run: bad input fails (exit 2) before anything is
/// written or started.
pub fn plan_run(args: &SweepArgs, orch: &Orchestrator) -> anyhow::Result<PlannedSweep> {
    check_run(args, orch)?.store(args, &|_| false)
}

/// Resolves and plans the run and checks every trial's task and agent; writes nothing. Bad
/// input fails here (exit 2).
pub fn check_run(args: &SweepArgs, orch: &Orchestrator) -> anyhow::Result<CheckedRun> {
    let clock = crate::cmd::shared::common::planning_clock()?;
    let clock = clock.as_ref();
    let crate::cmd::shared::planning::Resolved {
        spec,
        checks,
        tasks_root,
        agents_root,
    } = crate::cmd::shared::planning::resolve_checked(
        crate::cmd::shared::planning::Inputs::of_sweep(args),
        clock,
    )?;
    if !args.json {
        eprintln!(
            "akbench: task checks: {}",
            crate::cmd::shared::task_checks::checks_line(&checks)
        );
    }
    // The label a task needing the network adds is this sweep's own workers' to give
    // (they advertise it unless AKBENCH_EGRESS=off): refused now when they give none.
    let egress = akbench_core::egress::offer::EGRESS_LABEL;
    let gives = akbench_core::egress::offer::gives_egress(
        std::env::var(akbench_core::egress::offer::EGRESS_ENV)
            .ok()
            .as_deref(),
    )
    .map_err(InputError)?;
    let needing: Vec<String> = spec
        .condition
        .tasks
        .iter()
        .filter(|t| t.needs_egress)
        .map(|t| t.release.id.clone())
        .collect();
    if let Some(why) = akbench_core::egress::offer::refusal(gives, &needing) {
        return Err(InputError(format!("{}: {why}", args.config.display())).into());
    }
    let labels: Vec<&String> = spec
        .condition
        .execution
        .worker_labels
        .iter()
        .filter(|l| l.as_str() != egress)
        .collect();
    if !labels.is_empty() {
        // This sweep's workers (in this process, or the embedded default's) advertise no
        // labels: nothing would ever claim the trials.
        return Err(InputError(format!(
            "{}: field `execution.worker_labels` ({}) asks for workers with those labels, and `akbench sweep` runs its own unlabelled workers; fix: run it on a coordinator (`akbench run plan/start --coordinator URL`) with `akbench-worker --label` workers, or remove the field",
            args.config.display(),
            labels
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    let draft = plan(&spec, clock);
    let mut prepared: HashMap<(String, String), Arc<PreparedTrial>> = HashMap::new();
    for t in &draft.trials {
        let k = (t.task.id.clone(), t.agent.label.clone());
        if prepared.contains_key(&k) {
            continue;
        }
        let sa = spec_agent(&spec, t).ok_or_else(|| {
            InputError(format!(
                "failed to find agent condition `{}` in the spec",
                t.agent.label
            ))
        })?;
        let p = prepare(t, sa, &tasks_root, &agents_root).map_err(|e| InputError(e.to_string()))?;
        orch.registry.resolve(&p.agent).map_err(InputError)?;
        prepared.insert(k, Arc::new(p));
    }
    Ok(CheckedRun {
        spec,
        draft,
        tasks_root,
        agents_root,
        prepared,
    })
}

/// What a sweep's records say, for its result: each trial's report line, and each trial's
/// task with its last attempt's steps (empty for a one-step task), for the steps tables of
/// its multi-step tasks (`akbench_core::report::steps`, as `run aggregate` counts them).
#[derive(Debug, Default)]
pub struct Results {
    /// Report lines, in plan order.
    pub trials: Vec<ReportTrial>,
    /// (task, the last attempt's steps) of each trial with a record.
    pub steps: Vec<(String, Vec<akbench_core::record::steps::StepResult>)>,
}

impl Results {
    /// Adds a trial's line and, from its record, its task and last attempt's steps.
    pub fn push(&mut self, trial: ReportTrial, record: Option<&akbench_core::record::RunRecord>) {
        if let Some(r) = record {
            self.steps.push((
                trial.task.clone(),
                r.attempts
                    .last()
                    .map(|a| a.steps.clone())
                    .unwrap_or_default(),
            ));
        }
        self.trials.push(trial);
    }
}

/// Records the run's outcome beside its evidence and prints the accounting and the results
/// table (or one JSON document), with a steps table per multi-step task (JSON `steps`, only
/// when there is one): shared by the local and the embedded sweep.
pub fn show_result(
    store: &EvidenceStore,
    spec: &akbench_core::spec::ResolvedRunSpec,
    args: &SweepArgs,
    accounting: &akbench_core::accounting::RunAccounting,
    results: &Results,
    started: Instant,
    interrupted: bool,
) -> anyhow::Result<()> {
    let summary = summarize(&results.trials);
    let steps = akbench_core::report::steps::task_steps(
        &results
            .steps
            .iter()
            .map(|(task, steps)| akbench_core::report::steps::TrialSteps { task, steps })
            .collect::<Vec<_>>(),
    );
    let records = args.out.join(spec.run_key());
    store.put_outcome(
        spec.run_key(),
        &RunOutcome {
            state: if interrupted {
                "interrupted"
            } else {
                "finished"
            }
            .into(),
            records: records.display().to_string(),
            valid: accounting.valid,
            complete: accounting.complete,
            counts: accounting.counts,
            rates: accounting.rates,
            at: chrono::Utc::now(),
        },
    )?;
    if args.json {
        let mut doc = serde_json::json!({
            "run_key": spec.run_key(),
            "run_id": spec.run_id(),
            "out": args.out,
            "seconds": started.elapsed().as_secs_f64(),
            "interrupted": interrupted,
            "accounting": {
                "valid": accounting.valid,
                "complete": accounting.complete,
                "planned": accounting.planned,
                "counts": accounting.counts,
                "rates": accounting.rates,
                "candidates": accounting.candidates,
            },
            "summary": summary,
        });
        if !steps.is_empty() {
            doc["steps"] = serde_json::to_value(&steps)?;
        }
        crate::cmd::shared::common::print_json(&doc)?;
    } else {
        outln!();
        out!("{}", summary.to_markdown());
        outln!();
        out!("{}", summary.network_markdown());
        outln!();
        if !steps.is_empty() {
            out!("{}", akbench_core::report::steps::to_markdown(&steps));
            outln!();
        }
        outln!(
            "run {}: {} planned, {} with an outcome, accounting {}{} ({:.1}s)",
            spec.run_key(),
            accounting.planned,
            accounting.observations,
            if accounting.valid { "valid" } else { "INVALID" },
            if accounting.complete {
                ""
            } else {
                ", incomplete"
            },
            started.elapsed().as_secs_f64()
        );
        if let Some(c) = &accounting.candidates {
            outln!("{c}");
        }
        outln!("records: {}", records.display());
        if accounting.counts.not_graded > 0 {
            outln!(
                "{} trials were executed but not graded (evaluation.grade: false); {}",
                accounting.counts.not_graded,
                if args.local {
                    format!(
                        "grade them here, without running the agents again: `akbench run evaluate --all {}`",
                        records.display()
                    )
                } else {
                    format!(
                        "grade them without running the agents again, on workers: `akbench up --out {}` (same data folder), then `akbench run grade {} --coordinator http://127.0.0.1:7400`; or here: `akbench run evaluate --all {}`",
                        args.out.display(),
                        spec.run_key(),
                        records.display()
                    )
                }
            );
        }
        // The next step, where the user needs it (README, "Quick start").
        outln!(
            "next: akbench view {}    # the run in a browser\n      akbench run aggregate {} --junit report.xml    # summary (markdown, JSON, JUnit)",
            args.out.display(),
            records.display()
        );
    }
    Ok(())
}
