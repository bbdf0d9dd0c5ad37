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
use akbench_core::clock::SystemClock;
use akbench_core::digest::canonical_json;
use akbench_core::plan::plan;
use akbench_core::testkit::synthetic_spec;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use tonic::transport::Channel;

#[path = "common/half_finished.rs"]
mod half_finished;
use half_finished::half_finished;

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
    reconcile_memory(&mut client, pid, &key).await;

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

/// The coordinator's peak RSS while it reconciles the half-finished run: `Reconcile` (the
/// whole report in one message) against `ReconcileStream` (every entry, in pages), each
/// after the peak was reset (`clear_refs`), with the time each took.
async fn reconcile_memory(client: &mut ControlClient<Channel>, pid: u32, run: &str) {
    let reset = || std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    let peak = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = rss_kib(pid);
    let was_reset = reset();
    let t = Instant::now();
    let r = client
        .reconcile(pb::ReconcileRequest {
            run: run.into(),
            observations_json: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let whole = (t.elapsed(), peak(), r.report_json.len());
    drop(r);
    let between = rss_kib(pid);
    reset();
    let t = Instant::now();
    let mut parts = client
        .reconcile_stream(pb::ReconcileStreamRequest {
            run: run.into(),
            observations_json: String::new(),
            trials: pb::TrialList::All as i32,
            trials_limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut entries = 0usize;
    while let Some(part) = parts.message().await.unwrap() {
        entries += part.trials_json.len();
    }
    let streamed = (t.elapsed(), peak());
    println!(
        "Reconcile (whole report, {} MiB): {:?}, coordinator peak {} MiB (RSS before {} MiB); \
         ReconcileStream ({entries} entries): {:?}, peak {} MiB (RSS before {} MiB){}",
        whole.2 >> 20,
        whole.0,
        whole.1 / 1024,
        before / 1024,
        streamed.0,
        streamed.1 / 1024,
        between / 1024,
        if was_reset {
            ""
        } else {
            " (peak not reset: clear_refs refused)"
        }
    );
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
