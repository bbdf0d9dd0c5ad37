//! akbench, the command-line client.
//!
//! `cli` holds the clap definitions; each command lives in its own module under `cmd`;
//! `remote` turns the `run` commands into calls to a coordinator (`--coordinator URL`).
//! Expected errors map to documented exit codes (see [`exit`]); `main.rs` only calls
//! [`main_with_args`].

pub mod cli;
pub mod cmd;
pub mod embedded;
pub mod exit;
pub mod remote;
pub mod view;

use clap::Parser;

/// Runs the CLI with `args` (argv including the program name) and returns the exit code.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            restore_sigpipe();
            let _ = e.print();
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    // Commands that serve (a coordinator, workers, PostgreSQL connections, agents' pipes, a
    // web server) keep SIGPIPE ignored: a peer closing a socket or pipe is an error to handle
    // there, never a reason for the whole process (and its PostgreSQL) to die unstopped.
    if !matches!(
        cli.command,
        cli::Command::Up(_) | cli::Command::Sweep(_) | cli::Command::View(_)
    ) {
        restore_sigpipe();
    }
    let telemetry = init_telemetry();
    let span = command_span(&cli);
    let code = match span.in_scope(|| cmd::dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::code_for(&e)
        }
    };
    drop(span);
    telemetry.shutdown();
    code
}

/// Logs (`RUST_LOG`, off by default, to stderr) and, when `OTEL_EXPORTER_OTLP_ENDPOINT` is
/// set, span export (see `akbench_telemetry`).
fn init_telemetry() -> akbench_telemetry::Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    akbench_telemetry::init(akbench_telemetry::Logs {
        service_name: "akbench",
        json: false,
        filter,
        ansi: false,
        stderr: true,
        capture: None,
    })
}

/// The root span of the command (its trace continues into the coordinator: remote calls
/// carry its `traceparent`). Disabled when nothing is exported.
fn command_span(cli: &cli::Cli) -> tracing::Span {
    if !akbench_telemetry::enabled() {
        return tracing::Span::none();
    }
    let name = match &cli.command {
        cli::Command::Run(rc) => format!("run {}", remote::commands::name(rc)),
        cli::Command::Sweep(_) => "sweep".into(),
        cli::Command::Up(_) => "up".into(),
        cli::Command::Certs(_) => "certs".into(),
        cli::Command::View(_) => "view".into(),
    };
    tracing::info_span!(
        "akbench",
        otel.name = %format!("akbench {name}"),
        otel.kind = "client",
        process.command = %name,
    )
}

/// Restores the default SIGPIPE action, so `akbench ... | head` ends quietly instead of
/// panicking on a closed pipe (Rust ignores SIGPIPE by default).
fn restore_sigpipe() {
    // SAFETY: setting a signal disposition to its default; no handler code is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
