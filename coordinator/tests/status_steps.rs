//! `run status`'s per-step rows of multi-step tasks over a real coordinator on a fresh
//! database (migration 0037's index, `status_steps.sql`, `status_step_trials.sql`), from
//! records shaped as workers upload them: the same rows core's `report::steps` gives for
//! the trials' deciding attempts (what `run aggregate` counts of the records), a trial whose
//! deciding attempt ran no step counted among its task's trials, an earlier attempt's steps
//! not counted; a run whose done trials have no steps has none (and no `steps` key).

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::scheduler::store_records;
use akbench_coordinator::status::{run_status, StatusOptions};
use akbench_core::clock::SystemClock;
use akbench_core::digest::digest_of;
use akbench_core::lifecycle::State;
use akbench_core::plan::{plan, PlannedTrial};
use akbench_core::record::steps::{StepResult, StepVerdict};
use akbench_core::record::AttemptRecord;
use akbench_core::report::steps::{task_steps, TrialSteps};
use akbench_core::testkit::{attempt_record, synthetic_spec};
use std::collections::BTreeMap;
use uuid::Uuid;

#[path = "common/done_trials.rs"]
mod done_trials;

fn step(name: &str, verdict: StepVerdict, reward: Option<f64>, stop: bool) -> StepResult {
    StepResult {
        verdict,
        rewards: reward.map(|r| BTreeMap::from([("reward".to_string(), r)])),
        gated_stop: stop.then(|| "reward=0 below min_reward 1".to_string()),
        ..StepResult::not_run(name)
    }
}

/// The three steps of a trial: `solved` all, or stopped by the first step's gate.
fn steps(solved: bool) -> Vec<StepResult> {
    use StepVerdict::*;
    if solved {
        vec![
            StepResult {
                input_tokens: Some(1200),
                output_tokens: Some(80),
                cost_usd: Some(0.25),
                ..step("open", Solved, Some(1.0), false)
            },
            step("deposit", Solved, Some(1.0), false),
            step("report", Solved, Some(1.0), false),
        ]
    } else {
        vec![
            step("open", Failed, Some(0.0), true),
            step("deposit", NotRun, None, false),
            step("report", NotRun, None, false),
        ]
    }
}

/// The one attempt of the `nth` trial of the multi-step task: solved, gated, ended by the
/// infrastructure before any step, solved (a later attempt decides this one).
fn record(t: &PlannedTrial, id: Uuid, nth: usize) -> (AttemptRecord, &'static str) {
    if nth == 2 {
        return (
            attempt_record(id, &t.key, 1, State::InfrastructureError, None),
            "infrastructure_error",
        );
    }
    let ok = nth != 1;
    let mut r = attempt_record(id, &t.key, 1, State::Completed, Some(ok));
    r.steps = steps(ok);
    (r, if ok { "succeeded" } else { "failed" })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_the_steps_of_the_deciding_attempts_as_reports_do() {
    let url = test_support::fresh_database().await;
    let (_handle, _stop, mut c) = done_trials::serve(&url).await;
    let spec = synthetic_spec(2, 1, 4, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let key = spec.identity.run_key.clone();
    let (db, store) = done_trials::submit_with_items(&mut c, &url, &spec, &ready).await;
    let multi = ready.trials[0].task.id.clone();
    let (steps_trials, plain): (Vec<&PlannedTrial>, Vec<&PlannedTrial>) =
        ready.trials.iter().partition(|t| t.task.id == multi);
    assert_eq!((steps_trials.len(), plain.len()), (4, 4));

    // Done trials without steps: no steps, and no `steps` key in the JSON.
    done_trials::end_trials(&db, &store, plain.iter().copied(), |_| true).await;
    let status = run_status(&store, &key, StatusOptions::default())
        .await
        .expect("status");
    assert_eq!(status.finished, 4);
    assert!(status.steps.is_empty(), "{:?}", status.steps);
    let json = serde_json::to_value(&status).unwrap();
    assert!(json.get("steps").is_none(), "{json}");
    assert!(akbench_coordinator::convert::status(&status)
        .steps
        .is_empty());

    let nth: BTreeMap<Uuid, usize> = steps_trials
        .iter()
        .enumerate()
        .map(|(i, t)| (t.trial_id, i))
        .collect();
    done_trials::end_trials_with(&db, &store, steps_trials.iter().copied(), |t, id| {
        record(t, id, nth[&t.trial_id])
    })
    .await;
    // The fourth trial's second attempt (its gate stopped it) decides it: its first
    // attempt's solved steps are not counted.
    let last = steps_trials[3];
    let second = Uuid::now_v7();
    db.execute(
        "INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch, finished_at, terminal_state)
         VALUES ($1, $2, 2, 'execute', 'completed', 2, now(), 'completed')",
        &[&second, &last.trial_id],
    )
    .await
    .unwrap();
    let mut r = attempt_record(second, &last.key, 2, State::Completed, Some(false));
    r.steps = steps(false);
    let v = serde_json::to_value(&r).unwrap();
    store_records(
        &store.client().await.unwrap(),
        &[(second, digest_of(&v), v.to_string())],
    )
    .await
    .unwrap();
    db.execute(
        "UPDATE work_items SET attempts_used = 2 WHERE trial_id = $1",
        &[&last.trial_id],
    )
    .await
    .unwrap();

    // What core counts of the deciding attempts' steps, as `run aggregate` does.
    let deciding = [steps(true), steps(false), Vec::new(), steps(false)];
    let want = task_steps(
        &deciding
            .iter()
            .map(|steps| TrialSteps {
                task: &multi,
                steps,
            })
            .collect::<Vec<_>>(),
    );
    let status = run_status(&store, &key, StatusOptions::default())
        .await
        .expect("status");
    assert_eq!(status.steps, want);
    let got: Vec<(&str, u64, u64, u64)> = status.steps[0]
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.reached, s.passed, s.stopped))
        .collect();
    assert_eq!(
        (status.steps[0].task.as_str(), status.steps[0].trials),
        (multi.as_str(), 4)
    );
    assert_eq!(
        got,
        [("open", 3, 1, 2), ("deposit", 1, 1, 0), ("report", 1, 1, 0)]
    );
    let open = &status.steps[0].steps[0];
    assert_eq!(
        (
            open.input_tokens,
            open.cost_usd,
            status.steps[0].steps[1].cost_usd
        ),
        (Some(1200), Some(0.25), None)
    );
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["steps"], serde_json::to_value(&want).unwrap());
    let pb = akbench_coordinator::convert::status(&status);
    assert_eq!(akbench_proto::steps::from_wire(&pb.steps), want);
}
