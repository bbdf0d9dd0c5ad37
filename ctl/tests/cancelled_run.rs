//! A run cancelled mid-way on a real coordinator with a real worker (`akbench up`: a private
//! PostgreSQL, the coordinator, one worker with one slot): reconcile, `run status --json`,
//! the records export and `run aggregate` over the exported records print the same coverage
//! over the same denominator (core::accounting::Coverage), and every planned trial is
//! exported, the cancelled ones too (issue 12 saw 100%, 22.5% and 18 of 80).

mod common;

use common::examples;

#[path = "up/mod.rs"]
mod akbench_up;

use akbench_up::up;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn akbench(url: &str, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
    for v in ["AKBENCH_COORDINATOR", "AKBENCH_TOKEN", "AKBENCH_STORE_ROOT"] {
        c.env_remove(v);
    }
    c.arg("--coordinator").arg(url).args(args).output().unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e} ({:?}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn a_cancelled_runs_coverage_agrees_in_reconcile_status_records_and_aggregate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The PostgreSQL account (as root: `postgres`) must reach the data folder.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let agents = dir.join("agents");
    std::fs::create_dir_all(agents.join("scripts")).unwrap();
    for (file, to) in [
        ("noop.toml", "noop.toml"),
        ("hang.toml", "hang.toml"),
        ("scripts/noop.sh", "scripts/noop.sh"),
        ("scripts/hang.sh", "scripts/hang.sh"),
    ] {
        std::fs::copy(examples().join("agents").join(file), agents.join(to)).unwrap();
    }
    // Plan order is task-major: noop then hang on each task. One slot: the first noop trial
    // finishes, the first hang trial runs until the run is cancelled, four never start.
    let manifest = dir.join("experiment.yaml");
    std::fs::write(
        &manifest,
        "experiment: cancel\ntasks:\n  ids: [pyslug-001, pyslug-002, pyslug-003]\n\
         agents:\n  conditions:\n    - descriptor: noop\n    - descriptor: hang\nrepetitions: 1\n",
    )
    .unwrap();
    let (_up, url) = up(dir, &agents);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let planned = akbench(
        &url,
        &[
            "run",
            "plan",
            "--config",
            &s(&manifest),
            "--tasks-root",
            &s(&examples().join("tasks")),
            "--agents-root",
            &s(&agents),
            "--store-root",
            &s(&dir.join("runs")),
            "--json",
        ],
    );
    let key = json(&planned)["run_key"].as_str().unwrap().to_string();
    let o = akbench(&url, &["run", "start", &key]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // Mid-way: one trial done, one agent running.
    loop {
        let v = json(&akbench(&url, &["run", "status", &key, "--json"]));
        if v["finished"] == 1 && v["running"] == 1 {
            break;
        }
        assert!(v["finished"].as_u64().unwrap() <= 1, "{v}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let o = akbench(&url, &["run", "cancel", &key]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // The watch ends with the run (its live agent stopped).
    let o = akbench(&url, &["run", "status", &key, "--watch", "--json"]);
    let last = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let watched: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(watched["run"]["state"], "cancelled", "{watched}");

    let status = json(&akbench(&url, &["run", "status", &key, "--json"]));
    let reconciled = json(&akbench(&url, &["run", "reconcile", &key, "--json"]));
    let out = dir.join("records");
    let records = json(&akbench(
        &url,
        &["run", "records", &key, "--out", &s(&out), "--json"],
    ));
    let agg = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "aggregate", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let aggregated = json(&agg);

    let want = Some(1.0 / 6.0);
    let coverage = |v: &Value| v.as_f64();
    assert_eq!(coverage(&watched["rates"]["coverage"]), want, "{watched}");
    assert_eq!(coverage(&status["rates"]["coverage"]), want, "{status}");
    assert_eq!(
        coverage(&reconciled["rates"]["coverage"]),
        want,
        "{reconciled}"
    );
    assert_eq!(coverage(&records["coverage"]), want, "{records}");
    assert_eq!(
        coverage(&aggregated["summary"]["total"]["rates"]["coverage"]),
        want,
        "{aggregated}"
    );
    // The same denominator: every planned trial, each exported once.
    assert_eq!(status["planned"], 6);
    assert_eq!(reconciled["planned"], 6);
    assert_eq!(reconciled["complete"], true, "{reconciled}");
    assert_eq!(records["planned"], 6);
    assert_eq!(
        records["records"], 6,
        "every trial is exported, cancelled ones too"
    );
    assert_eq!(aggregated["records"], 6, "{aggregated}");
    assert_eq!(status["outcomes"]["cancelled"], 5, "{status}");
    assert_eq!(reconciled["counts"]["cancelled"], 5, "{reconciled}");
    assert_eq!(
        aggregated["summary"]["total"]["counts"]["cancelled"], 5,
        "{aggregated}"
    );
}
