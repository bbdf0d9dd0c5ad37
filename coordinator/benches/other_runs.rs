//! Claims, status and the runs list against other runs' work (issue 48): their cost must not
//! grow with the items other runs hold, nor wait on another run's uncommitted start.
//!
//! On a private PostgreSQL, in process:
//! 1. Four runs of `QUEUED` (default 200,000) no-op trials planned straight in the database
//!    (`common/bigrun.rs`) and started by `Scheduler::start_run` (what `StartRun` does), all
//!    queued; a 20-trial run started and finished by hand.
//! 2. Status (`status::run_status`, what `GetStatus` answers) of the finished run and of a
//!    queued run, `CALLS` times each (default 50; the first call of each apart, it plans the
//!    statements on the pool's connections), p50 / p99 / max; `run list` as
//!    `akbench run list --coordinator` reads it (`ListRuns`, then one `GetStatus` per listed
//!    run, in order) `LIST_CALLS` times (default 10). The previous `status_share.sql`
//!    (before issue 48) and the current one, timed alone on the same database for the
//!    finished run: the before/after ratio of one run.
//! 3. Claims (`Scheduler::claim` of one item, every `CLAIM_GAP_MS`, default 10): `CLAIMS`
//!    (default 100) before any start, then as many as fit while a run of `START` (default
//!    1,000,000) trials is started (`Scheduler::start_run`: its items inserted in one
//!    transaction, uncommitted until it ends), then `CLAIMS` after it. Then, while a second
//!    run of `START` trials is started, the previous claim contenders statement (a skip scan
//!    of the ready index) and the current one, each in a loop on a connection of its own
//!    under the scheduler's plan settings: the before/after ratio of one run.
//!
//! Run: `cargo bench -p akbench-coordinator --bench other_runs --profile dev` (needs the
//! PostgreSQL binaries; about 3-5 minutes at the defaults, most of it seeding and the start).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use akbench_coordinator::evidence::list_runs;
use akbench_coordinator::pgcluster::PrivateCluster;
use akbench_coordinator::scheduler::test_support::set_item_state;
use akbench_coordinator::scheduler::Scheduler;
use akbench_coordinator::status::{run_status, StatusOptions};
use akbench_coordinator::store::Store;
use uuid::Uuid;

#[path = "common/bigrun.rs"]
mod bigrun;
#[path = "common/synthetic.rs"]
#[allow(dead_code)]
mod synthetic;
use bigrun::{agents, caps, plan};
use synthetic::env;

/// `status_share.sql` before issue 48: `wants` as one EXISTS over two states, which the
/// planner answered with a sequential scan of every work item, once per running run.
const STATUS_SHARE_BEFORE: &str = "SELECT r.run_id, r.caps, \
       (SELECT count(*) FROM work_items l \
         WHERE l.run_id = r.run_id AND l.state = 'leased') AS live, \
       EXISTS (SELECT 1 FROM work_items w \
                WHERE w.run_id = r.run_id AND w.state IN ('ready', 'leased')) AS wants \
FROM runs r \
WHERE r.state IN ('running', 'cancelling') OR r.run_id = $1 \
ORDER BY r.run_id";
const STATUS_SHARE_NOW: &str = include_str!("../sql/control/status_share.sql");

/// `claim_contenders.sql` before issue 48: a recursive skip scan of the ready index.
const CONTENDERS_BEFORE: &str = "WITH RECURSIVE ready (run_id) AS ( \
    (SELECT w.run_id FROM work_items w WHERE w.state = 'ready' ORDER BY w.run_id LIMIT 1) \
    UNION ALL \
    SELECT (SELECT w.run_id FROM work_items w \
             WHERE w.state = 'ready' AND w.run_id > ready.run_id \
             ORDER BY w.run_id LIMIT 1) \
    FROM ready \
    WHERE ready.run_id IS NOT NULL \
) \
SELECT r.run_id, r.caps \
FROM ready \
JOIN runs r ON r.run_id = ready.run_id \
WHERE NOT EXISTS ( \
        SELECT 1 \
        FROM jsonb_array_elements_text(r.caps -> 'worker_labels') AS req (label) \
        WHERE NOT coalesce(( \
                SELECT CASE WHEN strpos(req.label, '=') > 0 \
                            THEN w.labels ->> split_part(req.label, '=', 1) \
                                 = substr(req.label, strpos(req.label, '=') + 1) \
                            ELSE w.labels ? req.label END \
                FROM workers w \
                WHERE w.worker_id = $1::text), false)) \
ORDER BY r.run_id";
const CONTENDERS_NOW: &str = include_str!("../sql/scheduler/claim_contenders.sql");
const KEYED_PLANS: &str = include_str!("../sql/scheduler/keyed_plans.sql");

/// "p50 .. p99 .. max .." of `times` (milliseconds), with their count.
fn summary(times: &[Duration]) -> String {
    if times.is_empty() {
        return "no calls".into();
    }
    let mut t = times.to_vec();
    t.sort();
    let pick = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
    format!(
        "{} calls: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        t.len(),
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3,
        t[t.len() - 1].as_secs_f64() * 1e3
    )
}

fn quantile(times: &[Duration], q: f64) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    t[((t.len() - 1) as f64 * q).round() as usize]
}

fn p50(times: &[Duration]) -> Duration {
    quantile(times, 0.5)
}

fn p99(times: &[Duration]) -> Duration {
    quantile(times, 0.99)
}

/// Its run_catalog row, so that status and the runs list find a run [`plan`] made.
async fn catalog(store: &Store, run_id: Uuid, trials: usize) -> String {
    let key = format!("run-{run_id}");
    let n = i64::try_from(trials).unwrap();
    store
        .client()
        .await
        .unwrap()
        .execute(
            "INSERT INTO run_catalog (run_id, run_key, experiment, trial_count, by_agent, \
             spec_digest, plan_digest) \
             SELECT $1, $2, 'bench', $3::bigint, jsonb_build_object('noop', $3::bigint), \
                    s.digest, 'sha256:' || repeat('0', 64) \
             FROM run_specs s WHERE s.run_id = $1",
            &[&run_id, &key, &n],
        )
        .await
        .unwrap();
    key
}

/// Times `sql` with `params` `calls` times on `client`.
async fn time_statement(
    client: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    calls: usize,
) -> Vec<Duration> {
    let statement = client.prepare(sql).await.unwrap();
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        client.query(&statement, params).await.unwrap();
        times.push(t.elapsed());
    }
    times
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Times a contenders statement in a loop under the scheduler's plan settings until `stop`.
async fn contenders_loop(url: String, sql: &'static str, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let mut client = connect(&url).await;
    let mut times = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let tx = client.transaction().await.unwrap();
        tx.query_one(KEYED_PLANS, &[]).await.unwrap();
        let statement = tx.prepare(sql).await.unwrap();
        let t = Instant::now();
        tx.query(&statement, &[&"bench"]).await.unwrap();
        times.push(t.elapsed());
        tx.commit().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    times
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let queued = env("QUEUED", 200_000);
    let calls = env("CALLS", 50).max(2);
    let list_calls = env("LIST_CALLS", 10).max(1);
    let start = env("START", 1_000_000);
    let claims = env("CLAIMS", 100).max(1);
    let gap = Duration::from_millis(env("CLAIM_GAP_MS", 10) as u64);
    let ttl = Duration::from_secs(3600);

    let cluster = PrivateCluster::start(None).expect("private cluster");
    let url = cluster.create_database("bench").await.expect("database");
    let store = Store::connect(&url).await.expect("connects");
    store.migrate().await.expect("migrates");
    let scheduler = Scheduler::new(store.clone());

    // 1. Four queued runs and a finished one.
    let t = Instant::now();
    let mut queued_keys = Vec::new();
    for _ in 0..4 {
        let (run, _) = plan(&store, queued, false).await;
        queued_keys.push(catalog(&store, run, queued).await);
        let created = scheduler.start_run(run, &caps(1), &agents()).await.unwrap();
        assert_eq!(created, Some(queued as u64));
    }
    let (finished, trials) = plan(&store, 20, true).await;
    let finished_key = catalog(&store, finished, 20).await;
    scheduler
        .start_run(finished, &caps(1), &agents())
        .await
        .unwrap();
    {
        let client = store.client().await.unwrap();
        set_item_state(&client, &trials, "done", Some("completed"), None)
            .await
            .unwrap();
        client
            .execute(
                "UPDATE runs SET state = 'finished', updated_at = now() WHERE run_id = $1",
                &[&finished],
            )
            .await
            .unwrap();
        client.batch_execute("VACUUM ANALYZE").await.unwrap();
    }
    println!(
        "four runs of {queued} queued trials ({} work items) and a finished 20-trial run: \
         seeded in {:.1?}",
        4 * queued,
        t.elapsed()
    );

    // 2. Status and the runs list.
    let options = StatusOptions::default();
    for (what, key) in [
        ("the finished 20-trial run", &finished_key),
        ("a queued run", &queued_keys[0]),
    ] {
        let mut times = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            let s = run_status(&store, key, options).await.expect("status");
            times.push(t.elapsed());
            if key == &finished_key {
                assert_eq!(s.finished, 20);
            } else {
                assert_eq!(s.queued, queued as u64);
            }
        }
        let first = times.remove(0);
        println!(
            "GetStatus of {what}: first call {:.1} ms; the {}",
            first.as_secs_f64() * 1e3,
            summary(&times)
        );
    }
    let mut times = Vec::with_capacity(list_calls);
    let mut listed = 0;
    for _ in 0..list_calls {
        let t = Instant::now();
        let runs = list_runs(&store, 100, None, "").await.expect("list");
        for (_, r) in &runs {
            run_status(&store, &r.run_id.to_string(), options)
                .await
                .expect("status");
        }
        times.push(t.elapsed());
        listed = runs.len();
    }
    println!(
        "run list (ListRuns, then GetStatus of each of its {listed} runs): {}",
        summary(&times)
    );
    let client = connect(&url).await;
    let before = time_statement(&client, STATUS_SHARE_BEFORE, &[&finished], calls).await;
    let now = time_statement(&client, STATUS_SHARE_NOW, &[&finished], calls).await;
    println!(
        "status_share.sql alone, the finished run: before (issue 48) {}; now {}; p50 ratio \
         before/now {:.0}",
        summary(&before),
        summary(&now),
        p50(&before).as_secs_f64() / p50(&now).as_secs_f64()
    );

    // 3. Claims before, during and after a large start, then the contenders statements
    // alone during a second one (apart, so that their loops do not load the claims' start).
    scheduler
        .register_worker("bench", 1_000_000, &Default::default(), "bench")
        .await
        .unwrap();
    let big = planned(&store, start).await;
    let mut before = Vec::with_capacity(claims);
    for _ in 0..claims {
        before.push(claim_any(&scheduler, ttl).await);
        tokio::time::sleep(gap).await;
    }
    println!("claims before the start: {}", summary(&before));
    let stop = Arc::new(AtomicBool::new(false));
    let starting = start_in_background(&scheduler, big, Arc::clone(&stop));
    let mut during = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        // The last one may end after the start committed (it then analyzes `work_items`).
        during.push(claim_any(&scheduler, ttl).await);
        tokio::time::sleep(gap).await;
    }
    let took = starting.await.unwrap();
    println!(
        "StartRun of {start} trials took {took:.1?}; claims during it: {}",
        summary(&during)
    );
    let mut after = Vec::with_capacity(claims);
    for _ in 0..claims {
        after.push(claim_any(&scheduler, ttl).await);
        tokio::time::sleep(gap).await;
    }
    println!("claims after the start: {}", summary(&after));
    println!(
        "p50 claim during/before the start: {:.2}; p99 during/before: {:.2}",
        p50(&during).as_secs_f64() / p50(&before).as_secs_f64(),
        p99(&during).as_secs_f64() / p99(&before).as_secs_f64()
    );

    let second = planned(&store, start).await;
    let stop = Arc::new(AtomicBool::new(false));
    let starting = start_in_background(&scheduler, second, Arc::clone(&stop));
    let old = tokio::spawn(contenders_loop(
        url.clone(),
        CONTENDERS_BEFORE,
        Arc::clone(&stop),
    ));
    let new = tokio::spawn(contenders_loop(
        url.clone(),
        CONTENDERS_NOW,
        Arc::clone(&stop),
    ));
    let took = starting.await.unwrap();
    let (old, new) = (old.await.unwrap(), new.await.unwrap());
    println!(
        "the claim contenders statement alone during a second start ({took:.1?}): before \
         (issue 48, the skip scan) {}; now {}",
        summary(&old),
        summary(&new)
    );
    if !old.is_empty() && !new.is_empty() {
        println!(
            "p50 ratio before/now during the start: {:.0}",
            p50(&old).as_secs_f64() / p50(&new).as_secs_f64()
        );
    }
}

/// A run of `trials` planned in the database, analyzed, not started.
async fn planned(store: &Store, trials: usize) -> Uuid {
    let t = Instant::now();
    let (run, _) = plan(store, trials, false).await;
    store
        .client()
        .await
        .unwrap()
        .batch_execute("ANALYZE")
        .await
        .unwrap();
    println!("a run of {trials} trials planned in {:.1?}", t.elapsed());
    run
}

/// Starts `run` (`Scheduler::start_run`) on a task of its own, setting `stop` once it
/// returned; the task answers how long the start took.
fn start_in_background(
    scheduler: &Scheduler,
    run: Uuid,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Duration> {
    let scheduler = scheduler.clone();
    tokio::spawn(async move {
        let t = Instant::now();
        let created = scheduler.start_run(run, &caps(1), &agents()).await.unwrap();
        stop.store(true, Ordering::Relaxed);
        assert!(created.is_some_and(|n| n > 0));
        t.elapsed()
    })
}

/// A claim of one item from any run (the started run contends once committed).
async fn claim_any(scheduler: &Scheduler, ttl: Duration) -> Duration {
    let t = Instant::now();
    let got = scheduler.claim("bench", 1, ttl).await.expect("claims");
    assert_eq!(got.len(), 1);
    t.elapsed()
}
