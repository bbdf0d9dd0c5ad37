//! `akbench sweep` over the example corpus, in-process.

mod common;

use common::{examples, local_sweep};

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn sweep(tmp: &Path, manifest: &str) -> (i32, Value) {
    sweep_with(tmp, manifest, true)
}

/// Runs `akbench sweep` in this process (`local`) or on the embedded default (a private
/// PostgreSQL whose data folder is in `tmp`, a coordinator and local workers).
fn sweep_with(tmp: &Path, manifest: &str, local: bool) -> (i32, Value) {
    let m = tmp.join("experiment.yaml");
    std::fs::write(&m, manifest).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_akbench"));
    // Planned at a fixed instant: the keys of two sweeps are comparable across UTC midnight.
    cmd.arg("sweep")
        .arg(&m)
        .env("AKBENCH_PLAN_TIME", "2026-03-04T05:06:07Z");
    if local {
        cmd.arg("--local");
    } else {
        // The PostgreSQL account (as root: `postgres`) must reach the data folder.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        cmd.env("AKBENCH_DATA", tmp.join("data"));
    }
    let out = cmd
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--store-root")
        .arg(tmp.join("runs"))
        .arg("--out")
        .arg(tmp.join("out"))
        .arg("--cache")
        .arg(tmp.join("cache"))
        .arg("--json")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "akbench sweep ended {:?} with stdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), v)
}

#[test]
fn a_graded_sweep_accounts_for_every_planned_trial() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, v) = sweep(
        tmp.path(),
        "experiment: t\ntasks:\n  ids: [pyslug-001, pyslug-002]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: crash\nrepetitions: 2\nexecution:\n  concurrency:\n    per_agent: {crash: 1}\n",
    );
    assert_eq!(code, 0, "{v}");
    let a = &v["accounting"];
    assert_eq!(a["valid"], true);
    assert_eq!(a["complete"], true);
    assert_eq!(a["planned"], 8);
    assert_eq!(a["counts"]["succeeded"], 4);
    assert_eq!(a["counts"]["agent_failed"], 4);
    assert_eq!(
        v["summary"]["by_agent"]["oracle"]["rates"]["pass_rate"],
        1.0
    );
    // The crashing agent never reached a verdict: neither rate is measured for it, and
    // neither is printed as 0.
    assert!(v["summary"]["by_agent"]["crash"]["rates"]["pass_rate"].is_null());
    assert!(v["summary"]["by_agent"]["crash"]["rates"]["solve_rate"].is_null());
    let records = walk(&tmp.path().join("out"));
    assert_eq!(records, 8, "exactly one record per planned trial");
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args([
            "run",
            "inspect",
            v["run_key"].as_str().unwrap(),
            "--json",
            "--store-root",
        ])
        .arg(tmp.path().join("runs"))
        .output()
        .unwrap();
    let inspect: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(inspect["state"], "finished");
    assert_eq!(inspect["outcome"]["valid"], true);
    assert_eq!(inspect["outcome"]["counts"]["succeeded"], 4);
}

#[test]
fn the_embedded_default_runs_a_sweep_through_coordinator_and_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = "experiment: t\ntasks:\n  ids: [pyslug-001, pyslug-002]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: crash\nrepetitions: 2\n";
    let (code, v) = sweep_with(tmp.path(), manifest, false);
    assert_eq!(code, 0, "{v}");
    let a = &v["accounting"];
    assert_eq!(a["valid"], true);
    assert_eq!(a["complete"], true);
    assert_eq!(a["planned"], 8);
    assert_eq!(a["counts"]["succeeded"], 4);
    assert_eq!(a["counts"]["agent_failed"], 4);
    assert!(v["summary"]["by_agent"]["crash"]["rates"]["pass_rate"].is_null());
    // The coordinator's records are exported, one per planned trial, with each attempt's
    // artifacts beside its trial record: `run aggregate` reads them like local records.
    assert_eq!(walk(&tmp.path().join("out")), 8);
    let agg = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "aggregate", "--json"])
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(
        agg.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&agg.stderr)
    );
    let agg: Value = serde_json::from_slice(&agg.stdout).unwrap();
    assert_eq!(agg["records"], 8, "{agg}");
    assert_eq!(agg["summary"]["total"]["counts"]["succeeded"], 4, "{agg}");
    let key = v["run_key"].as_str().unwrap();
    let trial = tmp
        .path()
        .join("out")
        .join(key)
        .join("pyslug-001/oracle/r1");
    assert!(trial.join("a1/agent.diff").is_file(), "{}", trial.display());
    // The data folder is kept for the next run.
    assert!(tmp.path().join("data/postgres/PG_VERSION").is_file());
    // The same manifest again the same day from a fresh local store (another clone): the
    // coordinator already holds the key, so the run takes the next free one.
    std::fs::remove_dir_all(tmp.path().join("runs")).unwrap();
    let (code, again) = sweep_with(tmp.path(), manifest, false);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        again["run_key"].as_str().unwrap(),
        format!("{key}-2"),
        "{again}"
    );
}

#[test]
fn an_ungraded_sweep_reports_na_never_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, v) = sweep(
        tmp.path(),
        "experiment: t\ntasks:\n  ids: [pyslug-003]\nagents:\n  conditions:\n    - descriptor: oracle\nevaluation:\n  grade: false\n",
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["accounting"]["counts"]["not_graded"], 1);
    assert!(v["accounting"]["rates"]["pass_rate"].is_null());
    assert!(v["summary"]["total"]["rates"]["pass_rate"].is_null());
}

#[test]
fn a_broken_task_in_the_selection_stops_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: t\ntasks:\n  ids: [pyslug-001, broken-malformed]\nagents:\n  conditions:\n    - descriptor: oracle\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .arg("sweep")
        .arg(&m)
        .arg("--local")
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--store-root")
        .arg(tmp.path().join("runs"))
        .arg("--out")
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken-malformed"));
    assert!(!tmp.path().join("out").exists() && !tmp.path().join("runs").exists());
}

fn walk(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += walk(&p);
        } else if p.file_name().unwrap() == "run_record.json" {
            n += 1;
        }
    }
    n
}

#[test]
fn a_finished_sweep_prints_the_next_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let m = t.join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: next\ntasks:\n  ids: [pyslug-003]\nagents:\n  conditions:\n    - descriptor: oracle\n",
    )
    .unwrap();
    let out = local_sweep(&m, &examples().join("agents"), t)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = stdout
        .lines()
        .find_map(|l| l.strip_prefix("records: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    for step in [
        format!("akbench view {}", t.join("out").display()),
        format!("akbench run aggregate {records}"),
    ] {
        assert!(stdout.contains(&step), "`{step}` in:\n{stdout}");
    }
}
