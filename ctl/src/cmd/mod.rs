//! One module per command.

pub mod single;

use crate::cli::{Cli, Command, RunCommand};

/// Runs the parsed command and returns its exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Run(RunCommand::Single(args)) => single::run(args),
    }
}
