//! What a run record keeps of an interactive world's sidecar services
//! ([`crate::task::world`]): for each service started for an attempt, its image by digest,
//! when it started, when its `depends_on` condition was met and how it ended. The rule
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
