//! `akbench run single` and `akbench run execute`: one trial, locally, through the worker's
//! orchestrator (`Orchestrator::run_trial`: a one-item `InMemoryDispatch`, settled by core as
//! `sweep --local` settles); `execute` stops before grading and ends `not_graded`.

use crate::cli::SingleArgs;
use crate::cmd::shared::inputs::{
    check_runtime, load_task, pin_task, single_compute, usable_cache_root,
};
use crate::cmd::shared::records::verdict;
use crate::exit::{self, InputError};
use akbench_core::agent::Agent;
use akbench_core::clock::SystemClock;
use akbench_core::dispatch::Backoff;
use akbench_core::ids;
use akbench_core::record::{Identity, Transition};
use akbench_worker::orchestrator::{AttemptOptions, Observer, Orchestrator, TrialRequest};
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::Limits;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Runs one trial; with `grade` false it ends `not_graded` (exit 0) unless the run itself
/// failed. Exit 0 yes, 1 the agent's no, 4 no verdict (`exit::of_answer`).
pub fn run(args: SingleArgs, grade: bool) -> anyhow::Result<i32> {
    let mut task = load_task(&args.task, &args.tasks_root)?;
    let agent = Agent::load(&args.agents_root, &args.agent)?;
    // --agent-timeout was range-checked where clap parsed it (core::limits::timeout_sec).
    let orch = Orchestrator::new(
        &usable_cache_root(args.cache.as_deref())?,
        Arc::new(SystemClock),
    );
    let runtime =
        crate::cmd::shared::inputs::runtime_for(args.runtime.as_deref(), &task, args.json);
    check_runtime(&task, runtime)?;
    let compute = single_compute(&task)?;
    if runtime == akbench_core::manifest::Runtime::Container {
        // As a plan would: the tag is resolved now, and the record names the digest.
        pin_task(&orch, &mut task)?;
    }
    orch.registry.resolve(&agent).map_err(InputError)?;
    let now = orch.clock.now();
    let run_id = ids::uuid_v7_at(now);
    let run_key = ids::run_key("single", now, &run_id);
    // Repetitions count from 1, as in a sweep's plan (`r1`).
    let trial_key = ids::trial_key(&run_key, &task.release.id, &agent.name, 1);
    let out_dir = args.out.join(&trial_key);
    let req = TrialRequest {
        task: &task,
        agent: &agent,
        run: Identity {
            id: run_id,
            key: run_key,
        },
        trial: Identity {
            id: ids::uuid_v7_at(now),
            key: trial_key,
        },
        out_dir,
        infrastructure_retries: args.infrastructure_retries,
        options: AttemptOptions {
            apply_mutation: !args.no_mutation,
            grade,
            keep_workspace: args.keep_workspace,
            agent_timeout_sec: args.agent_timeout,
            runtime,
            // The limits a planned run gets from a manifest that names none, raised to what
            // the task asks.
            limits: Limits {
                memory_mb: Some(compute.memory_mb),
                cpus: Some(u32::try_from(compute.cpus).unwrap_or(u32::MAX)),
                ..Limits::default()
            },
            ..AttemptOptions::default()
        },
        candidate: None,
    };
    let live = Live {
        start: Instant::now(),
        quiet: args.json,
    };
    if !args.json {
        eprintln!(
            "akbench: {} with agent {} ({})",
            task.release.id, agent.name, req.trial.key
        );
    }
    let cancel = CancelToken::new();
    // The trial is the one work item of an in-memory dispatch, claimed, run and settled as a
    // `sweep --local` slot's are: core's retries, backoff and terminal mapping.
    let outcome = orch.run_trial(&req, &Backoff::default(), &live, &cancel)?;
    let rec = &outcome.record;
    let last = rec.attempts.last().expect("a trial has an attempt");
    let answer = akbench_core::grading::answer(rec.outcome.state, rec.outcome.ok, grade);
    let spend = akbench_core::spend::Spend::of_record(rec);
    if args.json {
        let v = serde_json::json!({
            "spend": spend,
            "turns": last.observations.turns,
            "run": rec.run,
            "trial": rec.trial,
            "task": rec.task.release,
            "agent": rec.agent.name,
            "state": rec.outcome.state,
            "ok": rec.outcome.ok,
            "score": rec.outcome.score,
            "verdict": verdict(rec.outcome.state, rec.outcome.ok),
            "attempts": rec.outcome.attempts,
            "steps": last.steps,
            "cause": last.cause,
            "workspace": last.workspace.path.as_ref().map(|p| outcome.record_path.parent().unwrap_or(Path::new(".")).join(p)),
            "workspace_kept": last.workspace.kept,
            "record": outcome.record_path,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{}: {}{}",
            rec.outcome.state,
            verdict(rec.outcome.state, rec.outcome.ok),
            rec.outcome
                .score
                .map(|s| format!(" (score {s:.2})"))
                .unwrap_or_default()
        )?;
        // A multi-step task's steps, as its last attempt ran them.
        for step in &last.steps {
            writeln!(out, "{}", akbench_core::record::steps::line(step))?;
        }
        if let Some(c) = &last.cause {
            writeln!(out, "cause: {c}")?;
        }
        if rec.outcome.attempts > 1 {
            writeln!(out, "attempts: {}", rec.outcome.attempts)?;
        }
        {
            use akbench_core::spend::{fmt_count, fmt_usd};
            writeln!(
                out,
                "tokens: {} input, {} cached, {} output; cost {}{}{}",
                fmt_count(spend.input_tokens),
                fmt_count(spend.cached_input_tokens),
                fmt_count(spend.output_tokens),
                fmt_usd(spend.cost_usd),
                if rec.attempts.iter().any(|a| a.observations.cost_computed) {
                    " (computed from the agent's [price])"
                } else {
                    ""
                },
                if rec.outcome.attempts > 1 {
                    " (all attempts)"
                } else {
                    ""
                }
            )?;
        }
        if last.workspace.kept {
            if let Some(p) = &last.workspace.path {
                let dir = outcome.record_path.parent().unwrap_or(Path::new("."));
                writeln!(out, "workspace: {}", dir.join(p).display())?;
            }
        }
        writeln!(out, "record: {}", outcome.record_path.display())?;
    }
    Ok(exit::of_answer(answer))
}

/// Prints each phase as it happens.
struct Live {
    start: Instant,
    quiet: bool,
}

impl Observer for Live {
    fn transition(&self, _attempt: &Identity, number: u32, t: &Transition) {
        if self.quiet {
            return;
        }
        let secs = self.start.elapsed().as_secs_f64();
        let note = t
            .note
            .as_deref()
            .map(|n| format!("  {n}"))
            .unwrap_or_default();
        eprintln!("  [{secs:7.2}s] a{number} {:<20}{note}", t.state.as_str());
    }

    fn annotate(&self, _attempt: &Identity, _number: u32, t: &Transition) {
        if let (false, Some(n)) = (self.quiet, &t.note) {
            eprintln!("  {:>9}    {:<20}  {n}", "", "");
        }
    }

    fn retrying(&self, number: u32, after: std::time::Duration) {
        if !self.quiet {
            eprintln!(
                "  a{number} ended in an infrastructure error: retrying in {:.1}s",
                after.as_secs_f64()
            );
        }
    }
}
