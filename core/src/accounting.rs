//! Run accounting: typed trial outcomes matched against the exact planned membership.
//!
//! This module owns [`reconcile`] and [`RunAccounting`]. Every planned trial lands in exactly
//! one [`Bucket`]; observations for identities outside the plan are reported as unexpected;
//! an identical duplicate counts once; conflicting duplicates are quarantined (the trial goes
//! to the `quarantined` bucket) and make the accounting invalid, as do unexpected identities.
//! Accepted records stay in plan order. With best-of-N candidates every candidate is a plan
//! entry accounted here, and [`candidates_of`] adds the per-trial view (`crate::candidates`).
//! The observations file format lives in [`observations`].
//!
//! Layer: above `candidates`, `plan`, `grading`, `spend`, `buckets` and `rates`, which never
//! import it.

pub mod observations;
pub mod stream;

pub use observations::{
    load_lines, load_observations, observed_spend, parse_lines, parse_observations, Observation,
    ObservationsError, ObservedLine, ObservedSpend,
};
pub use stream::{Accountant, ObservationIndex};

pub use crate::buckets::{Bucket, BucketCounts, Coverage, ALL_BUCKETS};
use crate::plan::RunPlan;
use crate::rates::Rates;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

impl Bucket {
    /// The bucket of an accepted observation.
    pub fn of(o: &Observation) -> Bucket {
        Bucket::of_state(o.state, o.ok)
    }
}

/// One planned trial and where it landed, in plan order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccountedTrial {
    /// Plan ordinal.
    pub ordinal: u64,
    /// Trial UUID.
    pub trial_id: Uuid,
    /// Trial key.
    pub key: String,
    /// Its bucket.
    pub bucket: Bucket,
    /// The accepted observation (absent for missing and quarantined trials).
    pub outcome: Option<Observation>,
}

/// A trial observed more than once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Duplicate {
    /// Trial UUID.
    pub trial_id: Uuid,
    /// How many observations named it.
    pub count: usize,
    /// True when all of them are identical (counted once); false when they conflict.
    pub identical: bool,
}

/// Observations kept apart from the aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quarantined {
    /// The trial they name.
    pub trial_id: Uuid,
    /// Why: `conflicting_duplicate` or `unexpected_identity`.
    pub reason: String,
    /// The observations, in input order.
    pub observations: Vec<Observation>,
}

/// The result of reconciling outcomes with a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunAccounting {
    /// The run.
    pub run_id: Uuid,
    /// The run key.
    pub run_key: String,
    /// Digest of the plan accounted against.
    pub plan_digest: String,
    /// Planned trials.
    pub planned: u64,
    /// Observations read.
    pub observations: u64,
    /// Trials per bucket.
    pub counts: BucketCounts,
    /// Rates over the counts.
    pub rates: Rates,
    /// True when no conflicting duplicate and no unexpected identity was found.
    pub valid: bool,
    /// True when every planned trial has an accepted outcome.
    pub complete: bool,
    /// Every planned trial, in plan order.
    pub trials: Vec<AccountedTrial>,
    /// Trials observed more than once.
    pub duplicates: Vec<Duplicate>,
    /// UUIDs observed that the plan does not hold, in input order.
    pub unexpected: Vec<Uuid>,
    /// Conflicting duplicates and unexpected identities, kept apart.
    pub quarantined: Vec<Quarantined>,
    /// With best-of-N candidates (each candidate is a plan entry, counted above): every
    /// planned trial's candidates, its selected one and bucket, the per-trial counts and
    /// rates, and pass@k. Absent without candidates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<crate::candidates::CandidateAccounting>,
    /// Per agent label, the accepted trials whose deciding grade was flagged `grading
    /// tampered` or graded with withheld paths (`core::grading::integrity`), when the
    /// outcomes came with their grades (a coordinator reconciling its own records); absent
    /// when they did not (an observations file carries no grade).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flagged: Option<std::collections::BTreeMap<String, crate::grading::integrity::FlagCounts>>,
}

impl RunAccounting {
    /// `flagged` for every agent label of `plan` (zero where `by_agent` has none).
    pub fn with_flags(
        self,
        plan: &RunPlan,
        by_agent: std::collections::BTreeMap<String, crate::grading::integrity::FlagCounts>,
    ) -> RunAccounting {
        self.with_flags_for(plan.trials.iter().map(|t| t.agent.label.as_str()), by_agent)
    }

    /// `flagged` for every label of `agents` (zero where `by_agent` has none): a plan's
    /// labels, e.g. the keys of its summary's `by_agent`.
    pub fn with_flags_for<'a>(
        mut self,
        agents: impl IntoIterator<Item = &'a str>,
        mut by_agent: std::collections::BTreeMap<String, crate::grading::integrity::FlagCounts>,
    ) -> RunAccounting {
        for label in agents {
            by_agent.entry(label.to_string()).or_default();
        }
        self.flagged = Some(by_agent);
        self
    }

    /// The accepted records, in plan order.
    pub fn accepted(&self) -> impl Iterator<Item = (&AccountedTrial, &Observation)> {
        self.trials
            .iter()
            .filter_map(|t| t.outcome.as_ref().map(|o| (t, o)))
    }
}

/// Matches `observations` to `plan`'s exact UUID set: the [`Accountant`] over the whole plan,
/// its per-trial list kept.
pub fn reconcile(plan: &RunPlan, observations: &[Observation]) -> RunAccounting {
    let mut index = ObservationIndex::new(observations);
    let mut accountant = Accountant::new(plan.run_id, plan.run_key.clone(), plan.digest.clone());
    let trials: Vec<AccountedTrial> = plan
        .trials
        .iter()
        .map(|t| {
            let seen = index.take(t.trial_id);
            accountant.trial(t.ordinal, t.trial_id, t.key.clone(), &seen)
        })
        .collect();
    let mut a = accountant.finish(observations.len() as u64, index.unexpected());
    a.candidates = candidates_of(plan, &trials);
    a.trials = trials;
    a
}

/// The candidate section for `plan` given its accounted entries (in plan order); `None`
/// when the plan has no candidates.
pub fn candidates_of(
    plan: &RunPlan,
    entries: &[AccountedTrial],
) -> Option<crate::candidates::CandidateAccounting> {
    plan.trials.iter().find(|t| t.candidate.is_some())?;
    crate::candidates::account_entries(plan.trials.iter().zip(entries).map(|(p, e)| {
        let o = e.outcome.as_ref();
        crate::candidates::Entry {
            candidate: p.candidate.clone(),
            id: p.trial_id,
            key: p.key.clone(),
            bucket: e.bucket,
            score: o.and_then(|o| o.score),
            attempt_id: o.and_then(|o| o.attempt_id),
        }
    }))
}

#[cfg(test)]
mod tests;
