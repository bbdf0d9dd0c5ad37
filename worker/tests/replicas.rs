//! Two coordinator processes (replicas) on one database serve one run while a worker and a
//! coordinator are SIGKILLed in the same run: worker w0 (listing replica A first) loses its
//! coordinator and reconnects to B, re-presenting its live attempts; worker w1 (on B) dies
//! and B takes its leases back. The run ends with every planned trial ended exactly once:
//! status, reconcile and the records agree, read through the `akbench` client given the
//! dead replica first (docs/remote.md "Replicas"); a `run status --watch` following the run
//! through the killed replica switches to the other and ends with the run.

use akbench_coordinator::pgcluster::test_support;
mod e2e;

use akbench_core::digest::canonical_json;
use akbench_proto::v1 as pb;
use e2e::examples;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn start_coordinator(url: &str, grpc: SocketAddr, http: SocketAddr) -> Child {
    let bin = e2e::workspace_bin("akbench-coordinator");
    e2e::coordinator_command(&bin, url, grpc, http, 5_000)
        .spawn()
        .unwrap()
}

/// A worker daemon: `coordinators` as `--coordinator` (`flag`) or as `AKBENCH_COORDINATOR`.
fn start_worker(dir: &Path, id: &str, coordinators: &str, flag: bool) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench-worker"));
    if flag {
        cmd.arg("--coordinator").arg(coordinators);
    } else {
        cmd.env("AKBENCH_COORDINATOR", coordinators);
    }
    cmd.args(["--slots", "2", "--worker-id", id, "--grace", "5"])
        .arg("--cache")
        .arg(dir.join("cache"))
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .env("AKBENCH_LOG", "error")
        .spawn()
        .unwrap()
}

async fn count(db: &tokio_postgres::Client, q: &str, worker: &str) -> i64 {
    db.query_one(q, &[&worker]).await.unwrap().get(0)
}

/// `akbench --coordinator <list> run ARGS... --json`: exit code and JSON output.
fn akbench(coordinators: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let out = Command::new(e2e::workspace_bin("akbench"))
        .arg("--coordinator")
        .arg(coordinators)
        .arg("run")
        .args(args)
        .arg("--json")
        .env_remove("AKBENCH_TOKEN")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "akbench run {args:?}: not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_and_a_coordinator_killed_in_one_run_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    // Built before the run: the watch below starts mid-run and must not wait for a build.
    let akbench_bin = e2e::workspace_bin("akbench");
    let url = test_support::fresh_database().await;
    let [grpc_a, http_a, grpc_b, http_b] = e2e::restartable_addrs();
    // A first: it migrates the database; B then starts on the migrated one.
    let mut procs = e2e::Procs(vec![start_coordinator(&url, grpc_a, http_a)]);
    let mut client_a = e2e::control_client(grpc_a, 60).await;
    procs.0.push(start_coordinator(&url, grpc_b, http_b));
    let mut client_b = e2e::control_client(grpc_b, 60).await;
    let (a, b) = (format!("http://{grpc_a}"), format!("http://{grpc_b}"));

    let (spec, ready) = e2e::plan_run(
        tmp.path(),
        "experiment: replicas\ntasks:\n  include: [\"pyslug-*\"]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: fail\nrepetitions: 3\nexecution:\n  infrastructure_retries: 2\n",
    );
    let planned = ready.trials.len();
    assert_eq!(planned, 24);
    client_a
        .submit_plan(pb::SubmitPlanRequest {
            spec_json: canonical_json(&spec),
            spec_digest: spec.digest.clone(),
            plan_json: canonical_json(&ready),
            plan_digest: ready.digest.clone(),
        })
        .await
        .unwrap();
    let run = spec.identity.run_key.clone();
    // Started through B: A's idle sessions find the work by polling the shared queue.
    client_b
        .start_run(pb::StartRunRequest { run: run.clone() })
        .await
        .unwrap();
    // w0 opens its session on A (listed first), w1 on B.
    procs.0.push(start_worker(
        &tmp.path().join("w0"),
        "w0",
        &format!("{a},{b}"),
        true,
    ));
    procs.0.push(start_worker(
        &tmp.path().join("w1"),
        "w1",
        &format!("{b},{a}"),
        false,
    ));

    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    // Both workers hold leases, w0's through A: the kills land mid-run.
    let until = Instant::now() + Duration::from_secs(300);
    loop {
        let w0 = count(
            &db,
            "SELECT count(*) FROM leases WHERE worker_id = $1",
            "w0",
        )
        .await;
        let w1 = count(
            &db,
            "SELECT count(*) FROM leases WHERE worker_id = $1",
            "w1",
        )
        .await;
        if w0 > 0 && w1 > 0 {
            break;
        }
        assert!(
            Instant::now() < until,
            "the workers never both held leases (w0 {w0}, w1 {w1})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A client watching the run, given A first: it follows the run through A until A dies.
    let watch_out = tmp.path().join("watch.jsonl");
    let watch_err = tmp.path().join("watch.err");
    procs.0.push(
        Command::new(&akbench_bin)
            .args(["--coordinator", &format!("{a},{b}"), "run", "status", &run])
            .args(["--watch", "--json"])
            .env_remove("AKBENCH_TOKEN")
            .stdout(std::fs::File::create(&watch_out).unwrap())
            .stderr(std::fs::File::create(&watch_err).unwrap())
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&watch_out)
        .unwrap_or_default()
        .lines()
        .next()
        .is_none()
    {
        assert!(
            Instant::now() < until,
            "the watch showed nothing: {}",
            std::fs::read_to_string(&watch_err).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The worker on B and the coordinator w0 (and the watch) is connected to, without warning.
    procs.0[3].kill().unwrap();
    procs.0[3].wait().unwrap();
    procs.0[0].kill().unwrap();
    procs.0[0].wait().unwrap();
    let done: i64 = db
        .query_one("SELECT count(*) FROM work_items WHERE state = 'done'", &[])
        .await
        .unwrap()
        .get(0);
    assert!(done < 24, "the kills must land mid-run (done: {done})");

    // B alone finishes the run with w0.
    let until = Instant::now() + Duration::from_secs(600);
    loop {
        let state: String = db
            .query_one("SELECT state::text FROM runs", &[])
            .await
            .unwrap()
            .get(0);
        if state == "finished" {
            break;
        }
        assert!(
            Instant::now() < until,
            "the run did not finish after the kills"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status = client_b
        .get_status(pb::GetStatusRequest { run: run.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.planned, 24);
    assert_eq!(status.finished, 24, "{status:?}");
    assert_eq!((status.queued, status.running), (0, 0), "{status:?}");
    // The watch lost A, followed the run through B to its end, and exits 0 (accounting valid).
    let watch = procs.0.last_mut().unwrap();
    let until = Instant::now() + Duration::from_secs(120);
    let code = loop {
        if let Some(code) = watch.try_wait().unwrap() {
            break code.code();
        }
        assert!(Instant::now() < until, "the watch did not end with the run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let err = std::fs::read_to_string(&watch_err).unwrap();
    assert_eq!(code, Some(0), "watch: {err}");
    assert!(
        err.contains(&format!("following the run through {b}")),
        "{err}"
    );
    let shown = std::fs::read_to_string(&watch_out).unwrap();
    let last: serde_json::Value = serde_json::from_str(shown.lines().last().unwrap()).unwrap();
    assert_eq!(last["run"]["state"], "finished", "{last}");
    assert_eq!(last["finished"], 24, "{last}");
    let per_trial = e2e::accepted_records_per_trial(&db, spec.identity.run_id).await;
    assert_eq!(per_trial.len(), 24);
    assert!(per_trial.iter().all(|n| *n == 1), "{per_trial:?}");

    // The client, given the dead replica first, reads through B.
    let both = format!("{a},{b}");
    let (code, report) = akbench(&both, &["reconcile", &run]);
    assert_eq!(code, 0, "reconcile: {report}");
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(report["counts"]["succeeded"], 12, "{report}");
    assert_eq!(report["counts"]["failed"], 12, "{report}");
    let out = tmp.path().join("records");
    let (code, records) = akbench(&both, &["records", &run, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "records: {records}");
    assert_eq!(records["records"], 24, "{records}");
    assert_eq!(records["covered"], 24, "{records}");
    let (code, shown) = akbench(&both, &["status", &run]);
    assert_eq!(code, 0, "status: {shown}");
    assert_eq!(
        (&shown["planned"], &shown["finished"]),
        (&serde_json::json!(24), &serde_json::json!(24)),
        "{shown}"
    );
}
