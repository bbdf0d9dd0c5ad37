use super::*;

/// The whole (state, event) table, written out independently of `apply`.
fn expected(from: State, event: Event) -> Option<State> {
    use Event as E;
    use State as S;
    match (from, event) {
        (S::NotGraded | S::Completed | S::EvaluationError, E::Regrade) => {
            return Some(S::Evaluating)
        }
        (_, E::Regrade) => return None,
        (S::InfrastructureError, E::Lost) => return None,
        (_, E::Lost) => return Some(S::InfrastructureError),
        _ => {}
    }
    if from.is_terminal() {
        return None;
    }
    match (from, event) {
        (S::Pending, E::Advance) => Some(S::Preparing),
        (S::Preparing, E::Advance) => Some(S::Validating),
        (S::Validating, E::Advance) => Some(S::ConfiguringRuntime),
        (S::ConfiguringRuntime, E::Advance) => Some(S::CreatingWorkspace),
        (S::CreatingWorkspace, E::Advance) => Some(S::StartingAgent),
        (S::StartingAgent, E::Advance) => Some(S::Executing),
        (S::Executing, E::Advance) => Some(S::Collecting),
        (S::Collecting, E::Advance) => Some(S::Evaluating),
        (S::Evaluating, E::Advance) => Some(S::Finalizing),
        (S::Finalizing, E::Advance) => None,
        (S::Finalizing, E::Complete) => Some(S::Completed),
        (_, E::Complete) => None,
        (S::Finalizing, E::FinishUngraded) => Some(S::NotGraded),
        (_, E::FinishUngraded) => None,
        (S::Executing | S::Collecting, E::AgentFailed) => Some(S::Failed),
        (_, E::AgentFailed) => None,
        (S::Executing, E::AgentTimedOut) => Some(S::Timeout),
        (_, E::AgentTimedOut) => None,
        (
            S::Pending
            | S::Preparing
            | S::Validating
            | S::ConfiguringRuntime
            | S::CreatingWorkspace
            | S::StartingAgent
            | S::Executing,
            E::Rejected,
        ) => Some(S::InvalidConfiguration),
        (_, E::Rejected) => None,
        (_, E::InfrastructureFailed) => Some(S::InfrastructureError),
        (S::Evaluating, E::EvaluationFailed) => Some(S::EvaluationError),
        (_, E::EvaluationFailed) => None,
        (_, E::Cancel) => Some(S::Cancelled),
        _ => unreachable!("every non-terminal (state, event) pair is listed: {from:?} {event:?}"),
    }
}

#[test]
fn every_state_event_pair_matches_the_table() {
    let mut allowed = 0;
    for from in ALL_STATES {
        for event in ALL_EVENTS {
            let got = apply(from, event).ok();
            assert_eq!(got, expected(from, event), "{from:?} + {event:?}");
            if let Err(e) = apply(from, event) {
                assert_eq!(e.from, from);
                assert!(e.to_string().starts_with("failed to apply"));
            }
            allowed += usize::from(got.is_some());
        }
    }
    // 9 Advance + Complete + FinishUngraded + 2 AgentFailed + AgentTimedOut
    // + 7 Rejected + 10 InfrastructureFailed + EvaluationFailed + 10 Cancel + 3 Regrade
    // + 17 Lost (every state but infrastructure_error)
    assert_eq!(allowed, 9 + 1 + 1 + 2 + 1 + 7 + 10 + 1 + 10 + 3 + 17);
}

#[test]
fn no_way_out_of_a_terminal_state_but_a_regrade_of_executed_work_or_the_coordinators_loss() {
    for from in ALL_STATES.into_iter().filter(|s| s.is_terminal()) {
        let regradable = matches!(
            from,
            State::NotGraded | State::Completed | State::EvaluationError
        );
        let losable = from != State::InfrastructureError;
        for event in ALL_EVENTS {
            let ok = apply(from, event).is_ok();
            assert_eq!(
                ok,
                (regradable && event == Event::Regrade) || (losable && event == Event::Lost),
                "{from:?} {event:?}"
            );
        }
        for to in ALL_STATES {
            assert_eq!(
                is_valid_step(from, to),
                (regradable && to == State::Evaluating)
                    || (losable && to == State::InfrastructureError),
                "{from:?} -> {to:?}"
            );
            // A worker never takes the coordinator's step.
            assert_eq!(
                is_worker_step(from, to),
                regradable && to == State::Evaluating,
                "worker {from:?} -> {to:?}"
            );
        }
    }
    // A timeout, an agent failure, a cancel, an infrastructure error or a rejected
    // configuration can never be graded.
    for s in [
        State::Timeout,
        State::Failed,
        State::Cancelled,
        State::InfrastructureError,
        State::InvalidConfiguration,
    ] {
        assert!(apply(s, Event::Regrade).is_err());
    }
}

#[test]
fn advance_never_skips_a_step() {
    let mut s = State::Pending;
    let mut path = vec![s];
    while let Ok(n) = apply(s, Event::Advance) {
        s = n;
        path.push(s);
    }
    assert_eq!(path, CHAIN[..10].to_vec());
    path.push(apply(s, Event::Complete).unwrap());
    assert_eq!(path, CHAIN.to_vec());
    assert!(validate_path(&path).is_ok());
    // Dropping any intermediate step makes the path invalid.
    for skip in 1..path.len() - 1 {
        let mut p = path.clone();
        p.remove(skip);
        assert!(
            validate_path(&p).is_err(),
            "skipping {:?} passed",
            path[skip]
        );
    }
}

#[test]
fn validate_path_rejects_bad_starts_and_states_round_trip() {
    assert!(validate_path(&[]).is_err());
    assert!(validate_path(&[State::Preparing]).is_err());
    for s in ALL_STATES {
        assert_eq!(State::parse(s.as_str()), Some(s));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<State>(&json).unwrap(), s);
    }
    assert_eq!(ALL_STATES.iter().filter(|s| s.is_terminal()).count(), 8);
}

#[test]
fn an_agent_failure_is_read_only_where_the_agent_can_cause_it() {
    // EXECUTING: the agent's exit or a runtime limit; COLLECTING: work over a limit measured
    // when it is collected (the diff size). Never before the agent ran, never while grading.
    for from in ALL_STATES {
        let allowed = apply(from, Event::AgentFailed).is_ok();
        assert_eq!(
            allowed,
            matches!(from, State::Executing | State::Collecting),
            "{from:?}"
        );
    }
    let path = [
        State::Pending,
        State::Preparing,
        State::Validating,
        State::ConfiguringRuntime,
        State::CreatingWorkspace,
        State::StartingAgent,
        State::Executing,
        State::Collecting,
        State::Failed,
    ];
    assert!(validate_path(&path).is_ok());
    assert!(validate_path(&[&path[..8], &[State::Evaluating, State::Failed]].concat()).is_err());
}
