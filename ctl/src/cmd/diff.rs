//! `akbench run diff`: semantic comparison of two stored runs' conditions.
//! Exit 0 when identical (identities aside), 1 when they differ.

use crate::cli::DiffArgs;
use crate::cmd::{find_run, print_json};
use akbench_core::evidence::EvidenceStore;
use akbench_core::spec_diff::{diff, SpecDiff};

/// Compares two runs.
pub fn run(args: DiffArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let l = find_run(&store, &args.left)?;
    let r = find_run(&store, &args.right)?;
    let d = diff(&l.spec, &r.spec);
    let name = |s: &akbench_core::spec::ResolvedRunSpec| (s.run_key().to_string(), s.run_id());
    show(name(&l.spec), name(&r.spec), &d, args.store.json)
}

/// Prints a diff of two runs named (key, UUID) and returns the exit code (shared with
/// remote mode).
pub(crate) fn show<I: serde::Serialize>(
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
        println!("identical conditions ({left_key} vs {right_key}; identities differ only)");
    } else {
        println!("--- {left_key}\n+++ {right_key}");
        print!("{d}");
    }
    Ok(if d.is_empty() {
        crate::exit::OK
    } else {
        crate::exit::NEGATIVE
    })
}
