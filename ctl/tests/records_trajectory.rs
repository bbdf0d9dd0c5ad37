//! `akbench run records --artifacts DIR` on a real coordinator with a real worker (`akbench
//! up`): the export carries each attempt's `trajectory.json` beside its record, byte for
//! byte the worker's, so `akbench run trajectory` reads it from the export alone.

mod common;

use common::examples;

#[path = "up/mod.rs"]
mod akbench_up;

use akbench_up::up;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn akbench(url: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
    for v in ["AKBENCH_COORDINATOR", "AKBENCH_TOKEN", "AKBENCH_STORE_ROOT"] {
        c.env_remove(v);
    }
    if let Some(url) = url {
        c.arg("--coordinator").arg(url);
    }
    c.args(args).output().unwrap()
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

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn run_records_with_artifacts_carries_each_attempts_trajectory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The PostgreSQL account (as root: `postgres`) must reach the data folder.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let manifest = dir.join("experiment.yaml");
    std::fs::write(
        &manifest,
        "experiment: traj\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    \
         - descriptor: noop\nrepetitions: 1\n",
    )
    .unwrap();
    let (_up, url) = up(dir, &examples().join("agents"));
    let planned = akbench(
        Some(&url),
        &[
            "run",
            "plan",
            "--config",
            &s(&manifest),
            "--tasks-root",
            &s(&examples().join("tasks")),
            "--agents-root",
            &s(&examples().join("agents")),
            "--store-root",
            &s(&dir.join("runs")),
            "--json",
        ],
    );
    let key = json(&planned)["run_key"].as_str().unwrap().to_string();
    let o = akbench(Some(&url), &["run", "start", &key]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // The watch ends with the run.
    let o = akbench(Some(&url), &["run", "status", &key, "--watch", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");

    let out = dir.join("export");
    let o = akbench(
        Some(&url),
        &[
            "run",
            "records",
            &key,
            "--out",
            &s(&out),
            "--artifacts",
            &s(&dir.join("up-out")),
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v = json(&o);
    assert_eq!(v["trajectories"]["copied"], 1, "{v}");
    assert_eq!(v["trajectories"]["missing"], serde_json::json!([]), "{v}");
    let trial = v["trials"][0]["key"].as_str().unwrap().to_string();
    let record: Value =
        serde_json::from_slice(&std::fs::read(out.join(&trial).join("run_record.json")).unwrap())
            .unwrap();
    let attempt = record["attempts"][0]["artifacts_dir"].as_str().unwrap();
    let exported = std::fs::read(out.join(&trial).join(attempt).join("trajectory.json")).unwrap();
    let original = std::fs::read(
        dir.join("up-out")
            .join(&trial)
            .join(attempt)
            .join("trajectory.json"),
    )
    .unwrap();
    assert_eq!(exported, original, "the worker's trajectory, byte for byte");

    // `run trajectory` reads it from the export alone (nothing converted on the fly).
    let o = akbench(None, &["run", "trajectory", &s(&out.join(&trial))]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("converted"),
        "{o:?}"
    );
    let t = json(&o);
    assert!(
        t["schema_version"].as_str().unwrap().starts_with("ATIF-v"),
        "{t}"
    );
    akbench_core::trajectory::validate(&t).unwrap();

    // Without --artifacts the export is the records alone (as before); a folder that is not
    // there is refused and writes nothing.
    let bare = dir.join("bare");
    let o = akbench(
        Some(&url),
        &["run", "records", &key, "--out", &s(&bare), "--json"],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(json(&o)["trajectories"].is_null());
    assert!(!bare.join(&trial).join(attempt).exists());
    let refused = dir.join("refused");
    let o = akbench(
        Some(&url),
        &[
            "run",
            "records",
            &key,
            "--out",
            &s(&refused),
            "--artifacts",
            &s(&dir.join("nowhere")),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a folder"),
        "{o:?}"
    );
    assert!(!refused.exists());
}
