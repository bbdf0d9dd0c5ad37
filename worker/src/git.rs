//! Hardened git invocations.
//!
//! Every call runs with system and global configuration ignored, hooks disabled, replace
//! objects ignored, no attributes file outside the repository, no fsmonitor, no automatic gc,
//! prompts off, and only the file, https and ssh transports allowed. Callers put `--` before
//! any argument that is not a literal option. [`git_at`] also names the repository and work
//! tree explicitly, so git never discovers a repository on its own.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The `-c` options every call carries (pairs of `-c`, `key=value`).
const HARDENING: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.excludesFile=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "protocol.allow=never",
    "-c",
    "protocol.file.allow=always",
    "-c",
    "protocol.https.allow=always",
    "-c",
    "protocol.ssh.allow=always",
    "-c",
    "advice.detachedHead=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "init.defaultBranch=main",
];

/// A git command that failed.
#[derive(Debug, thiserror::Error)]
#[error("failed to run git {args}: {detail}")]
pub struct GitError {
    /// The arguments, for the message.
    pub args: String,
    /// stderr or the spawn error.
    pub detail: String,
}

/// A git command builder with the hardening applied.
pub fn git(dir: Option<&Path>) -> Command {
    let mut c = Command::new("git");
    if let Some(d) = dir {
        c.current_dir(d);
    }
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOW_PROTOCOL", "file:https:ssh")
        .env("GIT_AUTHOR_NAME", "akbench")
        .env("GIT_AUTHOR_EMAIL", "akbench@localhost")
        .env("GIT_COMMITTER_NAME", "akbench")
        .env("GIT_COMMITTER_EMAIL", "akbench@localhost")
        .env("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_CONFIG")
        .env_remove("GIT_CONFIG_COUNT")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .env_remove("GIT_EXEC_PATH")
        .args(HARDENING);
    c
}

/// A hardened git command on the repository `git_dir` (and the work tree `work_tree`, when
/// given), named explicitly so no repository is discovered from the current directory.
pub fn git_at(git_dir: &Path, work_tree: Option<&Path>) -> Command {
    let mut c = git(Some(work_tree.unwrap_or(git_dir)));
    c.env("GIT_DIR", git_dir);
    if let Some(w) = work_tree {
        c.env("GIT_WORK_TREE", w);
    }
    c
}

/// Runs a prepared git command; returns its stdout on success.
pub fn run(mut cmd: Command) -> Result<Vec<u8>, GitError> {
    let args = args_of(&cmd);
    let out: Output = cmd.output().map_err(|e| GitError {
        args: args.clone(),
        detail: format!("cannot start git: {e}"),
    })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(GitError {
            args,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// What [`run_capped`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capped {
    /// The whole output, at most the cap.
    Whole(Vec<u8>),
    /// The output went over the cap: git was stopped after `read` bytes (more than the
    /// cap) and nothing was kept.
    Over {
        /// Bytes read before git was stopped.
        read: u64,
    },
}

/// Runs git keeping at most `cap` bytes of its stdout: output past the cap stops git (a
/// diff of gigabytes is never held in memory); a failure of git under the cap is an error.
pub fn run_capped(mut cmd: Command, cap: u64) -> Result<Capped, GitError> {
    use std::io::Read;
    let args = args_of(&cmd);
    let fail = |detail: String| GitError {
        args: args.clone(),
        detail,
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start git: {e}")))?;
    let mut stderr = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let mut stdout = child.stdout.take().expect("piped");
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut over = false;
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() as u64 > cap {
                    over = true;
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!("failed to read git's output: {e}")));
            }
        }
    }
    if over {
        let _ = child.kill();
        drop(stdout);
        let _ = child.wait();
        let _ = err_reader.join();
        return Ok(Capped::Over {
            read: out.len() as u64,
        });
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("failed to wait for git: {e}")))?;
    let err = err_reader.join().unwrap_or_default();
    if status.success() {
        Ok(Capped::Whole(out))
    } else {
        Err(fail(String::from_utf8_lossy(&err).trim().to_string()))
    }
}

/// Runs git and returns trimmed stdout as a string.
pub fn run_text(cmd: Command) -> Result<String, GitError> {
    run(cmd).map(|o| String::from_utf8_lossy(&o).trim().to_string())
}

/// Runs a prepared git command with `input` on its stdin and its stdout sent to `stdout`.
pub fn run_with_input(mut cmd: Command, input: &[u8], stdout: Stdio) -> Result<Vec<u8>, GitError> {
    let args = args_of(&cmd);
    let fail = |detail: String| GitError {
        args: args.clone(),
        detail,
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start git: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input)
            .map_err(|e| fail(format!("cannot write to git: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("cannot wait for git: {e}")))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(fail(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// The git arguments of `cmd` after the hardening options, for error messages.
fn args_of(cmd: &Command) -> String {
    cmd.get_args()
        .skip(HARDENING.len())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_capped_keeps_output_up_to_the_cap_and_stops_past_it() {
        let mut c = git(None);
        c.arg("version");
        let full = run(c).expect("git version runs");
        let n = full.len() as u64;
        for (cap, whole) in [(n, true), (n + 100, true), (n - 1, false), (0, false)] {
            let mut c = git(None);
            c.arg("version");
            match run_capped(c, cap).unwrap() {
                Capped::Whole(out) => {
                    assert!(whole, "cap {cap} of {n}");
                    assert_eq!(out, full);
                }
                Capped::Over { read } => {
                    assert!(!whole, "cap {cap} of {n}");
                    assert!(read > cap && read <= n, "read {read}, cap {cap}");
                }
            }
        }
        // A git failure under the cap is an error naming git's message.
        let mut c = git(None);
        c.arg("no-such-subcommand");
        let e = run_capped(c, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("no-such-subcommand"), "{e}");
    }
}
