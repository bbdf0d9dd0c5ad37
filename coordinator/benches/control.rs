//! Control-plane benchmark: store a 100,000-trial plan through `SubmitPlan`, then time
//! `GetStatus` on it (20 calls, p50/p99) before and after half its trials finished, and read
//! the coordinator's RSS (a child process running the real binary) before and after, against
//! a 1,000-trial run, to show that status memory does not grow with plan size; then
//! `StartRun` of a second 100,000-trial plan (timed) and `GetStatus` on the started run.
//!
//! Run: `cargo bench -p akbench-coordinator --bench control` (needs the PostgreSQL binaries).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::scheduler::{store_records, NewRecord};
use akbench_coordinator::store::Store;
use akbench_core::clock::SystemClock;
use akbench_core::digest::canonical_json;
use akbench_core::plan::plan;
use akbench_core::testkit::synthetic_spec;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use tonic::transport::Channel;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn status_times(client: &mut ControlClient<Channel>, run: &str) -> (Duration, Duration) {
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        client
            .get_status(pb::GetStatusRequest { run: run.into() })
            .await
            .unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    (times[9], times[19])
}

fn submit_request(tasks: usize, reps: u32) -> (String, pb::SubmitPlanRequest) {
    let spec = synthetic_spec(tasks, 2, reps, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let key = spec.identity.run_key.clone();
    (
        key,
        pb::SubmitPlanRequest {
            spec_json: canonical_json(&spec),
            spec_digest: spec.digest.clone(),
            plan_json: canonical_json(&ready),
            plan_digest: ready.digest.clone(),
        },
    )
}

/// Half the trials done (one attempt and record each; a quarter solved), 100 live attempts.
async fn half_finished(url: &str, run: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "BEGIN;
             WITH created AS (
               INSERT INTO work_items (trial_id, run_id, ordinal, agent)
               SELECT p.trial_id, p.run_id, p.ordinal, p.agent FROM planned_trials p
               JOIN run_catalog c ON c.run_id = p.run_id WHERE c.run_key = '{run}'
               RETURNING run_id, agent)
             INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
               SELECT run_id, agent, 'items', 'total', NULL, count(*) FROM created
               GROUP BY run_id, agent;
             UPDATE runs SET state = 'running', started_at = now() - interval '10 minutes'
               WHERE run_id = (SELECT run_id FROM run_catalog WHERE run_key = '{run}');
             CREATE TEMP TABLE this_run AS SELECT run_id FROM run_catalog WHERE run_key = '{run}';
             CREATE TEMP TABLE picked AS
               SELECT trial_id, ordinal, gen_random_uuid() AS attempt_id FROM work_items
               WHERE ordinal % 2 = 0 AND run_id = (SELECT run_id FROM this_run);
             INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch, finished_at, terminal_state)
               SELECT attempt_id, trial_id, 1, 'execute', 'completed', 1, now(), 'completed' FROM picked;
             COMMIT;"
        ))
        .await
        .unwrap();
    // The records through the product's statement (spend counted as for a real report).
    let records: Vec<NewRecord> = client
        .query(
            "SELECT attempt_id, 'sha256:' || repeat('0', 64) AS digest,
                    jsonb_build_object('outcome', jsonb_build_object(
                        'state', 'completed', 'ok', ordinal % 4 = 0))::text AS record
             FROM picked",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get("attempt_id"), r.get("digest"), r.get("record")))
        .collect();
    let store = Store::connect(url).await.unwrap();
    store_records(&store.client().await.unwrap(), &records)
        .await
        .unwrap();
    client
        .batch_execute(
            "BEGIN;
             WITH done AS (
               UPDATE work_items w SET state = 'done', attempts_used = 1,
                      -- The picked attempts are `completed`: core's Bucket::settled.
                      bucket = (SELECT CASE s.ok WHEN true THEN 'succeeded'
                                                 WHEN false THEN 'failed' END
                                FROM picked p
                                LEFT JOIN submissions s ON s.attempt_id = p.attempt_id
                                WHERE p.trial_id = w.trial_id),
                      updated_at = now() - (ordinal % 600) * interval '1 second'
                 WHERE trial_id IN (SELECT trial_id FROM picked)
                 RETURNING run_id, agent, bucket)
             INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
               SELECT run_id, agent, 'items', 'done', bucket, count(*) FROM done
               GROUP BY run_id, agent, bucket;
             INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch)
               SELECT gen_random_uuid(), trial_id, 1, 'execute', 'executing', 2 FROM work_items
               WHERE ordinal % 2 = 1 AND ordinal < 200 AND run_id = (SELECT run_id FROM this_run);
             UPDATE work_items SET state = 'leased'
               WHERE ordinal % 2 = 1 AND ordinal < 200 AND run_id = (SELECT run_id FROM this_run);
             COMMIT;",
        )
        .await
        .unwrap();
    client.batch_execute("VACUUM ANALYZE").await.unwrap();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = test_support::fresh_database().await;
    let (grpc, http) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_akbench-coordinator"))
        .args(["--database-url", &url])
        .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
        .args(["--http-listen", &format!("127.0.0.1:{http}")])
        .env(
            "RUST_LOG",
            std::env::var("AKBENCH_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .env_remove("AKBENCH_OPERATOR_TOKEN")
        .env_remove("AKBENCH_VIEWER_TOKEN")
        .env_remove("AKBENCH_WORKER_TOKEN")
        .stdout(if std::env::var_os("AKBENCH_BENCH_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("starts akbench-coordinator");
    let child = Killed(child);
    let pid = child.0.id();
    let endpoint = Channel::from_shared(format!("http://127.0.0.1:{grpc}")).unwrap();
    let channel = loop {
        match endpoint.connect().await {
            Ok(c) => break c,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let mut client = ControlClient::new(channel)
        .max_encoding_message_size(512 << 20)
        .max_decoding_message_size(512 << 20);
    println!("coordinator RSS at start: {} MiB", rss_kib(pid) / 1024);

    let (small_key, small) = submit_request(500, 1);
    client.submit_plan(small).await.unwrap();
    half_finished(&url, &small_key).await;
    let (p50, p99) = status_times(&mut client, &small_key).await;
    let rss_small = rss_kib(pid);
    println!(
        "1,000-trial run, half finished: GetStatus p50 {p50:?} p99 {p99:?}; RSS {} MiB",
        rss_small / 1024
    );

    let (key, large) = submit_request(5_000, 10);
    let bytes = large.plan_json.len() + large.spec_json.len();
    let t = Instant::now();
    let r = client.submit_plan(large).await.unwrap().into_inner();
    let submit = t.elapsed();
    assert_eq!(r.run.unwrap().trial_count, 100_000);
    println!(
        "SubmitPlan 100,000 trials ({} MiB of JSON): {submit:?}; RSS after {} MiB",
        bytes >> 20,
        rss_kib(pid) / 1024
    );
    let (p50, p99) = status_times(&mut client, &key).await;
    println!("100,000-trial run, planned: GetStatus p50 {p50:?} p99 {p99:?}");
    half_finished(&url, &key).await;
    check_outcomes(&mut client, &key, 25_000, 25_000).await;
    let before = rss_kib(pid);
    let (p50, p99) = status_times(&mut client, &key).await;
    let after = rss_kib(pid);
    println!(
        "100,000-trial run, 50,000 finished + 100 live: GetStatus p50 {p50:?} p99 {p99:?}; RSS before {} MiB, after 20 calls {} MiB",
        before / 1024,
        after / 1024
    );
    if std::env::var_os("AKBENCH_BENCH_EXPLAIN").is_some() {
        explain(&url, &key).await;
    }

    // `run start` of a 100,000-trial run (issue 12: at most 5 s): a second plan, submitted
    // and started through the Control API; then status on the started run (every item ready).
    // 10,000 tasks x 2 agents x 5 repetitions: another run key than the first plan's.
    let (key2, large2) = submit_request(10_000, 5);
    client.submit_plan(large2).await.unwrap();
    let rss_before_start = rss_kib(pid);
    let t = Instant::now();
    let started = client
        .start_run(pb::StartRunRequest { run: key2.clone() })
        .await
        .unwrap()
        .into_inner();
    let start = t.elapsed();
    assert_eq!(started.work_items_created, 100_000);
    println!(
        "StartRun 100,000 trials: {start:?}; RSS before {} MiB, after {} MiB",
        rss_before_start / 1024,
        rss_kib(pid) / 1024
    );
    let (p50, p99) = status_times(&mut client, &key2).await;
    println!("100,000-trial run, started (100,000 ready): GetStatus p50 {p50:?} p99 {p99:?}");
    if std::env::var_os("AKBENCH_BENCH_EXPLAIN").is_some() {
        explain(&url, &key2).await;
    }
    drop(child);
}

/// The projection of the half-finished run counts what `half_finished` wrote: every even
/// ordinal done, those divisible by four solved.
async fn check_outcomes(
    client: &mut ControlClient<Channel>,
    run: &str,
    succeeded: u64,
    failed: u64,
) {
    let s = client
        .get_status(pb::GetStatusRequest { run: run.into() })
        .await
        .unwrap()
        .into_inner();
    let of = |counts: &[pb::StateCount], name: &str| {
        counts
            .iter()
            .find(|c| c.state == name)
            .map_or(0, |c| c.count)
    };
    assert_eq!(of(&s.outcomes, "succeeded"), succeeded, "{:?}", s.outcomes);
    assert_eq!(of(&s.outcomes, "failed"), failed, "{:?}", s.outcomes);
    let by_agent: u64 = s
        .agents
        .iter()
        .map(|a| of(&a.outcomes, "succeeded") + of(&a.outcomes, "failed"))
        .sum();
    assert_eq!(by_agent, succeeded + failed, "{:?}", s.agents);
}

async fn explain(url: &str, run: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let id: uuid::Uuid = client
        .query_one("SELECT run_id FROM run_catalog WHERE run_key = $1", &[&run])
        .await
        .unwrap()
        .get(0);
    // Every query of `run_status`, parameters inlined ($2 = 300 s window, $3 = 60 s).
    for sql in [
        include_str!("../sql/control/status_counts.sql"),
        include_str!("../sql/control/status_phases.sql"),
        include_str!("../sql/control/status_clock.sql"),
        include_str!("../sql/control/status_failures.sql"),
        include_str!("../sql/control/status_placement.sql"),
        include_str!("../sql/routes/paused_routes_of_run.sql"),
        include_str!("../sql/scheduler/budget_spend.sql"),
    ] {
        let text = format!("EXPLAIN (ANALYZE, BUFFERS) {sql}")
            .replace("$1::uuid[]", &format!("ARRAY['{id}']::uuid[]"))
            .replace("$1", &format!("'{id}'::uuid"))
            .replace("$2::uuid[]", "ARRAY[]::uuid[]")
            .replace("$2", "300")
            .replace("$3", "60");
        for row in client.query(&text, &[]).await.unwrap() {
            println!("{}", row.get::<_, String>(0));
        }
    }
}
