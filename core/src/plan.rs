//! The run plan: the exact membership of a run.
//!
//! This module owns [`RunPlan`], [`PlannedTrial`], [`PlanSummary`] and [`plan`], which
//! expands a [`ResolvedRunSpec`] into trials in a stable order (task x agent x repetition),
//! each with a fresh UUIDv7, a readable key and a contiguous ordinal from 0. With
//! `execution.candidates: N > 1` each planned trial becomes N consecutive entries, one per
//! candidate (see [`crate::candidates`]). Planning reads
//! no file: everything comes from the spec, so it can be benchmarked in memory. Families
//! `artefact`, `interactive` and `lifecycle` plan the same way.
//!
//! Plans of 100,000 trials are written and sent without being held in memory: the trials
//! come lazily from [`Expansion`], their summary from [`SummaryCounter`], their digests from
//! [`PlanSealer`] and their checks from [`PlanChecker`], each one trial at a time.

mod check;
mod expand;
mod membership;
mod seal;
mod summary;

pub use check::PlanChecker;
pub use expand::Expansion;
pub use membership::{check_membership, MembershipChecker};
pub use seal::{sealed_head, sealed_plan_digest, PlanHasher, PlanSealer, Sealed};
pub use summary::SummaryCounter;

use crate::clock::Clock;
use crate::manifest::{Runtime, Visibility};
use crate::selection::CandidateOf;
use crate::spec::{EvaluationPolicy, ResolvedRunSpec};
use crate::task::{Family, TaskRelease};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// Schema tag of a plan document.
pub const PLAN_SCHEMA: &str = "akbench.plan/v1";

/// Draft (just expanded) or ready (fixed; the one a run starts from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStage {
    /// Expanded, not yet fixed.
    Draft,
    /// Fixed: starting the run uses exactly this membership.
    Ready,
}

impl PlanStage {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStage::Draft => "draft",
            PlanStage::Ready => "ready",
        }
    }
}

/// The planned trials of one run and their summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// Always [`PLAN_SCHEMA`].
    pub schema: String,
    /// The run.
    pub run_id: Uuid,
    /// The run key.
    pub run_key: String,
    /// Digest of the spec this plan expands.
    pub spec_digest: String,
    /// Draft or ready.
    pub stage: PlanStage,
    /// When the plan was made.
    pub created_at: DateTime<Utc>,
    /// The trials, ordinal 0 first.
    pub trials: Vec<PlannedTrial>,
    /// Counts.
    pub summary: PlanSummary,
    /// Digest of this document without this field.
    pub digest: String,
}

/// One planned trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedTrial {
    /// UUIDv7.
    pub trial_id: Uuid,
    /// `<run key>/<task>/<agent>/r<rep>` (a candidate: `.../r<rep>/c<i>`).
    pub key: String,
    /// Position in the plan, contiguous from 0.
    pub ordinal: u64,
    /// The run.
    pub run_id: Uuid,
    /// The exact task release.
    pub task: TaskRelease,
    /// The task's execution metadata.
    pub task_source: TrialTaskSource,
    /// The agent condition.
    pub agent: TrialAgent,
    /// Resources and limits.
    pub compute: ComputeCondition,
    /// Repetition number, from 1.
    pub repetition: u32,
    /// Execution family.
    pub family: Family,
    /// How attempts are made.
    pub attempt: AttemptRecipe,
    /// How the trial is graded.
    pub evaluation: EvaluationPolicy,
    /// Visibility of its result.
    pub visibility: Visibility,
    /// Set when this entry is one best-of-N candidate of a planned trial (then `trial_id`
    /// and `key` are the candidate's own, `<trial key>/c<i>`); absent with one candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateOf>,
}

/// What a worker needs to find the task's code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialTaskSource {
    /// `[source] repo`.
    pub repo: String,
    /// Pinned commit.
    pub commit: String,
    /// The task's image pinned to its digest (`registry/repository@sha256:...`), when it
    /// names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// The agent condition of a trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialAgent {
    /// Label (as in the key).
    pub label: String,
    /// Descriptor name.
    pub descriptor: String,
    /// Adapter.
    pub adapter: String,
    /// Effective model.
    pub model: Option<String>,
    /// Digest of the spec's agent condition.
    pub digest: String,
}

/// Resources and limits of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeCondition {
    /// Runtime (the backend).
    pub runtime: Runtime,
    /// CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mb: u64,
    /// Largest diff the agent may leave, MiB; left out of the JSON when it is the default,
    /// so older plans and digests stay.
    #[serde(
        default = "crate::spec::default_diff_mb",
        skip_serializing_if = "crate::spec::is_default_diff_mb"
    )]
    pub diff_mb: u64,
    /// Agent timeout, seconds.
    pub agent_timeout_sec: f64,
    /// Evaluation timeout, seconds.
    pub verifier_timeout_sec: f64,
    /// Where grading happens (the run's `execution.grading_environment`); left out of the
    /// JSON when it is the default (`task`), so older plans and digests stay.
    #[serde(
        default,
        skip_serializing_if = "crate::grading_env::GradingEnvironment::is_default"
    )]
    pub grading_environment: crate::grading_env::GradingEnvironment,
}

/// How attempts of a trial are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptRecipe {
    /// Retries after infrastructure errors only.
    pub infrastructure_retries: u32,
    /// Best-of-N candidates.
    pub candidates: u32,
    /// Upper bound on attempts of the planned trial, all its candidates together:
    /// candidates x (1 + retries); each candidate makes at most 1 + retries.
    pub max_attempts: u32,
}

/// Counts of the planned trials. The lifecycle count is the state every planned trial starts
/// in (`pending`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSummary {
    /// All trials.
    pub trials: u64,
    /// By task id.
    pub by_task: BTreeMap<String, u64>,
    /// By agent label.
    pub by_agent: BTreeMap<String, u64>,
    /// By repetition number.
    pub by_repetition: BTreeMap<u32, u64>,
    /// By execution family.
    pub by_family: BTreeMap<String, u64>,
    /// By backend (runtime).
    pub by_backend: BTreeMap<String, u64>,
    /// By visibility.
    pub by_visibility: BTreeMap<String, u64>,
    /// By lifecycle state.
    pub by_lifecycle: BTreeMap<String, u64>,
}

impl PlanSummary {
    /// Counts `trials`.
    pub fn of(trials: &[PlannedTrial]) -> PlanSummary {
        let mut c = SummaryCounter::default();
        for t in trials {
            c.add(t);
        }
        c.finish()
    }
}

/// Expands `spec` into a draft plan. Reads no file; time comes from `clock`.
pub fn plan(spec: &ResolvedRunSpec, clock: &dyn Clock) -> RunPlan {
    let now = clock.now();
    let trials: Vec<PlannedTrial> = Expansion::new(spec, now).collect();
    let summary = PlanSummary::of(&trials);
    let mut p = RunPlan {
        schema: PLAN_SCHEMA.to_string(),
        run_id: spec.identity.run_id,
        run_key: spec.identity.run_key.clone(),
        spec_digest: spec.digest.clone(),
        stage: PlanStage::Draft,
        created_at: now,
        trials,
        summary,
        digest: String::new(),
    };
    p.digest = sealed_plan_digest(&p, PlanStage::Draft);
    p
}

impl RunPlan {
    /// The same plan, fixed as ready.
    pub fn ready(&self) -> RunPlan {
        let mut p = self.clone();
        p.stage = PlanStage::Ready;
        p.digest = sealed_plan_digest(&p, PlanStage::Ready);
        p
    }

    /// True when the stored digest matches the content.
    pub fn verify(&self) -> bool {
        self.digest == sealed_plan_digest(self, self.stage)
    }

    /// The plan's head: every field but its trials (`trials` empty).
    pub fn head(&self) -> RunPlan {
        RunPlan {
            schema: self.schema.clone(),
            run_id: self.run_id,
            run_key: self.run_key.clone(),
            spec_digest: self.spec_digest.clone(),
            stage: self.stage,
            created_at: self.created_at,
            trials: Vec::new(),
            summary: self.summary.clone(),
            digest: self.digest.clone(),
        }
    }

    /// Checks the invariants a plan from elsewhere must hold (see [`PlanChecker`]): ordinals
    /// contiguous from 0, unique UUIDv7s and keys, the run id on every trial, the summary
    /// matching the trials, candidates in whole groups.
    pub fn check(&self) -> Result<(), String> {
        let mut c = PlanChecker::with_capacity(self.run_id, self.trials.len() as u64);
        for t in &self.trials {
            c.push(t)?;
        }
        c.finish(&self.summary).map(|_| ())
    }
}

#[cfg(test)]
mod tests;
