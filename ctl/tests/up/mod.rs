//! `akbench up` for the tests that need a real coordinator with workers (a private
//! PostgreSQL, the coordinator, one worker with one slot), stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// `akbench up` stopped (SIGINT: workers drain, PostgreSQL stops) when dropped.
pub struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        // SAFETY: signals our own child by its pid.
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, libc::SIGINT);
        }
        let _ = self.0.wait();
    }
}

/// Starts `akbench up` in `dir`; returns it and its coordinator's URL (read from what it
/// prints once it serves).
pub fn up(dir: &Path, agents: &Path) -> (Up, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .arg("up")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args([
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(["--workers", "1", "--slots", "1"])
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(agents)
        .arg("--out")
        .arg(dir.join("up-out"))
        .arg("--cache")
        .arg(dir.join("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let up = Up(child);
    let mut url = None;
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.trim().strip_prefix("coordinator") {
            url = rest.split_whitespace().next().map(str::to_string);
        }
        if line.contains("stops everything") {
            break;
        }
    }
    // Keep draining stdout so `up` never writes to a closed or full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let url = url.expect("akbench up printed its coordinator's address");
    (up, url)
}
