//! Buckets: where a planned trial is counted ([`Bucket`], one per trial), the counts per
//! bucket ([`BucketCounts`]) and the one definition of coverage ([`Coverage`]). The bottom
//! layer of the numbers: rates are computed over these counts, the accounting matches
//! observations to the plan and counts them here. Re-exported by `accounting`.

use crate::lifecycle::State;
use serde::{Deserialize, Serialize};

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
    /// The bucket of a trial that ended in `state` with grade `ok`.
    pub fn of_state(state: State, ok: Option<bool>) -> Bucket {
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
