//! akbench-worker: the orchestrator that runs one attempt, and the pieces it drives.
//!
//! - [`git`]: hardened git invocations.
//! - [`mirror`]: the per-host cache of bare mirrors, safe under concurrent attempts.
//! - [`baseline`]: the per-host cache of baseline repositories (pinned tree + mutation, one
//!   parentless commit, nothing else), built once per task release.
//! - [`workspace`]: private copies of the baseline, fingerprints and the agent's diff.
//! - [`process`]: the direct runtime: a child in its own process group, reduced
//!   environment, capped output, SIGTERM then SIGKILL, no survivors.
//! - [`runtime`]: `direct` or `sandbox` (bubblewrap, cgroups, forwarded endpoints): what
//!   the agent and the evaluator can see, reach and use.
//! - [`root_path`]: a path inside an image's root folder as the image sees it.
//! - [`adapters`]: the agent registry; the orchestrator contains no agent-specific code.
//! - [`scrub`]: credential values scrubbed from stored files in constant memory, and the
//!   agent's `/logs` collected (no links, capped).
//! - [`evaluator`]: hidden tests at EVALUATING, reward files and JUnit reports.
//! - [`orchestrator`]: drives the lifecycle of attempts and writes `run_record.json`.
//! - [`dial`]: how clients reach the coordinator (TLS, CA file, the plaintext-token rule).
//! - [`daemon`]: the worker daemon (`akbench-worker`): the coordinator's session client.

pub mod adapters;
pub mod agents;
pub mod baseline;
pub mod daemon;
pub mod dial;
pub mod dial_probe;
pub mod evaluator;
pub mod git;
pub mod image;
pub mod mirror;
pub mod orchestrator;
pub mod process;
pub mod provenance;
pub mod regrade;
pub mod root_path;
pub mod runtime;
pub mod scrub;
pub mod spread;
pub mod task_check;
pub mod trial;
pub mod workspace;
pub mod world_env;
