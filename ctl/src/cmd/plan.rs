//! `akbench run plan`: manifest -> spec -> draft plan -> ready plan, stored in that order.
//! Bad input (manifest, task, agent) exits 2 before anything is written. The trials are
//! expanded straight into the plan files (`EvidenceStore::plan_streamed`): memory does not
//! grow with the plan.

use crate::cli::PlanArgs;
use crate::cmd::shared::candidates_suffix;
use crate::cmd::shared::task_checks::{checks_line, record_in_spec, PlannedChecks};
use crate::cmd::{counts, print_json};
use akbench_core::evidence::EvidenceStore;
use akbench_core::manifest::ExperimentManifest;
use akbench_core::plan::RunPlan;
use akbench_core::spec::{resolve, ResolveInputs, ResolvedRunSpec};
use std::path::PathBuf;

/// Plans a run.
pub fn run(args: PlanArgs) -> anyhow::Result<i32> {
    let (spec, ready, dir, checks) = plan_and_store(&args)?;
    if args.store.json {
        print_json(&serde_json::json!({
            "run_key": spec.run_key(),
            "run_id": spec.run_id(),
            "dir": dir,
            "spec_digest": spec.digest,
            "condition_digest": spec.condition_digest,
            "plan_digest": ready.digest,
            "state": "ready",
            "summary": ready.summary,
            "task_checks": checks,
        }))?;
    } else {
        println!("run      {}", spec.run_key());
        println!("uuid     {}", spec.run_id());
        println!("stored   {}", dir.display());
        print_summary(&spec, &ready);
        println!("checked  {}", checks_line(&checks));
        println!("state    ready ({})", counts(&ready.summary.by_lifecycle));
    }
    Ok(crate::exit::OK)
}

/// Resolves the manifest, plans, and stores spec, draft and ready plan in the local store;
/// returns the spec, the ready plan's head (`trials` empty: the trials are expanded straight
/// into the plan files, one at a time) and the run's folder (remote mode submits them next).
pub(crate) fn plan_and_store(
    args: &PlanArgs,
) -> anyhow::Result<(ResolvedRunSpec, RunPlan, PathBuf, PlannedChecks)> {
    let clock = super::planning_clock()?;
    let clock = clock.as_ref();
    let manifest = ExperimentManifest::load(&args.config)?;
    let inputs = ResolveInputs {
        manifest_path: Some(args.config.clone()),
        tasks_root: args.tasks_root.clone(),
        agents_root: args.agents_root.clone(),
    };
    let spec = resolve(&manifest, &inputs, clock)?;
    let spec = crate::cmd::shared::inputs::pin_spec(spec, clock)?;
    let cache = crate::cmd::shared::inputs::cache_root(args.cache.as_deref());
    let (spec, checks) = record_in_spec(spec, &cache, args.check_tasks)?;
    let store = EvidenceStore::new(&args.store.store_root);
    let spec = store.create_run(spec)?;
    let ready = store.plan_streamed(&spec, clock.now())?;
    let dir = args.store.store_root.join(spec.run_key());
    Ok((spec, ready, dir, checks))
}

/// Prints the plan summary lines (trials, agents, families, backend, visibility).
pub(crate) fn print_summary(spec: &ResolvedRunSpec, ready: &RunPlan) {
    let s = &ready.summary;
    println!(
        "trials   {} = {} tasks x {} agents x {} repetitions{}",
        s.trials / u64::from(spec.condition.execution.candidates.max(1)),
        s.by_task.len(),
        s.by_agent.len(),
        spec.condition.repetitions,
        candidates_suffix(spec, s.trials)
    );
    println!("agents   {}", counts(&s.by_agent));
    println!("families {}", counts(&s.by_family));
    println!("backend  {}", counts(&s.by_backend));
    println!("visible  {}", counts(&s.by_visibility));
}
