//! Runs sharing the workers on a real private PostgreSQL (issue 30): the claim divides its
//! slots among runs exactly as `akbench_core::dispatch::share::divide` does (its table, run
//! here against `Scheduler::claim` with real leases), a small run started behind a big one
//! gets the next claims' slots at once, and each run's caps still hold while runs share.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use akbench_coordinator::scheduler::test_support::{seed_run, SeededRun};
use akbench_coordinator::scheduler::{Caps, Scheduler};
use akbench_core::dispatch::share::{contenders, divide, Share, TABLE};
use akbench_core::dispatch::RunCaps;
use common::{enqueued, scheduler};
use uuid::Uuid;

const TTL: Duration = Duration::from_secs(600);

fn shared(priority: i32, weight: u32) -> Caps {
    Caps {
        share: Share { priority, weight },
        ..Caps::default()
    }
}

async fn worker(s: &Scheduler, id: &str) {
    s.register_worker(id, 100_000, &BTreeMap::new(), "test")
        .await
        .unwrap();
}

/// How many of `claimed` belong to each of `runs`.
fn per_run(claimed: &[Uuid], runs: &[Uuid]) -> Vec<u64> {
    runs.iter()
        .map(|r| claimed.iter().filter(|c| *c == r).count() as u64)
        .collect()
}

/// A run of `n` trials with `caps`, every one of them enqueued (ready).
async fn ready_run(s: &Scheduler, n: usize, caps: &Caps) -> Uuid {
    enqueued(s, n, 0, caps).await.run_id
}

/// The runs of the attempts one claim of `slots` by `worker` leased.
async fn claimed_runs(s: &Scheduler, worker: &str, slots: usize) -> Vec<Uuid> {
    s.claim(worker, slots, TTL)
        .await
        .unwrap()
        .iter()
        .map(|a| a.run_id)
        .collect()
}

/// A run of `live + ready` trials with `caps` whose first `live` items are leased to worker
/// `holder` by a real claim (made while no other run has ready items), the rest not yet
/// enqueued: see [`enqueue_rest`].
async fn with_live(s: &Scheduler, live: usize, ready: usize, caps: &Caps) -> SeededRun {
    let run = seed_run(s.store(), live + ready, "oracle", caps)
        .await
        .unwrap();
    if live == 0 {
        return run;
    }
    let items = run.items("oracle", 0);
    s.enqueue(run.run_id, &items[..live]).await.unwrap();
    let held = s.claim("holder", live, TTL).await.unwrap();
    assert_eq!(held.len(), live, "the holder takes the run's live leases");
    assert!(held.iter().all(|a| a.run_id == run.run_id));
    run
}

async fn enqueue_rest(s: &Scheduler, run: &SeededRun, live: usize) {
    let items = run.items("oracle", 0);
    s.enqueue(run.run_id, &items[live..]).await.unwrap();
}

#[tokio::test]
async fn the_claim_divides_its_slots_as_core_divides_them() {
    for (i, (row, slots, want)) in TABLE.iter().enumerate() {
        assert_eq!(
            divide(&contenders(row), *slots),
            want.to_vec(),
            "row {i}: the table"
        );
        if row.is_empty() {
            continue;
        }
        // A fresh database per row: nothing of one row is left for the next.
        let s = scheduler().await;
        worker(&s, "holder").await;
        worker(&s, "w").await;
        let mut runs = Vec::new();
        for &(priority, weight, live) in row.iter() {
            let live = live as usize;
            // Runs are UUIDv7, so created in the table's order they are listed in it.
            let run = with_live(&s, live, *slots as usize, &shared(priority, weight)).await;
            runs.push((run, live));
        }
        for (run, live) in &runs {
            enqueue_rest(&s, run, *live).await;
        }
        let claimed: Vec<Uuid> = claimed_runs(&s, "w", *slots as usize).await;
        let ids: Vec<Uuid> = runs.iter().map(|(r, _)| r.run_id).collect();
        assert_eq!(
            per_run(&claimed, &ids),
            want.to_vec(),
            "row {i}: {row:?} claiming {slots}"
        );
    }
}

#[tokio::test]
async fn a_small_run_started_behind_a_big_one_gets_its_share_at_once() {
    let s = scheduler().await;
    worker(&s, "w").await;
    let big = ready_run(&s, 5_000, &Caps::default()).await;
    // The big run alone: it takes every slot of 8 claims of 8.
    for _ in 0..8 {
        let got = s.claim("w", 8, TTL).await.unwrap();
        assert!(got.len() == 8 && got.iter().all(|a| a.run_id == big));
    }
    let small = ready_run(&s, 200, &Caps::default()).await;
    let runs = [big, small];
    // The big run holds 64 leases, the small one none: the next claims are all the small
    // run's until it holds as many, then they alternate.
    let mut seen = Vec::new();
    for _ in 0..10 {
        let got: Vec<Uuid> = claimed_runs(&s, "w", 8).await;
        seen.push(per_run(&got, &runs));
    }
    let mut want = vec![vec![0, 8]; 8];
    want.extend([vec![4, 4], vec![4, 4]]);
    assert_eq!(seen, want, "per claim: [big, small]");
}

#[tokio::test]
async fn a_weighted_run_gets_its_weight_and_a_higher_priority_run_everything() {
    let s = scheduler().await;
    worker(&s, "w").await;
    let mut runs = Vec::new();
    for caps in [shared(0, 1), shared(0, 3)] {
        runs.push(ready_run(&s, 100, &caps).await);
    }
    let got: Vec<Uuid> = claimed_runs(&s, "w", 40).await;
    assert_eq!(per_run(&got, &runs), vec![10, 30], "weights 1:3");
    let urgent = ready_run(&s, 5, &shared(1, 1)).await;
    runs.push(urgent);
    // The higher priority takes what it has (5); the rest goes by weight again.
    let got: Vec<Uuid> = claimed_runs(&s, "w", 9).await;
    assert_eq!(per_run(&got, &runs), vec![1, 3, 5]);
}

#[tokio::test]
async fn caps_still_hold_while_runs_share_and_the_rest_goes_to_the_others() {
    let s = scheduler().await;
    worker(&s, "w").await;
    let big = ready_run(&s, 100, &Caps::default()).await;
    let capped = Caps {
        limits: RunCaps {
            per_agent: [("oracle".to_string(), 2)].into(),
            ..RunCaps::default()
        },
        ..Caps::default()
    };
    let small = ready_run(&s, 50, &capped).await;
    let runs = [big, small];
    // Fair share would give each 4; the small run's per-agent cap of 2 holds, and the two
    // slots it cannot use go to the big run.
    let got: Vec<Uuid> = claimed_runs(&s, "w", 8).await;
    assert_eq!(per_run(&got, &runs), vec![6, 2]);
    let got: Vec<Uuid> = claimed_runs(&s, "w", 8).await;
    assert_eq!(per_run(&got, &runs), vec![8, 0], "the cap is full");
}

#[tokio::test]
async fn status_shows_each_runs_share_of_the_live_leases() {
    let s = scheduler().await;
    worker(&s, "w").await;
    let heavy = ready_run(&s, 40, &shared(0, 3)).await;
    let light = ready_run(&s, 40, &shared(0, 1)).await;
    let waiting = ready_run(&s, 3, &shared(-1, 1)).await;
    assert_eq!(s.claim("w", 8, TTL).await.unwrap().len(), 8);
    let client = s.store().client().await.unwrap();
    let share = |run| {
        let client = &client;
        async move {
            akbench_coordinator::status_share::run_share(client, run)
                .await
                .unwrap()
                .unwrap()
        }
    };
    let h = share(heavy).await;
    assert_eq!((h.priority, h.weight, h.live), (0, 3, 6));
    assert!((h.of_live - 0.75).abs() < 1e-9, "{h:?}");
    assert_eq!(h.entitled, Some(0.75));
    let l = share(light).await;
    assert_eq!((l.priority, l.weight, l.live), (0, 1, 2));
    assert!((l.of_live - 0.25).abs() < 1e-9, "{l:?}");
    assert_eq!(l.entitled, Some(0.25));
    let w = share(waiting).await;
    assert_eq!((w.priority, w.live, w.of_live), (-1, 0, 0.0));
    assert_eq!(
        w.entitled,
        Some(0.0),
        "a lower priority waits while others want workers"
    );
    // A run with nothing ready or live wants no workers.
    s.cancel_run(waiting).await.unwrap();
    assert_eq!(share(waiting).await.entitled, None);
}

/// Trials of the big run [`a_claim_made_while_another_run_starts_serves_the_committed_runs`]
/// holds in an open start.
const STARTING: i32 = 200_000;

/// A claim never reads another run's uncommitted start (issue 48): a run of [`STARTING`]
/// trials is started in a transaction held open (moved to `running`, its items inserted as
/// the start does, not committed) while a claim and a status read are made for another run.
/// They answer from the committed runs alone: the claim divides its slots among them (the
/// small run gets all it asks for), the small run is entitled to every worker. Once the
/// start commits, the next claim divides between both runs. Correctness only: how long such
/// a claim takes is the `claim_start` bench's (docs/PERFORMANCE.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_made_while_another_run_starts_serves_the_committed_runs() {
    let s = scheduler().await;
    worker(&s, "w").await;
    let small = seed_run(s.store(), 10, "oracle", &Caps::default())
        .await
        .unwrap();
    s.enqueue(small.run_id, &small.items("oracle", 0))
        .await
        .unwrap();
    // The big run, planned (spec, planned trials, a `planned` run) and committed, as a
    // submitted plan is; it sorts after the small run (UUIDv7), past every probe's start.
    let big = Uuid::now_v7();
    let mut holder = s.store().client().await.unwrap();
    holder
        .batch_execute(&format!(
            "INSERT INTO run_specs (run_id, run_key, digest, document) \
             VALUES ('{big}', 'big-{big}', 'sha256:' || repeat('0', 64), '{{}}'); \
             INSERT INTO planned_trials (trial_id, run_id, ordinal, key, task_id, agent, \
                                         repetition, document) \
             SELECT gen_random_uuid(), '{big}', o, 'big/' || o, 'noop', 'oracle', 0, '{{}}' \
             FROM generate_series(0, {} - 1) AS o; \
             INSERT INTO runs (run_id) VALUES ('{big}')",
            STARTING
        ))
        .await
        .unwrap();
    // The start, held open: the run moved to `running` and its items inserted, uncommitted.
    let start = holder.transaction().await.unwrap();
    let moved = start
        .execute(
            "UPDATE runs SET state = 'running', started_at = now(), caps = '{}' \
             WHERE run_id = $1 AND state = 'planned'",
            &[&big],
        )
        .await
        .unwrap();
    assert_eq!(moved, 1);
    akbench_coordinator::scheduler::test_support::insert_items_by_hand(&start, big)
        .await
        .unwrap();

    let got = s.claim("w", 4, TTL).await.unwrap();
    assert_eq!(
        got.iter().map(|a| a.run_id).collect::<Vec<_>>(),
        vec![small.run_id; 4],
        "the committed run gets every slot of a claim made during the open start"
    );
    let client = s.store().client().await.unwrap();
    let share = akbench_coordinator::status_share::run_share(&client, small.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((share.live, share.entitled), (4, Some(1.0)), "{share:?}");

    start.commit().await.unwrap();
    let got: Vec<Uuid> = s
        .claim("w", 4, TTL)
        .await
        .unwrap()
        .iter()
        .map(|a| a.run_id)
        .collect();
    assert_eq!(
        per_run(&got, &[small.run_id, big]),
        vec![0, 4],
        "once committed, the started run contends: equal weights, the small run already \
         holds 4 live leases ({got:?})"
    );
}
