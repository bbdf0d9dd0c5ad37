//! `akbench sweep experiment.yaml`: plan, run every trial on this machine, account.
//!
//! This executor runs the plan in-process with a pool of threads, each trial through the
//! same orchestrator as `run single`, honouring the plan's concurrency caps (whole run, per
//! agent, per provider route). Records land in `<out>/<trial key>/run_record.json`; the
//! accounting reconciles them against the exact planned set and the results table prints
//! rates through `Rates` ("n/a" when nothing was graded). Ctrl-C cancels: running agents are
//! stopped and their trials end `cancelled`; trials not started are reported missing. With
//! `execution.budget`, no trial starts once `core::budget` says the cap is spent; the trials
//! left are accounted `cancelled` with the reason "budget".

use crate::cli::SweepArgs;
use crate::cmd::single::{cache_root, verdict};
use crate::cmd::sweep_routes::{LocalRoutes, RouteObserver};
use crate::exit::{self, InputError};
use akbench_core::accounting::{reconcile, Observation};
use akbench_core::clock::SystemClock;
use akbench_core::evidence::{EvidenceStore, RunOutcome};
use akbench_core::manifest::ExperimentManifest;
use akbench_core::plan::{plan, PlannedTrial};
use akbench_core::record::Identity;
use akbench_core::report::{summarize, ReportTrial};
use akbench_core::spec::{resolve, roots, ResolveInputs};
use akbench_worker::orchestrator::{AttemptOptions, Orchestrator, TrialRequest};
use akbench_worker::process::CancelToken;
use akbench_worker::trial::{prepare, spec_agent, PreparedTrial};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Instant;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// A sweep's run, planned and stored, with every trial's task and agent checked.
#[derive(Debug)]
pub struct PlannedSweep {
    /// The stored spec.
    pub spec: akbench_core::spec::ResolvedRunSpec,
    /// The ready plan.
    pub ready: akbench_core::plan::RunPlan,
    /// The evidence store.
    pub store: EvidenceStore,
    /// Resolved tasks root.
    pub tasks_root: std::path::PathBuf,
    /// Resolved agents root.
    pub agents_root: std::path::PathBuf,
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
            plan(&spec, super::planning_clock()?.as_ref())
        };
        store.put_plan(&draft)?;
        let ready = draft.ready();
        store.put_plan(&ready)?;
        Ok(PlannedSweep {
            spec,
            ready,
            store,
            tasks_root: akbench_core::task::absolute(&self.tasks_root),
            agents_root: akbench_core::task::absolute(&self.agents_root),
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
    let clock = super::planning_clock()?;
    let clock = clock.as_ref();
    let manifest = ExperimentManifest::load(&args.config)?;
    let inputs = ResolveInputs {
        manifest_path: Some(args.config.clone()),
        tasks_root: args.tasks_root.clone(),
        agents_root: args.agents_root.clone(),
    };
    let (tasks_root, agents_root) = roots(&manifest, &inputs)?;
    let spec = resolve(&manifest, &inputs, clock)?;
    let labels = &spec.condition.execution.worker_labels;
    if !labels.is_empty() {
        // This sweep's workers (in this process, or the embedded default's) advertise no
        // labels: nothing would ever claim the trials.
        return Err(InputError(format!(
            "{}: field `execution.worker_labels` ({}) asks for workers with those labels, and `akbench sweep` runs its own unlabelled workers; fix: run it on a coordinator (`akbench run plan/start --coordinator URL`) with `akbench-worker --label` workers, or remove the field",
            args.config.display(),
            labels.join(", ")
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

/// Runs the sweep in this process (`--local`).
pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let clock = SystemClock;
    let orch = Orchestrator::new(&cache_root(args.cache.as_deref()), Arc::new(clock));
    let PlannedSweep {
        spec,
        ready,
        store,
        prepared,
        ..
    } = plan_run(&args, &orch)?;
    let total = ready.trials.len();
    if !args.json {
        eprintln!(
            "akbench sweep: run {} ({}), {} trials = {} tasks x {} agents x {} repetitions",
            spec.run_key(),
            spec.run_id(),
            total,
            ready.summary.by_task.len(),
            ready.summary.by_agent.len(),
            spec.condition.repetitions
        );
    }

    let cancel = CancelToken::new();
    INTERRUPTED.store(false, Ordering::SeqCst);
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let mut caps = Caps::new(&spec.condition.execution.concurrency, &spec, jobs);
    caps.budget = spec.condition.execution.budget;
    let run_identity = Identity {
        id: spec.run_id(),
        key: spec.run_key().to_string(),
    };
    let grade = spec.condition.evaluation.grade;
    let queue: Mutex<std::collections::VecDeque<&PlannedTrial>> =
        Mutex::new(ready.trials.iter().collect());
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    let mut observations = Vec::new();
    let mut report = Vec::new();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (queue, caps, cancel, orch, prepared, run_identity) =
                (&queue, &caps, &cancel, &orch, &prepared, &run_identity);
            let out = &args.out;
            s.spawn(move || loop {
                if cancel.is_cancelled() {
                    return;
                }
                let Some(t) = caps.take(queue) else { return };
                let p = &prepared[&(t.task.id.clone(), t.agent.label.clone())];
                let req = TrialRequest {
                    task: &p.task,
                    agent: &p.agent,
                    run: run_identity.clone(),
                    trial: Identity {
                        id: t.trial_id,
                        key: t.key.clone(),
                    },
                    out_dir: out.join(&t.key),
                    infrastructure_retries: t.attempt.infrastructure_retries,
                    options: AttemptOptions {
                        grade,
                        ..AttemptOptions::default()
                    }
                    .with_compute(&t.compute),
                };
                let observer = RouteObserver {
                    routes: &caps.routes,
                    route: caps.route_of.get(&t.agent.label).map(String::as_str),
                };
                let r = orch.run_trial(&req, &observer, cancel);
                caps.release(t, r.as_ref().ok().map(|o| &o.record));
                let _ = tx.send((t, r));
            });
        }
        drop(tx);
        let watcher_cancel = cancel.clone();
        let done = Arc::new(AtomicBool::new(false));
        let done2 = done.clone();
        s.spawn(move || {
            while !done2.load(Ordering::SeqCst) {
                if INTERRUPTED.load(Ordering::SeqCst) {
                    watcher_cancel.cancel();
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        let mut finished = 0usize;
        for (t, r) in rx {
            finished += 1;
            match r {
                Ok(outcome) => {
                    let rec = &outcome.record;
                    if !args.json {
                        eprintln!(
                            "[{finished:>width$}/{total}] {:<50} {}",
                            t.key,
                            verdict(rec.outcome.state, rec.outcome.ok),
                            width = total.to_string().len()
                        );
                    }
                    observations.push(Observation {
                        trial_id: rec.trial.id,
                        state: rec.outcome.state,
                        ok: rec.outcome.ok,
                        score: rec.outcome.score,
                        attempt_id: rec.attempts.last().map(|a| a.attempt.id),
                        source: Some(outcome.record_path.display().to_string()),
                    });
                    report.push(ReportTrial {
                        key: t.key.clone(),
                        agent: t.agent.label.clone(),
                        task: t.task.id.clone(),
                        observation: observations.last().expect("just pushed").clone(),
                        cause: rec.attempts.last().and_then(|a| a.cause.clone()),
                        spend: akbench_core::spend::Spend::of_record(rec),
                    });
                }
                Err(e) => eprintln!("[{finished}/{total}] {}: {e}", t.key),
            }
        }
        done.store(true, Ordering::SeqCst);
    });
    let budget_status = caps.budget_status();
    if !cancel.is_cancelled() {
        // Trials the budget kept from starting: cancelled, reason "budget".
        let left: Vec<&PlannedTrial> = queue.lock().expect("queue lock").drain(..).collect();
        if let (false, Some(b)) = (left.is_empty(), &budget_status) {
            if !args.json {
                eprintln!(
                    "{}: {} trials not started, cancelled (reason: {})",
                    b.line(),
                    left.len(),
                    akbench_core::budget::BUDGET_REASON
                );
            }
        }
        for t in left {
            let o = budget_cancelled(t);
            report.push(ReportTrial {
                key: t.key.clone(),
                agent: t.agent.label.clone(),
                task: t.task.id.clone(),
                observation: o.clone(),
                cause: Some(akbench_core::budget::BUDGET_REASON.into()),
                spend: Default::default(),
            });
            observations.push(o);
        }
    }
    if let (Some(b), false) = (&budget_status, args.json) {
        eprintln!("{}", b.line());
    }
    // SAFETY: restores the default disposition.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
    let accounting = reconcile(&ready, &observations);
    let interrupted = cancel.is_cancelled();
    show_result(
        &store,
        &spec,
        &args,
        &accounting,
        &report,
        started,
        interrupted,
    )?;
    Ok(if accounting.valid && accounting.complete {
        exit::OK
    } else {
        exit::NEGATIVE
    })
}

/// The outcome of a trial the budget kept from starting.
fn budget_cancelled(t: &PlannedTrial) -> Observation {
    Observation {
        trial_id: t.trial_id,
        state: akbench_core::lifecycle::State::Cancelled,
        ok: None,
        score: None,
        attempt_id: None,
        source: Some(akbench_core::budget::BUDGET_REASON.into()),
    }
}

/// Records the run's outcome beside its evidence and prints the accounting and the results
/// table (or one JSON document): shared by the local and the embedded sweep.
pub fn show_result(
    store: &EvidenceStore,
    spec: &akbench_core::spec::ResolvedRunSpec,
    args: &SweepArgs,
    accounting: &akbench_core::accounting::RunAccounting,
    trials: &[ReportTrial],
    started: Instant,
    interrupted: bool,
) -> anyhow::Result<()> {
    let summary = summarize(trials);
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
        crate::cmd::print_json(&serde_json::json!({
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
            },
            "summary": summary,
        }))?;
    } else {
        println!();
        print!("{}", summary.to_markdown());
        println!();
        println!(
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
        println!("records: {}", records.display());
        if accounting.counts.not_graded > 0 {
            println!(
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
    }
    Ok(())
}

/// The plan's concurrency caps, enforced when a thread takes the next trial.
struct Caps {
    state: Mutex<CapState>,
    freed: Condvar,
    max_trials: usize,
    per_agent: BTreeMap<String, u32>,
    per_route: BTreeMap<String, u32>,
    route_of: BTreeMap<String, String>,
    /// Provider route pauses (the coordinator's policy, in memory).
    routes: LocalRoutes,
    /// The run's spend cap (`core::budget`), checked before each trial starts.
    budget: Option<akbench_core::budget::Budget>,
}

#[derive(Default)]
struct CapState {
    running: usize,
    by_agent: BTreeMap<String, u32>,
    by_route: BTreeMap<String, u32>,
    /// What finished trials spent (for the budget).
    spent: akbench_core::budget::Spent,
}

impl Caps {
    fn new(
        c: &akbench_core::manifest::Concurrency,
        spec: &akbench_core::spec::ResolvedRunSpec,
        jobs: usize,
    ) -> Caps {
        Caps {
            state: Mutex::new(CapState::default()),
            freed: Condvar::new(),
            max_trials: c.max_trials.map_or(jobs, |m| (m as usize).min(jobs)),
            per_agent: c.per_agent.clone(),
            per_route: c.per_provider_route.clone(),
            route_of: spec
                .condition
                .agents
                .iter()
                .filter_map(|a| a.provider_route.clone().map(|r| (a.label.clone(), r)))
                .collect(),
            routes: LocalRoutes::default(),
            budget: None,
        }
    }

    /// Spend against the cap, when the run has one.
    fn budget_status(&self) -> Option<akbench_core::budget::BudgetStatus> {
        let st = self.state.lock().expect("caps lock");
        self.budget
            .map(|b| akbench_core::budget::BudgetStatus::of(b, st.spent))
    }

    fn fits(&self, st: &CapState, t: &PlannedTrial) -> bool {
        let label = &t.agent.label;
        let agent_ok = self
            .per_agent
            .get(label)
            .is_none_or(|cap| st.by_agent.get(label).copied().unwrap_or(0) < *cap);
        let route_ok = self.route_of.get(label).is_none_or(|r| {
            self.per_route
                .get(r)
                .is_none_or(|cap| st.by_route.get(r).copied().unwrap_or(0) < *cap)
                && !self.routes.paused(r)
        });
        st.running < self.max_trials && agent_ok && route_ok
    }

    /// The first queued trial that fits the caps, waiting while none does.
    fn take<'a>(
        &self,
        queue: &Mutex<std::collections::VecDeque<&'a PlannedTrial>>,
    ) -> Option<&'a PlannedTrial> {
        let mut st = self.state.lock().expect("caps lock");
        loop {
            {
                let mut q = queue.lock().expect("queue lock");
                if q.is_empty()
                    || akbench_core::budget::verdict(self.budget.as_ref(), &st.spent).is_some()
                {
                    return None;
                }
                if let Some(i) = q.iter().position(|t| self.fits(&st, t)) {
                    let t = q.remove(i).expect("index in range");
                    st.running += 1;
                    *st.by_agent.entry(t.agent.label.clone()).or_default() += 1;
                    if let Some(r) = self.route_of.get(&t.agent.label) {
                        *st.by_route.entry(r.clone()).or_default() += 1;
                    }
                    return Some(t);
                }
            }
            // Timed: a paused provider route resumes without any trial ending.
            st = self
                .freed
                .wait_timeout(st, std::time::Duration::from_millis(250))
                .expect("caps lock")
                .0;
        }
    }

    fn release(&self, t: &PlannedTrial, record: Option<&akbench_core::record::RunRecord>) {
        let mut st = self.state.lock().expect("caps lock");
        st.running -= 1;
        if let Some(r) = record {
            st.spent.add_record(r);
        }
        if let Some(n) = st.by_agent.get_mut(&t.agent.label) {
            *n -= 1;
        }
        if let Some(r) = self.route_of.get(&t.agent.label) {
            if let Some(n) = st.by_route.get_mut(r) {
                *n -= 1;
            }
        }
        self.freed.notify_all();
    }
}
