//! `akbench run inspect`: a stored run's condition, plan summary and state.

use crate::cli::InspectArgs;
use crate::cmd::{counts, find_run, print_json};
use akbench_core::evidence::{EvidenceStore, RunOutcome};
use akbench_core::plan::RunPlan;
use akbench_core::spec::ResolvedRunSpec;

/// Shows a run.
pub fn run(args: InspectArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let r = find_run(&store, &args.run)?;
    show(
        &r.spec,
        r.plan(),
        r.state(),
        r.outcome.as_ref(),
        args.store.json,
    )
}

/// Prints a run (shared with remote mode, where the state is the coordinator's).
pub(crate) fn show(
    s: &ResolvedRunSpec,
    plan: Option<&RunPlan>,
    state: &str,
    outcome: Option<&RunOutcome>,
    json: bool,
) -> anyhow::Result<i32> {
    if json {
        print_json(&serde_json::json!({
            "run_key": s.run_key(),
            "run_id": s.run_id(),
            "state": state,
            "outcome": outcome,
            "created_at": s.identity.created_at,
            "spec_digest": s.digest,
            "condition_digest": s.condition_digest,
            "plan_digest": plan.map(|p| p.digest.clone()),
            "condition": s.condition,
            "summary": plan.map(|p| p.summary.clone()),
        }))?;
        return Ok(crate::exit::OK);
    }
    let c = &s.condition;
    println!("run          {} ({})", s.run_key(), s.run_id());
    println!("state        {state}");
    if let Some(o) = outcome {
        println!(
            "outcome      accounting {}{}, {}; records in {}",
            if o.valid { "valid" } else { "INVALID" },
            if o.complete { "" } else { ", incomplete" },
            o.rates,
            o.records
        );
    }
    println!("created      {}", s.identity.created_at.to_rfc3339());
    println!("condition    {}", s.condition_digest);
    println!("experiment   {}", c.experiment);
    println!("tasks        {}", c.tasks.len());
    for t in &c.tasks {
        println!(
            "  {} {} {} {}",
            t.release.id, t.release.version, t.family, t.release.digest
        );
    }
    println!("agents       {}", c.agents.len());
    for a in &c.agents {
        println!(
            "  {} adapter={} model={} {}",
            a.label,
            a.descriptor.adapter,
            a.model.as_deref().unwrap_or("-"),
            a.digest
        );
    }
    println!("repetitions  {}", c.repetitions);
    println!(
        "compute      cpus={} memory_mb={} agent_timeout={} verifier_timeout={}",
        c.compute.cpus,
        c.compute.memory_mb,
        c.compute
            .agent_timeout_sec
            .map_or("task".to_string(), |t| format!("{t}s")),
        c.compute
            .verifier_timeout_sec
            .map_or("task".to_string(), |t| format!("{t}s")),
    );
    println!(
        "execution    runtime={} infrastructure_retries={} candidates={} selection={}",
        c.execution.runtime.as_str(),
        c.execution.infrastructure_retries,
        c.execution.candidates,
        c.execution.selection
    );
    println!(
        "evaluation   grade={} profile={} reviewer={}",
        c.evaluation.grade,
        c.evaluation.profile,
        c.evaluation.reviewer.as_deref().unwrap_or("-")
    );
    println!("visibility   {}", c.visibility.as_str());
    if !c.credentials.is_empty() {
        println!("credentials  {} (names only)", c.credentials.join(" "));
    }
    if let Some(p) = plan {
        let m = &p.summary;
        println!(
            "plan         {} ({} trials, {})",
            p.stage.as_str(),
            m.trials,
            p.digest
        );
        println!("  by agent      {}", counts(&m.by_agent));
        println!("  by repetition {}", counts(&m.by_repetition));
        println!("  by family     {}", counts(&m.by_family));
        println!("  by backend    {}", counts(&m.by_backend));
        println!("  by visibility {}", counts(&m.by_visibility));
        println!("  by lifecycle  {}", counts(&m.by_lifecycle));
    }
    Ok(crate::exit::OK)
}
