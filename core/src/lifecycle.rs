//! The lifecycle of one attempt as a pure state machine.
//!
//! ```text
//! PENDING -> PREPARING -> VALIDATING -> CONFIGURING_RUNTIME -> CREATING_WORKSPACE
//!         -> STARTING_AGENT -> EXECUTING -> COLLECTING -> EVALUATING -> FINALIZING -> COMPLETED
//! ```
//!
//! A transition that skips a step or leaves a terminal state is an error. Each terminal
//! failure state can only be entered from the phases where its cause can happen, so an
//! infrastructure error is never read as an agent failure.
//!
//! There are two ways out of a terminal state. [`Event::Regrade`]: an attempt whose agent ran
//! to the end (`not_graded`, `completed`, `evaluation_error`) may be graded again later, which
//! appends EVALUATING and FINALIZING entries to its history; the agent never runs again.
//! [`Event::Lost`]: the coordinator took the attempt back from its worker before the worker
//! confirmed its end (a worker killed after it reported `completed`, before its record with
//! the grade arrived); the attempt ends `infrastructure_error` after the state its worker
//! reported, so its history says both. Only the coordinator takes that step
//! ([`is_worker_step`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Every state an attempt can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Created, nothing done yet.
    Pending,
    /// Loading the task and agent.
    Preparing,
    /// Checking the task, agent, credentials and family.
    Validating,
    /// Setting up the runtime ("no runtime" in direct mode).
    ConfiguringRuntime,
    /// Making the git worktree and applying the mutation.
    CreatingWorkspace,
    /// Launching the agent process.
    StartingAgent,
    /// The agent is running.
    Executing,
    /// Collecting the agent's diff, fingerprint and observations.
    Collecting,
    /// Running the hidden tests.
    Evaluating,
    /// Writing the record and cleaning up.
    Finalizing,
    /// Terminal: reached the evaluator; `ok` says whether the task was solved.
    Completed,
    /// Terminal: the agent reported a failure.
    Failed,
    /// Terminal: the agent ran out of time.
    Timeout,
    /// Terminal: cancelled.
    Cancelled,
    /// Terminal: the environment could not run the agent.
    InfrastructureError,
    /// Terminal: the configuration was rejected (before the agent started, or by the agent
    /// or its model provider: a CLI refusing its flags, a refused credential).
    InvalidConfiguration,
    /// Terminal: the measurement itself broke.
    EvaluationError,
    /// Terminal: executed, grading deliberately not run.
    NotGraded,
}

/// The forward chain, in order.
pub const CHAIN: [State; 11] = [
    State::Pending,
    State::Preparing,
    State::Validating,
    State::ConfiguringRuntime,
    State::CreatingWorkspace,
    State::StartingAgent,
    State::Executing,
    State::Collecting,
    State::Evaluating,
    State::Finalizing,
    State::Completed,
];

/// Every state.
pub const ALL_STATES: [State; 18] = [
    State::Pending,
    State::Preparing,
    State::Validating,
    State::ConfiguringRuntime,
    State::CreatingWorkspace,
    State::StartingAgent,
    State::Executing,
    State::Collecting,
    State::Evaluating,
    State::Finalizing,
    State::Completed,
    State::Failed,
    State::Timeout,
    State::Cancelled,
    State::InfrastructureError,
    State::InvalidConfiguration,
    State::EvaluationError,
    State::NotGraded,
];

impl State {
    /// True for the eight terminal states.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Completed
                | State::Failed
                | State::Timeout
                | State::Cancelled
                | State::InfrastructureError
                | State::InvalidConfiguration
                | State::EvaluationError
                | State::NotGraded
        )
    }

    /// The next state of the forward chain, for non-terminal states before FINALIZING.
    pub fn next_in_chain(self) -> Option<State> {
        let i = CHAIN.iter().position(|s| *s == self)?;
        // FINALIZING -> COMPLETED needs a verdict: it is an event of its own.
        if self == State::Finalizing {
            return None;
        }
        CHAIN.get(i + 1).copied()
    }

    /// The snake_case name used in records and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Preparing => "preparing",
            State::Validating => "validating",
            State::ConfiguringRuntime => "configuring_runtime",
            State::CreatingWorkspace => "creating_workspace",
            State::StartingAgent => "starting_agent",
            State::Executing => "executing",
            State::Collecting => "collecting",
            State::Evaluating => "evaluating",
            State::Finalizing => "finalizing",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Timeout => "timeout",
            State::Cancelled => "cancelled",
            State::InfrastructureError => "infrastructure_error",
            State::InvalidConfiguration => "invalid_configuration",
            State::EvaluationError => "evaluation_error",
            State::NotGraded => "not_graded",
        }
    }

    /// Parses the snake_case name.
    pub fn parse(s: &str) -> Option<State> {
        ALL_STATES.into_iter().find(|st| st.as_str() == s)
    }

    /// True while the agent has not been started: the phases where the configuration may be
    /// rejected as `invalid_configuration`.
    pub fn before_agent_started(self) -> bool {
        matches!(
            self,
            State::Pending
                | State::Preparing
                | State::Validating
                | State::ConfiguringRuntime
                | State::CreatingWorkspace
                | State::StartingAgent
        )
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// The current phase finished; move to the next one in the chain.
    Advance,
    /// FINALIZING done after a grade: COMPLETED.
    Complete,
    /// FINALIZING done without grading: NOT_GRADED.
    FinishUngraded,
    /// The agent exited reporting failure or ran over a limit of the plan (EXECUTING), or
    /// left work over a limit that is only measured once it is collected, such as a diff
    /// larger than `compute.diff_mb` (COLLECTING).
    AgentFailed,
    /// The agent ran out of time (EXECUTING only).
    AgentTimedOut,
    /// The configuration was rejected: before the agent started, or while it ran when the
    /// agent itself refused it (a CLI that refuses to start, a credential the model
    /// provider refused). Never after the agent finished.
    Rejected,
    /// The environment broke (any non-terminal state).
    InfrastructureFailed,
    /// The evaluation broke (EVALUATING only).
    EvaluationFailed,
    /// Cancelled (any non-terminal state).
    Cancel,
    /// Grade an executed attempt later (from `not_graded`, `completed` or
    /// `evaluation_error` only): back to EVALUATING.
    Regrade,
    /// The coordinator took the attempt back from its worker (its lease expired or was
    /// released) before the worker's end of it was confirmed by a finish: INFRASTRUCTURE_ERROR,
    /// from any state but `infrastructure_error` itself, including a terminal state the worker
    /// had only reported as a transition (its record, with the grade, never arrived: the
    /// coordinator cannot vouch for it). The coordinator's step, never a worker's.
    Lost,
}

/// All events, for table tests.
pub const ALL_EVENTS: [Event; 11] = [
    Event::Advance,
    Event::Complete,
    Event::FinishUngraded,
    Event::AgentFailed,
    Event::AgentTimedOut,
    Event::Rejected,
    Event::InfrastructureFailed,
    Event::EvaluationFailed,
    Event::Cancel,
    Event::Regrade,
    Event::Lost,
];

/// A transition that the lifecycle does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("failed to apply `{event:?}` in state {from}: the lifecycle does not allow it")]
pub struct TransitionError {
    /// State the attempt was in.
    pub from: State,
    /// The refused event.
    pub event: Event,
}

/// The state `event` moves `from` to, or an error when the lifecycle forbids it.
pub fn apply(from: State, event: Event) -> Result<State, TransitionError> {
    let err = Err(TransitionError { from, event });
    if event == Event::Regrade {
        return match from {
            State::NotGraded | State::Completed | State::EvaluationError => Ok(State::Evaluating),
            _ => err,
        };
    }
    if event == Event::Lost {
        return match from {
            State::InfrastructureError => err,
            _ => Ok(State::InfrastructureError),
        };
    }
    if from.is_terminal() {
        return err;
    }
    let to = match event {
        Event::Advance => match from.next_in_chain() {
            Some(s) => s,
            None => return err,
        },
        Event::Complete if from == State::Finalizing => State::Completed,
        Event::FinishUngraded if from == State::Finalizing => State::NotGraded,
        Event::AgentFailed if matches!(from, State::Executing | State::Collecting) => State::Failed,
        Event::AgentTimedOut if from == State::Executing => State::Timeout,
        Event::Rejected if from.before_agent_started() || from == State::Executing => {
            State::InvalidConfiguration
        }
        Event::InfrastructureFailed => State::InfrastructureError,
        Event::EvaluationFailed if from == State::Evaluating => State::EvaluationError,
        Event::Cancel => State::Cancelled,
        _ => return err,
    };
    Ok(to)
}

/// True when `to` may directly follow `from` by some event; used to validate transition
/// logs that arrive from elsewhere (a worker, a record file).
pub fn is_valid_step(from: State, to: State) -> bool {
    ALL_EVENTS.iter().any(|e| apply(from, *e) == Ok(to))
}

/// True when a worker may report `to` right after `from`: [`is_valid_step`] without the
/// coordinator's own step ([`Event::Lost`]). A worker that reported a terminal state can only
/// regrade it; it never turns it into an infrastructure error afterwards.
pub fn is_worker_step(from: State, to: State) -> bool {
    ALL_EVENTS
        .iter()
        .filter(|e| **e != Event::Lost)
        .any(|e| apply(from, *e) == Ok(to))
}

/// Checks that a sequence of states, starting at PENDING, only takes allowed steps.
pub fn validate_path(states: &[State]) -> Result<(), String> {
    match states.first() {
        None => return Err("the transition log is empty".into()),
        Some(State::Pending) => {}
        Some(s) => return Err(format!("the transition log starts at {s}, not pending")),
    }
    for w in states.windows(2) {
        if !is_valid_step(w[0], w[1]) {
            return Err(format!("{} -> {} is not an allowed step", w[0], w[1]));
        }
    }
    Ok(())
}

/// What a work item asks a worker to do (`work_items.kind`, `attempts.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkKind {
    /// Run the agent (and grade, unless the plan says not to).
    Execute,
    /// Grade an attempt executed earlier.
    Grade,
}

impl WorkKind {
    /// Both kinds.
    pub const ALL: [WorkKind; 2] = [Self::Execute, Self::Grade];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Execute => "execute",
            Self::Grade => "grade",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[cfg(test)]
mod tests;
