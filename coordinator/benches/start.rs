//! `StartRun` benchmark (issue 12: start at most 5 s at 100,000 trials, coordinator memory
//! flat in the plan): submits plans of each size through the Control API of the real
//! `akbench-coordinator` binary (a child process on a private PostgreSQL), then times
//! `StartRun` of each and reads the coordinator's peak RSS during it (`VmHWM`, reset through
//! `/proc/<pid>/clear_refs` just before the call).
//!
//! Run: `cargo bench -p akbench-coordinator --bench start [-- SIZES...]` (default sizes
//! 10000 100000; each a multiple of 10: tasks x 2 agents x 5 repetitions).

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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| {
            v.trim_start_matches(':')
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Resets the peak RSS of `pid` to its current RSS; false when the kernel refuses.
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn submit_request(trials: usize) -> (String, pb::SubmitPlanRequest) {
    let spec = synthetic_spec(trials / 10, 2, 5, &SystemClock);
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
    let sizes: Vec<usize> = {
        let args: Vec<usize> = std::env::args()
            .skip(1)
            .filter_map(|a| a.parse().ok())
            .collect();
        if args.is_empty() {
            vec![10_000, 100_000]
        } else {
            args
        }
    };
    let url = test_support::fresh_database().await;
    let (grpc, http) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_akbench-coordinator"))
        .args(["--database-url", &url])
        .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
        .args(["--http-listen", &format!("127.0.0.1:{http}")])
        .env("RUST_LOG", "warn")
        .env_remove("AKBENCH_OPERATOR_TOKEN")
        .env_remove("AKBENCH_VIEWER_TOKEN")
        .env_remove("AKBENCH_WORKER_TOKEN")
        .stdout(Stdio::null())
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
    for n in sizes {
        let (key, request) = submit_request(n);
        client.submit_plan(request).await.unwrap();
        let rss_before = status_kib(pid, "VmRSS");
        let peak_known = reset_peak(pid);
        let t = Instant::now();
        let started = client
            .start_run(pb::StartRunRequest { run: key.clone() })
            .await
            .unwrap()
            .into_inner();
        let took = t.elapsed();
        assert_eq!(started.work_items_created, n as u64);
        let peak = if peak_known {
            format!("{} MiB", status_kib(pid, "VmHWM") / 1024)
        } else {
            "unknown (clear_refs refused)".into()
        };
        println!(
            "StartRun {n} trials: {took:?}; coordinator RSS before {} MiB, peak during {peak}, after {} MiB",
            rss_before / 1024,
            status_kib(pid, "VmRSS") / 1024
        );
    }
    if std::env::var_os("AKBENCH_BENCH_EXPLAIN").is_some() {
        explain(&url).await;
    }
    drop(child);
}

/// `EXPLAIN ANALYZE` of the item insert of the last started run, redone inside a rolled-back
/// transaction after deleting its items (`AKBENCH_BENCH_EXPLAIN=1`).
async fn explain(url: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let run: uuid::Uuid = client
        .query_one(
            "SELECT run_id FROM runs WHERE state = 'running' ORDER BY started_at DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!(
            // Rolled back below; work items are never deleted otherwise (migration 0029).
            "BEGIN; ALTER TABLE work_items DISABLE TRIGGER work_items_no_delete; \
             DELETE FROM work_items WHERE run_id = '{run}'"
        ))
        .await
        .unwrap();
    let sql = format!(
        "EXPLAIN (ANALYZE, BUFFERS) \
         INSERT INTO work_items (trial_id, run_id, ordinal, retry_budget, agent, provider_route, kind) \
         SELECT p.trial_id, p.run_id, p.ordinal, \
                LEAST((p.document -> 'attempt' ->> 'infrastructure_retries')::bigint, 2147483647)::int4, \
                p.agent, NULL::text, 'execute' \
         FROM planned_trials p JOIN run_agents a ON a.run_id = p.run_id AND a.agent = p.agent \
         WHERE p.run_id = '{run}'"
    );
    for row in client.query(&sql, &[]).await.unwrap() {
        println!("{}", row.get::<_, String>(0));
    }
    let t = std::time::Instant::now();
    client
        .query(
            &format!(
                "SELECT count((p.document -> 'attempt' ->> 'infrastructure_retries')::bigint) \
                 FROM planned_trials p WHERE p.run_id = '{run}'"
            ),
            &[],
        )
        .await
        .unwrap();
    println!(
        "parse of attempt.infrastructure_retries of every trial: {:?}",
        t.elapsed()
    );
    let t = std::time::Instant::now();
    client.batch_execute("ANALYZE work_items").await.unwrap();
    println!("ANALYZE work_items: {:?}", t.elapsed());
    client.batch_execute("ROLLBACK").await.unwrap();
}
