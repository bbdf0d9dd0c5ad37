//! Reports count, per agent, the trials whose grade was flagged `grading tampered` and those
//! graded with paths of the agent's diff withheld (core::grading::integrity): attacking
//! scripted agents run with `akbench run single` on the example task pyslug-001 under the
//! sandbox, then `akbench run aggregate` (JSON and the human table) counts them; and the same
//! agents planned on a real coordinator with a real worker (`akbench up`): `run status`,
//! `run reconcile` and `run aggregate` over the exported records count the same trials.

mod common;

use common::examples;

#[path = "up/mod.rs"]
mod akbench_up;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn akbench(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

/// An agent that patches `unittest.TestCase.run` from a test module of its own (the grader
/// discovers it): every test "passes", the tripwire too, so the grade is flagged.
const TAMPER: &str = r#"mkdir -p tests
: > tests/__init__.py
cat > tests/test_evil.py <<'AKBEOF'
import unittest
def _run(self, result=None):
    result.startTest(self)
    result.addSuccess(self)
    result.stopTest(self)
    return result
unittest.TestCase.run = _run
AKBEOF
"#;

/// An agent that leaves interpreter start-up hooks (withheld from grading) and no fix.
const WITHHOLD: &str = r#"printf 'import sys\n' > sitecustomize.py
printf 'import os\n' > evil.pth
"#;

/// An agents folder holding `noop` and the two attacking agents.
fn attacking_agents(dir: &Path) -> PathBuf {
    let agents = dir.join("agents");
    std::fs::create_dir_all(agents.join("scripts")).unwrap();
    std::fs::copy(
        examples().join("agents/noop.toml"),
        agents.join("noop.toml"),
    )
    .unwrap();
    std::fs::copy(
        examples().join("agents/scripts/noop.sh"),
        agents.join("scripts/noop.sh"),
    )
    .unwrap();
    for (name, script) in [("tamper", TAMPER), ("withhold", WITHHOLD)] {
        std::fs::write(
            agents.join(format!("{name}.toml")),
            format!("adapter = \"scripted\"\nscript = \"scripts/{name}.sh\"\n"),
        )
        .unwrap();
        std::fs::write(
            agents.join(format!("scripts/{name}.sh")),
            format!("#!/usr/bin/env bash\n{script}exit 0\n"),
        )
        .unwrap();
    }
    agents
}

#[test]
fn aggregate_counts_tampered_and_withheld_trials_per_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = attacking_agents(tmp.path());
    let out = tmp.path().join("out");
    let cache = tmp.path().join("cache");
    let tasks = examples().join("tasks");
    for agent in ["tamper", "withhold", "noop"] {
        let (code, all) = akbench(&[
            "run",
            "single",
            "pyslug-001",
            "--agent",
            agent,
            "--runtime",
            "sandbox",
            "--json",
            "--tasks-root",
            tasks.to_str().unwrap(),
            "--agents-root",
            agents.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
        ]);
        if code == 2 && all.contains("failed to start the `sandbox` runtime") {
            akbench_core::testkit::skip(
                "aggregate_counts_tampered_and_withheld_trials_per_agent",
                &format!("the sandbox does not work here: {all}"),
            );
            return;
        }
        assert_eq!(code, 1, "{agent}: graded not solved: {all}");
    }
    let (code, json) = akbench(&["run", "aggregate", out.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{json}");
    let v: Value = serde_json::from_str(&json).unwrap();
    let by = &v["summary"]["by_agent"];
    let flagged = |agent: &str| {
        (
            by[agent]["flagged"]["tampered"].as_u64(),
            by[agent]["flagged"]["withheld"].as_u64(),
        )
    };
    assert_eq!(flagged("tamper"), (Some(1), Some(0)), "{json}");
    assert_eq!(flagged("withhold"), (Some(0), Some(1)), "{json}");
    assert_eq!(flagged("noop"), (Some(0), Some(0)), "{json}");
    assert_eq!(v["summary"]["total"]["flagged"]["tampered"], 1);
    assert_eq!(v["summary"]["total"]["flagged"]["withheld"], 1);
    for agent in ["tamper", "withhold", "noop"] {
        assert_eq!(by[agent]["counts"]["failed"], 1, "{agent}: {json}");
    }
    let (code, human) = akbench(&["run", "aggregate", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{human}");
    assert!(
        human.contains("| grading tampered | withheld paths |"),
        "{human}"
    );
    let row = |agent: &str| {
        human
            .lines()
            .find(|l| l.starts_with(&format!("| {agent} |")))
            .unwrap_or_else(|| panic!("no row for {agent}: {human}"))
            .to_string()
    };
    // grading tampered, withheld paths, solved without tripwire (none is solved).
    assert!(row("tamper").ends_with("| 1 | 0 | 0 |"), "{human}");
    assert!(row("withhold").ends_with("| 0 | 1 | 0 |"), "{human}");
    assert!(row("noop").ends_with("| 0 | 0 | 0 |"), "{human}");
}

fn on(url: &str, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_akbench"));
    for v in ["AKBENCH_COORDINATOR", "AKBENCH_TOKEN", "AKBENCH_STORE_ROOT"] {
        c.env_remove(v);
    }
    let out = c.arg("--coordinator").arg(url).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The same attacks through a real coordinator and worker: the coordinator's status, its
/// reconciliation of its own records and `run aggregate` over the records it exports count
/// the attacking agents' trials alike (migration 0021's columns, core's definition).
#[test]
fn status_reconcile_and_aggregate_count_flagged_trials_alike_on_a_coordinator() {
    let test = "status_reconcile_and_aggregate_count_flagged_trials_alike_on_a_coordinator";
    if let Err(e) = akbench_worker::runtime::sandbox_available() {
        akbench_core::testkit::skip(test, &format!("the sandbox does not work here: {e}"));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The PostgreSQL account (as root: `postgres`) must reach the data folder.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let agents = attacking_agents(dir);
    let manifest = dir.join("experiment.yaml");
    std::fs::write(
        &manifest,
        "experiment: flags\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    \
         - descriptor: tamper\n    - descriptor: withhold\n    - descriptor: noop\n\
         repetitions: 1\nexecution:\n  runtime: sandbox\n",
    )
    .unwrap();
    let (_up, url) = akbench_up::up(dir, &agents);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (code, planned, err) = on(
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
    assert_eq!(code, 0, "{planned}{err}");
    let v: Value = serde_json::from_str(&planned).unwrap();
    let key = v["run_key"].as_str().unwrap().to_string();
    let (code, o, err) = on(&url, &["run", "start", &key]);
    assert_eq!(code, 0, "{o}{err}");
    // The watch ends with the run.
    let (code, o, err) = on(&url, &["run", "status", &key, "--watch", "--json"]);
    assert_eq!(code, 0, "{o}{err}");

    let want = [("tamper", (1, 0)), ("withhold", (0, 1)), ("noop", (0, 0))];
    let pair = |f: &Value| {
        (
            f["tampered"].as_u64().unwrap(),
            f["withheld"].as_u64().unwrap(),
        )
    };

    // run status: per agent and in total, JSON and the human view.
    let (code, o, err) = on(&url, &["run", "status", &key, "--json"]);
    assert_eq!(code, 0, "{o}{err}");
    let st: Value = serde_json::from_str(&o).unwrap();
    for (agent, counts) in want {
        let a = st["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == agent)
            .unwrap_or_else(|| panic!("no status row for {agent}: {st}"));
        assert_eq!(a["outcomes"]["failed"], 1, "{agent}: {st}");
        assert_eq!(pair(&a["flagged"]), counts, "status {agent}: {st}");
    }
    assert_eq!(pair(&st["flagged"]), (1, 1), "{st}");
    let (code, human, err) = on(&url, &["run", "status", &key]);
    assert_eq!(code, 0, "{human}{err}");
    assert!(
        human.contains("flagged    grading tampered 1, withheld paths 1"),
        "{human}"
    );
    let row = |agent: &str| {
        human
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{agent} ")))
            .unwrap_or_else(|| panic!("no agent line for {agent}: {human}"))
            .to_string()
    };
    assert!(
        row("tamper").ends_with("grading tampered 1, withheld paths 0"),
        "{human}"
    );

    // run reconcile over the coordinator's own records.
    let (code, o, err) = on(&url, &["run", "reconcile", &key, "--json"]);
    assert_eq!(code, 0, "{o}{err}");
    let rc: Value = serde_json::from_str(&o).unwrap();
    for (agent, counts) in want {
        assert_eq!(
            pair(&rc["flagged"][agent]),
            counts,
            "reconcile {agent}: {rc}"
        );
    }
    let (code, human, err) = on(&url, &["run", "reconcile", &key]);
    assert_eq!(code, 0, "{human}{err}");
    assert!(
        human.contains("grading tampered 1, withheld paths 0"),
        "{human}"
    );

    // run aggregate over the records the coordinator exports.
    let export = dir.join("export");
    let (code, o, err) = on(&url, &["run", "records", &key, "--out", &s(&export)]);
    assert_eq!(code, 0, "{o}{err}");
    let (code, json) = akbench(&["run", "aggregate", export.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{json}");
    let ag: Value = serde_json::from_str(&json).unwrap();
    for (agent, counts) in want {
        assert_eq!(
            pair(&ag["summary"]["by_agent"][agent]["flagged"]),
            counts,
            "aggregate {agent}: {json}"
        );
    }
    // Grading place and networks (core::report::network): the status (from the
    // coordinator's columns) and the aggregate (from the exported records) agree; every
    // verdict here was graded in a clean room, no agent reached the internet.
    for (agent, _) in want {
        let a = st["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == agent)
            .unwrap();
        assert_eq!(a["network"]["graded_clean_room"], 1, "{agent}: {st}");
        assert_eq!(
            a["network"], ag["summary"]["by_agent"][agent]["network"],
            "status and aggregate of {agent}: {st} {json}"
        );
    }
    assert_eq!(st["network"], ag["summary"]["total"]["network"], "{st}");
    let (_, human, _) = on(&url, &["run", "status", &key]);
    assert!(
        human.contains(
            "network    graded in the agent's environment 0, clean room 3; agent reached undeclared hosts: 0 trial(s), 0 host(s); infrastructure by a grading fetch: 0 attempt(s)"
        ),
        "{human}"
    );
}
