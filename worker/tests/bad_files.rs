//! The real `akbench-worker` given a FIFO or a device as a file to read: refused by name
//! at once, exit 1 ("could not start"), the node left as it is (docs/limits.md, "Reads").

#[path = "common/special_files.rs"]
mod special_files;

use special_files::{assert_refused_at_once, fifo_and_zero, run_patiently};
use std::path::Path;
use std::process::Command;

/// Runs the worker in `cwd`; (exit code, output), `None` for the code when killed.
fn worker(args: &[&str], cwd: &Path) -> (Option<i32>, String) {
    run_patiently(
        Command::new(env!("CARGO_BIN_EXE_akbench-worker"))
            .args([
                "--allow-unsandboxed",
                "--tasks-root",
                ".",
                "--agents-root",
                ".",
            ])
            .args(args)
            .current_dir(cwd)
            .env_remove("AKBENCH_COORDINATOR")
            .env_remove("AKBENCH_TOKEN"),
    )
}

#[test]
fn a_fifo_or_device_as_token_or_ca_file_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fifo_and_zero(d);
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &[
                "--coordinator",
                "http://127.0.0.1:9",
                "--token-file",
                "fifo",
            ],
            &["--token-file", "fifo", "FIFO"],
        ),
        (
            &[
                "--coordinator",
                "http://127.0.0.1:9",
                "--token-file",
                "zero",
            ],
            &["--token-file", "zero", "character device"],
        ),
        (
            &["--coordinator", "https://127.0.0.1:9", "--ca-file", "fifo"],
            &["--ca-file", "fifo", "FIFO"],
        ),
        (
            &["--coordinator", "https://127.0.0.1:9", "--ca-file", "zero"],
            &["--ca-file", "zero", "character device"],
        ),
    ];
    assert_refused_at_once(d, &cases, worker);
}
