//! The one conversion between core's lifecycle states and the wire's `AttemptState`, used by
//! the worker (which sends transitions and finishes) and the coordinator (which reads them).

use crate::v1::AttemptState;
use akbench_core::lifecycle::State;

/// The wire state of a lifecycle state.
pub fn wire_state(state: State) -> AttemptState {
    match state {
        State::Pending => AttemptState::Pending,
        State::Preparing => AttemptState::Preparing,
        State::Validating => AttemptState::Validating,
        State::ConfiguringRuntime => AttemptState::ConfiguringRuntime,
        State::CreatingWorkspace => AttemptState::CreatingWorkspace,
        State::StartingAgent => AttemptState::StartingAgent,
        State::Executing => AttemptState::Executing,
        State::Collecting => AttemptState::Collecting,
        State::Evaluating => AttemptState::Evaluating,
        State::Finalizing => AttemptState::Finalizing,
        State::Completed => AttemptState::Completed,
        State::Failed => AttemptState::Failed,
        State::Timeout => AttemptState::Timeout,
        State::Cancelled => AttemptState::Cancelled,
        State::InfrastructureError => AttemptState::InfrastructureError,
        State::InvalidConfiguration => AttemptState::InvalidConfiguration,
        State::EvaluationError => AttemptState::EvaluationError,
        State::NotGraded => AttemptState::NotGraded,
    }
}

/// The lifecycle state of a wire state; `None` for unspecified or unknown values.
pub fn state_of(value: i32) -> Option<State> {
    let s = match AttemptState::try_from(value).ok()? {
        AttemptState::Unspecified => return None,
        AttemptState::Pending => State::Pending,
        AttemptState::Preparing => State::Preparing,
        AttemptState::Validating => State::Validating,
        AttemptState::ConfiguringRuntime => State::ConfiguringRuntime,
        AttemptState::CreatingWorkspace => State::CreatingWorkspace,
        AttemptState::StartingAgent => State::StartingAgent,
        AttemptState::Executing => State::Executing,
        AttemptState::Collecting => State::Collecting,
        AttemptState::Evaluating => State::Evaluating,
        AttemptState::Finalizing => State::Finalizing,
        AttemptState::Completed => State::Completed,
        AttemptState::Failed => State::Failed,
        AttemptState::Timeout => State::Timeout,
        AttemptState::Cancelled => State::Cancelled,
        AttemptState::InfrastructureError => State::InfrastructureError,
        AttemptState::InvalidConfiguration => State::InvalidConfiguration,
        AttemptState::EvaluationError => State::EvaluationError,
        AttemptState::NotGraded => State::NotGraded,
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::lifecycle::ALL_STATES;

    #[test]
    fn every_state_maps_both_ways_under_its_own_name() {
        for s in ALL_STATES {
            let w = wire_state(s);
            assert_ne!(w, AttemptState::Unspecified, "{s}");
            assert_eq!(
                w.as_str_name(),
                format!("ATTEMPT_STATE_{}", s.as_str().to_uppercase())
            );
            assert_eq!(state_of(w as i32), Some(s));
        }
        assert_eq!(state_of(0), None);
        assert_eq!(state_of(99), None);
    }
}
