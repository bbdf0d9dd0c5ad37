//! Exit codes of `akbench`, documented in README.md.

/// Success: the attempt completed and solved the task; specs identical; accounting valid.
pub const OK: i32 = 0;
/// The command ran and the answer is "no": not solved, specs differ, accounting invalid.
pub const NEGATIVE: i32 = 1;
/// Bad usage or bad input (flags, task, agent descriptor, manifest, observations file);
/// nothing was written.
pub const USAGE: i32 = 2;
/// The command could not do its work (I/O, git, internal error).
pub const FAILURE: i32 = 3;

/// An error the user caused with their input: maps to [`USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// The exit code for an error returned by a command.
pub fn code_for(e: &anyhow::Error) -> i32 {
    if e.chain().any(|c| {
        c.is::<InputError>()
            || c.is::<akbench_core::task::TaskError>()
            || c.is::<akbench_core::agent::AgentError>()
            || c.is::<akbench_core::manifest::ManifestError>()
            || c.is::<akbench_core::spec::ResolveError>()
            || c.is::<akbench_core::accounting::ObservationsError>()
    }) {
        USAGE
    } else {
        FAILURE
    }
}
