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
