//! `akbench sweep --local`: every trial on this machine, dispatched by core's policy.
//!
//! A pool of `--jobs` slots takes work from [`InMemoryDispatch`] (core::dispatch over memory:
//! the caps, the retry rule with its backoff, route pauses and cancellation are the
//! coordinator's); each slot runs one attempt at a time through the same orchestrator as
//! `run single` and reports how it ended. A trial done writes its
//! `<out>/<trial key>/run_record.json` (every attempt it made). Ctrl-C cancels the run: live
//! agents are stopped and end `cancelled`, trials not started are cancelled (reason
//! `cancelled`, no attempt). With `execution.budget`, no attempt starts once `core::budget`
//! says the cap is spent; the trials left are cancelled with the reason "budget".

use super::planned::{plan_run, show_result, PlannedSweep, Results};
use super::routes::{LocalRoutes, RouteObserver};
use crate::cli::SweepArgs;
use crate::cmd::shared::candidates_suffix;
use crate::cmd::shared::inputs::cache_root;
use crate::cmd::shared::records::verdict;
use crate::exit;
use akbench_core::accounting::{reconcile, Observation};
use akbench_core::budget::{Budget, BudgetStatus, Spent, BUDGET_REASON};
use akbench_core::clock::SystemClock;
use akbench_core::dispatch::memory::{InMemoryDispatch, ItemState, NewItem, Next};
use akbench_core::dispatch::{Backoff, Settlement};
use akbench_core::plan::PlannedTrial;
use akbench_core::record::{AttemptRecord, Identity};
use akbench_core::report::ReportTrial;
use akbench_core::spec::ResolvedRunSpec;
use akbench_worker::orchestrator::{AttemptOptions, Orchestrator, TrialOutcome, TrialRequest};
use akbench_worker::process::CancelToken;
use akbench_worker::trial::PreparedTrial;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// How often a waiting slot looks again (a paused route resumes with no attempt ending).
const TICK: Duration = Duration::from_millis(250);

/// The dispatch and what the trials made so far, under one lock.
struct Shared {
    dispatch: InMemoryDispatch,
    /// Each trial's attempts so far, in plan order.
    attempts: Vec<Vec<AttemptRecord>>,
    /// When each trial's first attempt started.
    started: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    /// What ended trials spent (for the budget).
    spent: Spent,
}

/// What a slot tells the printer.
enum Event {
    /// A trial is done; its record written (or not).
    Done(usize, Result<TrialOutcome, String>),
}

/// Runs the sweep in this process (`--local`).
pub fn run(args: SweepArgs) -> anyhow::Result<i32> {
    let orch = Orchestrator::new(
        &cache_root(args.cache.as_deref()),
        std::sync::Arc::new(SystemClock),
    );
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
            "akbench sweep: run {} ({}), {} trials = {} tasks x {} agents x {} repetitions{}",
            spec.run_key(),
            spec.run_id(),
            total / spec.condition.execution.candidates.max(1) as usize,
            ready.summary.by_task.len(),
            ready.summary.by_agent.len(),
            spec.condition.repetitions,
            candidates_suffix(&spec, total as u64)
        );
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let started = Instant::now();
    let mut runner = LocalRunner::new(&args, &orch, &spec, &ready.trials, &prepared, jobs, started);
    INTERRUPTED.store(false, Ordering::SeqCst);
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    let results = runner.run_all(jobs);
    // SAFETY: restores the default disposition.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
    let interrupted = runner.cancel.is_cancelled();
    let ended = runner.finish(results);
    let (observations, report) = outcomes(&ready.trials, ended.results);
    if let (Some(b), false) = (&ended.budget, args.json) {
        if ended.budget_cancelled > 0 {
            eprintln!(
                "{}: {} trials not started, cancelled (reason: {BUDGET_REASON})",
                b.line(),
                ended.budget_cancelled
            );
        }
        eprintln!("{}", b.line());
    }
    let accounting = reconcile(&ready, &observations);
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

/// A trial's record as written, or why it could not be.
type TrialResult = Result<TrialOutcome, String>;

/// One local sweep's runner: the planned trials, the dispatch over memory, and the slots
/// that take attempts from it and run them through the orchestrator.
struct LocalRunner<'a> {
    args: &'a SweepArgs,
    orch: &'a Orchestrator,
    trials: &'a [PlannedTrial],
    prepared: &'a HashMap<(String, String), Arc<PreparedTrial>>,
    /// The run every trial record names.
    run: Identity,
    grade: bool,
    /// Each agent label's provider route, where it has one.
    route_of: BTreeMap<String, String>,
    budget: Option<Budget>,
    shared: Mutex<Shared>,
    /// Notified whenever the dispatch may have work again.
    changed: Condvar,
    routes: LocalRoutes,
    cancel: CancelToken,
}

/// What a local sweep left once every slot stopped.
struct Ended {
    /// Each trial's record, in plan order (`None`: never ended).
    results: Vec<Option<TrialResult>>,
    /// The budget's status at the end, with one.
    budget: Option<BudgetStatus>,
    /// Trials cancelled, not started, because the budget was spent.
    budget_cancelled: usize,
}

impl<'a> LocalRunner<'a> {
    fn new(
        args: &'a SweepArgs,
        orch: &'a Orchestrator,
        spec: &ResolvedRunSpec,
        trials: &'a [PlannedTrial],
        prepared: &'a HashMap<(String, String), Arc<PreparedTrial>>,
        jobs: usize,
        started: Instant,
    ) -> Self {
        let route_of: BTreeMap<String, String> = spec
            .condition
            .agents
            .iter()
            .filter_map(|a| a.provider_route.clone().map(|r| (a.label.clone(), r)))
            .collect();
        let total = trials.len();
        let shared = Mutex::new(Shared {
            dispatch: InMemoryDispatch::new(
                trials
                    .iter()
                    .map(|t| NewItem {
                        agent: t.agent.label.clone(),
                        route: route_of.get(&t.agent.label).cloned(),
                        retry_budget: t.attempt.infrastructure_retries,
                    })
                    .collect(),
                &spec.condition.execution.concurrency.caps(),
                jobs,
                Backoff::default(),
                started,
            ),
            attempts: vec![Vec::new(); total],
            started: vec![None; total],
            spent: Spent::default(),
        });
        LocalRunner {
            args,
            orch,
            trials,
            prepared,
            run: Identity {
                id: spec.run_id(),
                key: spec.run_key().to_string(),
            },
            grade: spec.condition.evaluation.grade,
            route_of,
            budget: spec.condition.execution.budget,
            shared,
            changed: Condvar::new(),
            routes: LocalRoutes::default(),
            cancel: CancelToken::new(),
        }
    }

    /// The orchestrator's request for trial `t`.
    fn request(&self, t: &PlannedTrial) -> TrialRequest<'_> {
        let p = &self.prepared[&(t.task.id.clone(), t.agent.label.clone())];
        TrialRequest {
            task: &p.task,
            agent: &p.agent,
            run: self.run.clone(),
            trial: Identity {
                id: t.trial_id,
                key: t.key.clone(),
            },
            out_dir: self.args.out.join(&t.key),
            infrastructure_retries: t.attempt.infrastructure_retries,
            options: AttemptOptions {
                grade: self.grade,
                ..AttemptOptions::default()
            }
            .with_compute(&t.compute),
            candidate: t.candidate.clone(),
        }
    }

    /// Runs every trial on `jobs` slots, printing each as it ends; returns each trial's
    /// record (`None`: none ended) once no slot has work left.
    fn run_all(&self, jobs: usize) -> Vec<Option<TrialResult>> {
        let total = self.trials.len();
        let (tx, rx) = mpsc::channel::<Event>();
        let done = AtomicBool::new(false);
        let mut results: Vec<Option<TrialResult>> = vec![None; total];
        std::thread::scope(|s| {
            for _ in 0..jobs {
                let tx = tx.clone();
                s.spawn(move || self.slot(&tx));
            }
            drop(tx);
            let done = &done;
            s.spawn(move || self.watch_interrupt(done));
            let mut finished = 0usize;
            for Event::Done(item, r) in rx {
                finished += 1;
                let t = &self.trials[item];
                match &r {
                    Ok(o) if !self.args.json => eprintln!(
                        "[{finished:>width$}/{total}] {:<50} {}",
                        t.key,
                        verdict(o.record.outcome.state, o.record.outcome.ok),
                        width = total.to_string().len()
                    ),
                    Err(e) => eprintln!("[{finished}/{total}] {}: {e}", t.key),
                    _ => {}
                }
                results[item] = Some(r);
            }
            done.store(true, Ordering::SeqCst);
        });
        results
    }

    /// One slot: takes the next attempt, runs it, reports a trial that ended; until the
    /// dispatch has nothing left to start.
    fn slot(&self, tx: &mpsc::Sender<Event>) {
        while let Some((item, number)) = self.next_lease() {
            if let Some(r) = self.attempt(item, number) {
                let _ = tx.send(Event::Done(item, r));
            }
            self.changed.notify_all();
        }
        self.changed.notify_all();
    }

    /// The next attempt to run, waiting while nothing may start (a cap, a backoff, a paused
    /// route); `None` once nothing will. A spent budget cancels the trials not started.
    fn next_lease(&self) -> Option<(usize, u32)> {
        let mut st = self.shared.lock().expect("sweep lock");
        loop {
            let spent = akbench_core::budget::verdict(self.budget.as_ref(), &st.spent);
            if spent.is_some() {
                st.dispatch.cancel_ready(BUDGET_REASON);
            }
            let now = Instant::now();
            match st.dispatch.next(now, &|r| self.routes.paused(r)) {
                Next::Lease { item, number } => {
                    st.started[item].get_or_insert_with(chrono::Utc::now);
                    return Some((item, number));
                }
                Next::Wait(until) => {
                    let wait = InMemoryDispatch::wait_for(until, now, TICK);
                    st = self.changed.wait_timeout(st, wait).expect("sweep lock").0;
                }
                Next::Stop => return None,
            }
        }
    }

    /// Runs attempt `number` of trial `item` and settles it; the trial's record when the
    /// trial is done (else it is retried later).
    fn attempt(&self, item: usize, number: u32) -> Option<TrialResult> {
        let t = &self.trials[item];
        let req = self.request(t);
        let observer = RouteObserver {
            routes: &self.routes,
            route: self.route_of.get(&t.agent.label).map(String::as_str),
        };
        let orch = self.orch;
        let a = orch.run_attempt(&orch.attempt_request(&req, number), &observer, &self.cancel);
        let terminal = a.state;
        let done = {
            let mut st = self.shared.lock().expect("sweep lock");
            st.attempts[item].push(a);
            match st.dispatch.ended(
                item,
                terminal,
                akbench_core::ids::random_unit(),
                Instant::now(),
            ) {
                Settlement::Retry { .. } => None,
                Settlement::Done(_) => Some((
                    std::mem::take(&mut st.attempts[item]),
                    st.started[item].unwrap_or_else(chrono::Utc::now),
                )),
            }
        };
        let (attempts, started_at) = done?;
        let r = orch
            .write_trial_record(&req, attempts, started_at, None)
            .map_err(|e| e.to_string());
        if let Ok(o) = &r {
            self.shared
                .lock()
                .expect("sweep lock")
                .spent
                .add_record(&o.record);
        }
        Some(r)
    }

    /// Ctrl-C: the run is cancelled, its live agents stopped. Watches until `done`.
    fn watch_interrupt(&self, done: &AtomicBool) {
        while !done.load(Ordering::SeqCst) {
            if INTERRUPTED.load(Ordering::SeqCst) {
                self.shared.lock().expect("sweep lock").dispatch.cancel();
                self.cancel.cancel();
                self.changed.notify_all();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Writes the records of the trials cancelled before an attempt ran to an end
    /// (`cancelled`, the reason, the attempts made, as the coordinator's export writes them)
    /// into `results`, and says what the budget left.
    fn finish(&mut self, mut results: Vec<Option<TrialResult>>) -> Ended {
        let trials = self.trials;
        let st = self.shared.get_mut().expect("sweep lock");
        let mut cancelled = Vec::new();
        for i in 0..trials.len() {
            if let ItemState::Cancelled(reason) = st.dispatch.item(i) {
                let attempts = std::mem::take(&mut st.attempts[i]);
                let at = st.started[i].unwrap_or_else(chrono::Utc::now);
                cancelled.push((i, reason, attempts, at));
            }
        }
        let budget = self.budget.map(|b| BudgetStatus::of(b, st.spent));
        let budget_cancelled = cancelled
            .iter()
            .filter(|(_, reason, _, _)| *reason == BUDGET_REASON)
            .count();
        for (i, reason, attempts, at) in cancelled {
            let req = self.request(&trials[i]);
            results[i] = Some(
                self.orch
                    .write_trial_record(&req, attempts, at, Some(reason))
                    .map_err(|e| e.to_string()),
            );
        }
        Ended {
            results,
            budget,
            budget_cancelled,
        }
    }
}

/// Every trial's observation and report line (and its steps), in plan order, from its record
/// (a cancelled trial's says `cancelled` and why); a trial whose record could not be written
/// has none (it is missing).
fn outcomes(
    trials: &[PlannedTrial],
    results: Vec<Option<Result<TrialOutcome, String>>>,
) -> (Vec<Observation>, Results) {
    let mut observations = Vec::new();
    let mut report = Results::default();
    for (t, r) in trials.iter().zip(results) {
        let (observation, cause, spend, attempts, grading, network, rec) = match r {
            Some(Ok(o)) => {
                let rec = o.record;
                (
                    Observation {
                        trial_id: rec.trial.id,
                        state: rec.outcome.state,
                        ok: rec.outcome.ok,
                        score: rec.outcome.score,
                        attempt_id: rec.attempts.last().map(|a| a.attempt.id),
                        source: Some(o.record_path.display().to_string()),
                    },
                    rec.cause(),
                    akbench_core::spend::Spend::of_record(&rec),
                    rec.outcome.attempts,
                    akbench_core::grading::integrity::GradeFlags::of_record(&rec),
                    akbench_core::report::network::TrialNetwork::of_record(&rec),
                    rec,
                )
            }
            _ => continue,
        };
        let line = ReportTrial {
            key: t.key.clone(),
            agent: t.agent.label.clone(),
            task: t.task.id.clone(),
            observation: observation.clone(),
            cause,
            spend,
            attempts,
            grading,
            network,
        };
        report.push(line, Some(&rec));
        observations.push(observation);
    }
    (observations, report)
}
