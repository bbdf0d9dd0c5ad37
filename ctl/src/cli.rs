//! Command-line definitions.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// akbench runs coding-agent benchmarks.
#[derive(Debug, Parser)]
#[command(name = "akbench", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan, run and account for runs.
    #[command(subcommand)]
    Run(RunCommand),
}

/// `akbench run ...`
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Run one trial locally: prepare, execute, evaluate, record. No server needed.
    Single(SingleArgs),
}

/// `akbench run single`.
#[derive(Debug, Args)]
pub struct SingleArgs {
    /// Task id (a folder under --tasks-root) or a path to a task folder.
    pub task: String,
    /// Agent name (a descriptor `<name>.toml` under --agents-root).
    #[arg(long)]
    pub agent: String,
    /// Folder holding the tasks.
    #[arg(long, default_value = "examples/tasks", env = "AKBENCH_TASKS_ROOT")]
    pub tasks_root: PathBuf,
    /// Folder holding the agent descriptors.
    #[arg(long, default_value = "examples/agents", env = "AKBENCH_AGENTS_ROOT")]
    pub agents_root: PathBuf,
    /// Where run records and artifacts are written.
    #[arg(long, default_value = "out", env = "AKBENCH_OUT")]
    pub out: PathBuf,
    /// Print one JSON object instead of human output.
    #[arg(long)]
    pub json: bool,
    /// Do not apply the task's mutation (the pristine repository).
    #[arg(long)]
    pub no_mutation: bool,
    /// Retries for infrastructure errors only (agent failures are never retried).
    #[arg(long, default_value_t = 0)]
    pub infrastructure_retries: u32,
    /// Keep the worktree on disk after the attempt.
    #[arg(long)]
    pub keep_workspace: bool,
    /// Override the task's agent timeout, in seconds.
    #[arg(long)]
    pub agent_timeout: Option<f64>,
    /// Per-host cache of bare mirrors (default: $XDG_CACHE_HOME/akbench or ~/.cache/akbench).
    #[arg(long, env = "AKBENCH_CACHE")]
    pub cache: Option<PathBuf>,
}
