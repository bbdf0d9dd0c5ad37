//! Who ended a graded process ([`EndedBy`]), as the worker's runtime recorded it in the
//! grade. The rule that turns it into a verdict lives in `grading::blame`, which re-exports
//! it under its old path. A leaf of `record`: it imports nothing from the crate.

use serde::{Deserialize, Serialize};

/// Who ended a graded process, as the worker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// The process tree itself: it exited, or died by a signal the harness did not send
    /// (a crash, or the code under test killing its own test process).
    Itself,
    /// The verifier's timeout (`verifier.timeout_sec`).
    Timeout,
    /// A limit of the grading run that the tree ran into (`disk_mb`: the disk watch;
    /// `memory_mb`: the kernel's kill at the run's own memory limit).
    Limit,
    /// The host, outside the run's limits: an out-of-memory kill while the run was under its
    /// own memory limit (or had none), i.e. the host ran out of memory.
    Host,
    /// The sandbox launcher (bubblewrap) failed before the graded program started.
    Launcher,
    /// The worker, shutting down or draining (a signal to the worker, its drain's grace
    /// running out).
    Shutdown,
    /// A cancel of the trial or its run.
    Cancel,
}

/// All enders, for table tests.
pub const ALL_ENDERS: [EndedBy; 7] = [
    EndedBy::Itself,
    EndedBy::Timeout,
    EndedBy::Limit,
    EndedBy::Host,
    EndedBy::Launcher,
    EndedBy::Shutdown,
    EndedBy::Cancel,
];

impl EndedBy {
    /// A sentence for the cause, naming who ended the graded process.
    pub fn describe(self) -> &'static str {
        match self {
            EndedBy::Itself => "the graded process tree ended itself",
            EndedBy::Timeout => "the harness stopped it at the verifier's timeout",
            EndedBy::Limit => "the harness stopped it at a limit of the grading run",
            EndedBy::Host => {
                "the host killed it outside the grading run's limits (the host ran out of memory)"
            }
            EndedBy::Launcher => "the sandbox launcher failed before the graded program started",
            EndedBy::Shutdown => "the worker was shutting down",
            EndedBy::Cancel => "the trial was cancelled",
        }
    }
}
