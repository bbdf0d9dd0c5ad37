//! `sweep --local` and the embedded coordinator run one dispatch policy (core::dispatch):
//! the same plan ends in the same outcome buckets with the same attempts, including
//! infrastructure retries. The `flaky` agent meets a provider failure (HTTP 500: an
//! infrastructure error) on its first attempt at each task, then answers without changing
//! anything (graded, not solved); `crash` reports its own failure, never retried.

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod sweep_json;
use sweep_json::examples;

/// The flaky agent's program (for the real `claude-code` adapter): its first run at a task
/// prints Claude Code's captured stream of a provider answering 500 (a provider failure, an
/// infrastructure error), later runs the captured stream of a session that answered.
fn flaky_program(markers: &Path) -> String {
    let fixture = |name: &str| {
        std::fs::read_to_string(
            examples()
                .join("../core/tests/fixtures/agents/claude-code")
                .join(name),
        )
        .unwrap()
    };
    format!(
        "#!/bin/sh
# The adapter asks for the CLI's version before each run (the record's provenance): that is
# not a run at the task.
if [ \"$1\" = --version ]; then echo '2.1.332 (Claude Code)'; exit 0; fi
marker=\"{}/$AKBENCH_TASK_ID\"
if [ ! -e \"$marker\" ]; then
: > \"$marker\"
cat <<'AKBENCH_TRANSCRIPT'
{}
AKBENCH_TRANSCRIPT
else
cat <<'AKBENCH_TRANSCRIPT'
{}
AKBENCH_TRANSCRIPT
fi
",
        markers.display(),
        fixture("captured_500.jsonl"),
        fixture("captured_solved.jsonl"),
    )
}

const MANIFEST: &str = "experiment: policy\ntasks:\n  ids: [pyslug-001, pyslug-002, pyslug-003]\n\
agents:\n  conditions:\n    - descriptor: flaky\n    - descriptor: crash\nrepetitions: 1\n\
execution:\n  runtime: direct\n  infrastructure_retries: 1\n  concurrency:\n    per_agent: {flaky: 1}\n";

/// One sweep in its own folder: `--local`, or the embedded default (a private PostgreSQL
/// in `dir`, a coordinator and local workers). Returns its JSON and every trial's record.
fn sweep(dir: &Path, local: bool) -> (i32, Value, Vec<Value>) {
    let agents = dir.join("agents");
    let markers = dir.join("markers");
    std::fs::create_dir_all(agents.join("scripts")).unwrap();
    std::fs::create_dir_all(&markers).unwrap();
    let program = agents.join("flaky.sh");
    std::fs::write(&program, flaky_program(&markers)).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        agents.join("flaky.toml"),
        format!(
            "adapter = \"claude-code\"\nprogram = \"{}\"\n",
            program.display()
        ),
    )
    .unwrap();
    std::fs::copy(
        examples().join("agents/crash.toml"),
        agents.join("crash.toml"),
    )
    .unwrap();
    std::fs::copy(
        examples().join("agents/scripts/crash.sh"),
        agents.join("scripts/crash.sh"),
    )
    .unwrap();
    let m = dir.join("experiment.yaml");
    std::fs::write(&m, MANIFEST).unwrap();
    if !local {
        // The PostgreSQL account (as root: `postgres`) must reach the data folder, the
        // markers are written by the workers' agents.
        for d in [dir, markers.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
    }
    let r = sweep_json::sweep(dir, &m, &agents, local, Some("2026-03-04T05:06:07Z"));
    let (code, v) = (r.code, r.json);
    let mut records = Vec::new();
    collect(&dir.join("out"), &mut records);
    (code, v, records)
}

fn collect(dir: &Path, out: &mut Vec<Value>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.file_name().unwrap() == "run_record.json" {
            out.push(serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap());
        }
    }
}

/// Per trial key (without the run key: the two runs' descriptors live in two folders): the
/// attempts' states and the outcome state.
fn attempts(records: &[Value]) -> Vec<(String, Vec<String>, String)> {
    let mut v: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r["trial"]["key"]
                    .as_str()
                    .unwrap()
                    .split_once('/')
                    .unwrap()
                    .1
                    .to_string(),
                r["attempts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["state"].as_str().unwrap().to_string())
                    .collect(),
                r["outcome"]["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn local_and_coordinator_sweeps_end_alike_with_infrastructure_retries() {
    let tmp = tempfile::tempdir().unwrap();
    let (local_dir, coord_dir) = (tmp.path().join("local"), tmp.path().join("coord"));
    std::fs::create_dir_all(&local_dir).unwrap();
    std::fs::create_dir_all(&coord_dir).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (local_code, local, local_records) = sweep(&local_dir, true);
    let (coord_code, coord, coord_records) = sweep(&coord_dir, false);
    assert_eq!(local_code, 0, "{local}");
    assert_eq!(coord_code, 0, "{coord}");
    // The flaky agent's three trials were each retried once after an infrastructure
    // error and ended graded-not-solved; the crashing agent's failures were not retried.
    let counts = &local["accounting"]["counts"];
    assert_eq!(counts["failed"], 3, "{local}");
    assert_eq!(counts["agent_failed"], 3, "{local}");
    assert_eq!(counts["infrastructure_error"], 0, "{local}");
    assert_eq!(local["accounting"]["counts"], coord["accounting"]["counts"]);
    assert_eq!(local["accounting"]["rates"], coord["accounting"]["rates"]);
    let (l, c) = (attempts(&local_records), attempts(&coord_records));
    assert_eq!(l.len(), 6, "{l:?}");
    for (key, states, outcome) in &l {
        if key.contains("/flaky/") {
            assert_eq!(states, &["infrastructure_error", "completed"], "{key}");
            assert_eq!(outcome, "completed");
        } else {
            assert_eq!(states, &["failed"], "{key}");
        }
    }
    assert_eq!(l, c, "the same attempts locally and on the coordinator");
}
