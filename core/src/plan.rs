//! The run plan: the exact membership of a run.
//!
//! This module owns [`RunPlan`], [`PlannedTrial`], [`PlanSummary`] and [`plan`], which
//! expands a [`ResolvedRunSpec`] into trials in a stable order (task x agent x repetition),
//! each with a fresh UUIDv7, a readable key and a contiguous ordinal from 0. With
//! `execution.candidates: N > 1` each planned trial becomes N consecutive entries, one per
//! candidate (see [`crate::candidates`]). Planning reads
//! no file: everything comes from the spec, so it can be benchmarked in memory. Families
//! `artefact`, `interactive` and `lifecycle` plan the same way.

use crate::candidates::CandidateOf;
use crate::clock::Clock;
use crate::digest::sealed_digest;
use crate::ids::{candidate_key, trial_key, uuid_v7_at};
use crate::manifest::{Runtime, Visibility};
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
        let mut s = PlanSummary {
            trials: trials.len() as u64,
            ..PlanSummary::default()
        };
        fn bump<K: Ord>(m: &mut BTreeMap<K, u64>, k: K, n: u64) {
            *m.entry(k).or_insert(0) += n;
        }
        let (mut family, mut backend, mut visibility) =
            (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        // Trials come in runs of the same task and agent: count names per run, not per trial.
        let mut i = 0;
        while i < trials.len() {
            let t = &trials[i];
            let mut j = i + 1;
            while j < trials.len()
                && trials[j].task.id == t.task.id
                && trials[j].agent.label == t.agent.label
            {
                j += 1;
            }
            bump(&mut s.by_task, t.task.id.clone(), (j - i) as u64);
            bump(&mut s.by_agent, t.agent.label.clone(), (j - i) as u64);
            for u in &trials[i..j] {
                bump(&mut s.by_repetition, u.repetition, 1);
                bump(&mut family, u.family.as_str(), 1);
                bump(&mut backend, u.compute.runtime.as_str(), 1);
                bump(&mut visibility, u.visibility.as_str(), 1);
            }
            i = j;
        }
        let owned = |m: BTreeMap<&str, u64>| -> BTreeMap<String, u64> {
            m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        };
        s.by_family = owned(family);
        s.by_backend = owned(backend);
        s.by_visibility = owned(visibility);
        s.by_lifecycle.insert(
            crate::lifecycle::State::Pending.as_str().to_string(),
            s.trials,
        );
        s.by_lifecycle.retain(|_, v| *v > 0);
        s
    }
}

/// Expands `spec` into a draft plan. Reads no file; time comes from `clock`.
pub fn plan(spec: &ResolvedRunSpec, clock: &dyn Clock) -> RunPlan {
    let now = clock.now();
    let c = &spec.condition;
    let run_id = spec.identity.run_id;
    let run_key = &spec.identity.run_key;
    let recipe = AttemptRecipe {
        infrastructure_retries: c.execution.infrastructure_retries,
        candidates: c.execution.candidates,
        max_attempts: c
            .execution
            .candidates
            .saturating_mul(c.execution.infrastructure_retries.saturating_add(1)),
    };
    let mut trials = Vec::with_capacity(spec.trial_count() as usize);
    let mut ordinal = 0u64;
    for task in &c.tasks {
        let source = TrialTaskSource {
            repo: task.source_repo.clone(),
            commit: task.source_commit.clone(),
        };
        let compute = ComputeCondition {
            runtime: c.execution.runtime,
            cpus: c.compute.cpus,
            memory_mb: c.compute.memory_mb,
            diff_mb: c.compute.diff_mb,
            agent_timeout_sec: task.agent_timeout_sec,
            verifier_timeout_sec: task.verifier_timeout_sec,
        };
        for agent in &c.agents {
            let trial_agent = TrialAgent {
                label: agent.label.clone(),
                descriptor: agent.descriptor.name.clone(),
                adapter: agent.descriptor.adapter.clone(),
                model: agent.model.clone(),
                digest: agent.digest.clone(),
            };
            for repetition in 1..=c.repetitions {
                let trial_id = uuid_v7_at(now);
                let key = trial_key(run_key, &task.release.id, &agent.label, repetition);
                let n = c.execution.candidates.max(1);
                for index in 1..=n {
                    // One candidate plans as the trial itself; N candidates as N entries
                    // under the trial's identity.
                    let (id, entry_key, candidate) = if n == 1 {
                        (trial_id, key.clone(), None)
                    } else {
                        let of = CandidateOf {
                            trial_id,
                            trial_key: key.clone(),
                            index,
                            of: n,
                            selection: c.execution.selection,
                        };
                        (uuid_v7_at(now), candidate_key(&key, index), Some(of))
                    };
                    trials.push(PlannedTrial {
                        trial_id: id,
                        key: entry_key,
                        ordinal,
                        run_id,
                        task: task.release.clone(),
                        task_source: source.clone(),
                        agent: trial_agent.clone(),
                        compute: compute.clone(),
                        repetition,
                        family: task.family,
                        attempt: recipe,
                        evaluation: c.evaluation.clone(),
                        visibility: c.visibility,
                        candidate,
                    });
                    ordinal += 1;
                }
            }
        }
    }
    let summary = PlanSummary::of(&trials);
    let mut p = RunPlan {
        schema: PLAN_SCHEMA.to_string(),
        run_id,
        run_key: run_key.clone(),
        spec_digest: spec.digest.clone(),
        stage: PlanStage::Draft,
        created_at: now,
        trials,
        summary,
        digest: String::new(),
    };
    p.digest = sealed_digest(&p);
    p
}

impl RunPlan {
    /// The same plan, fixed as ready.
    pub fn ready(&self) -> RunPlan {
        let mut p = self.clone();
        p.stage = PlanStage::Ready;
        p.digest = sealed_digest(&p);
        p
    }

    /// True when the stored digest matches the content.
    pub fn verify(&self) -> bool {
        self.digest == sealed_digest(self)
    }

    /// Checks the invariants a plan from elsewhere must hold: ordinals contiguous from 0,
    /// unique UUIDv7s and keys, the run id on every trial, the summary matching the trials.
    pub fn check(&self) -> Result<(), String> {
        let mut ids = std::collections::HashSet::with_capacity(self.trials.len());
        let mut keys = std::collections::HashSet::with_capacity(self.trials.len());
        for (i, t) in self.trials.iter().enumerate() {
            if t.ordinal != i as u64 {
                return Err(format!(
                    "trial {} has ordinal {}, expected {i}",
                    t.key, t.ordinal
                ));
            }
            if !crate::ids::is_uuid_v7(&t.trial_id) {
                return Err(format!("trial {} has a non-v7 id {}", t.key, t.trial_id));
            }
            if t.run_id != self.run_id {
                return Err(format!("trial {} belongs to run {}", t.key, t.run_id));
            }
            if !ids.insert(t.trial_id) {
                return Err(format!("trial id {} appears twice", t.trial_id));
            }
            if !keys.insert(t.key.as_str()) {
                return Err(format!("trial key {} appears twice", t.key));
            }
        }
        if self.summary != PlanSummary::of(&self.trials) {
            return Err("the summary does not match the trials".into());
        }
        self.check_candidates()
    }

    /// Candidate entries come in whole groups: entries 1..=N of one planned trial in a row,
    /// each keyed `<trial key>/c<i>`, all with the same trial, count and rule; and either
    /// every entry is a candidate or none is.
    fn check_candidates(&self) -> Result<(), String> {
        if self.trials.iter().all(|t| t.candidate.is_none()) {
            return Ok(());
        }
        let mut expect: Option<&CandidateOf> = None;
        for t in &self.trials {
            let Some(c) = &t.candidate else {
                return Err(format!("trial {} is not a candidate, others are", t.key));
            };
            let fits = match expect {
                Some(e) => {
                    c.index == e.index + 1
                        && (c.trial_id, &c.trial_key, c.of, c.selection)
                            == (e.trial_id, &e.trial_key, e.of, e.selection)
                }
                None => c.index == 1 && c.of >= 2,
            };
            if !fits || t.key != candidate_key(&c.trial_key, c.index) {
                return Err(format!(
                    "entry {} is not candidate {} of a whole group under its planned trial",
                    t.key, c.index
                ));
            }
            expect = (c.index < c.of).then_some(c);
        }
        match expect {
            Some(e) => Err(format!(
                "trial {} has candidate {} of {} only",
                e.trial_key, e.index, e.of
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
