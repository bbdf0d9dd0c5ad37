//! `akbench run single`: one trial, locally, through the worker's orchestrator.

use crate::cli::SingleArgs;

/// Runs one trial.
pub fn run(args: SingleArgs) -> anyhow::Result<i32> {
    let _ = args;
    anyhow::bail!("failed to run: `run single` is being built")
}
