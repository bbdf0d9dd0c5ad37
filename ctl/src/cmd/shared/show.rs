//! What a run looks like printed, the same whether it came from the local store or from a
//! coordinator (remote mode fetches it and prints it through these): `run inspect`'s run,
//! `run diff`'s comparison and `run plan`'s summary lines.

use crate::cmd::shared::common::{counts, print_json};
use akbench_core::evidence::RunOutcome;
use akbench_core::plan::RunPlan;
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::spec_diff::SpecDiff;

/// Prints a run (`run inspect`; in remote mode the state is the coordinator's).
pub fn run(
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
    outln!("run          {} ({})", s.run_key(), s.run_id());
    outln!("state        {state}");
    if let Some(o) = outcome {
        outln!(
            "outcome      accounting {}{}, {}; records in {}",
            if o.valid { "valid" } else { "INVALID" },
            if o.complete { "" } else { ", incomplete" },
            o.rates,
            o.records
        );
    }
    outln!("created      {}", s.identity.created_at.to_rfc3339());
    outln!("condition    {}", s.condition_digest);
    outln!("experiment   {}", c.experiment);
    outln!("tasks        {}", c.tasks.len());
    for t in &c.tasks {
        outln!(
            "  {} {} {} {}",
            t.release.id,
            t.release.version,
            t.family,
            t.release.digest
        );
    }
    outln!("agents       {}", c.agents.len());
    for a in &c.agents {
        outln!(
            "  {} adapter={} model={} {}",
            a.label,
            a.descriptor.adapter,
            a.model.as_deref().unwrap_or("-"),
            a.digest
        );
    }
    outln!("repetitions  {}", c.repetitions);
    outln!(
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
    outln!(
        "execution    runtime={} infrastructure_retries={} candidates={} selection={}",
        c.execution.runtime.as_str(),
        c.execution.infrastructure_retries,
        c.execution.candidates,
        c.execution.selection
    );
    if let Some(why) = &s.provenance.runtime_picked {
        outln!("             {why}");
    }
    outln!(
        "evaluation   grade={} profile={} reviewer={}",
        c.evaluation.grade,
        c.evaluation.profile,
        c.evaluation.reviewer.as_deref().unwrap_or("-")
    );
    outln!("visibility   {}", c.visibility.as_str());
    if !c.credentials.is_empty() {
        outln!("credentials  {} (names only)", c.credentials.join(" "));
    }
    if let Some(p) = plan {
        let m = &p.summary;
        outln!(
            "plan         {} ({} trials, {})",
            p.stage.as_str(),
            m.trials,
            p.digest
        );
        outln!("  by agent      {}", counts(&m.by_agent));
        outln!("  by repetition {}", counts(&m.by_repetition));
        outln!("  by family     {}", counts(&m.by_family));
        outln!("  by backend    {}", counts(&m.by_backend));
        outln!("  by visibility {}", counts(&m.by_visibility));
        outln!("  by lifecycle  {}", counts(&m.by_lifecycle));
    }
    Ok(crate::exit::OK)
}

/// Prints a diff of two runs named (key, UUID) (`run diff`) and returns the exit code: 0
/// identical, 1 different.
pub fn diff<I: serde::Serialize>(
    (left_key, left_id): (String, I),
    (right_key, right_id): (String, I),
    d: &SpecDiff,
    json: bool,
) -> anyhow::Result<i32> {
    if json {
        print_json(&serde_json::json!({
            "left": {"run_key": left_key, "run_id": left_id},
            "right": {"run_key": right_key, "run_id": right_id},
            "identical": d.is_empty(),
            "changes": d.changes,
        }))?;
    } else if d.is_empty() {
        outln!("identical conditions ({left_key} vs {right_key}; identities differ only)");
    } else {
        outln!("--- {left_key}\n+++ {right_key}");
        out!("{d}");
    }
    Ok(if d.is_empty() {
        crate::exit::OK
    } else {
        crate::exit::NEGATIVE
    })
}

/// Prints the plan summary lines (trials, agents, families, backend, visibility).
pub fn plan_summary(spec: &ResolvedRunSpec, ready: &RunPlan) {
    let s = &ready.summary;
    outln!(
        "trials   {} = {} tasks x {} agents x {} repetitions{}",
        s.trials / u64::from(spec.condition.execution.candidates.max(1)),
        s.by_task.len(),
        s.by_agent.len(),
        spec.condition.repetitions,
        super::candidates_suffix(spec, s.trials)
    );
    outln!("agents   {}", counts(&s.by_agent));
    outln!("families {}", counts(&s.by_family));
    outln!("backend  {}", counts(&s.by_backend));
    outln!("visible  {}", counts(&s.by_visibility));
    if let Some(why) = &spec.provenance.runtime_picked {
        outln!(
            "runtime  {}: {why}",
            spec.condition.execution.runtime.as_str()
        );
    }
}
