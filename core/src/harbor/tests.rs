use super::*;
use serde_json::json;

fn result(v: serde_json::Value) -> TrialResult {
    serde_json::from_value(v).unwrap()
}

#[test]
fn results_map_to_states() {
    let id = Uuid::now_v7();
    let path = format!("trials/{id}");
    let base = |extra: serde_json::Value| {
        let mut v = json!({"trial_name": "t__abc", "task_name": "akbench/x", "config": {"task": {"path": path}}, "id": "h1", "agent_info": {"name": "oracle"}});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        result(v)
    };
    let ex = |t: &str| json!({"exception_info": {"exception_type": t, "exception_message": "m", "exception_traceback": "", "occurred_at": "2026-01-01T00:00:00Z"}});
    let table = [
        (
            json!({"verifier_result": {"rewards": {"reward": 1.0}}}),
            State::Completed,
            Some(true),
            Some(1.0),
        ),
        (
            json!({"verifier_result": {"rewards": {"reward": 0}}}),
            State::Completed,
            Some(false),
            Some(0.0),
        ),
        (
            json!({"verifier_result": {"rewards": {"pass": 0.5}}}),
            State::Completed,
            Some(false),
            Some(0.5),
        ),
        (
            json!({"verifier_result": {"rewards": {"a": 1, "b": 1}}}),
            State::EvaluationError,
            None,
            None,
        ),
        (
            json!({"verifier_result": null}),
            State::EvaluationError,
            None,
            None,
        ),
        (ex("AgentTimeoutError"), State::Timeout, None, None),
        (
            ex("EnvironmentStartTimeoutError"),
            State::InfrastructureError,
            None,
            None,
        ),
        (
            ex("AgentSetupTimeoutError"),
            State::InfrastructureError,
            None,
            None,
        ),
        (ex("ContextLengthExceededError"), State::Failed, None, None),
        (
            ex("ModelNotFoundError"),
            State::InvalidConfiguration,
            None,
            None,
        ),
        (
            ex("ApiRateLimitError"),
            State::InfrastructureError,
            None,
            None,
        ),
        (
            ex("RewardFileNotFoundError"),
            State::EvaluationError,
            None,
            None,
        ),
        (
            ex("VerifierTimeoutError"),
            State::EvaluationError,
            None,
            None,
        ),
        (ex("NonZeroAgentExitCodeError"), State::Failed, None, None),
        (ex("CancelledError"), State::Cancelled, None, None),
        (
            ex("SomethingNewError"),
            State::InfrastructureError,
            None,
            None,
        ),
    ];
    for (extra, state, ok, score) in table {
        let r = base(extra.clone());
        assert_eq!(trial_id(&r).unwrap(), id);
        let (o, _) = observation(&r, id, 1.0);
        assert_eq!((o.state, o.ok, o.score), (state, ok, score), "{extra}");
        o.check().unwrap_or_else(|e| panic!("{extra}: {e}"));
        assert_eq!(o.source.as_deref(), Some("harbor:t__abc"));
    }
    // An agent timeout with rewards (Harbor verifies anyway) is still a timeout.
    let mut v = ex("AgentTimeoutError");
    v["verifier_result"] = json!({"rewards": {"reward": 1.0}});
    assert_eq!(observation(&base(v), id, 1.0).0.state, State::Timeout);
    // The threshold decides.
    let r = base(json!({"verifier_result": {"rewards": {"reward": 0.5}}}));
    assert_eq!(observation(&r, id, 0.5).0.ok, Some(true));
}

#[test]
fn identities_come_from_the_task_path() {
    let r =
        result(json!({"trial_name": "t", "config": {"task": {"path": "/x/trials/not-a-uuid"}}}));
    assert!(trial_id(&r).unwrap_err().contains("not-a-uuid"));
    let r = result(json!({"trial_name": "t"}));
    assert!(trial_id(&r).is_err());
    let id = Uuid::now_v7();
    let r = result(
        json!({"trial_name": "t", "config": {"task": {"path": format!("/abs/trials/{id}/")}}}),
    );
    assert_eq!(trial_id(&r).unwrap(), id);
}

fn with_exception(t: &str, rewards: Option<serde_json::Value>) -> TrialResult {
    let id = Uuid::now_v7();
    result(json!({
        "trial_name": "t__abc",
        "config": {"task": {"path": format!("trials/{id}")}},
        "verifier_result": rewards.map(|r| json!({"rewards": r})),
        "exception_info": {"exception_type": t, "exception_message": "m"},
    }))
}

/// Harbor 0.25's error policy counts a spent budget and a refusal as the agent's outcome
/// (the reward is a valid measurement): graded by the reward, `failed` without one; never an
/// infrastructure error.
#[test]
fn the_agents_outcomes_by_harbors_policy_are_graded_by_the_reward() {
    let id = Uuid::now_v7();
    for t in [
        "ContextLengthExceededError",
        "OutputLengthExceededError",
        "ContentPolicyViolationError",
        "ContextWindowExceededError",
        "OutputTokenExceededError",
        "AgentSafetyRefusalError",
    ] {
        let (o, _) = observation(&with_exception(t, Some(json!({"reward": 1.0}))), id, 1.0);
        assert_eq!(
            (o.state, o.ok, o.score),
            (State::Completed, Some(true), Some(1.0)),
            "{t}"
        );
        let (o, _) = observation(&with_exception(t, Some(json!({"reward": 0.0}))), id, 1.0);
        assert_eq!((o.state, o.ok), (State::Completed, Some(false)), "{t}");
        let (o, _) = observation(&with_exception(t, None), id, 1.0);
        assert_eq!((o.state, o.ok, o.score), (State::Failed, None, None), "{t}");
        o.check().unwrap();
    }
}

/// Every type of Harbor's table, by its cause.
#[test]
fn every_harbor_policy_type_maps_by_its_cause() {
    let mut seen = std::collections::BTreeSet::new();
    for (t, cause) in HARBOR_POLICY {
        assert!(seen.insert(*t), "{t} listed twice");
        assert_eq!(cause_of(t), *cause);
        let (state, _) = state_of_exception(t);
        let expected = match cause {
            FailureCause::AgentExhaustedBudget if *t == "AgentTimeoutError" => Some(State::Timeout),
            FailureCause::AgentExhaustedBudget | FailureCause::AgentRefusedTask => None,
            FailureCause::Unclassified => Some(State::Failed),
            FailureCause::VerifierFailed => Some(State::EvaluationError),
            FailureCause::Cancelled => Some(State::Cancelled),
            FailureCause::ModelProviderFailed if NOT_FOUND.contains(t) => {
                Some(State::InvalidConfiguration)
            }
            FailureCause::ModelProviderFailed
            | FailureCause::SandboxFailed
            | FailureCause::HarborFailed => Some(State::InfrastructureError),
        };
        assert_eq!(state, expected, "{t}");
    }
    assert_eq!(cause_of("SomethingNewError"), FailureCause::Unclassified);
    assert_eq!(
        state_of_exception("SomethingNewError").0,
        Some(State::InfrastructureError)
    );
}

#[test]
fn tokens_and_cost_are_kept() {
    let r = result(json!({
        "trial_name": "t",
        "agent_result": {"n_input_tokens": 1200, "n_cache_tokens": 200, "n_output_tokens": 30, "cost_usd": 0.25, "rollout_details": null, "metadata": null},
    }));
    assert_eq!(
        spend(&r),
        Some(crate::spend::Spend {
            input_tokens: Some(1000),
            cached_input_tokens: Some(200),
            output_tokens: Some(30),
            cost_usd: Some(0.25),
        })
    );
    let r = result(
        json!({"trial_name": "t", "agent_result": {"n_input_tokens": null, "cost_usd": null}}),
    );
    assert_eq!(spend(&r), None);
    assert_eq!(spend(&result(json!({"trial_name": "t"}))), None);
    let r = result(json!({"trial_name": "t", "agent_result": {"n_output_tokens": 7}}));
    assert_eq!(spend(&r).unwrap().input_tokens, None);
}

#[test]
fn a_multi_step_trials_spend_is_the_sum_of_its_steps() {
    // Harbor's compute_token_cost_totals: a multi-step trial has no top-level agent_result.
    let r = result(json!({
        "trial_name": "t",
        "verifier_result": {"rewards": {"reward": 1.0}},
        "step_results": [
            {"step_name": "one", "agent_result": {"n_input_tokens": 1000, "n_cache_tokens": 100, "n_output_tokens": 10, "cost_usd": 0.5}},
            {"step_name": "two", "agent_result": {"n_input_tokens": 500, "n_output_tokens": 5}},
            {"step_name": "three", "agent_result": null},
        ],
    }));
    assert_eq!(
        spend(&r),
        Some(crate::spend::Spend {
            input_tokens: Some(1400),
            cached_input_tokens: Some(100),
            output_tokens: Some(15),
            cost_usd: Some(0.5),
        })
    );
    // The top-level agent_result wins when present, as in Harbor.
    let mut top = r.clone();
    top.agent_result = Some(AgentResult {
        n_input_tokens: Some(9),
        n_cache_tokens: None,
        n_output_tokens: None,
        cost_usd: None,
    });
    assert_eq!(spend(&top).unwrap().input_tokens, Some(9));
    assert_eq!(
        spend(&result(json!({"trial_name": "t", "step_results": []}))),
        None
    );
}

#[test]
fn a_step_exception_decides_a_multi_step_trial_as_harbors_failure_cause() {
    // A step's environment failure is the trial's (Harbor records it on the step only).
    let r = result(json!({
        "trial_name": "t",
        "verifier_result": {"rewards": {"reward": 1.0}},
        "step_results": [
            {"step_name": "one", "verifier_result": {"rewards": {"reward": 1.0}}},
            {"step_name": "two", "exception_info": {"exception_type": "RuntimeError"}},
        ],
    }));
    assert_eq!(exception(&r).unwrap().exception_type, "RuntimeError");
    let (o, _) = observation(&r, uuid::Uuid::nil(), 1.0);
    assert_eq!(o.state, State::InfrastructureError);
    // The trial's own exception comes first.
    let mut own = r.clone();
    own.exception_info = Some(ExceptionInfo {
        exception_type: "AgentTimeoutError".into(),
        exception_message: None,
    });
    assert_eq!(exception(&own).unwrap().exception_type, "AgentTimeoutError");
    // Without exceptions the trial's reward decides.
    let ok = result(json!({
        "trial_name": "t",
        "verifier_result": {"rewards": {"reward": 1.0}},
        "step_results": [{"step_name": "one"}],
    }));
    assert_eq!(
        observation(&ok, uuid::Uuid::nil(), 1.0).0.state,
        State::Completed
    );
}

/// Harbor's `step_results` become the attempt's steps: verdicts by core's rule and the
/// threshold, times from the agent and verifier timings, uncached input tokens, the cause
/// from the exception; planned steps without a result are `not_run`, and the last step that
/// ran says Harbor stopped there.
#[test]
fn step_results_become_the_attempts_steps() {
    use crate::record::steps::StepVerdict::*;
    let r = result(json!({
        "trial_name": "t",
        "step_results": [
            {"step_name": "one",
             "agent_result": {"n_input_tokens": 1000, "n_cache_tokens": 100, "n_output_tokens": 10, "cost_usd": 0.5},
             "verifier_result": {"rewards": {"reward": 1.0, "<b>": 0.5}},
             "agent_execution": {"started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z"},
             "verifier": {"started_at": "2026-01-01T00:01:00Z", "finished_at": "2026-01-01T00:02:00Z"}},
            {"step_name": "two",
             "agent_result": {"n_input_tokens": 50},
             "verifier_result": {"rewards": {"reward": 0.5}},
             "agent_execution": {"started_at": "2026-01-01T00:03:00Z", "finished_at": "2026-01-01T00:04:00Z"}},
            {"step_name": "three",
             "exception_info": {"exception_type": "RuntimeError", "exception_message": "boom"}},
        ],
    }));
    let planned: Vec<String> = ["one", "two", "three", "four"].map(String::from).to_vec();
    let s = steps::steps(&r, &planned, 0.5);
    let t = |x: &str| Some(x.parse::<chrono::DateTime<chrono::Utc>>().unwrap());
    // (name, verdict, started, ended, input, output, cost, cause, gated)
    let table = [
        (
            "one",
            Solved,
            t("2026-01-01T00:00:00Z"),
            t("2026-01-01T00:02:00Z"),
            Some(900),
            Some(10),
            Some(0.5),
            None,
            false,
        ),
        (
            "two",
            Solved,
            t("2026-01-01T00:03:00Z"),
            t("2026-01-01T00:04:00Z"),
            Some(50),
            None,
            None,
            None,
            false,
        ),
        (
            "three",
            NotGraded,
            None,
            None,
            None,
            None,
            None,
            Some("harbor: RuntimeError: boom"),
            true,
        ),
        ("four", NotRun, None, None, None, None, None, None, false),
    ];
    assert_eq!(s.len(), table.len());
    for (got, (name, v, start, end, input, output, cost, cause, gated)) in s.iter().zip(table) {
        assert_eq!(got.name, name);
        assert_eq!(got.verdict, v, "{name}");
        assert_eq!((got.started_at, got.ended_at), (start, end), "{name}");
        assert_eq!(
            (got.input_tokens, got.output_tokens, got.cost_usd),
            (input, output, cost),
            "{name}"
        );
        assert_eq!(got.cause.as_deref(), cause, "{name}");
        assert_eq!(
            got.gated_stop.is_some(),
            gated,
            "{name}: {:?}",
            got.gated_stop
        );
    }
    assert_eq!(s[0].rewards.as_ref().unwrap()["<b>"], 0.5);
    assert!(s[2].gated_stop.as_deref().unwrap().contains("RuntimeError"));
    // The threshold decides the verdict.
    assert_eq!(steps::steps(&r, &planned, 1.0)[1].verdict, Failed);
    // Without a plan: Harbor's steps, in its order, none stopped.
    let s = steps::steps(&r, &[], 1.0);
    let names: Vec<&str> = s.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["one", "two", "three"]);
    assert!(s.iter().all(|x| x.gated_stop.is_none()));
    // A step Harbor ran that the plan does not name is kept after the planned ones.
    let s = steps::steps(&r, &["two".to_string()], 1.0);
    let names: Vec<&str> = s.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["two", "one", "three"]);
    // A one-step trial has no steps.
    assert!(steps::steps(&result(json!({"trial_name": "t"})), &[], 1.0).is_empty());
    // A gate: the first step failed its reward, Harbor ran no more.
    let gated = result(json!({"trial_name": "t", "step_results": [
        {"step_name": "one", "verifier_result": {"rewards": {"reward": 0.0}}}]}));
    let s = steps::steps(&gated, &planned[..2], 1.0);
    assert_eq!((s[0].verdict, s[1].verdict), (Failed, NotRun));
    assert!(s[0].gated_stop.as_deref().unwrap().contains("min_reward"));
}
