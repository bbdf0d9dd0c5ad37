//! `run_record.json`: the audit trail of one trial, written next to the agent's artifacts.
//!
//! A record holds the identities, the task release, the agent condition and one
//! [`AttemptRecord`] per attempt (retries of infrastructure errors are new attempts). Each
//! attempt keeps its full transition log, fingerprints, observations and timings; the grade is
//! a separate section so that grading later replaces the grade only. Paths inside a record are
//! relative to the folder holding `run_record.json`. The schema is documented in
//! docs/record.md; bump [`SCHEMA_VERSION`] on any incompatible change.
//!
//! Layer: above `agent`, `observe`, `task`, `selection` and `paths`; `grading`, `budget`,
//! `spend`, `candidates` and the accounting import it, never the reverse (who ended a graded
//! process, [`EndedBy`], lives here for that reason; `grading::blame` re-exports it).

use crate::agent::AgentCondition;
use crate::lifecycle::State;
pub use crate::observe::Observations;
use crate::task::{Family, TaskRelease};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

pub use ended_by::{EndedBy, ALL_ENDERS};

mod ended_by;
pub mod services;
mod step;
pub mod steps;
pub mod wire;

/// Version of the record schema.
pub const SCHEMA_VERSION: u32 = 1;
/// File name of a record.
pub const RECORD_FILE: &str = "run_record.json";
/// The largest run record read from a run folder, in bytes.
pub const MAX_RECORD_BYTES: u64 = crate::bounded_read::ReadKind::Record.cap();

/// An identity: UUIDv7 and readable key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    /// UUIDv7.
    pub id: Uuid,
    /// Readable key.
    pub key: String,
}

/// What a record says about the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRef {
    /// id, version, digest.
    pub release: TaskRelease,
    /// Execution family.
    pub family: Family,
    /// The repository as git was given it (empty for an image-only task).
    pub repo: String,
    /// The pinned commit (empty for an image-only task: its start is `image`'s working
    /// folder).
    pub commit: String,
    /// Digest of the mutation patch, when the task has one.
    pub mutation_digest: Option<String>,
    /// Whether the mutation was applied (false under `--no-mutation`).
    pub mutation_applied: bool,
    /// Digest of the hidden tests folder.
    pub tests_digest: String,
    /// Digest of the reference solution, when the task has one.
    pub reference_digest: Option<String>,
    /// The image the task ran in, pinned (`registry/repository@sha256:...`), when it names
    /// one (`environment.image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// Options the trial ran with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Runtime name (`direct`).
    pub runtime: String,
    /// Infrastructure retry budget.
    pub infrastructure_retries: u32,
    /// Whether grading was requested.
    pub grade: bool,
    /// Whether the workspace was kept.
    pub keep_workspace: bool,
}

/// One transition of an attempt's lifecycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Position in the attempt's log, from 0.
    pub seq: u32,
    /// State entered.
    pub state: State,
    /// When it was entered.
    pub at: DateTime<Utc>,
    /// A note: "no runtime", the cause of a failure, etc.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Facts about the workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceFacts {
    /// The kept worktree, relative to the record's folder (`a<n>/workspace`); absent when
    /// the worktree was removed.
    pub path: Option<String>,
    /// The pinned commit the worktree was made from.
    pub base_commit: Option<String>,
    /// Git tree id after the mutation (the agent's starting point).
    pub tree_after_mutation: Option<String>,
    /// Git tree id of what the agent left.
    pub tree_after_agent: Option<String>,
    /// The agent's diff against the post-mutation tree (relative path).
    pub diff_path: Option<String>,
    /// Digest of that diff.
    pub diff_digest: Option<String>,
    /// Files the diff touches.
    pub files_changed: Option<u32>,
    /// Whether the worktree was kept on disk.
    pub kept: bool,
    /// What the agent left that is not in `tree_after_agent` nor the diff, each named with
    /// why (the rule of [`crate::uncollectable`]); at most
    /// [`crate::uncollectable::MAX_LISTED`] entries, the rest counted in
    /// `not_collected_more`. Empty when everything was collected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_collected: Vec<NotCollected>,
    /// Entries not collected beyond those listed in `not_collected`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_collected_more: Option<u64>,
}

/// One entry of the worktree that COLLECTING did not collect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotCollected {
    /// Its path from the worktree's root, quoted as git quotes paths
    /// ([`crate::uncollectable::quote_path`]).
    pub path: String,
    /// Why ([`crate::uncollectable::Why::describe`]).
    pub why: String,
}

/// What a workspace can be rebuilt from: the recorded fingerprints and the agent's diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedChange<'a> {
    /// Git tree id after the mutation (the agent's starting point).
    pub tree_after_mutation: &'a str,
    /// Git tree id of what the agent left.
    pub tree_after_agent: &'a str,
    /// The agent's diff (relative path).
    pub diff_path: &'a str,
    /// Digest of that diff.
    pub diff_digest: &'a str,
}

impl WorkspaceFacts {
    /// The fingerprints and diff that rebuild the agent's workspace, when all were recorded.
    pub fn recorded_change(&self) -> Option<RecordedChange<'_>> {
        Some(RecordedChange {
            tree_after_mutation: self.tree_after_mutation.as_deref()?,
            tree_after_agent: self.tree_after_agent.as_deref()?,
            diff_path: self.diff_path.as_deref()?,
            diff_digest: self.diff_digest.as_deref()?,
        })
    }
}

/// How the agent process ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessFacts {
    /// The argv launched, with credential values never present (only names reach argv
    /// templates).
    pub argv: Vec<String>,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Whether it was stopped by the timeout.
    pub timed_out: bool,
    /// Whether it was stopped by a cancel.
    pub cancelled: bool,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Captured stdout (relative path).
    pub stdout_path: Option<String>,
    /// Captured stderr (relative path).
    pub stderr_path: Option<String>,
    /// Bytes the process wrote to stdout (captured up to the cap).
    pub stdout_bytes: u64,
    /// Bytes the process wrote to stderr.
    pub stderr_bytes: u64,
    /// True when output beyond the cap was dropped.
    pub output_truncated: bool,
    /// Processes of the attempt still alive after the group kill, then killed by the sweep.
    pub stragglers_killed: u32,
    /// The runtime that actually ran the process (observed, not copied from the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeFacts>,
}

/// What the runtime was and enforced, as observed by the worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeFacts {
    /// `sandbox` or `direct`.
    pub name: String,
    /// False for `direct`: the agent ran unisolated (it could read the tasks root, the
    /// worker's environment and the host's network), so its grade rests on its good manners.
    pub isolated: bool,
    /// Limits enforced, e.g. `memory_mb=2048 cpus=2 pids=1024 disk_mb=4096`; empty when none.
    #[serde(default)]
    pub limits: String,
    /// The limit the agent ran into, when one did (`memory_mb`, `pids`, `disk_mb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_hit: Option<String>,
    /// Every host the process tree contacted through the worker's egress proxy, per host,
    /// port and outcome (docs/network.md); empty when the phase had no network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<crate::egress::Contact>,
}

/// Who ran an attempt and with what, as observed where it ran (never copied from the plan):
/// the worker process and its host, the adapter that resolved the descriptor and its version,
/// and the agent CLI's own `--version` answer when the adapter asks one (`claude-code`,
/// `codex`). The runtime and the limits in force are in [`ProcessFacts::runtime`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The worker that ran the attempt: `akbench-worker --worker-id`, or `local` for
    /// `run single` / `sweep --local`.
    pub worker_id: String,
    /// The host it ran on (`gethostname`).
    pub host: String,
    /// The adapter that launched the agent, once the descriptor resolved to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    /// That adapter's version: the adapters are built in, so akbench's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_version: Option<String>,
    /// The first line the agent CLI printed for `<program> --version` just before it was
    /// launched (`claude-code`, `codex`), or `unknown: <why>` when it gave none; absent for
    /// adapters whose agent has no CLI of its own (`scripted`, `command`, `oracle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_cli_version: Option<String>,
}

/// Verdict of one test in a JUnit report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestOutcome {
    /// Passed.
    Passed,
    /// Failed an assertion.
    Failed,
    /// Errored.
    Error,
    /// Skipped.
    Skipped,
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestResult {
    /// `classname::name` or `name`.
    pub name: String,
    /// Outcome.
    pub outcome: TestOutcome,
    /// Failure message, when any (capped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The grade of an attempt: a separate section that grading later replaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    /// True when the task counts as solved.
    pub ok: bool,
    /// Score in [0, 1] (reward file, else 1.0 / 0.0 from the exit code).
    pub score: f64,
    /// Where the verdict came from: `reward_txt`, `reward_json` or `exit_code`.
    pub source: String,
    /// The evaluation command's exit code.
    pub exit_code: Option<i32>,
    /// Per-test results from a JUnit XML report, when one was written.
    pub tests: Vec<TestResult>,
    /// The evaluator's verbatim output (stdout then stderr), capped.
    pub report: String,
    /// True when the report was cut at the cap.
    pub report_truncated: bool,
    /// Digest of the tests folder that graded.
    pub tests_digest: String,
    /// When grading ran.
    pub graded_at: DateTime<Utc>,
    /// How long grading took.
    pub duration_ms: u64,
    /// The runtime the hidden tests ran in and the limits enforced, as observed by the worker
    /// (`direct` only when the run said `runtime: direct`). Absent in records written before
    /// it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeFacts>,
    /// Why the grade is `not solved` whatever the reward said: `grading tampered: ...` (with
    /// `tampered`), or the evaluation died or gave no verdict while the agent's code ran on a
    /// task whose reference solution the same grader solves. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// True when grading saw tampering (a verifier output that is a link, not a regular
    /// file, too large, or changed after the test process ended; a tripwire that did not
    /// fail): the grade is `not solved`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tampered: bool,
    /// The tripwire check run beside the hidden tests. Absent in records written before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<TripwireFacts>,
    /// Paths the agent's diff changed that were not taken into the grading workspace (they
    /// steer the grader, not the solution: docs/tasks.md, "Clean-room grading").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
    /// Who ended the graded process when it was not its own end (the verifier's timeout, a
    /// limit of the grading run): what made a run without a verdict the agent's failure
    /// (core::grading::blame). Absent when the process ended itself, and in records written
    /// before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<EndedBy>,
    /// `shared` when the grade ran in the environment the agent left (the task's
    /// `verifier.environment_mode = "shared"`, Harbor's default for a task in its layout:
    /// its file-system changes anywhere in the image and the processes it left running);
    /// `separate` when the task grades there but the run asked for a fresh grading sandbox
    /// (`execution.grading_environment: separate`); absent for a fresh grading sandbox by
    /// the task's own choice ([`crate::grading_env::GradeIn::recorded`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

/// The tripwire of a grade: the tripwire twin (the hidden tests with their expected values
/// changed, or a declared test that must fail), run in a second, fresh grading run when the
/// first one solved (docs/tasks.md, "Tripwire").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TripwireFacts {
    /// A declared or appended test's name (random per grade); empty for a twin of the
    /// hidden tests, and when none was placed.
    pub name: String,
    /// The files of the tests copy made into the twin (relative to `tests/`, `, `-separated),
    /// empty when none.
    pub file: String,
    /// What happened: `failed as it must`, `not run: ...`, `none: ...`, `no verdict: ...`,
    /// `ineffective: ...`, `unconfirmed: ...`, or the tampering seen.
    pub result: String,
    /// What the twin cost: its grading run, and the reference's on the same twin when it was
    /// asked, in milliseconds. Absent when no twin ran, and in records made before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// The result of a tripwire that failed as it must ([`TripwireFacts::result`]).
pub const TRIPWIRE_OK: &str = "failed as it must";

/// True when a grade's tripwire result says it was checked by a tripwire that failed as it
/// must; a solved grade without that is graded without a tripwire (counted by reports).
pub fn tripwire_held(result: &str) -> bool {
    result == TRIPWIRE_OK
}

/// One attempt of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Attempt identity.
    pub attempt: Identity,
    /// 1 for the first attempt.
    pub number: u32,
    /// The full transition log.
    pub transitions: Vec<Transition>,
    /// Terminal state of this attempt.
    pub state: State,
    /// Why it ended where it did, for any state but `completed`; for a `completed` attempt,
    /// the grade's `cause` when it has one (tampering, an evaluation the agent's code broke).
    pub cause: Option<String>,
    /// Workspace facts.
    pub workspace: WorkspaceFacts,
    /// The agent process, when one ran.
    pub agent_process: Option<ProcessFacts>,
    /// What the adapter observed.
    pub observations: Observations,
    /// Milliseconds spent in each phase.
    pub timings_ms: BTreeMap<State, u64>,
    /// The grade, when grading ran and gave a verdict.
    pub grade: Option<Grade>,
    /// Folder of this attempt's artifacts (relative).
    pub artifacts_dir: String,
    /// Set on an attempt that graded, later, the recorded work of an earlier attempt of the
    /// same trial (a distributed grade): that attempt's identity. Its transition log up to
    /// that attempt's terminal state, its workspace facts, agent process, observations and
    /// timings are copied from it; what follows is the grading. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graded_from: Option<Identity>,
    /// Names of the credentials whose values were found, and replaced by
    /// `[REDACTED:<NAME>]`, in what this attempt stored (logs, diff, evaluator output, the
    /// record's text). Absent when nothing was redacted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// Who ran this attempt and with what (worker, host, adapter and agent CLI versions), as
    /// observed there. Absent in records written before it existed and in attempts the
    /// coordinator reconstructed without the worker's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// A multi-step task's steps (`[[steps]]`), in order, as far as this attempt ran them
    /// ([`steps::StepResult`]); empty for a one-step task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<steps::StepResult>,
    /// An interactive world's sidecar services as this attempt started them
    /// ([`services::ServiceFacts`]); empty for a task without sidecars.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<services::ServiceFacts>,
}

/// The trial's outcome, taken from its last attempt; or `cancelled` with its reason when its
/// run cancelled it before an attempt ran to an end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Terminal state.
    pub state: State,
    /// Solved or not; present only when graded.
    pub ok: Option<bool>,
    /// Score; absent (never 0) when not graded.
    pub score: Option<f64>,
    /// Number of attempts.
    pub attempts: u32,
    /// Why the trial was cancelled before an attempt ran to an end (`cancelled` when its run
    /// was cancelled, `budget` when the run's budget was spent); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<String>,
}

impl Outcome {
    /// The outcome of a trial its run cancelled, for `reason`, after `attempts` attempts
    /// (none when it never started; earlier ones when it was waiting for a retry).
    pub fn cancelled(attempts: u32, reason: &str) -> Outcome {
        Outcome {
            state: State::Cancelled,
            ok: None,
            score: None,
            attempts,
            cancelled: Some(reason.to_string()),
        }
    }
}

/// `run_record.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run: Identity,
    /// The trial.
    pub trial: Identity,
    /// The task.
    pub task: TaskRef,
    /// The agent condition.
    pub agent: AgentCondition,
    /// Options.
    pub options: RunOptions,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRecord>,
    /// The outcome.
    pub outcome: Outcome,
    /// When the trial started.
    pub started_at: DateTime<Utc>,
    /// When the trial ended.
    pub finished_at: DateTime<Utc>,
    /// The akbench version that wrote it.
    pub written_by: String,
    /// With best-of-N candidates: this record is one candidate of a planned trial (`trial`
    /// is the candidate's identity, `<trial key>/c<i>`); names that trial, the candidate's
    /// number and the selection rule. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<crate::selection::CandidateOf>,
}

impl RunRecord {
    /// Why the trial ended where it did, one answer for every surface (`run aggregate`, the
    /// viewer, the sweep's report): the reason its run cancelled it before an attempt ran to
    /// an end (`budget`, `cancelled`), else the last attempt's cause.
    pub fn cause(&self) -> Option<String> {
        self.outcome
            .cancelled
            .clone()
            .or_else(|| self.attempts.last().and_then(|a| a.cause.clone()))
    }

    /// The outcome implied by the last attempt.
    pub fn outcome_of(attempts: &[AttemptRecord]) -> Option<Outcome> {
        let last = attempts.last()?;
        Some(Outcome {
            state: last.state,
            ok: last.grade.as_ref().map(|g| g.ok),
            score: last.grade.as_ref().map(|g| g.score),
            attempts: u32::try_from(attempts.len()).unwrap_or(u32::MAX),
            cancelled: None,
        })
    }

    /// Checks a record read from disk: schema version, every attempt's transition log, and
    /// that the outcome agrees with the last attempt.
    pub fn validate(&self) -> Result<(), String> {
        if self.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "schema_version {} is not supported (this akbench reads {SCHEMA_VERSION})",
                self.schema_version
            ));
        }
        if self.attempts.is_empty() && self.outcome.cancelled.is_none() {
            return Err("the record has no attempts".into());
        }
        for (i, a) in self.attempts.iter().enumerate() {
            if a.number as usize != i + 1 {
                return Err(format!("attempt {} is numbered {}", i + 1, a.number));
            }
            let states: Vec<State> = a.transitions.iter().map(|t| t.state).collect();
            crate::lifecycle::validate_path(&states)
                .map_err(|e| format!("attempt {}: {e}", a.number))?;
            if states.last() != Some(&a.state) || !a.state.is_terminal() {
                return Err(format!(
                    "attempt {}: state {} is not the end of its transition log",
                    a.number, a.state
                ));
            }
            if a.grade.is_some() != (a.state == State::Completed) {
                return Err(format!(
                    "attempt {}: a grade is present exactly when the state is completed",
                    a.number
                ));
            }
        }
        let expected = match &self.outcome.cancelled {
            Some(reason) => Some(Outcome::cancelled(
                u32::try_from(self.attempts.len()).unwrap_or(u32::MAX),
                reason,
            )),
            None => Self::outcome_of(&self.attempts),
        };
        if expected.as_ref() != Some(&self.outcome) {
            return Err("the outcome does not match the last attempt".into());
        }
        Ok(())
    }
}

/// Resolves `rel`, a path read from an untrusted run directory, inside `run_dir`: absolute
/// paths and `..` are refused, symlinks are followed and the result must still be inside
/// the (canonical) run directory. The path must exist.
pub fn resolve_inside(run_dir: &std::path::Path, rel: &str) -> Result<std::path::PathBuf, String> {
    let root = run_dir.canonicalize().map_err(|e| {
        format!(
            "cannot resolve the run directory {}: {e}",
            run_dir.display()
        )
    })?;
    let joined = crate::paths::inside(&root, rel).ok_or_else(|| {
        format!("`{rel}` is absolute or climbs out with `..`; a run directory may only point inside itself")
    })?;
    let real = joined
        .canonicalize()
        .map_err(|e| format!("`{rel}` cannot be resolved: {e}"))?;
    if !real.starts_with(&root) {
        return Err(format!(
            "`{rel}` resolves to {} (through a symlink), outside the run directory {}",
            real.display(),
            root.display()
        ));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_inside_refuses_escapes() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        std::fs::create_dir_all(run.join("a1")).unwrap();
        std::fs::write(run.join("a1/agent.diff"), "").unwrap();
        std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
        std::fs::write(tmp.path().join("elsewhere/agent.diff"), "").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("elsewhere"), run.join("a2")).unwrap();
        std::os::unix::fs::symlink("a1", run.join("a3")).unwrap();
        assert!(resolve_inside(&run, "a1/agent.diff").is_ok());
        assert!(
            resolve_inside(&run, "a3/agent.diff").is_ok(),
            "a symlink inside is fine"
        );
        let e = resolve_inside(&run, "a2/agent.diff").unwrap_err();
        assert!(e.contains("outside the run directory"), "{e}");
        assert!(resolve_inside(&run, "../elsewhere/agent.diff").is_err());
        assert!(resolve_inside(&run, "/etc/passwd").is_err());
        assert!(resolve_inside(&run, "a1/missing").is_err());
    }
}
