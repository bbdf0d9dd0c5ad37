//! `akbench sweep`'s live export of the records of trials as they end
//! (`remote::records::export_ended`) over a real coordinator served in-process on a fresh
//! database of a private PostgreSQL cluster, its trials ended by hand between polls: each
//! poll asks `ListTrialRows` only for the trials that ended from a margin before the latest
//! end it saw (`ended_after_unix_ms`), so a trial stamped in the same millisecond as one
//! already read, or earlier within the margin (its transaction began earlier and committed
//! later), is written on the next poll and none is lost; one stamped before the margin is
//! not read by a poll (a poll costs what ended lately, not the run), and the whole export at
//! the end writes it.

use akbench::cli::RemoteArgs;
use akbench::remote::records::{self, EndedSoFar, ENDED_OVERLAP_MS, RECORD_FILE};
use akbench::remote::Remote;
use akbench_coordinator::pgcluster::test_support;
use akbench_core::clock::SystemClock;
use akbench_core::plan::{plan, PlannedTrial};
use akbench_core::testkit::synthetic_spec;

#[path = "../../coordinator/tests/common/done_trials.rs"]
mod done_trials;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_write_each_trial_that_ended_since_the_last_one_and_read_only_those() {
    let url = test_support::fresh_database().await;
    let (handle, _stop, mut c) = done_trials::serve(&url).await;
    // 4 tasks x 2 agents x 2 repetitions: 16 trials, four groups of four.
    let spec = synthetic_spec(4, 2, 2, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let run = spec.identity.run_key.clone();
    let (db, store) = done_trials::submit_with_items(&mut c, &url, &spec, &ready).await;
    let group = |n: u64| -> Vec<&PlannedTrial> {
        ready.trials.iter().filter(|t| t.ordinal / 4 == n).collect()
    };
    let keys = |trials: &[&PlannedTrial]| -> Vec<String> {
        let mut k: Vec<String> = trials.iter().map(|t| t.key.clone()).collect();
        k.sort();
        k
    };
    let client = Remote::new(
        &format!("http://{}", handle.grpc_addr),
        &RemoteArgs::default(),
    )
    .unwrap()
    .connect()
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut so_far = EndedSoFar::default();
    let written = |so_far: &EndedSoFar| -> Vec<String> {
        let mut w: Vec<String> = so_far.written.iter().cloned().collect();
        w.sort();
        w
    };

    // Nothing ended: nothing written, and the next poll still reads every done trial.
    let pending = records::export_ended(&client, &run, &ready, out.path(), &mut so_far)
        .await
        .unwrap();
    assert_eq!(
        (pending, so_far.written.len(), so_far.bound()),
        (0, 0, None)
    );

    // The first group ends: its records are written, and the latest end is kept.
    let first = group(0);
    done_trials::end_trials(&db, &store, first.iter().copied(), |_| true).await;
    records::export_ended(&client, &run, &ready, out.path(), &mut so_far)
        .await
        .unwrap();
    assert_eq!(written(&so_far), keys(&first));
    for k in keys(&first) {
        assert!(out.path().join(&k).join(RECORD_FILE).is_file(), "{k}");
    }
    let latest = so_far.latest_ms.expect("the rows carry when they ended");
    assert_eq!(so_far.bound(), Some(latest - ENDED_OVERLAP_MS));

    // Two groups end stamped at or before that latest end (transactions that began earlier
    // and committed after the poll): in the same millisecond, and 10 s before it.
    let (second, third) = (group(1), group(2));
    done_trials::end_trials(&db, &store, second.iter().copied(), |_| true).await;
    done_trials::stamp_ended(&db, &second, latest * 1000 + 500).await;
    done_trials::end_trials(&db, &store, third.iter().copied(), |_| false).await;
    done_trials::stamp_ended(&db, &third, (latest - 10_000) * 1000).await;
    let pending = records::export_ended(&client, &run, &ready, out.path(), &mut so_far)
        .await
        .unwrap();
    assert_eq!(pending, 0);
    let all3: Vec<&PlannedTrial> = first.iter().chain(&second).chain(&third).copied().collect();
    assert_eq!(
        written(&so_far),
        keys(&all3),
        "none lost at or before the latest end"
    );
    assert_eq!(so_far.latest_ms, Some(latest), "no later end seen");

    // A group stamped an hour before (beyond the margin) is not read by a poll: a poll asks
    // for what ended lately, not for every done trial (a full read would write it).
    let fourth = group(3);
    done_trials::end_trials(&db, &store, fourth.iter().copied(), |_| false).await;
    done_trials::stamp_ended(&db, &fourth, (latest - 3_600_000) * 1000).await;
    records::export_ended(&client, &run, &ready, out.path(), &mut so_far)
        .await
        .unwrap();
    assert_eq!(written(&so_far), keys(&all3));
    assert!(!out.path().join(&fourth[0].key).exists());
    // The export at the end of a sweep reads every record.
    let exported = records::export(&client, &run, out.path(), &[])
        .await
        .unwrap();
    assert!(exported.unexported.is_empty());
    for t in &ready.trials {
        assert!(
            out.path().join(&t.key).join(RECORD_FILE).is_file(),
            "{}",
            t.key
        );
    }
}
