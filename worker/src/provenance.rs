//! Who runs an attempt and with what, observed where it runs: the worker's id and host, the
//! adapter that resolved the descriptor and its version, and the agent CLI's own answer to
//! `--version` (asked just before the agent is launched, with the agent's environment).
//! Nothing here is copied from the plan.

use crate::process::{spawn, CancelToken, ProcessSpec};
use akbench_core::record::Provenance;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The worker id of attempts run in the `akbench` process itself (`run single`,
/// `sweep --local`).
pub const LOCAL_WORKER: &str = "local";

/// How long an agent CLI gets to print its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// The longest version line kept (characters).
const VERSION_MAX: usize = 200;

/// akbench's version: the version of every (built-in) adapter.
pub fn akbench_version() -> String {
    format!("akbench {}", env!("CARGO_PKG_VERSION"))
}

/// This host's name (`gethostname`), `unknown` when it has none.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success (and
    // we stop at the first NUL or the end).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if name.is_empty() {
        "unknown".into()
    } else {
        name
    }
}

/// The provenance of an attempt run by `worker_id` on this host, before any adapter resolved.
pub fn here(worker_id: &str) -> Provenance {
    Provenance {
        worker_id: worker_id.to_string(),
        host: hostname(),
        ..Provenance::default()
    }
}

/// Runs `argv` (an agent CLI's `--version`) in `cwd` with exactly `env`, its output in
/// `scratch`; returns the first non-empty line of its stdout (else stderr), or
/// `unknown: <why>` when it printed none, failed or hung.
pub fn cli_version(
    argv: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    scratch: &Path,
    cancel: &CancelToken,
) -> String {
    let out = scratch.join("agent-version.stdout");
    let err = scratch.join("agent-version.stderr");
    let spec = ProcessSpec {
        argv: argv.to_vec(),
        cwd: cwd.to_path_buf(),
        env: env.clone(),
        stdout_path: out.clone(),
        stderr_path: err.clone(),
        output_cap: 64 * 1024,
        timeout: VERSION_TIMEOUT,
        grace: Duration::from_secs(1),
        tag: format!("version-{}", uuid::Uuid::now_v7()),
        hooks: Default::default(),
    };
    let end = match spawn(spec) {
        Ok(running) => running.wait(cancel),
        Err(e) => return format!("unknown: {e}"),
    };
    let first_line = |p: &Path| {
        akbench_core::bounded_read::ReadKind::Log
            .read_text(p, akbench_core::bounded_read::Links::Refuse)
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| l.chars().take(VERSION_MAX).collect::<String>())
    };
    let line = first_line(&out).or_else(|| first_line(&err));
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&err);
    match line {
        _ if end.timed_out => format!(
            "unknown: `{}` did not answer within {}s",
            argv.join(" "),
            VERSION_TIMEOUT.as_secs()
        ),
        Some(l) if end.exit_code == Some(0) => l,
        Some(l) => format!(
            "unknown: `{}` exited {:?}: {l}",
            argv.join(" "),
            end.exit_code
        ),
        None => format!(
            "unknown: `{}` printed nothing (exit {:?})",
            argv.join(" "),
            end.exit_code
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(script: &str) -> String {
        let tmp = tempfile::tempdir().unwrap();
        let env: BTreeMap<String, String> = [(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        )]
        .into();
        cli_version(
            &["sh".into(), "-c".into(), script.into()],
            tmp.path(),
            &env,
            tmp.path(),
            &CancelToken::new(),
        )
    }

    #[test]
    fn the_first_line_of_the_answer_is_the_version() {
        assert_eq!(
            run("echo; echo '  2.1.3 (Claude Code)  '; echo more"),
            "2.1.3 (Claude Code)"
        );
        assert_eq!(run("echo 'codex-cli 0.46.0' >&2"), "codex-cli 0.46.0");
        let failed = run("echo 'unknown option' >&2; exit 2");
        assert!(failed.starts_with("unknown: "), "{failed}");
        assert!(failed.contains("unknown option"), "{failed}");
        let silent = run("exit 0");
        assert!(silent.contains("printed nothing"), "{silent}");
        assert_eq!(run("printf '%0300d' 0").len(), VERSION_MAX);
    }

    #[test]
    fn here_names_the_worker_and_the_host() {
        let p = here("w-1");
        assert_eq!(p.worker_id, "w-1");
        assert!(!p.host.is_empty());
        assert_eq!(p.adapter, None);
    }
}
