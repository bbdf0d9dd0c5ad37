//! `akbench run plan`: manifest -> spec -> draft plan -> ready plan, stored in that order.
//! Bad input (manifest, task, agent) exits 2 before anything is written. The trials are
//! expanded straight into the plan files (`EvidenceStore::plan_streamed`): memory does not
//! grow with the plan.

use crate::cli::PlanArgs;
use crate::cmd::shared::common::{counts, print_json};
use crate::cmd::shared::planning::plan_and_store;
use crate::cmd::shared::show;
use crate::cmd::shared::task_checks::checks_line;

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
            "runtime": spec.condition.execution.runtime,
            "runtime_picked": spec.provenance.runtime_picked,
        }))?;
    } else {
        outln!("run      {}", spec.run_key());
        outln!("uuid     {}", spec.run_id());
        outln!("stored   {}", dir.display());
        show::plan_summary(&spec, &ready);
        outln!("checked  {}", checks_line(&checks));
        outln!("state    ready ({})", counts(&ready.summary.by_lifecycle));
    }
    Ok(crate::exit::OK)
}
