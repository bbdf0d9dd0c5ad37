//! The dispatch policy under faults, on a real private PostgreSQL and real gRPC sessions:
//! the start race, frozen workers, broken sessions, database outages, shutdowns, resume.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use akbench_coordinator::scheduler::test_support::seed_run;
use akbench_coordinator::scheduler::Caps;
use common::scheduler;

/// A run is `running` only once all its work items exist: a reader polling state and item
/// count in one snapshot never sees a running run with fewer items than planned, and the
/// reaper's end-of-run safety net, run all along, never ends it while it is being started.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_is_running_only_once_its_work_items_exist() {
    const N: usize = 20_000;
    let s = scheduler().await;
    let run = seed_run(s.store(), N, "oracle", &Caps::default())
        .await
        .unwrap();
    let c = s.store().client().await.unwrap();
    c.execute(
        "UPDATE runs SET state = 'planned', started_at = NULL WHERE run_id = $1",
        &[&run.run_id],
    )
    .await
    .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (s, done, run_id) = (s.clone(), Arc::clone(&done), run.run_id);
        tokio::spawn(async move {
            let c = s.store().client().await.unwrap();
            let mut seen = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                let row = c
                    .query_one(
                        "SELECT r.state, (SELECT count(*) FROM work_items w WHERE w.run_id = r.run_id) \
                         FROM runs r WHERE r.run_id = $1",
                        &[&run_id],
                    )
                    .await
                    .unwrap();
                seen.push((row.get::<_, String>(0), row.get::<_, i64>(1)));
                // The reaper's safety net ends any run with nothing ready or leased.
                s.reap(s.now()).await.unwrap();
                if finished {
                    return seen;
                }
            }
        })
    };
    let created = s
        .start_run(run.run_id, &Caps::default(), run.items("oracle", 0))
        .await
        .unwrap();
    assert_eq!(created, Some(N as u64));
    done.store(true, Ordering::SeqCst);
    let seen = watcher.await.unwrap();
    assert!(
        seen.len() >= 2,
        "the watcher looked during the start: {seen:?}"
    );
    for (state, items) in &seen {
        match state.as_str() {
            "planned" => assert_eq!(*items, 0),
            "running" => assert_eq!(*items, N as i64, "running with a partial queue"),
            other => panic!("the run became {other} while it was started ({items} items)"),
        }
    }
    assert_eq!(seen.last().unwrap(), &("running".to_string(), N as i64));
    // A second start creates nothing.
    assert_eq!(
        s.start_run(run.run_id, &Caps::default(), run.items("oracle", 0))
            .await
            .unwrap(),
        None
    );
}
