//! The resolved run spec: the complete requested condition of one run.
//!
//! This module owns [`ResolvedRunSpec`] and [`resolve`], which turns an
//! [`ExperimentManifest`] into exact task releases (loaded with [`crate::task::load_by_id`])
//! and agent conditions (loaded with [`Agent::load`]) with every default made explicit.
//! The spec is canonical JSON with its own digest; credentials appear only as
//! environment-variable names. The run key's 4 hex come from the digest of the condition,
//! so resolving the same manifest on the same day gives the same key.
//!
//! Layer: above `manifest`, `task`, `agent` and `selection`; the gate of what akbench can
//! execute (`support`) is its child; `plan` imports `spec`, never the reverse.

use crate::agent::{Agent, AgentCondition, AgentError};
use crate::clock::Clock;
use crate::digest::{digest_of, sealed_digest};
use crate::ids::{slug, uuid_v7_at};
use crate::manifest::{
    glob_match, Concurrency, ExperimentManifest, References, Runtime, Visibility,
};
use crate::selection::Selection;
use crate::task::requirements::{Offered, Requirements};
use crate::task::{load_by_id, Family, TaskError, TaskRelease};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use uuid::Uuid;

pub use crate::manifest::{DEFAULT_DIFF_MB, MAX_DIFF_MB};

pub mod support;

/// Schema tag of a spec document.
pub const SPEC_SCHEMA: &str = "akbench.spec/v1";
/// Default CPUs per trial.
pub const DEFAULT_CPUS: u32 = 1;
/// Default memory per trial, MiB.
pub const DEFAULT_MEMORY_MB: u64 = 2048;
/// True for the default diff limit (left out of the JSON, so older digests stay).
pub fn is_default_diff_mb(mb: &u64) -> bool {
    *mb == DEFAULT_DIFF_MB
}

/// The default diff limit, for serde.
pub fn default_diff_mb() -> u64 {
    DEFAULT_DIFF_MB
}

/// Default evaluation profile.
pub const DEFAULT_PROFILE: &str = "default";

/// The complete requested condition of one run, with its identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolvedRunSpec {
    /// Always [`SPEC_SCHEMA`].
    pub schema: String,
    /// Who this run is (never compared by diff).
    pub identity: RunIdentity,
    /// Where the inputs came from (never compared by diff).
    pub provenance: Provenance,
    /// What was asked for: the comparable part.
    pub condition: RunCondition,
    /// Digest of `condition`; two runs with equal condition digests asked for the same thing.
    pub condition_digest: String,
    /// Digest of this document without this field.
    pub digest: String,
}

/// A run's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIdentity {
    /// UUIDv7.
    pub run_id: Uuid,
    /// `<experiment>-<yyyymmdd>-<4 hex>` (a `-2`, `-3` suffix when a store already holds the
    /// key for another run).
    pub run_key: String,
    /// When the spec was resolved.
    pub created_at: DateTime<Utc>,
}

/// Where the inputs came from; informative only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The manifest path as given.
    pub manifest: Option<String>,
    /// Digest of the manifest bytes.
    pub manifest_digest: Option<String>,
    /// The tasks root used.
    pub tasks_root: Option<String>,
    /// The agents root used.
    pub agents_root: Option<String>,
    /// The task checks this run was planned with (`akbench task check`, or `run plan
    /// --check-tasks`): one per task release that had one on the run's runtime, each valid (a
    /// plan refuses a task whose check is not). A task without one was not checked here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_checks: Vec<crate::task_check::TaskCheck>,
    /// Why the run's runtime was picked when the manifest named none (every task
    /// image-only: `container`; [`crate::task::pick_runtime`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_picked: Option<String>,
}

/// The requested condition, every default explicit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCondition {
    /// Experiment name.
    pub experiment: String,
    /// Description, when given.
    pub description: Option<String>,
    /// Task releases, sorted by id.
    pub tasks: Vec<SpecTask>,
    /// Agent conditions, in manifest order.
    pub agents: Vec<SpecAgent>,
    /// Trials per (task, agent).
    pub repetitions: u32,
    /// Resources per trial.
    pub compute: ComputePolicy,
    /// Execution policy.
    pub execution: ExecutionPolicy,
    /// Evaluation policy.
    pub evaluation: EvaluationPolicy,
    /// Visibility of results.
    pub visibility: Visibility,
    /// Credential environment-variable names: the manifest's plus every agent's declared
    /// ones, sorted. Never values.
    pub credentials: Vec<String>,
    /// Optional references.
    pub references: References,
}

/// One exact task release and what planning needs from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecTask {
    /// id, version, digest.
    pub release: TaskRelease,
    /// Execution family.
    pub family: Family,
    /// `[source] repo` as written in task.toml.
    pub source_repo: String,
    /// The pinned commit.
    pub source_commit: String,
    /// Digest of the mutation patch, when any.
    pub mutation_digest: Option<String>,
    /// Digest of the hidden tests.
    pub tests_digest: String,
    /// Digest of the reference solution, when any.
    pub reference_digest: Option<String>,
    /// `environment.image` as the task writes it, or pinned to a digest once resolved
    /// (`registry/repository@sha256:...`); a ready plan holds only pinned images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Effective agent timeout (the manifest's, else the task's).
    pub agent_timeout_sec: f64,
    /// Effective evaluation timeout (the manifest's, else the task's).
    pub verifier_timeout_sec: f64,
    /// What the task asks of the run (`[environment] cpus`, `memory_mb`, `storage_mb`),
    /// checked against the run's compute when it was planned.
    #[serde(default, skip_serializing_if = "Requirements::is_empty")]
    pub requires: Requirements,
    /// The task's free-form metadata.
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// The keys of the task's task.toml kept as ignored (ones Harbor itself runs nothing
    /// from, `akbench_core::task::HARBOR_FIELDS`), so the plan says what was not acted on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_fields: Vec<String>,
    /// Its agent or grading phase reaches a network (`core::egress::offer::needs_egress`):
    /// the run then requires workers that give the egress proxy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_egress: bool,
    /// The names of its `[[environment.mcp_servers]]` (`core::task::mcp`): an agent whose
    /// adapter takes no MCP is refused for it (`spec::support`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
}

/// One agent condition as planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecAgent {
    /// Label used in trial keys.
    pub label: String,
    /// The descriptor's condition, as loaded.
    pub descriptor: AgentCondition,
    /// Effective model (manifest override, else the descriptor's).
    pub model: Option<String>,
    /// Effective parameters (descriptor's, overridden by the manifest's).
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// Provider route, when given.
    pub provider_route: Option<String>,
    /// Digest of all fields above.
    pub digest: String,
}

/// Resources per trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputePolicy {
    /// CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mb: u64,
    /// Largest diff the agent may leave, MiB; left out of the JSON when it is the default
    /// ([`DEFAULT_DIFF_MB`]), so older digests stay.
    #[serde(
        default = "default_diff_mb",
        skip_serializing_if = "is_default_diff_mb"
    )]
    pub diff_mb: u64,
    /// Manifest-wide agent timeout; `null` means each task's own (see [`SpecTask`]).
    pub agent_timeout_sec: Option<f64>,
    /// Manifest-wide evaluation timeout; `null` means each task's own.
    pub verifier_timeout_sec: Option<f64>,
}

impl ComputePolicy {
    /// What the run gives each attempt, against what a task asks
    /// ([`crate::task::requirements::check`]).
    pub fn offered(&self) -> Offered {
        Offered {
            cpus: u64::from(self.cpus),
            memory_mb: self.memory_mb,
            disk_mb: crate::task::requirements::DISK_MB,
        }
    }
}

/// Execution policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionPolicy {
    /// Runtime (the backend).
    pub runtime: Runtime,
    /// Infrastructure retries.
    pub infrastructure_retries: u32,
    /// Best-of-N candidates.
    pub candidates: u32,
    /// How a trial's result is chosen among its candidates; left out of the JSON when it is
    /// the default (`first_solved`), so older digests stay.
    #[serde(default, skip_serializing_if = "Selection::is_default")]
    pub selection: Selection,
    /// Concurrency caps.
    pub concurrency: Concurrency,
    /// Spend cap; absent (and left out of the JSON, so older digests stay) when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::manifest::Budget>,
    /// Labels a worker must advertise to run the trials ([`crate::placement`]); absent (and
    /// left out of the JSON, so older digests stay) when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_labels: Vec<String>,
    /// The run's priority among runs sharing the workers ([`crate::dispatch::share`]); left
    /// out of the JSON (so older digests stay) when it is the default 0.
    #[serde(default, skip_serializing_if = "is_zero_priority")]
    pub priority: i32,
    /// The run's weight among runs of its priority; left out of the JSON when it is the
    /// default 1.
    #[serde(default = "default_weight", skip_serializing_if = "is_default_weight")]
    pub weight: u32,
    /// Where grading happens ([`crate::grading_env::GradingEnvironment`]); left out of the
    /// JSON when it is the default (`task`), so older digests stay.
    #[serde(
        default,
        skip_serializing_if = "crate::grading_env::GradingEnvironment::is_default"
    )]
    pub grading_environment: crate::grading_env::GradingEnvironment,
}

fn is_zero_priority(p: &i32) -> bool {
    *p == 0
}

fn default_weight() -> u32 {
    1
}

fn is_default_weight(w: &u32) -> bool {
    *w == 1
}

impl ExecutionPolicy {
    /// The run's share of the workers (priority and weight).
    pub fn share(&self) -> crate::dispatch::share::Share {
        crate::dispatch::share::Share {
            priority: self.priority,
            weight: self.weight,
        }
    }
}

/// Evaluation policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationPolicy {
    /// Grade or not.
    pub grade: bool,
    /// Profile name.
    pub profile: String,
    /// Reviewer, when any.
    pub reviewer: Option<String>,
}

/// Where resolve reads tasks and agents from.
#[derive(Debug, Clone, Default)]
pub struct ResolveInputs {
    /// The manifest file (for relative roots and provenance).
    pub manifest_path: Option<PathBuf>,
    /// `--tasks-root`, overriding the manifest's `tasks.root`.
    pub tasks_root: Option<PathBuf>,
    /// `--agents-root`, overriding the manifest's `agents.root`.
    pub agents_root: Option<PathBuf>,
}

/// The most trials one plan may hold (tasks x agent conditions x repetitions).
pub const MAX_PLAN_TRIALS: u64 = 1_000_000;

/// Resolving failed; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A selected task failed to load.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// An agent failed to load.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The manifest asks for something akbench would accept and then not honour.
    #[error("failed to plan the manifest: {0}; nothing was written")]
    Unsupported(String),
    /// Other selection problems.
    #[error("failed to resolve the manifest: {problem}; fix: {fix}")]
    Selection {
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
}

fn selection(problem: impl Into<String>, fix: impl Into<String>) -> ResolveError {
    ResolveError::Selection {
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// The tasks root and agents root a manifest resolves with: the flags, else the manifest's
/// roots relative to its file.
pub fn roots(
    manifest: &ExperimentManifest,
    inputs: &ResolveInputs,
) -> Result<(PathBuf, PathBuf), ResolveError> {
    Ok((
        root_of(
            &inputs.tasks_root,
            &manifest.tasks.root,
            &inputs.manifest_path,
            "task",
        )?,
        root_of(
            &inputs.agents_root,
            &manifest.agents.root,
            &inputs.manifest_path,
            "agent",
        )?,
    ))
}

fn root_of(
    flag: &Option<PathBuf>,
    manifest_root: &Option<PathBuf>,
    manifest_path: &Option<PathBuf>,
    what: &str,
) -> Result<PathBuf, ResolveError> {
    if let Some(p) = flag {
        return Ok(p.clone());
    }
    match manifest_root {
        Some(r) if r.is_absolute() => Ok(r.clone()),
        Some(r) => Ok(manifest_path
            .as_deref()
            .and_then(Path::parent)
            .map(|d| d.join(r))
            .unwrap_or_else(|| r.clone())),
        None => Err(selection(
            format!("no {what} root is given"),
            format!("pass --{what}s-root or set `{what}s.root` in the manifest"),
        )),
    }
}

/// Task ids a selection picks from the folders under `tasks_root`, sorted.
pub fn select_task_ids(
    manifest: &ExperimentManifest,
    tasks_root: &Path,
) -> Result<Vec<String>, ResolveError> {
    let sel = &manifest.tasks;
    let mut ids: BTreeSet<String> = sel.ids.iter().cloned().collect();
    if !sel.include.is_empty() {
        let rd = std::fs::read_dir(tasks_root).map_err(|e| {
            selection(
                format!("cannot read the tasks root {}: {e}", tasks_root.display()),
                "pass an existing folder with --tasks-root",
            )
        })?;
        let entries: Vec<_> = rd.flatten().filter(|e| e.path().is_dir()).collect();
        let mut names: Vec<String> = entries
            .iter()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        for g in &sel.include {
            let hits: Vec<&String> = names.iter().filter(|n| glob_match(g, n)).collect();
            // A folder whose name is not UTF-8 cannot be a task id: named as such, not
            // reported later as a missing folder under its mangled name.
            if let Some(bad) = entries.iter().find(|e| {
                e.file_name().to_str().is_none() && glob_match(g, &e.file_name().to_string_lossy())
            }) {
                return Err(selection(
                    format!(
                        "the include glob `{g}` matches the folder {}, whose name is not UTF-8",
                        bad.path().display()
                    ),
                    "rename the folder (task ids are letters, digits, `.`, `_` and `-`) or narrow the glob",
                ));
            }
            if hits.is_empty() {
                return Err(selection(
                    format!(
                        "the include glob `{g}` matches no task under {}",
                        tasks_root.display()
                    ),
                    "check the glob or the tasks root",
                ));
            }
            ids.extend(hits.into_iter().cloned());
        }
    }
    ids.retain(|id| !sel.exclude.iter().any(|g| glob_match(g, id)));
    if ids.is_empty() {
        return Err(selection(
            "the task selection is empty after `exclude`",
            "loosen `tasks.exclude`",
        ));
    }
    Ok(ids.into_iter().collect())
}

/// Resolves `manifest` into a spec: loads every selected task and agent from disk.
pub fn resolve(
    manifest: &ExperimentManifest,
    inputs: &ResolveInputs,
    clock: &dyn Clock,
) -> Result<ResolvedRunSpec, ResolveError> {
    // `container` is refused with the other values akbench cannot honour (core::spec::support).
    let tasks_root = root_of(
        &inputs.tasks_root,
        &manifest.tasks.root,
        &inputs.manifest_path,
        "task",
    )?;
    let agents_root = root_of(
        &inputs.agents_root,
        &manifest.agents.root,
        &inputs.manifest_path,
        "agent",
    )?;
    let ids = select_task_ids(manifest, &tasks_root)?;
    let planned = ids.len() as u64
        * manifest.agents.conditions.len() as u64
        * u64::from(manifest.repetitions.unwrap_or(1));
    if planned > MAX_PLAN_TRIALS {
        return Err(selection(
            format!(
                "the manifest plans {planned} trials ({} tasks x {} agent conditions x {} repetitions), more than the maximum {MAX_PLAN_TRIALS}",
                ids.len(),
                manifest.agents.conditions.len(),
                manifest.repetitions.unwrap_or(1)
            ),
            "select fewer tasks, agent conditions or repetitions, or split the experiment into several runs",
        ));
    }
    let compute = ComputePolicy {
        cpus: manifest.compute.cpus.unwrap_or(DEFAULT_CPUS),
        memory_mb: manifest.compute.memory_mb.unwrap_or(DEFAULT_MEMORY_MB),
        diff_mb: manifest.compute.diff_mb.unwrap_or(DEFAULT_DIFF_MB),
        agent_timeout_sec: manifest.compute.agent_timeout_sec,
        verifier_timeout_sec: manifest.compute.verifier_timeout_sec,
    };
    let mut loaded = Vec::with_capacity(ids.len());
    for id in &ids {
        loaded.push(load_by_id(&tasks_root, id)?);
    }
    let (runtime, runtime_picked) = crate::task::pick_runtime(manifest.execution.runtime, &loaded);
    let mut tasks = Vec::with_capacity(ids.len());
    for t in loaded {
        t.check_runtime(runtime == Runtime::Container)
            .map_err(ResolveError::Unsupported)?;
        crate::task::requirements::check(&t.release.id, &t.requirements, &compute.offered())
            .map_err(ResolveError::Unsupported)?;
        let metadata = t
            .file
            .metadata
            .iter()
            .map(|(k, v)| {
                let j = serde_json::to_value(v).unwrap_or(serde_json::Value::Null);
                (k.clone(), j)
            })
            .collect();
        tasks.push(SpecTask {
            needs_egress: crate::egress::offer::needs_egress(&t.network),
            mcp_servers: t.mcp_servers.iter().map(|s| s.name.clone()).collect(),
            family: t.family,
            source_repo: t
                .file
                .source
                .as_ref()
                .map(|s| s.repo.clone())
                .unwrap_or_default(),
            source_commit: t.commit.clone(),
            mutation_digest: t.mutation.as_ref().map(|m| m.1.clone()),
            tests_digest: t.tests_digest.clone(),
            reference_digest: t.reference.as_ref().map(|r| r.1.clone()),
            image: t.image.as_ref().map(|i| match &i.digest {
                Some(d) => i.pinned(d),
                None => i.to_string(),
            }),
            agent_timeout_sec: compute.agent_timeout_sec.unwrap_or(t.agent_timeout_sec),
            verifier_timeout_sec: compute
                .verifier_timeout_sec
                .unwrap_or(t.verifier_timeout_sec),
            metadata,
            requires: t.requirements,
            ignored_fields: t
                .fields
                .iter()
                // `metadata` is recorded in full above; files (a Dockerfile an image wins
                // over) are not keys.
                .filter(|u| u.handling == "ignored" && u.field != "metadata")
                .filter(|u| !u.field.contains('/'))
                .map(|u| u.field.clone())
                .collect(),
            release: t.release,
        });
    }
    let mut agents = Vec::new();
    let mut credentials: BTreeSet<String> = manifest.credentials.iter().cloned().collect();
    for entry in &manifest.agents.conditions {
        let a = Agent::load(&agents_root, &entry.descriptor)?;
        credentials.extend(a.condition.credentials.iter().cloned());
        let mut parameters = a.descriptor.parameters.clone();
        parameters.extend(entry.parameters.clone());
        let model = entry.model.clone().or_else(|| a.condition.model.clone());
        // At plan time, not in every trial: the adapter exists and takes these settings.
        crate::agent::adapters::check(&a.descriptor, model.as_deref(), &parameters).map_err(
            |problem| {
                let problem = if entry.parameters.is_empty() && entry.model.is_none() {
                    problem
                } else {
                    format!(
                        "{problem} (condition `{}`: the manifest's model/parameters merged over the descriptor's)",
                        entry.label()
                    )
                };
                AgentError::Invalid {
                    file: a.file.clone(),
                    problem,
                }
            },
        )?;
        agents.push(SpecAgent::new(
            entry.label().to_string(),
            a.condition.clone(),
            model,
            parameters,
            entry.provider_route.clone(),
        ));
    }
    support::refusal(&support::undeclared_credentials(
        &manifest.credentials,
        &agents,
    ))
    .map_err(ResolveError::Unsupported)?;
    let selection = support::selection(manifest.execution.selection.as_deref())
        .map_err(|u| ResolveError::Unsupported(u.to_string()))?;
    let needs_egress = tasks.iter().any(|t| t.needs_egress);
    let condition = RunCondition {
        experiment: manifest.experiment.clone(),
        description: manifest.description.clone(),
        tasks,
        agents,
        repetitions: manifest.repetitions.unwrap_or(1),
        compute,
        execution: ExecutionPolicy {
            runtime,
            infrastructure_retries: manifest.execution.infrastructure_retries.unwrap_or(0),
            candidates: manifest.execution.candidates.unwrap_or(1),
            selection,
            concurrency: manifest.execution.concurrency.clone(),
            budget: manifest.execution.budget,
            worker_labels: {
                let mut l = manifest.execution.worker_labels.clone();
                // A task that needs the network runs only where the worker gives it.
                if needs_egress {
                    l.push(crate::egress::offer::EGRESS_LABEL.to_string());
                }
                l.sort();
                l.dedup();
                l
            },
            priority: match manifest.execution.priority {
                Some(p) => crate::dispatch::share::check_priority(p).map_err(|why| {
                    ResolveError::Unsupported(format!("execution.priority {why}"))
                })?,
                None => 0,
            },
            weight: match manifest.execution.weight {
                Some(w) => crate::dispatch::share::check_weight(w)
                    .map_err(|why| ResolveError::Unsupported(format!("execution.weight {why}")))?,
                None => 1,
            },
            grading_environment: manifest.execution.grading_environment.unwrap_or_default(),
        },
        evaluation: EvaluationPolicy {
            grade: manifest.evaluation.grade.unwrap_or(true),
            profile: manifest
                .evaluation
                .profile
                .clone()
                .unwrap_or_else(|| DEFAULT_PROFILE.to_string()),
            reviewer: manifest.evaluation.reviewer.clone(),
        },
        visibility: manifest.visibility.unwrap_or(Visibility::Private),
        credentials: credentials.into_iter().collect(),
        references: manifest.references.clone(),
    };
    support::check_executable(&condition).map_err(ResolveError::Unsupported)?;
    let manifest_digest = inputs
        .manifest_path
        .as_deref()
        .and_then(|p| {
            crate::bounded_read::read(
                p,
                crate::manifest::MAX_MANIFEST_BYTES as u64,
                crate::bounded_read::Links::Follow,
            )
            .ok()
        })
        .map(|b| crate::digest::digest_bytes(&b));
    let provenance = Provenance {
        manifest: inputs
            .manifest_path
            .as_ref()
            .map(|p| p.display().to_string()),
        manifest_digest,
        tasks_root: Some(tasks_root.display().to_string()),
        agents_root: Some(agents_root.display().to_string()),
        task_checks: Vec::new(),
        runtime_picked,
    };
    Ok(ResolvedRunSpec::assemble(condition, provenance, clock))
}

/// Why [`ResolvedRunSpec::pin_images`] failed: the message names the task and the image;
/// `cause` is the resolver's own error when it was the resolver that failed (so a caller
/// can tell a registry that is down from an image that does not exist).
#[derive(Debug)]
pub struct PinError<E> {
    /// What failed, naming the task and the image.
    pub message: String,
    /// The resolver's error; `None` when the image line or the digest was wrong.
    pub cause: Option<E>,
}

impl<E> PinError<E> {
    fn invalid(message: String) -> Self {
        Self {
            message,
            cause: None,
        }
    }
}

impl<E> std::fmt::Display for PinError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ResolvedRunSpec {
    /// The spec with every task image that names a tag pinned to the digest `resolve`
    /// gives for it (`registry/repository@sha256:...`), its digests and identity made anew:
    /// a plan runs exactly the images resolved when it was made. An image already pinned
    /// is kept; a resolver's error names the task and the image.
    pub fn pin_images<E: std::fmt::Display>(
        self,
        mut resolve: impl FnMut(&crate::image::ImageRef) -> Result<String, E>,
        clock: &dyn Clock,
    ) -> Result<ResolvedRunSpec, PinError<E>> {
        let mut condition = self.condition;
        let mut changed = false;
        for t in &mut condition.tasks {
            let Some(written) = &t.image else { continue };
            let r = crate::image::ImageRef::parse(written).map_err(|e| {
                PinError::invalid(format!(
                    "failed to pin the image of task `{}`: {e}",
                    t.release.id
                ))
            })?;
            if r.digest.is_some() {
                continue;
            }
            let digest = resolve(&r).map_err(|e| PinError {
                message: format!(
                    "failed to pin the image of task `{}` ({written}): {e}",
                    t.release.id
                ),
                cause: Some(e),
            })?;
            if !crate::image::is_digest(&digest) {
                return Err(PinError::invalid(format!(
                    "failed to pin the image of task `{}` ({written}): `{digest}` is not a sha256 digest",
                    t.release.id
                )));
            }
            t.image = Some(r.pinned(&digest));
            changed = true;
        }
        if !changed {
            return Ok(ResolvedRunSpec { condition, ..self });
        }
        Ok(ResolvedRunSpec::assemble(condition, self.provenance, clock))
    }
}

impl SpecAgent {
    /// Builds an agent condition and its digest.
    pub fn new(
        label: String,
        descriptor: AgentCondition,
        model: Option<String>,
        parameters: BTreeMap<String, serde_json::Value>,
        provider_route: Option<String>,
    ) -> SpecAgent {
        let mut a = SpecAgent {
            label,
            descriptor,
            model,
            parameters,
            provider_route,
            digest: String::new(),
        };
        a.digest = sealed_digest(&a);
        a
    }
}

impl ResolvedRunSpec {
    /// The spec with `checks` recorded in its provenance (the digest sealed again; the
    /// condition, its digest and the run's identity unchanged).
    pub fn with_task_checks(mut self, checks: Vec<crate::task_check::TaskCheck>) -> Self {
        self.provenance.task_checks = checks;
        self.digest = sealed_digest(&self);
        self
    }

    /// Gives a condition its identity: a fresh UUIDv7 and a key whose 4 hex come from the
    /// condition's digest. Pure apart from the clock and the UUID's random bits.
    pub fn assemble(
        condition: RunCondition,
        provenance: Provenance,
        clock: &dyn Clock,
    ) -> ResolvedRunSpec {
        let now = clock.now();
        let condition_digest = digest_of(&condition);
        let hex = condition_digest
            .strip_prefix(crate::digest::DIGEST_PREFIX)
            .unwrap_or(&condition_digest);
        let run_key = format!(
            "{}-{}-{}",
            slug(&condition.experiment),
            now.format("%Y%m%d"),
            &hex[..4]
        );
        let mut spec = ResolvedRunSpec {
            schema: SPEC_SCHEMA.to_string(),
            identity: RunIdentity {
                run_id: uuid_v7_at(now),
                run_key,
                created_at: now,
            },
            provenance,
            condition,
            condition_digest,
            digest: String::new(),
        };
        spec.digest = sealed_digest(&spec);
        spec
    }

    /// The same spec under another run key (used by the evidence store on a key collision).
    pub fn with_run_key(mut self, run_key: String) -> ResolvedRunSpec {
        self.identity.run_key = run_key;
        self.digest = sealed_digest(&self);
        self
    }

    /// True when the stored digests match the content.
    pub fn verify(&self) -> bool {
        self.digest == sealed_digest(self) && self.condition_digest == digest_of(&self.condition)
    }

    /// The run id.
    pub fn run_id(&self) -> Uuid {
        self.identity.run_id
    }

    /// The run key.
    pub fn run_key(&self) -> &str {
        &self.identity.run_key
    }

    /// Number of entries the plan will hold: one per trial, or one per candidate with
    /// best-of-N candidates (N per trial).
    pub fn trial_count(&self) -> u64 {
        self.condition.tasks.len() as u64
            * self.condition.agents.len() as u64
            * u64::from(self.condition.repetitions)
            * u64::from(self.condition.execution.candidates.max(1))
    }
}

#[cfg(test)]
pub(crate) mod tests;
