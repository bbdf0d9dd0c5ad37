//! Hardened git invocations.
//!
//! Every call runs with system and global configuration ignored, hooks disabled, prompts
//! off, and only the file, https and ssh transports allowed. Callers put `--` before any
//! argument that is not a literal option.

use std::path::Path;
use std::process::{Command, Output};

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
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
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
        ]);
    c
}

/// Runs a prepared git command; returns its stdout on success.
pub fn run(mut cmd: Command) -> Result<Vec<u8>, GitError> {
    let args = cmd
        .get_args()
        .skip(14) // the hardening `-c` pairs
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
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

/// Runs git and returns trimmed stdout as a string.
pub fn run_text(cmd: Command) -> Result<String, GitError> {
    run(cmd).map(|o| String::from_utf8_lossy(&o).trim().to_string())
}
