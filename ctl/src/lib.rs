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
    restore_sigpipe();
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
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::code_for(&e)
        }
    }
}

/// Restores the default SIGPIPE action, so `akbench ... | head` ends quietly instead of
/// panicking on a closed pipe (Rust ignores SIGPIPE by default).
fn restore_sigpipe() {
    // SAFETY: setting a signal disposition to its default; no handler code is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
