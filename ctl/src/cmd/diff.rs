//! `akbench run diff`: semantic comparison of two stored runs' conditions.
//! Exit 0 when identical (identities aside), 1 when they differ.

use crate::cli::DiffArgs;
use crate::cmd::{find_run, print_json};
use akbench_core::evidence::EvidenceStore;
use akbench_core::spec_diff::diff;

/// Compares two runs.
pub fn run(args: DiffArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let l = find_run(&store, &args.left)?;
    let r = find_run(&store, &args.right)?;
    let d = diff(&l.spec, &r.spec);
    if args.store.json {
        print_json(&serde_json::json!({
            "left": {"run_key": l.spec.run_key(), "run_id": l.spec.run_id()},
            "right": {"run_key": r.spec.run_key(), "run_id": r.spec.run_id()},
            "identical": d.is_empty(),
            "changes": d.changes,
        }))?;
    } else if d.is_empty() {
        println!(
            "identical conditions ({} vs {}; identities differ only)",
            l.spec.run_key(),
            r.spec.run_key()
        );
    } else {
        println!("--- {}\n+++ {}", l.spec.run_key(), r.spec.run_key());
        print!("{d}");
    }
    Ok(if d.is_empty() {
        crate::exit::OK
    } else {
        crate::exit::NEGATIVE
    })
}
