//! What several of ctl's suites set up the same way: the examples' folder, where the viewer
//! tests keep their screenshots, and a local sweep (`akbench sweep --local`) of the examples'
//! tasks with its store, records and cache in a test's folder.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The repository's `examples/` (tasks and agents).
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// `<target>/tmp/view-screenshots/`, made when missing.
pub fn screenshots() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("view-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `akbench sweep <manifest> --local` of the examples' tasks with the agents of `agents`,
/// the run store, records and cache in `tmp` (`runs/`, `out/`, `cache/`); more arguments
/// may be added before it runs.
pub fn local_sweep(manifest: &Path, agents: &Path, tmp: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench"));
    cmd.arg("sweep")
        .arg(manifest)
        .arg("--local")
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(agents)
        .arg("--store-root")
        .arg(tmp.join("runs"))
        .arg("--out")
        .arg(tmp.join("out"))
        .arg("--cache")
        .arg(tmp.join("cache"));
    cmd
}

/// Starts `akbench view` as `cmd` holds it, its standard output piped, and reads the address
/// it prints on its first line: the child and its URL.
pub fn spawn_view(cmd: &mut Command) -> (Child, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (child, url)
}

/// The page reported no script errors (its `console-errors` block is there and hidden).
pub fn no_console_errors(dom: &str) {
    assert!(
        dom.contains("<pre id=\"console-errors\" hidden=\"\"></pre>"),
        "the page reported script errors: {}",
        dom.split("console-errors").nth(1).unwrap_or("")
    );
}
