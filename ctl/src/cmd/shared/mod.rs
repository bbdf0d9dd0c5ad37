//! What the commands share, and the one place they take it from: a command's module
//! (`single`, `evaluate`, `sweep`, `up`, ...) imports its helpers from here, never from
//! `cmd` itself (which only dispatches) nor from another command's module.
//!
//! Layers (checked by `core/tests/import_layers.rs`): `cmd` (the dispatcher) and
//! `remote::commands` on top; then the command modules and the rest of `remote` (`submit`,
//! `watch`, `reconcile`, ...); then `shared`; then `remote`'s client (`remote/mod.rs`),
//! `remote::records` and `remote::view`, which import nothing from `cmd`.
//!
//! - [`common`]: a JSON document printed, a summary map as one line, a stored run found,
//!   the planning clock;
//! - [`inputs`]: the per-host cache root, a task by id or by path, task images pinned to
//!   their digests at plan time;
//! - [`embedded`]: the embedded system's options from the flags (`up`, the default sweep);
//! - [`records`]: run records found under a folder and read, and the word a result is
//!   shown as;
//! - [`source`]: a run named on the command line found (local store, folder, coordinator)
//!   and loaded;
//! - [`compare`]: two loaded runs checked for comparability and compared;
//! - [`task_checks`]: task checks cached by digest, and recorded in a plan's spec;
//! - [`planning`]: a manifest resolved, its images pinned and its tasks checked (`run plan`,
//!   local and remote, and the sweep), and a planned run stored;
//! - [`accounting`]: an accounting printed, with its exit code (`run reconcile` local and
//!   remote, the Harbor import);
//! - [`show`]: a run, a diff of two runs and a plan's summary printed, the same for a local
//!   run and a coordinator's.

pub mod accounting;
pub mod common;
pub mod compare;
pub mod embedded;
pub mod inputs;
pub mod planning;
pub mod records;
pub mod show;
pub mod source;
pub mod task_checks;

use akbench_core::spec::ResolvedRunSpec;

/// `, each with N candidates (M plan entries, selection R)` with best-of-N, else nothing.
pub fn candidates_suffix(spec: &ResolvedRunSpec, entries: u64) -> String {
    let e = &spec.condition.execution;
    if e.candidates > 1 {
        format!(
            ", each with {} candidates ({entries} plan entries, selection {})",
            e.candidates, e.selection
        )
    } else {
        String::new()
    }
}
