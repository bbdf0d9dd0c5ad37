//! The real `akbench-coordinator` given a FIFO or a device as a file to read: refused by
//! name at once (before the database is reached), exit 1, the node left as it is
//! (docs/limits.md, "Reads").

#[path = "../../worker/tests/common/special_files.rs"]
mod special_files;

use special_files::{assert_refused_at_once, fifo_and_zero, run_patiently};
use std::path::Path;
use std::process::Command;

/// Runs the coordinator in `cwd`; (exit code, output), `None` for the code when killed.
fn coordinator(args: &[&str], cwd: &Path) -> (Option<i32>, String) {
    run_patiently(
        Command::new(env!("CARGO_BIN_EXE_akbench-coordinator"))
            .args([
                "--database-url",
                "postgres://akbench@127.0.0.1:9/none",
                "--grpc-listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
            ])
            .args(args)
            .current_dir(cwd)
            .env_remove("AKBENCH_DATABASE_URL"),
    )
}

#[test]
fn a_fifo_or_device_as_token_or_tls_file_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fifo_and_zero(d);
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--token-file", "fifo"], &["token file", "fifo", "FIFO"]),
        (
            &["--token-file", "zero"],
            &["token file", "zero", "character device"],
        ),
        (
            &["--tls-cert", "fifo", "--tls-key", "zero"],
            &["fifo", "FIFO"],
        ),
        (
            &["--tls-cert", "zero", "--tls-key", "zero"],
            &["zero", "character device"],
        ),
    ];
    assert_refused_at_once(d, &cases, coordinator);
}
