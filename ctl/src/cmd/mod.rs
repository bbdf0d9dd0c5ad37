//! One module per command.

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
    let command = match crate::remote::dispatch(&cli.remote, cli.command) {
        crate::remote::Dispatch::Done(result) => return result,
        crate::remote::Dispatch::Local(command) => command,
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
        Command::Run(rc) => Err(crate::remote::needs_coordinator(&rc)),
    }
}

/// The variable that fixes the instant a run is planned at (RFC 3339, e.g.
/// `2026-03-04T05:06:07Z`): run keys carry the planning date, so scripted replays and tests
/// that plan twice get keys that do not depend on when they ran (across UTC midnight).
pub const PLAN_TIME_ENV: &str = "AKBENCH_PLAN_TIME";

/// The clock planning reads: [`PLAN_TIME_ENV`] when set, else the system clock. A value that
/// is not an RFC 3339 instant is bad input (exit 2) naming the variable.
pub(crate) fn planning_clock() -> anyhow::Result<Box<dyn akbench_core::clock::Clock>> {
    match std::env::var(PLAN_TIME_ENV) {
        Ok(v) if !v.is_empty() => {
            let at = chrono::DateTime::parse_from_rfc3339(&v).map_err(|e| {
                crate::exit::InputError(format!(
                    "failed to read {PLAN_TIME_ENV}={v:?}: {e}; fix: give an RFC 3339 instant such as 2026-03-04T05:06:07Z, or unset it"
                ))
            })?;
            Ok(Box::new(akbench_core::clock::ManualClock::new(
                at.with_timezone(&chrono::Utc),
            )))
        }
        _ => Ok(Box::new(akbench_core::clock::SystemClock)),
    }
}

/// Finds a stored run; an unknown key or UUID is bad input (exit 2).
pub(crate) fn find_run(
    store: &akbench_core::evidence::EvidenceStore,
    run: &str,
) -> anyhow::Result<akbench_core::evidence::StoredRun> {
    use akbench_core::evidence::EvidenceError;
    store.find(run).map_err(|e| match e {
        EvidenceError::NotFound { .. } => crate::exit::InputError(e.to_string()).into(),
        other => anyhow::Error::new(other),
    })
}

/// Finds a stored run's spec and ready plan head (trials not read); an unknown key or UUID
/// is bad input (exit 2).
pub(crate) fn find_head(
    store: &akbench_core::evidence::EvidenceStore,
    run: &str,
) -> anyhow::Result<akbench_core::evidence::StoredHead> {
    use akbench_core::evidence::EvidenceError;
    store.find_head(run).map_err(|e| match e {
        EvidenceError::NotFound { .. } => crate::exit::InputError(e.to_string()).into(),
        other => anyhow::Error::new(other),
    })
}

/// Prints `value` as one JSON document.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Renders a summary map as `a=1 b=2`.
pub(crate) fn counts<K: std::fmt::Display, V: std::fmt::Display>(
    m: &std::collections::BTreeMap<K, V>,
) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
