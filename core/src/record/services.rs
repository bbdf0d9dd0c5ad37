//! What a run record keeps of an interactive world's sidecar services
//! ([`crate::task::world`]): for each service started for an attempt, its image by digest,
//! when it started, when its `depends_on` condition was met, how it ended and where its
//! program's output is kept (beside the agent's, bounded the same way). The rule
//! that words an ending is [`ended`], table-tested.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One sidecar service of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceFacts {
    /// The compose service name.
    pub name: String,
    /// The image it ran, pinned (`registry/repository@sha256:...`).
    pub image: String,
    /// When its program was started.
    pub started_at: DateTime<Utc>,
    /// Milliseconds from its start until a service depending on it saw its condition met
    /// (healthy, or completed); absent when nothing waited on more than its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_ms: Option<u64>,
    /// How it ended ([`ended`]); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// Its program's stdout, relative to the record's folder like the agent's
    /// (`a1/services/NAME.stdout.log`); absent when it was not kept (a reference
    /// solution's world).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_path: Option<String>,
    /// Its program's stderr (`a1/services/NAME.stderr.log`), as `stdout_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_path: Option<String>,
}

/// How a service's program ended, in words: `exit_code` / `signal` as the process layer
/// saw them; `stopped`: the worker stopped it when the trial's environment ended (what a
/// long-running service does).
pub fn ended(exit_code: Option<i32>, signal: Option<i32>, stopped: bool) -> String {
    match (stopped, exit_code, signal) {
        (true, _, _) => "running until the trial ended (stopped by the worker)".into(),
        (false, Some(c), _) => format!("exited {c}"),
        (false, None, Some(s)) => format!("killed by signal {s}"),
        (false, None, None) => "ended (no exit status)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_is_worded() {
        let cases = [
            ((Some(0), None, false), "exited 0"),
            ((Some(3), None, false), "exited 3"),
            ((None, Some(9), false), "killed by signal 9"),
            ((None, None, false), "ended (no exit status)"),
            (
                (Some(143), None, true),
                "running until the trial ended (stopped by the worker)",
            ),
            (
                (None, Some(15), true),
                "running until the trial ended (stopped by the worker)",
            ),
        ];
        for ((code, signal, stopped), want) in cases {
            assert_eq!(
                ended(code, signal, stopped),
                want,
                "{code:?} {signal:?} {stopped}"
            );
        }
    }
}
