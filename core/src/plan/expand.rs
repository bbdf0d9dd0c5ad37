//! Lazy plan expansion: the planned trials of a spec one at a time, in plan order.
//!
//! This module owns [`Expansion`], the iterator [`super::plan`] collects and the streaming
//! plan writer ([`crate::evidence::EvidenceStore::plan_streamed`]) consumes entry by entry,
//! so a 100,000-trial plan never has to be held in memory. Its order and content are the
//! plan's: task x agent x repetition (x candidate), ordinals contiguous from 0.

use super::{AttemptRecipe, ComputeCondition, PlannedTrial, TrialAgent, TrialTaskSource};
use crate::ids::{candidate_key, trial_key, uuid_v7_at};
use crate::selection::CandidateOf;
use crate::spec::ResolvedRunSpec;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The planned trials of a spec, produced lazily. Ids come from the id source (by default a
/// fresh UUIDv7 at the planning instant for each id).
pub struct Expansion<'a> {
    spec: &'a ResolvedRunSpec,
    ids: Box<dyn FnMut() -> Uuid + 'a>,
    recipe: AttemptRecipe,
    /// Next (task, agent, repetition from 1, candidate from 1).
    task: usize,
    agent: usize,
    repetition: u32,
    candidate: u32,
    /// The planned trial the current candidates belong to (id and key).
    current: Option<(Uuid, String)>,
    ordinal: u64,
}

impl std::fmt::Debug for Expansion<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expansion")
            .field("run_key", &self.spec.identity.run_key)
            .field("ordinal", &self.ordinal)
            .finish()
    }
}

impl<'a> Expansion<'a> {
    /// The trials of `spec` planned at `now`, each with a fresh UUIDv7.
    pub fn new(spec: &'a ResolvedRunSpec, now: DateTime<Utc>) -> Self {
        Self::with_ids(spec, Box::new(move || uuid_v7_at(now)))
    }

    /// The trials of `spec` with ids from `ids` (tests pass a deterministic source).
    pub fn with_ids(spec: &'a ResolvedRunSpec, ids: Box<dyn FnMut() -> Uuid + 'a>) -> Self {
        let e = &spec.condition.execution;
        let recipe = AttemptRecipe {
            infrastructure_retries: e.infrastructure_retries,
            candidates: e.candidates,
            max_attempts: e
                .candidates
                .saturating_mul(e.infrastructure_retries.saturating_add(1)),
        };
        Self {
            spec,
            ids,
            recipe,
            task: 0,
            agent: 0,
            repetition: 1,
            candidate: 1,
            current: None,
            ordinal: 0,
        }
    }

    /// Moves to the next (task, agent, repetition, candidate).
    fn advance(&mut self, n: u32) {
        let c = &self.spec.condition;
        self.candidate += 1;
        if self.candidate <= n {
            return;
        }
        self.candidate = 1;
        self.current = None;
        self.repetition += 1;
        if self.repetition <= c.repetitions {
            return;
        }
        self.repetition = 1;
        self.agent += 1;
        if self.agent < c.agents.len() {
            return;
        }
        self.agent = 0;
        self.task += 1;
    }
}

impl Iterator for Expansion<'_> {
    type Item = PlannedTrial;

    fn next(&mut self) -> Option<PlannedTrial> {
        let c = &self.spec.condition;
        if c.repetitions == 0 || c.agents.is_empty() {
            return None;
        }
        let task = c.tasks.get(self.task)?;
        let agent = &c.agents[self.agent];
        let n = c.execution.candidates.max(1);
        let (trial_id, key) = match &self.current {
            Some(cur) => cur.clone(),
            None => {
                let id = (self.ids)();
                let key = trial_key(
                    &self.spec.identity.run_key,
                    &task.release.id,
                    &agent.label,
                    self.repetition,
                );
                self.current = Some((id, key.clone()));
                (id, key)
            }
        };
        // One candidate plans as the trial itself; N candidates as N entries under the
        // trial's identity.
        let (id, entry_key, candidate) = if n == 1 {
            (trial_id, key, None)
        } else {
            let index = self.candidate;
            let entry_key = candidate_key(&key, index);
            let of = CandidateOf {
                trial_id,
                trial_key: key,
                index,
                of: n,
                selection: c.execution.selection,
            };
            ((self.ids)(), entry_key, Some(of))
        };
        let trial = PlannedTrial {
            trial_id: id,
            key: entry_key,
            ordinal: self.ordinal,
            run_id: self.spec.identity.run_id,
            task: task.release.clone(),
            task_source: TrialTaskSource {
                repo: task.source_repo.clone(),
                commit: task.source_commit.clone(),
                image: task.image.clone(),
            },
            agent: TrialAgent {
                label: agent.label.clone(),
                descriptor: agent.descriptor.name.clone(),
                adapter: agent.descriptor.adapter.clone(),
                model: agent.model.clone(),
                digest: agent.digest.clone(),
            },
            compute: ComputeCondition {
                runtime: c.execution.runtime,
                cpus: c.compute.cpus,
                memory_mb: c.compute.memory_mb,
                diff_mb: c.compute.diff_mb,
                agent_timeout_sec: task.agent_timeout_sec,
                verifier_timeout_sec: task.verifier_timeout_sec,
                grading_environment: c.execution.grading_environment,
            },
            repetition: self.repetition,
            family: task.family,
            attempt: self.recipe,
            evaluation: c.evaluation.clone(),
            visibility: c.visibility,
            candidate,
        };
        self.ordinal += 1;
        self.advance(n);
        Some(trial)
    }
}
