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
