use super::*;
use crate::lifecycle::State;
use crate::testkit::attempt_record;
use uuid::Uuid;

fn t(task: &str, agent: &str, rep: u32, bucket: Bucket) -> CompareTrial {
    CompareTrial {
        key: format!("r/{task}/{agent}/r{rep}"),
        task: task.into(),
        agent: agent.into(),
        repetition: rep,
        bucket,
    }
}

#[test]
fn usage_causes_matrix_and_timeline() {
    let trials = vec![
        t("a", "x", 2, Bucket::Succeeded),
        t("a", "x", 1, Bucket::Failed),
        t("b", "x", 1, Bucket::InfrastructureError),
        t("a", "y", 1, Bucket::Missing),
    ];
    let mut a1 = attempt_record(Uuid::now_v7(), "r/a/x/r1", 1, State::Completed, Some(false));
    a1.observations.cost_usd = Some(0.25);
    a1.observations.input_tokens = Some(100);
    a1.observations.output_tokens = Some(10);
    let mut a2 = attempt_record(Uuid::now_v7(), "r/a/x/r2", 1, State::Completed, Some(true));
    a2.observations.cost_usd = Some(0.5);
    // Computed from the agent's price (core::agent::price): counted, and counted as computed.
    a2.observations.cost_computed = true;
    let mut b1 = attempt_record(
        Uuid::now_v7(),
        "r/b/x/r1",
        1,
        State::InfrastructureError,
        None,
    );
    b1.cause = Some("workspace: commit not found".into());
    let mut b2 = attempt_record(
        Uuid::now_v7(),
        "r/b/x/r1",
        2,
        State::InfrastructureError,
        None,
    );
    b2.cause = Some("workspace: commit not found".into());
    a2.grade.as_mut().unwrap().environment = Some("shared".into());
    let mut b3 = attempt_record(
        Uuid::now_v7(),
        "r/b/x/r1",
        3,
        State::InfrastructureError,
        None,
    );
    b3.cause = Some(format!(
        "{}pypi.org failed: pypi.org:443 (1 connection(s), timeout), a known upstream of this worker; no passing reward was written, so this is not a verdict",
        crate::egress::vouch::FETCH_FAILED_CAUSE
    ));
    let (r1, r2, rb) = (vec![a1], vec![a2], vec![b1, b2, b3]);
    let records = [
        TrialAttempts {
            key: "r/a/x/r1",
            attempts: &r1,
        },
        TrialAttempts {
            key: "r/a/x/r2",
            attempts: &r2,
        },
        TrialAttempts {
            key: "r/b/x/r1",
            attempts: &rb,
        },
    ];
    let v = build(&trials, &records);
    assert_eq!(v.tasks, ["a", "b"]);
    assert_eq!(v.agents, ["x", "y"]);
    let reps: Vec<u32> = v.matrix["a"]["x"].iter().map(|c| c.repetition).collect();
    assert_eq!(reps, [1, 2]);
    assert_eq!(v.matrix["a"]["y"][0].bucket, Bucket::Missing);
    let u = &v.usage["x"];
    assert_eq!(
        (u.attempts, u.attempts_with_cost, u.attempts_with_tokens),
        (5, 2, 1)
    );
    assert_eq!(u.cost_usd, Some(0.75));
    assert_eq!(u.attempts_with_computed_cost, 1);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cached_input_tokens),
        (Some(100), Some(10), None)
    );
    assert!(
        !v.usage.contains_key("y"),
        "no record, no usage: absent, not zero"
    );
    assert_eq!(v.infrastructure_causes["workspace: commit not found"], 2);
    assert_eq!(v.timeline.len(), 5);
    let n = &v.network["x"];
    assert_eq!(
        (
            n.graded_shared,
            n.graded_clean_room,
            n.fetch_failed_attempts
        ),
        (1, 1, 1)
    );
    assert!(!v.network.contains_key("y"));
    assert!(v
        .timeline
        .iter()
        .all(|s| s.start_ms >= 0 && s.end_ms >= s.start_ms));
    assert_eq!(v.by_agent["x"].rates.pass_rate, Some(0.5));
    assert_eq!(v.by_agent["y"].rates.pass_rate, None);
}

/// A multi-step task's steps count by each trial's last attempt (an infra-only retry
/// restarts the whole trial: the first attempt's steps are history); a run without one has
/// no steps section.
#[test]
fn steps_count_by_the_last_attempt_and_only_for_multi_step_tasks() {
    use crate::record::steps::{StepResult, StepVerdict};
    let step = |name: &str, v: StepVerdict, r: Option<f64>| StepResult {
        verdict: v,
        rewards: r.map(|r| BTreeMap::from([("reward".to_string(), r)])),
        ..StepResult::not_run(name)
    };
    let trials = vec![
        t("s", "oracle", 1, Bucket::Succeeded),
        t("s", "noop", 1, Bucket::Failed),
        t("one", "oracle", 1, Bucket::Succeeded),
    ];
    let mut crashed = attempt_record(
        Uuid::now_v7(),
        "r/s/oracle/r1",
        1,
        State::InfrastructureError,
        None,
    );
    crashed.steps = vec![
        step("open", StepVerdict::Solved, Some(1.0)),
        step("deposit", StepVerdict::NotGraded, None),
    ];
    let mut solved = attempt_record(
        Uuid::now_v7(),
        "r/s/oracle/r1",
        2,
        State::Completed,
        Some(true),
    );
    solved.steps = vec![
        step("open", StepVerdict::Solved, Some(1.0)),
        step("deposit", StepVerdict::Solved, Some(1.0)),
    ];
    let mut gated = attempt_record(
        Uuid::now_v7(),
        "r/s/noop/r1",
        1,
        State::Completed,
        Some(false),
    );
    gated.steps = vec![
        StepResult {
            gated_stop: Some("reward=0 below min_reward 1".into()),
            ..step("open", StepVerdict::Failed, Some(0.0))
        },
        step("deposit", StepVerdict::NotRun, None),
    ];
    let one = attempt_record(
        Uuid::now_v7(),
        "r/one/oracle/r1",
        1,
        State::Completed,
        Some(true),
    );
    let (ro, rn, r1) = (vec![crashed, solved], vec![gated], vec![one]);
    let records = [
        TrialAttempts {
            key: "r/s/oracle/r1",
            attempts: &ro,
        },
        TrialAttempts {
            key: "r/s/noop/r1",
            attempts: &rn,
        },
        TrialAttempts {
            key: "r/one/oracle/r1",
            attempts: &r1,
        },
    ];
    let v = build(&trials, &records);
    assert_eq!(v.steps.len(), 1, "{:?}", v.steps);
    assert_eq!((v.steps[0].task.as_str(), v.steps[0].trials), ("s", 2));
    let counts: Vec<(&str, u64, u64, u64, u64)> = v.steps[0]
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.reached,
                s.passed,
                s.stopped,
                s.not_graded,
            )
        })
        .collect();
    assert_eq!(counts, [("open", 2, 1, 1, 0), ("deposit", 1, 1, 0, 0)]);
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["steps"][0]["steps"][0]["mean_reward"], 0.5);
    // Without a multi-step task: no section, and none in the JSON.
    let v = build(&trials[2..], &records[2..]);
    assert!(v.steps.is_empty());
    assert!(serde_json::to_value(&v).unwrap().get("steps").is_none());
}
