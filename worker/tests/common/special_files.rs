//! A FIFO and a character device given to a real binary as files to read, for the
//! coordinator's and the worker's `tests/bad_files.rs` (included by path): each start is
//! refused by name at once (never blocked: a start still running after [`PATIENCE`] is
//! killed and fails its case), and the nodes are left as they are.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a start may take before it counts as blocked (generous: never a timing claim).
pub const PATIENCE: Duration = Duration::from_secs(20);

fn mknod(p: &Path, mode: libc::mode_t, dev: libc::dev_t) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::mknod(c.as_ptr(), mode, dev) == 0 }
}

/// Makes `fifo` (a FIFO) and `zero` in `d`: /dev/zero's numbers (as root), else a link to
/// it, followed for the flags under test.
pub fn fifo_and_zero(d: &Path) {
    assert!(mknod(&d.join("fifo"), libc::S_IFIFO | 0o600, 0));
    if !mknod(&d.join("zero"), libc::S_IFCHR | 0o600, libc::makedev(1, 5)) {
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
    }
}

/// Runs `cmd` with no input and its output piped; (exit code, output), `None` for the code
/// when it was still running after [`PATIENCE`] and was killed.
pub fn run_patiently(cmd: &mut Command) -> (Option<i32>, String) {
    let mut child = cmd
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

/// Each case (arguments, words the message must hold), started by `run` in `d`, exits 1
/// at once naming them, without a panic; `fifo` and `zero` are still there afterwards.
pub fn assert_refused_at_once(
    d: &Path,
    cases: &[(&[&str], &[&str])],
    run: impl Fn(&[&str], &Path) -> (Option<i32>, String),
) {
    let mut failures = Vec::new();
    for (args, words) in cases {
        let (code, text) = run(args, d);
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
