//! `GetStatus` at a million planned trials while executing, in process: a run of
//! `TRIALS` (default 1,000,000) no-op trials planned straight in the database (one
//! statement per table, `common/bigrun.rs`, plus its catalog row), half of them done with
//! an attempt and a record each and 100 live (`common/half_finished.rs`), then
//! `status::run_status` (what `GetStatus` answers, without the gRPC hop or a CLI process)
//! called `CALLS` times (default 50): every call in order, the first (which opens the pooled
//! connections) apart, p50 and p99 of the rest, and the projection's outcome counts checked
//! against what was written; the per-step rows' part of it (`status_steps::run_steps`, a run
//! without multi-step tasks) `CALLS` times apart. Then, on the same run, one page of the viewer's compact
//! trial rows (`view_source::trial_rows_page`: what `ListTrialRows` with `after`/`limit`
//! reads per page, 50 rows after the middle ordinal) `CALLS` times, and once the whole run's
//! rows in one query (the unpaged read `ListTrialRows` made before it paged).
//!
//! Run: `cargo bench -p akbench-coordinator --bench status` (needs the PostgreSQL binaries;
//! about 2 minutes at a million trials, most of it seeding); `TRIALS=200000` for less.

use std::time::{Duration, Instant};

use akbench_coordinator::pgcluster::PrivateCluster;
use akbench_coordinator::status::{run_status, StatusOptions};
use akbench_coordinator::store::Store;
use akbench_coordinator::view_source::trial_rows_page;

#[path = "common/bigrun.rs"]
#[allow(dead_code)]
mod bigrun;
#[path = "common/half_finished.rs"]
mod half_finished;

#[path = "common/synthetic.rs"]
#[allow(dead_code)]
mod synthetic;
use synthetic::env;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let trials = env("TRIALS", 1_000_000);
    let calls = env("CALLS", 50).max(2);
    let cluster = PrivateCluster::start(None).expect("private cluster");
    let url = cluster.create_database("bench").await.expect("database");
    let store = Store::connect(&url).await.expect("connects");
    store.migrate().await.expect("migrates");

    let t = Instant::now();
    let (run_id, _) = bigrun::plan(&store, trials, false).await;
    let key = format!("run-{run_id}");
    let n = i64::try_from(trials).unwrap();
    store
        .client()
        .await
        .unwrap()
        .execute(
            "INSERT INTO run_catalog (run_id, run_key, experiment, trial_count, by_agent, \
             spec_digest, plan_digest) \
             SELECT $1, $2, 'bench', $3::bigint, jsonb_build_object('noop', $3::bigint), s.digest, \
                    'sha256:' || repeat('0', 64) \
             FROM run_specs s WHERE s.run_id = $1",
            &[&run_id, &key, &n],
        )
        .await
        .unwrap();
    half_finished::half_finished(&url, &key).await;
    println!(
        "{trials} planned trials, {} done, 100 live: seeded in {:.0?}",
        trials.div_ceil(2),
        t.elapsed()
    );

    let options = StatusOptions::default();
    let mut times: Vec<Duration> = Vec::with_capacity(calls);
    let mut last = None;
    for _ in 0..calls {
        let t = Instant::now();
        let s = run_status(&store, &key, options).await.expect("status");
        times.push(t.elapsed());
        last = Some(s);
    }
    let s = last.expect("a status");
    let of = |name: &str| s.outcomes.get(name).copied().unwrap_or(0);
    let (succeeded, failed) = (of("succeeded"), of("failed"));
    assert_eq!(s.planned, trials as u64);
    assert_eq!(
        succeeded + failed,
        trials.div_ceil(2) as u64,
        "{:?}",
        s.outcomes
    );
    let in_order: Vec<String> = times
        .iter()
        .map(|t| format!("{:.1}", t.as_secs_f64() * 1e3))
        .collect();
    println!("GetStatus each call in order (ms): {}", in_order.join(" "));
    // The first call opens the store's pooled connections and plans every statement on
    // them (once per coordinator, not per call): printed apart, left out of the percentiles.
    let first = times.remove(0);
    times.sort();
    let pick = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "GetStatus in process: first call {first:.1?} (the pool's connections opened); the {} \
         after it: p50 {:.1?} p99 {:.1?} max {:.1?}; succeeded {succeeded}, failed {failed}, \
         running {}",
        times.len(),
        pick(0.5),
        pick(0.99),
        times[times.len() - 1],
        s.running
    );

    // The per-step rows' part of each call (`status_steps`, issue 46) on this run, which has
    // no multi-step task: one query over the empty partial index `submissions_steps`.
    let client = store.client().await.expect("a connection");
    let mut times: Vec<Duration> = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let steps = akbench_coordinator::status_steps::run_steps(&client, s.run.run_id)
            .await
            .expect("steps");
        times.push(t.elapsed());
        assert!(steps.is_empty());
    }
    times.sort();
    let pick = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "the steps part of a status of this run without steps ({calls} calls): p50 {:.2?} p99 {:.2?} max {:.2?}",
        pick(0.5),
        pick(0.99),
        times[times.len() - 1]
    );

    // The viewer's run page of this run: one page of compact rows after the middle ordinal.
    let run = akbench_coordinator::evidence::find_run(&store, &key)
        .await
        .expect("the run");
    let middle = (trials / 2) as u64;
    let mut times: Vec<Duration> = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let page = trial_rows_page(&store, &run, Some(middle), Some(50))
            .await
            .expect("a page");
        times.push(t.elapsed());
        assert_eq!(page.len(), 50);
        assert!(page[0].ordinal.unwrap() > middle);
    }
    times.sort();
    let pick = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "a page of 50 trial rows after ordinal {middle} ({calls} calls): p50 {:.1?} p99 {:.1?} max {:.1?}",
        pick(0.5),
        pick(0.99),
        times[times.len() - 1]
    );
    let t = Instant::now();
    let all = trial_rows_page(&store, &run, None, None)
        .await
        .expect("every row");
    println!(
        "every done trial's row in one query (the unpaged read): {} rows in {:.1?}",
        all.len(),
        t.elapsed()
    );
}
