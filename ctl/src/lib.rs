//! akbench, the command-line client.
//!
//! `cli` holds the clap definitions; each command lives in its own module under `cmd`;
//! `remote` turns the `run` commands into calls to a coordinator (`--coordinator URL`).
//! Expected errors map to documented exit codes (see [`exit`]); `main.rs` only calls
//! [`main_with_args`].

/// `println!` for `akbench`'s standard output: a failed write ends the command with one line
/// on stderr, never a panic (see [`out`]).
macro_rules! outln {
    () => {
        $crate::out::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for `akbench`'s standard output (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::print(format_args!($($arg)*))
    };
}

pub mod cli;
pub mod cmd;
pub mod embedded;
pub mod exit;
pub mod out;
pub mod remote;
pub mod view;

use clap::Parser;
use std::io::Write as _;

/// Runs the CLI with `args` (argv including the program name) and returns the exit code.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // SIGPIPE stays ignored (Rust's default) for every command: a peer that closes a socket
    // (an http:// URL sent to a TLS port) or a reader that closes stdout (`| head`) is an
    // error with a message and exit 3, never a silent death by signal.
    report_closed_stdout();
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    let telemetry = init_telemetry();
    let span = command_span(&cli);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        span.in_scope(|| cmd::dispatch(cli))
    }));
    let mut code = match ran {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            exit::code_for(&e)
        }
        Err(payload) => match payload.downcast::<out::StdoutFailed>() {
            Ok(failed) => {
                let _ = writeln!(std::io::stderr(), "{}", failed.message());
                exit::FAILURE
            }
            // Already reported by the panic hook (a closed stdout, or a bug).
            Err(_) => exit::FAILURE,
        },
    };
    // What a last `out!` left buffered: its failure is the command's too.
    if let Err(failed) = out::flush() {
        if code != exit::FAILURE {
            let _ = writeln!(std::io::stderr(), "{}", failed.message());
            code = exit::FAILURE;
        }
    }
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
        cli::Command::Task(_) => "task check".into(),
        cli::Command::Image(_) => "image build".into(),
        cli::Command::Agent(cli::AgentCommand::List(_)) => "agent list".into(),
        cli::Command::Agent(cli::AgentCommand::Install(_)) => "agent install".into(),
    };
    tracing::info_span!(
        "akbench",
        otel.name = %format!("akbench {name}"),
        otel.kind = "client",
        process.command = %name,
    )
}

/// Makes a write to a closed standard output by a `println!` left in a dependency (it
/// panics on `EPIPE` while SIGPIPE is ignored; akbench's own output goes through [`out`])
/// end the command with one line saying so on stderr (and exit 3, from [`main_with_args`])
/// instead of a panic message; other panics keep the default report.
fn report_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_closed_stdout(payload) {
            let _ = writeln!(
                std::io::stderr(),
                "error: failed to write to standard output: the reader closed the pipe (os \
                 error 32); the output is incomplete"
            );
        } else {
            default(info);
        }
    }));
}

/// Whether a panic message is `println!`'s on a closed pipe.
fn is_closed_stdout(message: &str) -> bool {
    message.starts_with("failed printing to stdout")
        && (message.contains("Broken pipe") || message.contains("os error 32"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_closed_stdout_is_reported_as_one() {
        for (message, want) in [
            ("failed printing to stdout: Broken pipe (os error 32)", true),
            (
                "failed printing to stdout: No space left on device (os error 28)",
                false,
            ),
            ("index out of bounds", false),
            ("", false),
        ] {
            assert_eq!(super::is_closed_stdout(message), want, "{message}");
        }
    }
}
