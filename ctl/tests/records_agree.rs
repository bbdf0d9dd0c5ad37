//! The records of the same plan run both ways agree field by field: `akbench sweep --local`
//! (the orchestrator in this process) and `akbench sweep` on the embedded default (a private
//! PostgreSQL, a coordinator and `akbench-worker` processes; the records the coordinator
//! assembles and exports). Only the fields docs/record.md lists as differing between two runs
//! are masked: identities (ids, keys), times and durations, process ids in notes, and the
//! worker id. Any other difference fails the test.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod sweep_json;
use sweep_json::examples;

/// A copy of the example agents plus `fake-claude`: the real `claude-code` adapter with a
/// program that answers `--version` and prints a captured event stream.
fn agents(root: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let agents = root.join("agents");
    let status = Command::new("cp")
        .arg("-r")
        .arg(examples().join("agents"))
        .arg(&agents)
        .status()
        .unwrap();
    assert!(status.success());
    let transcript = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../core/tests/fixtures/agents/claude-code/captured_solved.jsonl"),
    )
    .unwrap();
    let script = agents.join("fake-claude.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '9.8.7 (Fake Code)'; exit 0; fi\n\
             cat <<'AKBENCH_TRANSCRIPT'\n{transcript}\nAKBENCH_TRANSCRIPT\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        agents.join("fake-claude.toml"),
        format!(
            "adapter = \"claude-code\"\nprogram = \"{}\"\n",
            script.display()
        ),
    )
    .unwrap();
    agents
}

const MANIFEST: &str = "experiment: agree\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: oracle\n    - descriptor: crash\n    - descriptor: fake-claude\nrepetitions: 1\n";

/// Runs the sweep in `dir` (`local` or on the embedded default); returns its run key.
fn sweep(dir: &Path, agents: &Path, local: bool) -> String {
    let m = dir.join("experiment.yaml");
    std::fs::write(&m, MANIFEST).unwrap();
    if !local {
        // The PostgreSQL account (as root: `postgres`) must reach the data folder.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let r = sweep_json::sweep(dir, &m, agents, local, Some("2026-03-04T05:06:07Z"));
    let v = r.json;
    assert_eq!(r.code, 0, "{v}");
    v["run_key"].as_str().unwrap().to_string()
}

/// Every `run_record.json` under `dir/out/<run key>`, by trial path relative to it.
fn records(dir: &Path, run_key: &str) -> BTreeMap<String, Value> {
    let root = dir.join("out").join(run_key);
    let mut out = BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() == "run_record.json" {
                let rel = p.parent().unwrap().strip_prefix(&root).unwrap();
                let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                out.insert(rel.display().to_string(), v);
            }
        }
    }
    out
}

/// Fields that differ between any two runs of the same plan (docs/record.md, "Comparing
/// records"): identities, times, durations, the worker id, the evaluator's verbatim report
/// (it prints its own timings and the attempt's paths; `grade.tests` holds the per-test
/// results and is compared), who wrote the record file (`akbench` or
/// `akbench-coordinator`), and the tripwire's random name (`grade.tripwire.name`).
const MASKED: &[&str] = &[
    "id",
    "key",
    "at",
    "started_at",
    "finished_at",
    "graded_at",
    "duration_ms",
    "timings_ms",
    "worker_id",
    "report",
    "written_by",
];

/// Masks the documented differing fields; the run key inside text becomes `<run>`, and a
/// process id in a transition note (`pid 1234`) becomes `pid <pid>`.
fn mask(v: &mut Value, run_key: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "tripwire" {
                    if let Some(name) = x.get_mut("name") {
                        *name = Value::String("<masked>".into());
                    }
                }
                if MASKED.contains(&k.as_str()) {
                    *x = Value::String("<masked>".into());
                } else {
                    mask(x, run_key);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mask(x, run_key)),
        Value::String(s) => {
            let mut t = s.replace(run_key, "<run>");
            if let Some(rest) = t.strip_prefix("pid ") {
                if rest.chars().all(|c| c.is_ascii_digit()) {
                    t = "pid <pid>".into();
                }
            }
            *s = t;
        }
        _ => {}
    }
}

/// The paths where `a` and `b` differ.
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = format!("{at}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => differences(p, q, &path, out),
                    (p, q) => out.push(format!("{path}: {p:?} vs {q:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &format!("{at}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{at}: {a} vs {b}")),
        _ => {}
    }
}

#[test]
fn local_and_coordinator_records_of_the_same_plan_agree_field_by_field() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = agents(tmp.path());
    let (local_dir, remote_dir) = (tmp.path().join("local"), tmp.path().join("remote"));
    std::fs::create_dir_all(&local_dir).unwrap();
    std::fs::create_dir_all(&remote_dir).unwrap();
    let local_key = sweep(&local_dir, &agents, true);
    let remote_key = sweep(&remote_dir, &agents, false);
    let local = records(&local_dir, &local_key);
    let remote = records(&remote_dir, &remote_key);
    assert_eq!(local.len(), 3, "{:?}", local.keys());
    assert_eq!(
        local.keys().collect::<Vec<_>>(),
        remote.keys().collect::<Vec<_>>()
    );
    let mut diffs = Vec::new();
    for (trial, l) in &local {
        let r = &remote[trial];
        // What was observed where it ran, before masking: the worker (`local` in this
        // process, the worker process's id on the embedded default), the adapter and the
        // agent CLI's version.
        for (rec, local_run) in [(l, true), (r, false)] {
            for a in rec["attempts"].as_array().unwrap() {
                let p = &a["provenance"];
                let worker = p["worker_id"].as_str().unwrap_or_default();
                assert_eq!(worker == "local", local_run, "{trial}: {p}");
                assert!(!p["host"].as_str().unwrap_or_default().is_empty(), "{p}");
                assert_eq!(
                    p["adapter"], rec["agent"]["adapter"],
                    "{trial}: the adapter that ran is the descriptor's"
                );
                assert_eq!(
                    p["adapter_version"],
                    format!("akbench {}", env!("CARGO_PKG_VERSION"))
                );
                let cli = p.get("agent_cli_version");
                if trial.contains("fake-claude") {
                    assert_eq!(cli, Some(&Value::from("9.8.7 (Fake Code)")), "{p}");
                } else {
                    assert_eq!(cli, None, "{trial}: {p}");
                }
                let runtime = &a["agent_process"]["runtime"];
                assert!(runtime["name"].is_string(), "{trial}: {a}");
            }
        }
        let (mut l, mut r) = (l.clone(), r.clone());
        mask(&mut l, &local_key);
        mask(&mut r, &remote_key);
        differences(&l, &r, trial, &mut diffs);
    }
    assert!(
        diffs.is_empty(),
        "local and coordinator records differ beyond the documented fields:\n{}",
        diffs.join("\n")
    );
}
