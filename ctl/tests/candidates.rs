//! Best-of-N candidates end to end (issue 16): a scripted agent that solves one time in three
//! (by a counter file shared by its runs), three candidates per trial, through `akbench sweep
//! --local` and through the embedded coordinator and workers: the same records and rates.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod sweep_json;
use sweep_json::examples;

/// An agents root holding `third`: every run bumps a counter (under a lock) and applies the
/// task's fix when the count is 2 modulo 3, else changes nothing (graded, not solved).
fn third_agent(tmp: &Path) -> PathBuf {
    let root = tmp.join("agents");
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::write(
        root.join("scripts/third.sh"),
        r#"#!/usr/bin/env bash
set -euo pipefail
cd "$AKBENCH_WORKSPACE"
exec 9>>"$COUNTER.lock"
flock 9
n=$(( $(cat "$COUNTER" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$COUNTER"
flock -u 9
if (( n % 3 == 2 )); then git apply "$FIX"; echo "run $n: fixed"; else echo "run $n: no change"; fi
"#,
    )
    .unwrap();
    std::fs::write(
        root.join("third.toml"),
        format!(
            "adapter = \"scripted\"\ndescription = \"Solves one run in three\"\nscript = \"scripts/third.sh\"\n[env]\nCOUNTER = \"{}\"\nFIX = \"{}\"\n",
            tmp.join("counter").display(),
            examples()
                .join("tasks/pyslug-001/solution/fix.patch")
                .display()
        ),
    )
    .unwrap();
    root
}

const MANIFEST: &str = "experiment: cand\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: third\nrepetitions: 2\nexecution:\n  runtime: direct\n  candidates: 3\n  selection: first_solved\n  concurrency:\n    max_trials: 1\n";

/// `akbench sweep --json` of `manifest` in `dir` (local, or the embedded coordinator).
fn sweep(tmp: &Path, dir: &str, manifest: &str, local: bool) -> (i32, Value, String) {
    let agents = third_agent(tmp);
    let _ = std::fs::remove_file(tmp.join("counter"));
    let base = tmp.join(dir);
    std::fs::create_dir_all(&base).unwrap();
    let m = base.join("experiment.yaml");
    std::fs::write(&m, manifest).unwrap();
    if !local {
        // The PostgreSQL account (as root: `postgres`) must reach the data folder.
        use std::os::unix::fs::PermissionsExt;
        for p in [tmp, base.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    // The agent solves by a counter shared by its runs, so candidates must run one at a time
    // in plan order: `max_trials: 1` caps them, and one embedded worker keeps the order (two
    // workers' claims skip rows the other holds locked, so plan order is best effort there;
    // CI saw r2/c3 run before r2/c1).
    let extra: &[&str] = if local { &[] } else { &["--workers", "1"] };
    let r = sweep_json::sweep_with(&base, &m, &agents, local, None, extra);
    (r.code, r.json, r.stderr)
}

/// What must agree between two runs of the same plan: per planned trial (key without the
/// run key) its bucket, selection and every candidate's bucket and score; the counts, rates
/// and pass@k.
fn comparable(v: &Value) -> Value {
    comparable_section(
        &v["accounting"]["candidates"],
        v["run_key"].as_str().unwrap(),
    )
}

fn comparable_section(c: &Value, run_key: &str) -> Value {
    let strip = |k: &Value| k.as_str().unwrap().replacen(run_key, "", 1);
    let trials: Vec<Value> = c["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            serde_json::json!({
                "key": strip(&t["key"]),
                "bucket": t["bucket"],
                "selected": t["selected"],
                "measured": t["measured"],
                "solved": t["solved"],
                "candidates": t["candidates"].as_array().unwrap().iter().map(|x| serde_json::json!({
                    "index": x["index"], "key": strip(&x["key"]), "bucket": x["bucket"], "score": x["score"],
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "selection": c["selection"],
        "candidates": c["candidates"],
        "counts": c["counts"],
        "rates": c["rates"],
        "pass_at": c["pass_at"],
        "trials": trials,
    })
}

fn records(dir: &Path, out: &mut Vec<akbench_core::record::RunRecord>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            records(&p, out);
        } else if p.file_name().unwrap() == "run_record.json" {
            out.push(serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap());
        }
    }
}

fn check_run(tmp: &Path, dir: &str, v: &Value) {
    let a = &v["accounting"];
    assert_eq!(a["valid"], true, "{v}");
    assert_eq!(a["complete"], true, "{v}");
    assert_eq!(a["planned"], 6, "three candidates x two repetitions: {v}");
    let c = &a["candidates"];
    assert_eq!(c["selection"], "first_solved");
    assert_eq!(c["candidates"], 3);
    assert_eq!(c["planned_trials"], 2);
    for t in c["trials"].as_array().unwrap() {
        assert_eq!(t["bucket"], "succeeded", "{t}");
        let buckets: Vec<&str> = t["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["bucket"].as_str().unwrap())
            .collect();
        assert_eq!(buckets, ["failed", "succeeded", "failed"], "{t}");
        assert_eq!(t["selected"], 2, "the solved candidate is selected: {t}");
    }
    assert_eq!(c["counts"]["succeeded"], 2);
    let pass = |k: u64| -> f64 {
        c["pass_at"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["k"] == k)
            .unwrap()["value"]
            .as_f64()
            .unwrap()
    };
    assert!((pass(1) - 1.0 / 3.0).abs() < 1e-12, "{c}");
    assert_eq!(pass(3), 1.0, "{c}");
    // Every candidate has its own record, UUID and attempt keys `<trial>/c<i>/a<n>`.
    let mut rs = Vec::new();
    records(&tmp.join(dir).join("out"), &mut rs);
    assert_eq!(rs.len(), 6, "one record per candidate");
    let ids: std::collections::HashSet<_> = rs.iter().map(|r| r.trial.id).collect();
    assert_eq!(ids.len(), 6);
    for r in &rs {
        let k = &r.attempts[0].attempt.key;
        assert!(
            k.ends_with("/c1/a1") || k.ends_with("/c2/a1") || k.ends_with("/c3/a1"),
            "{k}"
        );
    }
}

#[test]
fn three_candidates_select_the_solved_one_and_report_pass_at_k() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, local, stderr) = sweep(tmp.path(), "local", MANIFEST, true);
    assert_eq!(code, 0, "{local}\n{stderr}");
    check_run(tmp.path(), "local", &local);
    if which("initdb").is_none() && !pg_available() {
        eprintln!("skipped the coordinator half: no PostgreSQL binaries");
        return;
    }
    let (code, coord, stderr) = sweep(tmp.path(), "coord", MANIFEST, false);
    assert_eq!(code, 0, "{coord}\n{stderr}");
    check_run(tmp.path(), "coord", &coord);
    assert_eq!(
        comparable(&local),
        comparable(&coord),
        "the local sweep and the coordinator agree"
    );
    // `run compare` pairs the planned trials (two), on their selected outcome.
    let folder = |dir: &str, v: &Value| {
        tmp.path()
            .join(dir)
            .join("out")
            .join(v["run_key"].as_str().unwrap())
    };
    let (code, cmp) = akbench(
        &["run", "compare"],
        &[&folder("local", &local), &folder("coord", &coord)],
    );
    assert_eq!(code, 0, "{cmp}");
    let c = &cmp["comparison"];
    assert_eq!(c["pairs"].as_array().unwrap().len(), 2, "{cmp}");
    assert_eq!(c["left"]["total"], c["right"]["total"], "{cmp}");
    assert_eq!(c["left"]["total"]["counts"]["succeeded"], 2, "{cmp}");
    assert_eq!(
        cmp["left"]["candidates"]["pass_at"],
        cmp["right"]["candidates"]["pass_at"]
    );
    // The coordinator's exported records name their planned trial too.
    assert_eq!(
        cmp["right"]["candidates"]["pass_at"][1]["value"], 1.0,
        "{cmp}"
    );
    // The HTML report states the selection and pass@k.
    let html = tmp.path().join("report.html");
    let (code, _) = akbench(
        &["run", "report"],
        &[&folder("local", &local), Path::new("--html"), &html],
    );
    assert_eq!(code, 0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("selection first_solved") && page.contains("pass@3 100.0%"),
        "the report names the selection and pass@k"
    );
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(bin))
            .find(|p| p.is_file())
    })
}

fn pg_available() -> bool {
    std::fs::read_dir("/usr/lib/postgresql")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

/// `akbench ARGS --json` (exit code, JSON).
fn akbench(args: &[&str], extra: &[&Path]) -> (i32, Value) {
    let o = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .args(extra)
        .arg("--json")
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
        panic!(
            "akbench {args:?} ended {:?}: {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code().unwrap(), v)
}

#[test]
fn grading_three_candidates_later_matches_grading_them_now() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, now, stderr) = sweep(tmp.path(), "now", MANIFEST, true);
    assert_eq!(code, 0, "{now}\n{stderr}");
    check_run(tmp.path(), "now", &now);
    let later_manifest = format!("{MANIFEST}evaluation:\n  grade: false\n");
    let (code, later, stderr) = sweep(tmp.path(), "later", &later_manifest, true);
    assert_eq!(code, 0, "{later}\n{stderr}");
    let c = &later["accounting"]["candidates"];
    assert_eq!(c["counts"]["not_graded"], 2, "{c}");
    assert!(
        c["pass_at"][0]["value"].is_null(),
        "not graded: no pass@1: {c}"
    );
    assert!(c["trials"][0]["selected"].is_null(), "{c}");
    // Grade every candidate's recorded diff, without running the agent again.
    let out = |dir: &str, v: &Value| {
        tmp.path()
            .join(dir)
            .join("out")
            .join(v["run_key"].as_str().unwrap())
    };
    let (code, v) = akbench(
        &["run", "evaluate", "--all", "--tasks-root"],
        &[&examples().join("tasks"), &out("later", &later)],
    );
    assert_eq!(code, 0, "{v}");
    let counter = std::fs::read_to_string(tmp.path().join("counter")).unwrap();
    assert_eq!(counter.trim(), "6", "no agent ran again");
    // The records, aggregated: the same selection, counts and pass@k as grading now.
    let (code, agg_later) = akbench(&["run", "aggregate"], &[&out("later", &later)]);
    assert_eq!(code, 0, "{agg_later}");
    let (code, agg_now) = akbench(&["run", "aggregate"], &[&out("now", &now)]);
    assert_eq!(code, 0, "{agg_now}");
    let section = |v: &Value, run: &Value| {
        comparable_section(&v["candidates"], run["run_key"].as_str().unwrap())
    };
    assert_eq!(section(&agg_later, &later), section(&agg_now, &now));
    assert_eq!(
        section(&agg_now, &now),
        comparable(&now),
        "aggregate agrees with the sweep"
    );
}
