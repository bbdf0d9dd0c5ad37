//! `akbench run diff`: semantic comparison of two stored runs' conditions.
//! Exit 0 when identical (identities aside), 1 when they differ.

use crate::cli::DiffArgs;
use crate::cmd::shared::common::find_run;
use crate::cmd::shared::show;
use akbench_core::evidence::EvidenceStore;
use akbench_core::spec_diff::diff;

/// Compares two runs.
pub fn run(args: DiffArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let l = find_run(&store, &args.left)?;
    let r = find_run(&store, &args.right)?;
    let d = diff(&l.spec, &r.spec);
    let name = |s: &akbench_core::spec::ResolvedRunSpec| (s.run_key().to_string(), s.run_id());
    show::diff(name(&l.spec), name(&r.spec), &d, args.store.json)
}
