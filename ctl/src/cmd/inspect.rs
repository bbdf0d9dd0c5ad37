//! `akbench run inspect`: a stored run's condition, plan summary and state.

use crate::cli::InspectArgs;
use crate::cmd::shared::common::find_run;
use crate::cmd::shared::show;
use akbench_core::evidence::EvidenceStore;

/// Shows a run.
pub fn run(args: InspectArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let r = find_run(&store, &args.run)?;
    show::run(
        &r.spec,
        r.plan(),
        r.state(),
        r.outcome.as_ref(),
        args.store.json,
    )
}
