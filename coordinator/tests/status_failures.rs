//! `run status`'s latest failures over a real coordinator on a fresh database: the five
//! newest done trials that did not succeed, newest first, trials that ended at the same
//! instant in key order; succeeded trials never listed, however recent. The statement reads
//! only the newest failures (`status_failures.sql`), so this holds the rule it must keep.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::status::{run_status, StatusOptions};
use akbench_core::clock::SystemClock;
use akbench_core::plan::{plan, PlannedTrial};
use akbench_core::testkit::synthetic_spec;

#[path = "common/done_trials.rs"]
mod done_trials;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_failures_are_the_five_newest_with_ties_in_key_order() {
    let url = test_support::fresh_database().await;
    let (_handle, _stop, mut c) = done_trials::serve(&url).await;
    let spec = synthetic_spec(4, 2, 2, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let key = spec.identity.run_key.clone();
    let (db, store) = done_trials::submit_with_items(&mut c, &url, &spec, &ready).await;
    let all: Vec<&PlannedTrial> = ready.trials.iter().collect();
    assert_eq!(all.len(), 16);
    // Even ordinals solved, odd ones failed.
    done_trials::end_trials(&db, &store, all.iter().copied(), |t| t.ordinal % 2 == 0).await;
    // Ends, in seconds after t0: the failures spread with a three-way tie, the successes
    // all newer than every failure.
    let t0: i64 = 1_780_000_000_000_000;
    let end_of = |t: &PlannedTrial| -> i64 {
        match t.ordinal {
            o if o % 2 == 0 => 100,
            1 | 3 => 1,
            5 | 7 => 2,
            9 | 11 | 13 => 3,
            _ => 4,
        }
    };
    for t in &all {
        done_trials::stamp_ended(&db, &[*t], t0 + end_of(t) * 1_000_000).await;
    }
    let mut failures: Vec<(i64, String)> = all
        .iter()
        .filter(|t| t.ordinal % 2 == 1)
        .map(|t| (end_of(t), t.key.clone()))
        .collect();
    failures.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let want: Vec<String> = failures.into_iter().take(5).map(|(_, k)| k).collect();

    let status = run_status(&store, &key, StatusOptions::default())
        .await
        .expect("status");
    let got: Vec<String> = status
        .recent_failures
        .iter()
        .map(|f| f.trial.clone())
        .collect();
    assert_eq!(got, want);
    assert!(status.recent_failures.iter().all(|f| f.bucket == "failed"));

    // Fewer than five failures: every one of them.
    let solved_now: Vec<&PlannedTrial> = all
        .iter()
        .copied()
        .filter(|t| t.ordinal % 2 == 1 && t.ordinal >= 5)
        .collect();
    db.execute(
        "UPDATE work_items SET bucket = 'succeeded' WHERE trial_id = ANY ($1)",
        &[&solved_now.iter().map(|t| t.trial_id).collect::<Vec<_>>()],
    )
    .await
    .unwrap();
    let status = run_status(&store, &key, StatusOptions::default())
        .await
        .expect("status");
    let mut left: Vec<String> = all
        .iter()
        .filter(|t| t.ordinal == 1 || t.ordinal == 3)
        .map(|t| t.key.clone())
        .collect();
    left.sort();
    let got: Vec<String> = status
        .recent_failures
        .iter()
        .map(|f| f.trial.clone())
        .collect();
    assert_eq!(got, left);
}
