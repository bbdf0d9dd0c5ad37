//! `run list` and `run compare` against a real coordinator (in-process, on a fresh database
//! of a private PostgreSQL cluster), driven through the real `akbench` binary.

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::server::{serve_with, Config, Services};
use akbench_coordinator::store::Store;
use akbench_core::evidence::EvidenceStore;
use akbench_core::plan::RunPlan;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use uuid::Uuid;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn akbench(url: &str, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
    for v in ["AKBENCH_COORDINATOR", "AKBENCH_TOKEN", "AKBENCH_STORE_ROOT"] {
        c.env_remove(v);
    }
    c.arg("--coordinator").arg(url).args(args).output().unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Plans and submits the example experiment; returns its ready plan.
fn plan(url: &str, store_root: &Path) -> RunPlan {
    let root = repo();
    let o = akbench(
        url,
        &[
            "run",
            "plan",
            "--config",
            root.join("examples/experiment.yaml").to_str().unwrap(),
            "--tasks-root",
            root.join("examples/tasks").to_str().unwrap(),
            "--agents-root",
            root.join("examples/agents").to_str().unwrap(),
            "--store-root",
            store_root.to_str().unwrap(),
            "--json",
        ],
    );
    let key = json(&o)["run_key"].as_str().unwrap().to_string();
    EvidenceStore::new(store_root)
        .find(&key)
        .unwrap()
        .ready
        .unwrap()
}

/// Creates the work items of a run by hand (what the scheduler's start does).
async fn start_by_hand(store: &Store, run_id: Uuid) {
    let c = store.client().await.unwrap();
    for s in [
        akbench_coordinator::scheduler::test_support::INSERT_ITEMS_BY_HAND_SQL,
        "UPDATE runs SET state = 'running', started_at = now() WHERE run_id = $1",
    ] {
        c.execute(s, &[&run_id]).await.unwrap();
    }
}

/// Finishes trial `ordinal` with one graded attempt and an accepted record.
async fn finish_trial(store: &Store, plan: &RunPlan, ordinal: usize, ok: bool) {
    let trial = &plan.trials[ordinal];
    akbench_coordinator::scheduler::test_support::finish_trial(
        store,
        trial.trial_id,
        &trial.key,
        1,
        akbench_core::lifecycle::State::Completed,
        Some(ok),
        serde_json::json!({}),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_compare_runs_on_a_coordinator() {
    let db = test_support::fresh_database().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = serve_with(Config::local(db), Services::default(), async move {
        let _ = stopped.await;
    })
    .await
    .expect("serves");
    let url = format!("http://{}", handle.grpc_addr);
    let tmp = tempfile::tempdir().unwrap();
    let store_root = tmp.path().join("runs");
    let (a, b) = (plan(&url, &store_root), plan(&url, &store_root));
    let store = &handle.store;
    // Run A solves trials 0 and 1; run B fails trial 0 and solves trial 1; run B's trial 2
    // has no counterpart in A (A never ran it).
    for (p, oks) in [(&a, vec![true, true]), (&b, vec![false, true, true])] {
        start_by_hand(store, p.run_id).await;
        for (i, ok) in oks.into_iter().enumerate() {
            finish_trial(store, p, i, ok).await;
        }
    }

    let o = akbench(&url, &["run", "list", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let runs = json(&o)["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let row = runs
        .iter()
        .find(|r| r["key"] == a.run_key.as_str())
        .unwrap();
    assert_eq!(row["state"], "running");
    assert_eq!(row["experiment"], "examples");
    assert_eq!(
        (row["trials"].as_u64(), row["finished"].as_u64()),
        (Some(32), Some(2))
    );
    // Progress counts settled trials: with an outcome, or cancelled without running (a spent
    // budget), as the local store's progress does; B has 3 done and 2 cancelled.
    akbench_coordinator::scheduler::test_support::set_item_state(
        &store.client().await.unwrap(),
        &[b.trials[30].trial_id, b.trials[31].trial_id],
        "cancelled",
        None,
        Some("budget"),
    )
    .await
    .unwrap();
    let o = akbench(&url, &["run", "list", "--json"]);
    let runs = json(&o)["runs"].as_array().unwrap().clone();
    let row = runs
        .iter()
        .find(|r| r["key"] == b.run_key.as_str())
        .unwrap();
    assert_eq!(
        (row["trials"].as_u64(), row["finished"].as_u64()),
        (Some(32), Some(5)),
        "{row}"
    );
    let count = |args: &[&str]| {
        let mut all = vec!["run", "list", "--json"];
        all.extend_from_slice(args);
        json(&akbench(&url, &all))["runs"].as_array().unwrap().len()
    };
    assert_eq!(count(&["--experiment", "examples", "--since", "1h"]), 2);
    assert_eq!(count(&["--experiment", "other"]), 0);
    assert_eq!(count(&["--state", "planned"]), 0);

    let o = akbench(&url, &["run", "compare", &a.run_key, &b.run_key, "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(v["conditions"]["checked_from"], "spec");
    assert_eq!(v["left"]["plan_known"], true);
    let c = &v["comparison"];
    assert_eq!(c["paired"]["pairs"], 2, "{c}");
    assert_eq!(c["paired"]["lost"], 1);
    assert_eq!(c["flips"][0]["direction"], "lost");
    assert_eq!(c["flips"][0]["left_key"], a.trials[0].key.as_str());
    // The 30 trials neither run finished, and B's extra one, are listed, not failures.
    let unpaired = c["unpaired"].as_array().unwrap();
    assert_eq!(unpaired.len(), 30);
    assert_eq!(
        unpaired
            .iter()
            .filter(|u| u["left"] == "missing" && u["right"] == "succeeded")
            .count(),
        1
    );
    assert_eq!(c["left"]["total"]["counts"]["missing"], 30);
    let _ = stop.send(());
    handle.wait().await.expect("stops");
}
