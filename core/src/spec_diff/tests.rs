use super::*;
use crate::clock::ManualClock;
use crate::spec::ResolvedRunSpec;
use crate::task::Family;
use crate::testkit::{synthetic_agent, synthetic_condition, synthetic_task};
use chrono::{TimeZone, Utc};
use proptest::prelude::*;

fn clock() -> ManualClock {
    ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 4, 0, 0, 0).unwrap())
}

#[test]
fn identical_conditions_differ_in_nothing_even_with_other_identities() {
    let a = ResolvedRunSpec::assemble(synthetic_condition(3, 2, 3), Default::default(), &clock());
    let b = ResolvedRunSpec::assemble(synthetic_condition(3, 2, 3), Default::default(), &clock());
    assert_ne!(a.identity.run_id, b.identity.run_id);
    assert!(diff(&a, &b).is_empty());
}

#[test]
fn version_agent_and_repetitions_each_get_their_own_line() {
    let left = synthetic_condition(3, 2, 2);
    let mut right = left.clone();
    right.tasks[1] = synthetic_task("task-00001", "2.0", Family::Artefact);
    right.agents.push(synthetic_agent("extra", Some("m")));
    right.repetitions = 3;
    let d = diff_conditions(&left, &right);
    let text = d.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.contains(&"~ tasks.task-00001.release.version: \"1.0\" -> \"2.0\""),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("+ agents.extra: sha256:")),
        "{text}"
    );
    assert!(lines.contains(&"~ repetitions: 2 -> 3"), "{text}");
    // Removing a task is reported once, as the task.
    let mut fewer = left.clone();
    fewer.tasks.remove(0);
    let d = diff_conditions(&left, &fewer);
    assert_eq!(d.changes.len(), 1, "{d}");
    assert_eq!(d.changes[0].path, "tasks.task-00000");
    assert_eq!(d.changes[0].kind, ChangeKind::Removed);
}

#[test]
fn compute_evaluation_and_policies_are_compared() {
    let left = synthetic_condition(1, 1, 1);
    let mut right = left.clone();
    right.compute.cpus = 4;
    right.evaluation.grade = false;
    right.execution.infrastructure_retries = 2;
    right
        .execution
        .concurrency
        .per_agent
        .insert("agent-00".into(), 3);
    right.visibility = crate::manifest::Visibility::Public;
    let d = diff_conditions(&left, &right);
    let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "compute.cpus",
            "evaluation.grade",
            "execution.concurrency.per_agent.agent-00",
            "execution.infrastructure_retries",
            "visibility"
        ]
    );
}

fn arb_condition() -> impl Strategy<Value = crate::spec::RunCondition> {
    (
        proptest::collection::btree_map("[a-d]", "[12]\\.0", 0..4),
        proptest::collection::btree_set("[x-z]", 1..3),
        1u32..4,
        1u32..3,
        any::<bool>(),
    )
        .prop_map(|(tasks, agents, reps, cpus, grade)| {
            let mut c = synthetic_condition(0, 0, reps);
            c.tasks = tasks
                .iter()
                .map(|(id, v)| synthetic_task(id, v, Family::Artefact))
                .collect();
            c.agents = agents.iter().map(|a| synthetic_agent(a, None)).collect();
            c.compute.cpus = cpus;
            c.evaluation.grade = grade;
            c
        })
}

proptest! {
    #[test]
    fn diff_with_itself_is_empty(a in arb_condition()) {
        prop_assert!(diff_conditions(&a, &a).is_empty());
    }

    #[test]
    fn diff_is_symmetric_in_content(a in arb_condition(), b in arb_condition()) {
        let ab = diff_conditions(&a, &b);
        let ba = diff_conditions(&b, &a);
        prop_assert_eq!(&ab.swapped(), &ba);
        prop_assert_eq!(ab.is_empty(), a == b);
    }
}
