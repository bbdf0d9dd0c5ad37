//! `run status`'s grading place and network counts over a real coordinator on a fresh
//! database (migration 0035's columns, `network_by_agent.sql`), from records shaped as
//! workers upload them: per agent and in total, verdicts graded in the agent's environment
//! and in a clean room, trials whose agent reached for undeclared hosts and how many distinct
//! hosts, attempts a vouched grading fetch ended `infrastructure_error`: the same counts
//! core's `TrialNetwork` gives for those records.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::status::{run_status, StatusOptions};
use akbench_core::clock::SystemClock;
use akbench_core::egress::vouch::FETCH_FAILED_CAUSE;
use akbench_core::lifecycle::State;
use akbench_core::plan::{plan, PlannedTrial};
use akbench_core::record::{AttemptRecord, ProcessFacts};
use akbench_core::report::network::{NetworkAcc, NetworkCounts, TrialNetwork};
use akbench_core::testkit::{attempt_record, synthetic_spec};
use uuid::Uuid;

#[path = "common/done_trials.rs"]
mod done_trials;

/// The agent's process as the worker records it, with contacts (host, outcome, undeclared).
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

/// The record of trial `t`'s one attempt, by its position among its agent's trials.
fn record(
    t: &PlannedTrial,
    id: Uuid,
    nth: usize,
    first_agent: bool,
) -> (AttemptRecord, &'static str) {
    let completed = |ok| attempt_record(id, &t.key, 1, State::Completed, Some(ok));
    if !first_agent {
        return (completed(true), "succeeded");
    }
    match nth {
        0 => {
            let mut r = completed(true);
            r.grade.as_mut().unwrap().environment = Some("shared".into());
            r.agent_process = Some(agent(&[
                ("pypi.org", "allowed", false),
                ("github.com", "denied", true),
            ]));
            (r, "succeeded")
        }
        1 => {
            let mut r = completed(false);
            r.agent_process = Some(agent(&[
                ("evil.example", "allowed", true),
                ("github.com", "allowed", true),
            ]));
            (r, "failed")
        }
        2 => {
            let mut r = attempt_record(id, &t.key, 1, State::InfrastructureError, None);
            r.cause = Some(format!(
                "{FETCH_FAILED_CAUSE}astral.sh failed: astral.sh:443 (1 connection(s), dns_failed), a known upstream of this worker; no passing reward was written, so this is not a verdict"
            ));
            (r, "infrastructure_error")
        }
        _ => (completed(true), "succeeded"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_grading_place_undeclared_hosts_and_grading_fetches() {
    let url = test_support::fresh_database().await;
    let (_handle, _stop, mut c) = done_trials::serve(&url).await;
    let spec = synthetic_spec(2, 2, 2, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let key = spec.identity.run_key.clone();
    let (db, store) = done_trials::submit_with_items(&mut c, &url, &spec, &ready).await;
    let first = ready.trials[0].agent.label.clone();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let nth: std::collections::HashMap<Uuid, usize> = ready
        .trials
        .iter()
        .map(|t| {
            let n = seen.entry(t.agent.label.clone()).or_default();
            *n += 1;
            (t.trial_id, *n - 1)
        })
        .collect();
    // What core counts of the same records, per agent and in total.
    let made = std::sync::Mutex::new(Vec::new());
    done_trials::end_trials_with(&db, &store, ready.trials.iter(), |t, id| {
        let (r, b) = record(t, id, nth[&t.trial_id], t.agent.label == first);
        made.lock()
            .unwrap()
            .push((t.agent.label.clone(), r.clone()));
        (r, b)
    })
    .await;
    let mut want: std::collections::BTreeMap<String, NetworkAcc> = Default::default();
    let mut want_total = NetworkAcc::default();
    for (label, r) in made.into_inner().unwrap() {
        let n = TrialNetwork::of_attempts(std::slice::from_ref(&r));
        want.entry(label).or_default().add(&n);
        want_total.add(&n);
    }
    let want_total = want_total.finish();
    assert_eq!(
        want_total,
        NetworkCounts {
            graded_shared: 1,
            graded_clean_room: 6,
            undeclared_trials: 2,
            undeclared_hosts: 2,
            fetch_failed_attempts: 1,
        }
    );

    let status = run_status(&store, &key, StatusOptions::default())
        .await
        .expect("status");
    assert_eq!(status.network, want_total, "{status:#?}");
    for a in &status.agents {
        assert_eq!(
            a.network,
            want.remove(&a.agent).unwrap().finish(),
            "{}",
            a.agent
        );
    }
    assert!(want.is_empty());
    let pb = akbench_coordinator::convert::status(&status);
    let n = pb.network.unwrap();
    assert_eq!(
        (n.graded_shared, n.graded_clean_room, n.undeclared_hosts),
        (1, 6, 2)
    );
}
