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

use crate::cli::SweepArgs;
use crate::cmd::shared::candidates_suffix;
use crate::cmd::shared::inputs::cache_root;
use crate::cmd::shared::records::verdict;
use crate::cmd::shared::sweep::{plan_run, show_result, PlannedSweep};
use crate::cmd::sweep_dispatch::{InMemoryDispatch, ItemState, Next};
use crate::cmd::sweep_routes::{LocalRoutes, RouteObserver};
use crate::exit;
use akbench_core::accounting::{reconcile, Observation};
use akbench_core::budget::{Budget, BudgetStatus, Spent, BUDGET_REASON};
use akbench_core::clock::SystemClock;
use akbench_core::dispatch::{Backoff, Settlement};
use akbench_core::plan::PlannedTrial;
use akbench_core::record::{AttemptRecord, Identity};
use akbench_core::report::ReportTrial;
use akbench_worker::orchestrator::{AttemptOptions, Orchestrator, TrialOutcome, TrialRequest};
use akbench_worker::process::CancelToken;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
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
    let route_of: BTreeMap<String, String> = spec
        .condition
        .agents
        .iter()
        .filter_map(|a| a.provider_route.clone().map(|r| (a.label.clone(), r)))
        .collect();
    let budget: Option<Budget> = spec.condition.execution.budget;
    let started = Instant::now();
    let shared = Mutex::new(Shared {
        dispatch: InMemoryDispatch::new(
            &ready.trials,
            &route_of,
            &spec.condition.execution.concurrency,
            jobs,
            Backoff::default(),
            started,
        ),
        attempts: vec![Vec::new(); total],
        started: vec![None; total],
        spent: Spent::default(),
    });
    let changed = Condvar::new();
    let routes = LocalRoutes::default();
    let run_identity = Identity {
        id: spec.run_id(),
        key: spec.run_key().to_string(),
    };
    let grade = spec.condition.evaluation.grade;
    let request = |t: &PlannedTrial| {
        let p = &prepared[&(t.task.id.clone(), t.agent.label.clone())];
        TrialRequest {
            task: &p.task,
            agent: &p.agent,
            run: run_identity.clone(),
            trial: Identity {
                id: t.trial_id,
                key: t.key.clone(),
            },
            out_dir: args.out.join(&t.key),
            infrastructure_retries: t.attempt.infrastructure_retries,
            options: AttemptOptions {
                grade,
                ..AttemptOptions::default()
            }
            .with_compute(&t.compute),
            candidate: t.candidate.clone(),
        }
    };
    let (tx, rx) = mpsc::channel::<Event>();
    let done = AtomicBool::new(false);
    let mut results: Vec<Option<Result<TrialOutcome, String>>> = vec![None; total];
    std::thread::scope(|s| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (shared, changed, routes, cancel, orch, trials, request, route_of) = (
                &shared,
                &changed,
                &routes,
                &cancel,
                &orch,
                &ready.trials,
                &request,
                &route_of,
            );
            s.spawn(move || loop {
                // Take the next attempt, waiting while nothing may start.
                let lease = {
                    let mut st = shared.lock().expect("sweep lock");
                    loop {
                        let spent = akbench_core::budget::verdict(budget.as_ref(), &st.spent);
                        if spent.is_some() {
                            st.dispatch.cancel_ready(BUDGET_REASON);
                        }
                        let now = Instant::now();
                        match st.dispatch.next(now, &|r| routes.paused(r)) {
                            Next::Lease { item, number } => {
                                st.started[item].get_or_insert_with(chrono::Utc::now);
                                break Some((item, number));
                            }
                            Next::Wait(until) => {
                                let wait = InMemoryDispatch::wait_for(until, now, TICK);
                                st = changed.wait_timeout(st, wait).expect("sweep lock").0;
                            }
                            Next::Stop => break None,
                        }
                    }
                };
                let Some((item, number)) = lease else {
                    changed.notify_all();
                    return;
                };
                let t = &trials[item];
                let req = request(t);
                let observer = RouteObserver {
                    routes,
                    route: route_of.get(&t.agent.label).map(String::as_str),
                };
                let a = orch.run_attempt(&orch.attempt_request(&req, number), &observer, cancel);
                let terminal = a.state;
                let done = {
                    let mut st = shared.lock().expect("sweep lock");
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
                if let Some((attempts, started_at)) = done {
                    let r = orch
                        .write_trial_record(&req, attempts, started_at, None)
                        .map_err(|e| e.to_string());
                    if let Ok(o) = &r {
                        shared
                            .lock()
                            .expect("sweep lock")
                            .spent
                            .add_record(&o.record);
                    }
                    let _ = tx.send(Event::Done(item, r));
                }
                changed.notify_all();
            });
        }
        drop(tx);
        // Ctrl-C: the run is cancelled, its live agents stopped.
        let (shared, changed, cancel, done_ref) = (&shared, &changed, &cancel, &done);
        s.spawn(move || {
            while !done_ref.load(Ordering::SeqCst) {
                if INTERRUPTED.load(Ordering::SeqCst) {
                    shared.lock().expect("sweep lock").dispatch.cancel();
                    cancel.cancel();
                    changed.notify_all();
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut finished = 0usize;
        for Event::Done(item, r) in rx {
            finished += 1;
            let t = &ready.trials[item];
            match &r {
                Ok(o) if !args.json => eprintln!(
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
    // SAFETY: restores the default disposition.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
    let mut st = shared.into_inner().expect("sweep lock");
    // Trials cancelled before an attempt ran to an end have their record too (`cancelled`,
    // the reason, the attempts made), as the coordinator's export writes them.
    for (i, t) in ready.trials.iter().enumerate() {
        if let ItemState::Cancelled(reason) = st.dispatch.item(i) {
            let attempts = std::mem::take(&mut st.attempts[i]);
            let at = st.started[i].unwrap_or_else(chrono::Utc::now);
            results[i] = Some(
                orch.write_trial_record(&request(t), attempts, at, Some(reason))
                    .map_err(|e| e.to_string()),
            );
        }
    }
    let budget_status = budget.map(|b| BudgetStatus::of(b, st.spent));
    let (observations, report) = outcomes(&ready.trials, results);
    if let (Some(b), false) = (&budget_status, args.json) {
        let left = (0..total)
            .filter(|i| st.dispatch.item(*i) == ItemState::Cancelled(BUDGET_REASON))
            .count();
        if left > 0 {
            eprintln!(
                "{}: {left} trials not started, cancelled (reason: {BUDGET_REASON})",
                b.line()
            );
        }
        eprintln!("{}", b.line());
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

/// Every trial's observation and report line, in plan order, from its record (a cancelled
/// trial's says `cancelled` and why); a trial whose record could not be written has none (it
/// is missing).
fn outcomes(
    trials: &[PlannedTrial],
    results: Vec<Option<Result<TrialOutcome, String>>>,
) -> (Vec<Observation>, Vec<ReportTrial>) {
    let mut observations = Vec::new();
    let mut report = Vec::new();
    for (t, r) in trials.iter().zip(results) {
        let (observation, cause, spend, attempts, grading) = match r {
            Some(Ok(o)) => {
                let rec = &o.record;
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
                    akbench_core::spend::Spend::of_record(rec),
                    rec.outcome.attempts,
                    akbench_core::grading::integrity::GradeFlags::of_record(rec),
                )
            }
            _ => continue,
        };
        report.push(ReportTrial {
            key: t.key.clone(),
            agent: t.agent.label.clone(),
            task: t.task.id.clone(),
            observation: observation.clone(),
            cause,
            spend,
            attempts,
            grading,
        });
        observations.push(observation);
    }
    (observations, report)
}
