//! `akbench run reconcile`: typed outcomes against a stored run's plan, and what the
//! observation lines say the planned trials spent (`spend`, e.g. from a Harbor import).
//! Exit 0 when the accounting is valid, 1 when invalid, 2 for a malformed observations file.

use crate::cli::ReconcileArgs;
use crate::cmd::shared::accounting::show;
use crate::cmd::shared::common::find_run;
use akbench_core::accounting::{load_lines, observed_spend, reconcile};
use akbench_core::evidence::EvidenceStore;

/// Reconciles a run.
pub fn run(args: ReconcileArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let r = find_run(&store, &args.run)?;
    let Some(plan) = r.ready.as_ref() else {
        return Err(crate::exit::InputError(format!(
            "failed to reconcile run {}: it has no ready plan; fix: plan it with `akbench run plan`",
            r.spec.run_key()
        ))
        .into());
    };
    let Some(path) = args.observations.as_ref() else {
        return Err(crate::exit::InputError(
            "failed to reconcile: --observations FILE is required locally; fix: pass the \
             observations file, or reconcile the coordinator's own records with --coordinator URL"
                .into(),
        )
        .into());
    };
    let lines = load_lines(path)?;
    let observations: Vec<_> = lines.iter().map(|l| l.observation.clone()).collect();
    let a = reconcile(plan, &observations);
    let planned = plan.trials.iter().map(|t| t.trial_id).collect();
    let spent = observed_spend(&planned, &lines);
    show(&a, Some(&spent), args.all, args.store.json)
}
