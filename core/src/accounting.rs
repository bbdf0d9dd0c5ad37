//! Run accounting: typed trial outcomes matched against the exact planned membership.
//!
//! This module owns [`reconcile`] and [`RunAccounting`]. Every planned trial lands in exactly
//! one [`Bucket`]; observations for identities outside the plan are reported as unexpected;
//! an identical duplicate counts once; conflicting duplicates are quarantined (the trial goes
//! to the `quarantined` bucket) and make the accounting invalid, as do unexpected identities.
//! Accepted records stay in plan order. With best-of-N candidates every candidate is a plan
//! entry accounted here, and [`crate::candidates::account`] adds the per-trial view. The
//! observations file format lives in
//! [`observations`].

pub mod observations;
pub mod stream;

pub use observations::{
    load_lines, load_observations, observed_spend, parse_lines, parse_observations, Observation,
    ObservationsError, ObservedLine, ObservedSpend,
};
pub use stream::{Accountant, ObservationIndex};

use crate::lifecycle::State;
use crate::plan::RunPlan;
use crate::rates::Rates;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a planned trial is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// `completed` with `ok: true`.
    Succeeded,
    /// `completed` with `ok: false`: graded, not solved.
    Failed,
    /// `failed`: the agent reported its own failure (no verdict).
    AgentFailed,
    /// `cancelled`.
    Cancelled,
    /// `timeout`.
    TimedOut,
    /// `invalid_configuration`.
    Invalid,
    /// `not_graded`.
    NotGraded,
    /// `infrastructure_error`: never counted as an agent failure.
    InfrastructureError,
    /// `evaluation_error`: the measurement broke.
    EvaluationError,
    /// Conflicting observations; none accepted.
    Quarantined,
    /// No observation.
    Missing,
}

/// Every bucket, in report order.
pub const ALL_BUCKETS: [Bucket; 11] = [
    Bucket::Succeeded,
    Bucket::Failed,
    Bucket::AgentFailed,
    Bucket::Cancelled,
    Bucket::TimedOut,
    Bucket::Invalid,
    Bucket::NotGraded,
    Bucket::InfrastructureError,
    Bucket::EvaluationError,
    Bucket::Quarantined,
    Bucket::Missing,
];

impl Bucket {
    /// The bucket of an accepted observation.
    pub fn of(o: &Observation) -> Bucket {
        Bucket::of_state(o.state, o.ok)
    }

    fn of_state(state: State, ok: Option<bool>) -> Bucket {
        match state {
            State::Completed if ok == Some(true) => Bucket::Succeeded,
            State::Completed => Bucket::Failed,
            State::Failed => Bucket::AgentFailed,
            State::Cancelled => Bucket::Cancelled,
            State::Timeout => Bucket::TimedOut,
            State::InvalidConfiguration => Bucket::Invalid,
            State::NotGraded => Bucket::NotGraded,
            State::InfrastructureError => Bucket::InfrastructureError,
            State::EvaluationError => Bucket::EvaluationError,
            // Parsing refuses non-terminal states; should one arrive, nothing is accepted.
            _ => Bucket::Quarantined,
        }
    }

    /// The bucket a done trial is counted in by the coordinator, from its last attempt's
    /// terminal state and the `ok` of that attempt's accepted record: `None` (not counted
    /// yet) for a `completed` attempt whose record, or its `ok`, has not arrived, and for a
    /// state that is not terminal. The coordinator writes it into `work_items.bucket` when it
    /// settles a trial (`scheduler::apply`) and when a late record arrives
    /// (`record_store::rebucket`; since migration 0023 no SQL copy of this rule exists).
    pub fn settled(terminal: State, ok: Option<bool>) -> Option<Bucket> {
        let counted = terminal.is_terminal() && (terminal != State::Completed || ok.is_some());
        counted.then(|| Bucket::of_state(terminal, ok))
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Bucket::Succeeded => "succeeded",
            Bucket::Failed => "failed",
            Bucket::AgentFailed => "agent_failed",
            Bucket::Cancelled => "cancelled",
            Bucket::TimedOut => "timed_out",
            Bucket::Invalid => "invalid",
            Bucket::NotGraded => "not_graded",
            Bucket::InfrastructureError => "infrastructure_error",
            Bucket::EvaluationError => "evaluation_error",
            Bucket::Quarantined => "quarantined",
            Bucket::Missing => "missing",
        }
    }
}

/// Trials per bucket; the fields sum to the planned count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketCounts {
    /// Succeeded.
    pub succeeded: u64,
    /// Graded, not solved.
    pub failed: u64,
    /// The agent reported its own failure.
    #[serde(default)]
    pub agent_failed: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Timed out.
    pub timed_out: u64,
    /// Invalid configuration.
    pub invalid: u64,
    /// Not graded.
    pub not_graded: u64,
    /// Infrastructure errors.
    pub infrastructure_error: u64,
    /// Evaluation errors.
    pub evaluation_error: u64,
    /// Quarantined (conflicting duplicates).
    pub quarantined: u64,
    /// Missing.
    pub missing: u64,
}

impl BucketCounts {
    fn slot(&mut self, b: Bucket) -> &mut u64 {
        match b {
            Bucket::Succeeded => &mut self.succeeded,
            Bucket::Failed => &mut self.failed,
            Bucket::AgentFailed => &mut self.agent_failed,
            Bucket::Cancelled => &mut self.cancelled,
            Bucket::TimedOut => &mut self.timed_out,
            Bucket::Invalid => &mut self.invalid,
            Bucket::NotGraded => &mut self.not_graded,
            Bucket::InfrastructureError => &mut self.infrastructure_error,
            Bucket::EvaluationError => &mut self.evaluation_error,
            Bucket::Quarantined => &mut self.quarantined,
            Bucket::Missing => &mut self.missing,
        }
    }

    /// Counts one more trial in `b`.
    pub fn add(&mut self, b: Bucket) {
        self.add_n(b, 1);
    }

    /// Counts `n` more trials in `b`.
    pub fn add_n(&mut self, b: Bucket, n: u64) {
        *self.slot(b) += n;
    }

    /// The count of one bucket.
    pub fn get(&self, b: Bucket) -> u64 {
        let mut c = *self;
        *c.slot(b)
    }

    /// The sum over all buckets: the planned trial count.
    pub fn planned(&self) -> u64 {
        ALL_BUCKETS.iter().map(|b| self.get(*b)).sum()
    }
}

/// The one definition of coverage and of its denominator, used by every surface that prints
/// it (reconcile, `run status` and its watch, the records export, `run aggregate`, the
/// report): the denominator is every planned trial; a trial is covered when it ran to an
/// accepted outcome other than `cancelled`. A cancelled trial is accounted (its bucket is
/// `cancelled`, the accounting can be complete) but was not measured, so a run cancelled
/// after 12 of 80 trials has coverage 15%, not 100%. Missing and quarantined trials have no
/// accepted outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// The denominator: planned trials.
    pub planned: u64,
    /// Trials with an accepted outcome, cancelled ones included.
    pub with_outcome: u64,
    /// Trials with an accepted outcome other than `cancelled`: the numerator.
    pub covered: u64,
}

impl Coverage {
    /// The coverage of bucket counts (their sum is the planned count).
    pub fn of(c: &BucketCounts) -> Coverage {
        let planned = c.planned();
        let with_outcome = planned - c.missing - c.quarantined;
        Coverage {
            planned,
            with_outcome,
            covered: with_outcome - c.cancelled,
        }
    }

    /// covered / planned; `None` for an empty plan.
    pub fn ratio(&self) -> Option<f64> {
        (self.planned > 0).then(|| self.covered as f64 / self.planned as f64)
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
    a.candidates = crate::candidates::account(plan, &trials);
    a.trials = trials;
    a
}

#[cfg(test)]
mod tests;
