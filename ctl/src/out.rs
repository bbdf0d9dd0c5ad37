//! Standard output of `akbench`: every line a command prints goes through [`print`] (the
//! `outln!` and `out!` macros), never `println!`, which panics when the write fails.
//!
//! A failed write ends the command: the error unwinds to [`crate::main_with_args`] as a
//! [`StdoutFailed`] payload (`resume_unwind`: no panic message, destructors run), which
//! prints one line on stderr and exits [`crate::exit::FAILURE`] (3). A closed pipe
//! (`akbench run list | head`) and any other error (`akbench run list > /dev/full`: no space
//! left on device) end the same way, with the error named.

use std::io::Write as _;

/// A write to standard output failed; carried by the unwind to `main_with_args`.
#[derive(Debug)]
pub struct StdoutFailed(pub std::io::Error);

impl StdoutFailed {
    /// The one line stderr gets.
    pub fn message(&self) -> String {
        let e = &self.0;
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            format!(
                "error: failed to write to standard output: the reader closed the pipe ({e}); \
                 the output is incomplete"
            )
        } else {
            format!(
                "error: failed to write to standard output: {e}; the output is incomplete; fix: \
                 send it somewhere it can be written (a file on a disk with free space, a pipe)"
            )
        }
    }
}

/// Writes `args` to standard output; a failure ends the command (see the module).
pub fn print(args: std::fmt::Arguments<'_>) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        std::panic::resume_unwind(Box::new(StdoutFailed(e)));
    }
}

/// Flushes standard output (what a last `out!` without a newline left buffered).
pub fn flush() -> Result<(), StdoutFailed> {
    std::io::stdout().lock().flush().map_err(StdoutFailed)
}

/// Ends the command for a failed write of a writer over standard output (a `BufWriter`, a
/// copy), as [`print`] does.
pub fn failed(e: std::io::Error) -> ! {
    std::panic::resume_unwind(Box::new(StdoutFailed(e)))
}
