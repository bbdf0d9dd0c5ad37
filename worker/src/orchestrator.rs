//! The orchestrator: drives attempts through the lifecycle and writes `run_record.json`.
//!
//! It only uses the generic contracts: the adapter registry, the runtime, the
//! workspace manager and the evaluator. [`Orchestrator::run_attempt`] is the atom the worker
//! daemon runs for every assignment; [`Orchestrator::run_trial`] runs a trial on its own
//! through a one-item in-memory dispatch (`one_trial`: core's retries, backoff and terminal
//! mapping, as `sweep --local` settles) and writes the record.

mod attempt;
pub(crate) mod container;
mod one_trial;
mod provider_watch;
pub mod rebuild;

use crate::adapters::Registry;
use crate::mirror::MirrorCache;
use crate::process::CancelToken;
use crate::runtime::{Limits, RuntimeKind};
use akbench_core::agent::Agent;
use akbench_core::clock::Clock;
use akbench_core::dispatch::Backoff;
use akbench_core::ids;
use akbench_core::record::{
    AttemptRecord, Identity, RunOptions, RunRecord, TaskRef, Transition, RECORD_FILE,
    SCHEMA_VERSION,
};
use akbench_core::task::Task;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Receives every transition as it happens (live output, the worker's stream).
pub trait Observer: Send + Sync {
    /// A transition of `attempt` was recorded.
    fn transition(&self, attempt: &Identity, number: u32, transition: &Transition);
    /// A note was attached to an already recorded transition (the workspace's fingerprint,
    /// the verdict).
    fn annotate(&self, _attempt: &Identity, _number: u32, _transition: &Transition) {}
    /// Called before attempt `number` (2 and up) of a trial starts, after an
    /// infrastructure error: may block, e.g. while the trial's provider route is paused
    /// (`akbench sweep --local`), returning early once `cancel` is set.
    fn before_retry(&self, _number: u32, _cancel: &CancelToken) {}
    /// Attempt `number` ended in an infrastructure error and is retried after `after`
    /// (the backoff of [`Orchestrator::run_trial`]).
    fn retrying(&self, _number: u32, _after: Duration) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {
    fn transition(&self, _: &Identity, _: u32, _: &Transition) {}
}

/// How an attempt runs.
#[derive(Debug, Clone)]
pub struct AttemptOptions {
    /// Apply the task's mutation (false: the pristine pinned commit).
    pub apply_mutation: bool,
    /// Run the evaluation (false: the attempt ends `not_graded`).
    pub grade: bool,
    /// Keep the worktree after the attempt.
    pub keep_workspace: bool,
    /// Overrides the task's agent timeout (seconds).
    pub agent_timeout_sec: Option<f64>,
    /// Bytes of agent stdout / stderr kept.
    pub output_cap: u64,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// How long the agent may keep meeting model provider failures (outage, 5xx, 429)
    /// before it is stopped and the attempt ends `infrastructure_error`; a refused
    /// credential stops it at once. Default [`DEFAULT_PROVIDER_GRACE`], or
    /// `AKBENCH_PROVIDER_GRACE_SEC` when set.
    pub provider_grace: Duration,
    /// The runtime asked for (`sandbox` by default; `direct` only when chosen).
    pub runtime: RuntimeKind,
    /// Limits the `sandbox` runtime enforces (from the plan's compute condition).
    pub limits: Limits,
    /// Where grading happens: where the task says (default), or a fresh sandbox for every
    /// task (the run's `execution.grading_environment`, [`akbench_core::grading_env`]).
    pub grading_environment: akbench_core::grading_env::GradingEnvironment,
}

/// The default [`AttemptOptions::provider_grace`]: with the 5 s kill grace and the polling,
/// an attempt whose provider is down wastes at most about 26 s.
pub const DEFAULT_PROVIDER_GRACE: Duration = Duration::from_secs(20);

/// The provider grace from `AKBENCH_PROVIDER_GRACE_SEC`
/// ([`akbench_core::ranges::PROVIDER_GRACE_SEC`]: seconds, 0 to 300), or the default.
pub fn provider_grace_from_env() -> Duration {
    match std::env::var("AKBENCH_PROVIDER_GRACE_SEC") {
        Err(_) => DEFAULT_PROVIDER_GRACE,
        Ok(v) => match akbench_core::ranges::PROVIDER_GRACE_SEC.parse_real(&v) {
            Ok(s) => Duration::from_secs_f64(s),
            Err(e) => {
                tracing::warn!(
                    "AKBENCH_PROVIDER_GRACE_SEC: {e}; using {}s",
                    DEFAULT_PROVIDER_GRACE.as_secs()
                );
                DEFAULT_PROVIDER_GRACE
            }
        },
    }
}

impl AttemptOptions {
    /// The runtime and limits a planned trial asks for (its compute condition).
    pub fn with_compute(self, c: &akbench_core::plan::ComputeCondition) -> Self {
        Self {
            runtime: c.runtime,
            limits: Limits {
                memory_mb: Some(c.memory_mb),
                cpus: Some(c.cpus),
                diff_mb: c.diff_mb,
                ..self.limits
            },
            grading_environment: c.grading_environment,
            ..self
        }
    }
}

impl Default for AttemptOptions {
    fn default() -> Self {
        Self {
            apply_mutation: true,
            grade: true,
            keep_workspace: false,
            agent_timeout_sec: None,
            output_cap: 8 * 1024 * 1024,
            grace: Duration::from_secs(5),
            provider_grace: provider_grace_from_env(),
            runtime: RuntimeKind::Sandbox,
            limits: Limits::default(),
            grading_environment: Default::default(),
        }
    }
}

/// One attempt to run.
#[derive(Debug)]
pub struct AttemptRequest<'a> {
    /// The task.
    pub task: &'a Task,
    /// The agent.
    pub agent: &'a Agent,
    /// The attempt's identity.
    pub attempt: Identity,
    /// 1 for the first attempt of a trial.
    pub number: u32,
    /// Folder for this attempt's artifacts (created if missing).
    pub artifacts_dir: PathBuf,
    /// `artifacts_dir` relative to the record's folder, as written in the record.
    pub artifacts_rel: String,
    /// Options.
    pub options: AttemptOptions,
}

impl AttemptRequest<'_> {
    /// The attempt's limits: its options', with the task's disk limit when it names one
    /// (`storage_mb`, any size: Harbor gives the container that storage); a task naming
    /// none keeps the options' limit (the default, `DISK_MB`, or the operator's).
    pub fn limits(&self) -> Limits {
        Limits {
            disk_mb: akbench_core::task::requirements::attempt_disk_mb(
                &self.task.requirements,
                self.options.limits.disk_mb,
            ),
            ..self.options.limits
        }
    }
}

/// One trial to run locally.
#[derive(Debug)]
pub struct TrialRequest<'a> {
    /// The task.
    pub task: &'a Task,
    /// The agent.
    pub agent: &'a Agent,
    /// The run this trial belongs to.
    pub run: Identity,
    /// The trial.
    pub trial: Identity,
    /// Where `run_record.json` and the attempts' artifacts go.
    pub out_dir: PathBuf,
    /// Infrastructure retries (agent failures are never retried).
    pub infrastructure_retries: u32,
    /// Attempt options.
    pub options: AttemptOptions,
    /// With best-of-N candidates: the planned trial this one is a candidate of.
    pub candidate: Option<akbench_core::candidates::CandidateOf>,
}

/// The result of a trial.
#[derive(Debug, Clone)]
pub struct TrialOutcome {
    /// The record written.
    pub record: RunRecord,
    /// Its path.
    pub record_path: PathBuf,
}

/// The trial could not be recorded.
#[derive(Debug, thiserror::Error)]
#[error("failed to write the run record {}: {source}", path.display())]
pub struct RecordWriteError {
    /// Path.
    pub path: PathBuf,
    /// Cause.
    pub source: std::io::Error,
}

/// Runs attempts.
#[derive(Debug, Clone)]
pub struct Orchestrator {
    /// Mirror cache.
    pub cache: MirrorCache,
    /// Root for per-attempt work folders (worktree, home, evaluation).
    pub work_root: PathBuf,
    /// The image store's folder (the `container` runtime, [`crate::image::Store`]).
    pub images: PathBuf,
    /// Adapters.
    pub registry: Registry,
    /// Clock.
    pub clock: Arc<dyn Clock>,
    /// The worker id recorded in every attempt's provenance:
    /// [`crate::provenance::LOCAL_WORKER`] unless the daemon sets its own.
    pub worker_id: String,
}

impl Orchestrator {
    /// An orchestrator keeping mirrors in `<cache>/mirrors` and work in `<cache>/work`.
    pub fn new(cache_root: &Path, clock: Arc<dyn Clock>) -> Self {
        Self {
            cache: MirrorCache::new(cache_root.join("mirrors")),
            work_root: cache_root.join("work"),
            images: cache_root.join("images"),
            registry: Registry::builtin(),
            clock,
            worker_id: crate::provenance::LOCAL_WORKER.to_string(),
        }
    }

    /// Runs one attempt through the lifecycle. Never fails: every problem ends in a terminal
    /// state with its cause.
    pub fn run_attempt(
        &self,
        req: &AttemptRequest<'_>,
        observer: &dyn Observer,
        cancel: &CancelToken,
    ) -> AttemptRecord {
        attempt::run(self, req, observer, cancel)
    }

    /// Runs a trial: its one work item goes claim -> run -> settle through an
    /// `InMemoryDispatch` (`one_trial`) until one attempt ends in anything but an
    /// infrastructure error or the retry budget is spent, each retry after `backoff` (core's
    /// settle, as the coordinator and `sweep --local` retry), then writes `run_record.json`
    /// atomically. A cancel during a backoff ends the trial with the attempts made.
    pub fn run_trial(
        &self,
        req: &TrialRequest<'_>,
        backoff: &Backoff,
        observer: &dyn Observer,
        cancel: &CancelToken,
    ) -> Result<TrialOutcome, RecordWriteError> {
        let started_at = self.clock.now();
        let attempts = one_trial::attempts(self, req, backoff, observer, cancel);
        self.write_trial_record(req, attempts, started_at, None)
    }

    /// The request for attempt `number` of the trial `req` (its identity minted now, its
    /// artifacts in `a<number>` beside the trial's record).
    pub fn attempt_request<'a>(&self, req: &TrialRequest<'a>, number: u32) -> AttemptRequest<'a> {
        let rel = format!("a{number}");
        AttemptRequest {
            task: req.task,
            agent: req.agent,
            attempt: Identity {
                id: ids::uuid_v7_at(self.clock.now()),
                key: ids::attempt_key(&req.trial.key, number),
            },
            number,
            artifacts_dir: req.out_dir.join(&rel),
            artifacts_rel: rel,
            options: req.options.clone(),
        }
    }

    /// Writes the trial's `run_record.json` atomically from the attempts it made: the end of
    /// [`Orchestrator::run_trial`], and of a trial whose attempts a scheduler ran one by one
    /// (`akbench sweep --local`). The outcome is the last attempt's (there must be one), or,
    /// with `cancelled` (a reason), `cancelled` after the attempts made, possibly none.
    pub fn write_trial_record(
        &self,
        req: &TrialRequest<'_>,
        attempts: Vec<AttemptRecord>,
        started_at: chrono::DateTime<chrono::Utc>,
        cancelled: Option<&str>,
    ) -> Result<TrialOutcome, RecordWriteError> {
        let outcome = match cancelled {
            Some(reason) => akbench_core::record::Outcome::cancelled(
                u32::try_from(attempts.len()).unwrap_or(u32::MAX),
                reason,
            ),
            None => RunRecord::outcome_of(&attempts).expect("at least one attempt ran"),
        };
        let record = RunRecord {
            schema_version: SCHEMA_VERSION,
            run: req.run.clone(),
            trial: req.trial.clone(),
            task: task_ref(req.task, req.options.apply_mutation),
            agent: req.agent.condition.clone(),
            options: RunOptions {
                runtime: observed_runtime(&attempts)
                    .unwrap_or(req.options.runtime.as_str())
                    .to_string(),
                infrastructure_retries: req.infrastructure_retries,
                grade: req.options.grade,
                keep_workspace: req.options.keep_workspace,
            },
            attempts,
            outcome,
            started_at,
            finished_at: self.clock.now(),
            written_by: format!("akbench {}", env!("CARGO_PKG_VERSION")),
            candidate: req.candidate.clone(),
        };
        let record_path = req.out_dir.join(RECORD_FILE);
        write_json_atomic(&record_path, &record).map_err(|source| RecordWriteError {
            path: record_path.clone(),
            source,
        })?;
        Ok(TrialOutcome {
            record,
            record_path,
        })
    }
}

/// The runtime the last attempt's agent actually ran under, when one ran.
pub fn observed_runtime(attempts: &[AttemptRecord]) -> Option<&str> {
    attempts
        .iter()
        .rev()
        .find_map(|a| a.agent_process.as_ref()?.runtime.as_ref())
        .map(|r| r.name.as_str())
}

/// What a record says about a task.
pub fn task_ref(task: &Task, mutation_applied: bool) -> TaskRef {
    TaskRef {
        release: task.release.clone(),
        family: task.family,
        // As the task wrote it (a path relative to the task, or a URL), as the coordinator's
        // records say it: never this machine's absolute path.
        repo: task
            .file
            .source
            .as_ref()
            .map(|s| s.repo.clone())
            .or_else(|| task.repo.as_ref().map(|r| r.as_git_arg()))
            .unwrap_or_default(),
        commit: task.commit.clone(),
        mutation_digest: task.mutation.as_ref().map(|(_, d)| d.clone()),
        mutation_applied: mutation_applied && task.mutation.is_some(),
        tests_digest: task.tests_digest.clone(),
        reference_digest: task.reference.as_ref().map(|(_, d)| d.clone()),
        image: task.image.as_ref().map(|i| {
            i.digest
                .as_deref()
                .map_or_else(|| i.to_string(), |d| i.pinned(d))
        }),
    }
}

/// Writes pretty JSON at `path` through the one output writer ([`akbench_core::output`]):
/// a temporary file beside it, synced and renamed into place; a FIFO, device or folder at
/// the path is refused and left as it is.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    use akbench_core::output::{write_with, Existing, Mode, OutputError};
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_with(path, Mode::Public, Existing::Replace, |w| {
        w.write_all(&bytes)?;
        w.write_all(b"\n")
    })
    .map_err(|e| match e {
        OutputError::Io { source, .. } => source,
        refused => std::io::Error::other(refused.to_string()),
    })
}
