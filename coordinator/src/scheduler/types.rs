//! Inputs and outputs of the scheduler.

use akbench_core::lifecycle::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use akbench_core::work::WorkKind;

/// One work item to create for a planned trial of a started run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWorkItem {
    /// The planned trial (must exist in `planned_trials`).
    pub trial_id: Uuid,
    /// Its ordinal in the plan.
    pub ordinal: i32,
    /// Infrastructure retries allowed.
    pub retry_budget: i32,
    /// The agent condition's name (what per-agent caps count).
    pub agent: String,
    /// The provider route (what per-provider caps count), when the agent uses one.
    pub provider_route: Option<String>,
    /// Execute or grade.
    pub kind: WorkKind,
    /// The document the worker receives (core's `WorkItem`); `None` falls back to the
    /// planned trial's document.
    pub document: Option<serde_json::Value>,
}

/// One agent condition of a run being started ([`super::Scheduler::start_run`]): every
/// planned trial of the agent becomes an execute work item counted against its caps, and its
/// document is stored once for the run (`run_agents`).
#[derive(Debug, Clone, PartialEq)]
pub struct RunAgent {
    /// The agent condition's label (`planned_trials.agent`).
    pub label: String,
    /// Its provider route (what per-provider caps count), when it uses one.
    pub provider_route: Option<String>,
    /// core's `SpecAgent` as serde serializes it: the `agent` of each trial's `WorkItem`.
    pub document: serde_json::Value,
}

/// Per-run dispatch limits, stored as jsonb on `runs.caps`: core's concurrency caps (one
/// type with `sweep --local`'s, its fields at the top level of the stored document), the
/// worker labels, and the run's share of the workers (priority, weight).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    /// The concurrency caps.
    #[serde(flatten)]
    pub limits: akbench_core::dispatch::RunCaps,
    /// Labels a worker must advertise to claim the run's items (`execution.worker_labels`,
    /// matched as `akbench_core::placement::eligible` does, in `claim_candidates.sql`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_labels: Vec<String>,
    /// The run's priority and weight among runs sharing the workers
    /// (`execution.priority`, `execution.weight`; `akbench_core::dispatch::share`), at the
    /// top level of the stored document, left out when they are the defaults.
    #[serde(flatten)]
    pub share: akbench_core::dispatch::share::Share,
}

/// A new attempt leased to a worker by [`super::Scheduler::claim`].
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// The new attempt (UUIDv7).
    pub attempt_id: Uuid,
    /// The planned trial.
    pub trial_id: Uuid,
    /// The run.
    pub run_id: Uuid,
    /// Attempt number within the trial, from 1.
    pub number: i32,
    /// The lease's fencing epoch.
    pub epoch: i64,
    /// Execute or grade.
    pub kind: WorkKind,
    /// The planned trial's document (`planned_trials.document`).
    pub document: serde_json::Value,
}

/// One lifecycle transition reported by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionIn {
    /// Position in the attempt's history, from 1, without gaps.
    pub seq: u32,
    /// The state entered.
    pub state: State,
    /// When (worker clock).
    pub at: DateTime<Utc>,
    /// Detail; may be empty.
    pub note: String,
}

/// A worker's report about one attempt, as [`super::Scheduler::report`] takes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// Transitions, in increasing seq.
    Transitions {
        /// The attempt.
        attempt_id: Uuid,
        /// The lease epoch the worker holds.
        epoch: i64,
        /// The transitions.
        transitions: Vec<TransitionIn>,
    },
    /// The attempt reached a terminal state.
    Finished {
        /// The attempt.
        attempt_id: Uuid,
        /// The lease epoch the worker holds.
        epoch: i64,
        /// The terminal state.
        terminal: State,
        /// Why; may be empty for `completed`.
        cause: String,
    },
    /// The attempt's record.
    Record {
        /// The attempt.
        attempt_id: Uuid,
        /// The lease epoch the worker holds.
        epoch: i64,
        /// Canonical JSON of the attempt record.
        record_json: String,
        /// `sha256:<hex>` of the canonical JSON.
        digest: String,
    },
}

impl Report {
    /// The attempt the report is about.
    pub fn attempt_id(&self) -> Uuid {
        match self {
            Self::Transitions { attempt_id, .. }
            | Self::Finished { attempt_id, .. }
            | Self::Record { attempt_id, .. } => *attempt_id,
        }
    }
}

/// What the coordinator decided for a trial whose attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Back to `ready`: a new attempt later (infrastructure error within budget).
    Requeued,
    /// Done with this outcome.
    Done(State),
}

/// What a stored report did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportAck {
    /// Transitions stored (or re-sent identically); the highest seq now stored.
    Transitions {
        /// Highest stored seq.
        last_seq: u32,
    },
    /// The attempt finished (or had already finished identically: `None`).
    Finished(Option<Disposition>),
    /// The record was stored (`false`: an identical record was already stored).
    Record {
        /// True for the first upload.
        stored: bool,
    },
}

/// One attempt whose lease expired, from [`super::Scheduler::reap`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// The attempt (now `infrastructure_error`).
    pub attempt_id: Uuid,
    /// Its trial.
    pub trial_id: Uuid,
    /// The worker that went silent.
    pub worker_id: String,
    /// What became of the trial.
    pub disposition: Disposition,
}

/// What [`super::Scheduler::cancel_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelReport {
    /// Queued items marked `cancelled`.
    pub cancelled_items: u64,
    /// Live attempts and their workers: send them `Cancel`.
    pub live: Vec<(Uuid, String)>,
    /// When the run did not move (core's run machine): its state and why (an ended run's
    /// outcomes stand; a second cancel).
    pub unchanged: Option<(
        akbench_core::dispatch::RunState,
        akbench_core::dispatch::machine::Unchanged,
    )>,
}

/// A session's claim to make after its reports (see [`Scheduler::report_and_claim`]).
#[derive(Debug, Clone)]
pub struct ClaimAfter {
    /// The worker.
    pub worker_id: String,
    /// Slots free before these reports.
    pub free: usize,
    /// The most attempts to claim.
    pub slots: usize,
    /// Attempts the session holds (a finish or stale refusal of one frees its slot).
    pub held: std::collections::HashSet<Uuid>,
    /// Lease TTL in milliseconds.
    pub ttl_ms: i64,
    /// Another worker may claim: skip the items whose last lease this worker lost.
    pub others_eligible: bool,
    /// The labels the worker advertised, in one canonical form ([`placement_key`]): the
    /// claims of sessions with equal keys may be made together (scheduler/rounds.rs).
    pub placement: String,
}

/// The canonical form of a worker's advertised labels ([`ClaimAfter::placement`]).
pub fn placement_key(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k:?}={v:?}"))
        .collect::<Vec<_>>()
        .join(",")
}
