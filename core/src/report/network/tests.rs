use super::*;
use crate::lifecycle::State;
use crate::record::{AttemptRecord, ProcessFacts};
use crate::testkit::attempt_record;
use uuid::Uuid;

fn attempt(n: u32, state: State, ok: Option<bool>) -> AttemptRecord {
    attempt_record(Uuid::now_v7(), "t", n, state, ok)
}

/// The agent's process as the worker records it, with `contacts` (host, outcome,
/// undeclared).
fn agent(contacts: &[(&str, &str, bool)]) -> ProcessFacts {
    let egress: Vec<serde_json::Value> = contacts
        .iter()
        .map(|(host, outcome, undeclared)| {
            serde_json::json!({"host": host, "port": 443, "outcome": outcome, "connections": 1,
                "bytes_up": 1, "bytes_down": 1, "undeclared": undeclared})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "argv": ["agent"], "exit_code": 0, "signal": null, "timed_out": false,
        "cancelled": false, "duration_ms": 1, "stdout_path": null, "stderr_path": null,
        "stdout_bytes": 0, "stderr_bytes": 0, "output_truncated": false,
        "stragglers_killed": 0,
        "runtime": {"name": "container", "isolated": true, "egress": egress}
    }))
    .unwrap()
}

fn shared(mut a: AttemptRecord) -> AttemptRecord {
    a.grade.as_mut().unwrap().environment = Some("shared".into());
    a
}

fn fetch_failed(n: u32) -> AttemptRecord {
    let mut a = attempt(n, State::InfrastructureError, None);
    a.cause = Some(format!(
        "{FETCH_FAILED_CAUSE}astral.sh failed: astral.sh:443 (1 connection(s), dns_failed), a known upstream of this worker; no passing reward was written, so this is not a verdict"
    ));
    a
}

#[test]
fn a_trials_network_facts_come_from_its_attempts() {
    let mut with_hosts = attempt(1, State::Completed, Some(false));
    with_hosts.agent_process = Some(agent(&[
        ("pypi.org", "allowed", false),
        ("github.com", "denied", true),
        ("evil.example", "allowed", true),
    ]));
    let mut other_infra = attempt(1, State::InfrastructureError, None);
    other_infra.cause = Some("the sandbox launcher failed".into());
    let mut retried = attempt(2, State::Completed, Some(true));
    retried.agent_process = Some(agent(&[("github.com", "denied", true)]));
    let cases: Vec<(Vec<AttemptRecord>, TrialNetwork)> = vec![
        (vec![], TrialNetwork::default()),
        (
            vec![attempt(1, State::Completed, Some(true))],
            TrialNetwork {
                graded_in: Some(GradedIn::CleanRoom),
                ..Default::default()
            },
        ),
        (
            vec![shared(attempt(1, State::Completed, Some(false)))],
            TrialNetwork {
                graded_in: Some(GradedIn::Shared),
                ..Default::default()
            },
        ),
        (
            vec![with_hosts.clone()],
            TrialNetwork {
                graded_in: Some(GradedIn::CleanRoom),
                undeclared_hosts: vec!["evil.example".into(), "github.com".into()],
                fetch_failed_attempts: 0,
            },
        ),
        // Retried after a grading fetch failed: the deciding grade is the last attempt's,
        // the hosts are every attempt's.
        (
            vec![
                fetch_failed(1),
                other_infra.clone(),
                shared(retried.clone()),
            ],
            TrialNetwork {
                graded_in: Some(GradedIn::Shared),
                undeclared_hosts: vec!["github.com".into()],
                fetch_failed_attempts: 1,
            },
        ),
        (
            vec![fetch_failed(1), fetch_failed(2)],
            TrialNetwork {
                graded_in: None,
                undeclared_hosts: vec![],
                fetch_failed_attempts: 2,
            },
        ),
        (vec![other_infra], TrialNetwork::default()),
    ];
    let mut acc = NetworkAcc::default();
    for (attempts, want) in &cases {
        let got = TrialNetwork::of_attempts(attempts);
        assert_eq!(&got, want, "{attempts:#?}");
        acc.add(&got);
    }
    assert_eq!(
        acc.finish(),
        NetworkCounts {
            graded_shared: 2,
            graded_clean_room: 2,
            undeclared_trials: 2,
            undeclared_hosts: 2,
            fetch_failed_attempts: 3,
        }
    );
}

#[test]
fn the_facts_and_counts_round_trip_and_old_records_read_as_none() {
    let t = TrialNetwork {
        graded_in: Some(GradedIn::Shared),
        undeclared_hosts: vec!["evil.example".into()],
        fetch_failed_attempts: 1,
    };
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(json["graded_in"], "shared");
    assert_eq!(serde_json::from_value::<TrialNetwork>(json).unwrap(), t);
    assert_eq!(
        serde_json::from_value::<TrialNetwork>(serde_json::json!({})).unwrap(),
        TrialNetwork::default()
    );
    let c = NetworkCounts {
        graded_shared: 1,
        graded_clean_room: 2,
        undeclared_trials: 3,
        undeclared_hosts: 4,
        fetch_failed_attempts: 5,
    };
    assert_eq!(
        c.describe(),
        "graded in the agent's environment 1, clean room 2; agent reached undeclared hosts: 3 trial(s), 4 host(s); infrastructure by a grading fetch: 5 attempt(s)"
    );
}
