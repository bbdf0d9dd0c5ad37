//! The coordinator process killed with SIGKILL mid-sweep and restarted on the same database
//! and address: workers reconnect, re-present their leases, and the sweep ends with valid
//! accounting and exactly one accepted record per planned trial.

use akbench_coordinator::pgcluster::test_support;
mod e2e;

use akbench_core::digest::canonical_json;
use akbench_proto::v1 as pb;
use e2e::examples;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn coordinator_bin() -> PathBuf {
    e2e::workspace_bin("akbench-coordinator")
}

fn start_coordinator(url: &str, grpc: SocketAddr, http: SocketAddr) -> Child {
    e2e::coordinator_command(&coordinator_bin(), url, grpc, http, 5_000)
        .spawn()
        .unwrap()
}

async fn done(db: &tokio_postgres::Client) -> i64 {
    db.query_one("SELECT count(*) FROM work_items WHERE state = 'done'", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_killed_and_restarted_mid_sweep_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let url = test_support::fresh_database().await;
    let [grpc, http] = e2e::restartable_addrs();
    let mut procs = e2e::Procs(vec![start_coordinator(&url, grpc, http)]);
    let mut client = e2e::control_client(grpc, 60).await;

    let (spec, ready) = e2e::plan_run(
        tmp.path(),
        "experiment: restart\ntasks:\n  include: [\"pyslug-*\"]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: fail\nrepetitions: 4\nexecution:\n  infrastructure_retries: 2\n",
    );
    client
        .submit_plan(pb::SubmitPlanRequest {
            spec_json: canonical_json(&spec),
            spec_digest: spec.digest.clone(),
            plan_json: canonical_json(&ready),
            plan_digest: ready.digest.clone(),
        })
        .await
        .unwrap();
    let run = spec.identity.run_key.clone();
    client
        .start_run(pb::StartRunRequest { run: run.clone() })
        .await
        .unwrap();
    for n in 0..2 {
        let dir = tmp.path().join(format!("w{n}"));
        procs.0.push(
            Command::new(env!("CARGO_BIN_EXE_akbench-worker"))
                .arg("--coordinator")
                .arg(format!("http://{grpc}"))
                .args([
                    "--slots",
                    "2",
                    "--worker-id",
                    &format!("w{n}"),
                    "--grace",
                    "5",
                ])
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
                .unwrap(),
        );
    }
    // Let part of the sweep finish, then kill the coordinator without warning.
    let store_url = url.clone();
    let (db, conn) = tokio_postgres::connect(&store_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let until = Instant::now() + Duration::from_secs(300);
    while done(&db).await < 4 {
        assert!(Instant::now() < until, "no progress before the kill");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = done(&db).await;
    procs.0[0].kill().unwrap();
    procs.0[0].wait().unwrap();
    assert!(before < 32, "the kill must land mid-sweep (done: {before})");

    // Restart on the same database and address.
    procs.0[0] = start_coordinator(&url, grpc, http);
    let mut client = e2e::control_client(grpc, 60).await;
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
            "the run did not finish after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = client
        .reconcile(pb::ReconcileRequest {
            run: run.clone(),
            observations_json: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let report: serde_json::Value = serde_json::from_str(&r.report_json).unwrap();
    assert!(r.valid, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(report["counts"]["succeeded"], 16, "{report}");
    assert_eq!(report["counts"]["failed"], 16, "{report}");
    let per_trial = e2e::accepted_records_per_trial(&db, spec.identity.run_id).await;
    assert_eq!(per_trial.len(), 32);
    assert!(per_trial.iter().all(|n| *n == 1), "{per_trial:?}");
}
