//! One module per command, and [`dispatch`], the top layer: it imports the command modules
//! and `remote::commands`; nothing in the crate but `lib.rs` imports it. Helpers the commands
//! share live in [`shared`], never here.

pub mod agents;
pub mod aggregate;
pub mod certs;
pub mod compare;
pub mod diff;
pub mod evaluate;
pub mod harbor_export;
pub mod harbor_import;
pub mod images;
pub mod inspect;
pub mod list;
pub mod plan;
pub mod reconcile;
pub mod report;
pub mod report_html;
pub mod shared;
pub mod single;
pub mod sweep;
pub mod task_check;
pub mod trajectory;
pub mod up;
pub mod view;

use crate::cli::{Cli, Command, RunCommand};

/// Runs the parsed command and returns its exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let command = match crate::remote::commands::dispatch(&cli.remote, cli.command) {
        crate::remote::commands::Dispatch::Done(result) => return result,
        crate::remote::commands::Dispatch::Local(command) => command,
    };
    // `up` and `sweep` serve a coordinator and local workers in this one process (`--local`:
    // every trial): the open-files limit `akbench-coordinator` and `akbench-worker` raise
    // (a socket per worker session and per PostgreSQL connection, descriptors per attempt).
    if matches!(command, Command::Up(_) | Command::Sweep(_)) {
        akbench_telemetry::raise_open_files_limit();
    }
    match command {
        Command::Run(RunCommand::Single(args)) => single::run(args, true),
        Command::Run(RunCommand::Execute(args)) => single::run(args, false),
        Command::Run(RunCommand::Evaluate(args)) => evaluate::run(args),
        Command::Run(RunCommand::Aggregate(args)) => aggregate::run(args),
        Command::Sweep(args) if args.local => sweep::local::run(args),
        Command::Sweep(args) => sweep::embedded::run(args),
        Command::Up(args) => up::run(args),
        Command::Certs(args) => certs::run(args),
        Command::View(args) => view::run(args, &cli.remote),
        Command::Task(crate::cli::TaskCommand::Check(args)) => task_check::run(args),
        Command::Image(crate::cli::ImageCommand::Build(args)) => images::build(args),
        Command::Agent(crate::cli::AgentCommand::List(args)) => agents::list(args),
        Command::Agent(crate::cli::AgentCommand::Install(args)) => agents::install(args),
        Command::Run(RunCommand::Plan(args)) => plan::run(args),
        Command::Run(RunCommand::Inspect(args)) => inspect::run(args),
        Command::Run(RunCommand::Diff(args)) => diff::run(args),
        Command::Run(RunCommand::Reconcile(args)) => reconcile::run(args),
        Command::Run(RunCommand::Compare(args)) => compare::run(args, &cli.remote),
        Command::Run(RunCommand::List(args)) => list::run(args, &cli.remote),
        Command::Run(RunCommand::ExportHarbor(args)) => harbor_export::run(args),
        Command::Run(RunCommand::ImportHarbor(args)) => harbor_import::run(args),
        Command::Run(RunCommand::Report(args)) => report::run(args, &cli.remote),
        Command::Run(RunCommand::Trajectory(args)) => trajectory::run(args),
        // What is left needs a coordinator (`Reach::Remote` in remote::commands::describe,
        // the one table of where each subcommand runs).
        Command::Run(rc) => Err(crate::remote::commands::needs_coordinator(&rc)),
    }
}
