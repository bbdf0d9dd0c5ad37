//! The real `akbench-worker` given a FIFO or a device as a file to read: refused by name
//! at once, exit 1 ("could not start"), the node left as it is (docs/limits.md, "Reads").

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a start may take before it counts as blocked (generous: never a timing claim).
const PATIENCE: Duration = Duration::from_secs(20);

fn mknod(p: &Path, mode: libc::mode_t, dev: libc::dev_t) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::mknod(c.as_ptr(), mode, dev) == 0 }
}

/// Runs the worker in `cwd`; (exit code, output), `None` for the code when killed.
fn worker(args: &[&str], cwd: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_akbench-worker"))
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
        .env_remove("AKBENCH_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (code, text)
}

#[test]
fn a_fifo_or_device_as_token_or_ca_file_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    assert!(mknod(&d.join("fifo"), libc::S_IFIFO | 0o600, 0));
    // /dev/zero's numbers (as root); else a link to it, followed for these flags.
    if !mknod(&d.join("zero"), libc::S_IFCHR | 0o600, libc::makedev(1, 5)) {
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
    }
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
    let mut failures = Vec::new();
    for (args, words) in cases {
        let (code, text) = worker(args, d);
        let missing: Vec<_> = words.iter().filter(|w| !text.contains(**w)).collect();
        if code != Some(1) || !missing.is_empty() || text.contains("panicked") {
            failures.push(format!(
                "{args:?}: exit {code:?} (None: blocked), missing {missing:?}: {text}"
            ));
        }
    }
    let still = |n: &str| {
        std::fs::symlink_metadata(d.join(n))
            .map(|m| m.file_type())
            .is_ok_and(|t| t.is_fifo() || t.is_char_device() || t.is_symlink())
    };
    assert!(still("fifo") && still("zero"), "the nodes are still there");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
