//! What the chaos check watches so that a setup that cannot run trials stops it at once
//! instead of a silent wait: whether a process it started has exited ([`exited`], without
//! reaping it), the tail of a process's log ([`log_tail`]), and the likely cause of a
//! failure named from the words of a log or an attempt's cause ([`likely_cause`], a table of
//! known start-up failures and their fixes).

use std::path::Path;
use std::process::Child;

/// How `child` ended (`exit status N` or `killed by signal N`) when it has exited, `None`
/// while it runs (or is stopped). The child is left unreaped: a later `wait` still works.
pub fn exited(child: &Child) -> Option<String> {
    // SAFETY: an all-zero siginfo_t is a valid value; waitid writes it for the call.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on the pid of a child this test spawned and has not reaped; WNOWAIT
    // leaves it waitable, WNOHANG returns at once.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            child.id(),
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled `info` (si_pid 0: no child changed state).
    if rc != 0 || unsafe { info.si_pid() } == 0 {
        return None;
    }
    // SAFETY: as above.
    let status = unsafe { info.si_status() };
    Some(if info.si_code == libc::CLD_EXITED {
        format!("exit status {status}")
    } else {
        format!("killed by signal {status}")
    })
}

/// The last `n` lines of the log at `path` (each cut to 400 characters), or why it cannot be
/// read.
pub fn log_tail(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Err(e) => format!("(failed to read {}: {e})", path.display()),
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            let tail: Vec<String> = lines[lines.len().saturating_sub(n)..]
                .iter()
                .map(|l| l.chars().take(400).collect())
                .collect();
            if tail.is_empty() {
                "(empty)".into()
            } else {
                tail.join("\n")
            }
        }
    }
}

/// Known failures of a setup that cannot run the chaos check's trials: words seen in a
/// worker's or coordinator's log or an attempt's cause, and the likely cause with its fix.
const CAUSES: &[(&[&str], &str)] = &[
    (
        &["`bwrap` is not installed", "bwrap: not found", "bwrap: command not found"],
        "bwrap not found: install bubblewrap (`apt-get install -y bubblewrap`)",
    ),
    (
        &["may not create user namespaces", "apparmor_restrict_unprivileged_userns"],
        "the sandbox cannot create user namespaces here: allow them (see the log line), or run the worker as root",
    ),
    (
        &["cgroup"],
        "the sandbox cannot make cgroups here: a writable cgroup v2 hierarchy is needed (see docs/agents.md, runtimes)",
    ),
    (
        &["the `sandbox` runtime cannot run here"],
        "the worker's sandbox check failed: see its log line for what is missing",
    ),
    (
        &["No module named pytest", "No module named 'pytest'", "pytest: not found"],
        "pytest not found: install python3-pytest (`apt-get install -y python3-pytest`)",
    ),
    (
        &["python3: not found", "python3: command not found", "No such file or directory: 'python3'"],
        "python3 not found: install python3",
    ),
    (
        &["git: not found", "git: command not found", "cannot start git"],
        "git not found or failing: install git, and check the workers' PATH",
    ),
    (
        &["Address already in use"],
        "an address the process needs is taken: free it, or run again (new ports are picked)",
    ),
    (
        &["unexpected argument", "invalid value", "Usage:"],
        "the process refused its command line (a flag it does not know: CHAOS_WORKER_ARGS?)",
    ),
    (
        &["database", "PostgreSQL", "postgres"],
        "the coordinator cannot use its PostgreSQL: see the log",
    ),
];

/// The likely cause of a failure from `text` (a log tail, attempts' causes): the first known
/// failure whose words it holds, else a pointer to the text itself.
pub fn likely_cause(text: &str) -> &'static str {
    CAUSES
        .iter()
        .find(|(words, _)| words.iter().any(|w| text.contains(w)))
        .map_or(
            "not one the check knows: read the log above",
            |(_, cause)| cause,
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_failures_name_their_fix() {
        for (text, want) in [
            (
                // The worker's own start-up refusal (worker/src/runtime/bwrap.rs, preflight.rs).
                "ERROR failed to start: the `sandbox` runtime cannot run here; bubblewrap is missing (probe: `bwrap` is not installed; fix: `apt-get install -y bubblewrap`)",
                "bwrap not found",
            ),
            ("ModuleNotFoundError: No module named 'pytest'", "pytest not found"),
            ("test.sh: line 14: python3: command not found", "python3 not found"),
            (
                "infrastructure_error: failed to run git init --quiet --bare -- /tmp/x: cannot start git: No such file or directory (os error 2)",
                "git not found",
            ),
            ("error: unexpected argument '--bogus' found", "the process refused its command line"),
            ("something else entirely", "not one the check knows"),
        ] {
            assert!(
                likely_cause(text).starts_with(want),
                "{text:?}: {}",
                likely_cause(text)
            );
        }
    }

    #[test]
    fn a_running_child_has_not_exited_and_an_ended_one_has_and_stays_waitable() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        assert_eq!(exited(&sleeper), None);
        sleeper.kill().unwrap();
        let mut quick = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        // Polls without sleeping a fixed time: the child ends on its own.
        while exited(&quick).is_none() {
            std::thread::yield_now();
        }
        assert_eq!(exited(&quick).as_deref(), Some("exit status 3"));
        assert_eq!(quick.wait().unwrap().code(), Some(3), "still waitable");
        let killed = loop {
            if let Some(how) = exited(&sleeper) {
                break how;
            }
            std::thread::yield_now();
        };
        assert_eq!(killed, format!("killed by signal {}", libc::SIGKILL));
        sleeper.wait().unwrap();
    }
}
