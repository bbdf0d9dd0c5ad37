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
            || c.is::<akbench_core::bounded_read::ReadError>()
            || c.downcast_ref::<akbench_core::output::OutputError>()
                .is_some_and(|o| o.is_refusal())
    }) {
        USAGE
    } else {
        FAILURE
    }
}

/// No verdict on the agent (`run single`, `run execute`, `run evaluate`): the trial ended
/// `infrastructure_error`, `invalid_configuration`, `evaluation_error` or `cancelled`, not
/// by the agent's doing; distinct from [`NEGATIVE`] so that a script tells a broken
/// environment from an agent's "no".
pub const NO_VERDICT: i32 = 4;

/// The exit code of a trial's answer (`akbench_core::grading::answer`): the one mapping for
/// `run single`, `run execute` and `run evaluate`.
pub fn of_answer(a: akbench_core::grading::Answer) -> i32 {
    use akbench_core::grading::Answer;
    match a {
        Answer::Yes => OK,
        Answer::No => NEGATIVE,
        Answer::NoVerdict => NO_VERDICT,
    }
}
