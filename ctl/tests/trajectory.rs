//! `akbench run trajectory` with the real binary: `run single` of a fake claude-code agent
//! (a recorded transcript as its stdout) stores `trajectory.json`; the command prints it, and
//! converts the stored stdout when the file is absent (runs recorded before it existed).

use akbench_core::trajectory::{validate, Source, Trajectory};
use serde_json::Value;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output};

mod fake_cli;
use fake_cli::{fake_agent, repo};

fn akbench(args: &[OsString]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(args)
        .output()
        .unwrap()
}

fn trajectory(dir: &Path, extra: &[&str]) -> (i32, Trajectory, String) {
    let mut args: Vec<OsString> = vec!["run".into(), "trajectory".into(), dir.into()];
    args.extend(extra.iter().map(OsString::from));
    let out = akbench(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{stderr}", String::from_utf8_lossy(&out.stdout)));
    validate(&v).unwrap();
    (
        out.status.code().unwrap(),
        serde_json::from_value(v).unwrap(),
        stderr,
    )
}

fn tool_calls(t: &Trajectory) -> Vec<(String, bool)> {
    t.steps
        .iter()
        .flat_map(|s| {
            s.tool_calls.iter().flatten().map(|c| {
                let answered = s.observation.as_ref().is_some_and(|o| {
                    o.results
                        .iter()
                        .any(|r| r.source_call_id.as_deref() == Some(&c.tool_call_id))
                });
                (c.tool_call_id.clone(), answered)
            })
        })
        .collect()
}

#[test]
fn run_trajectory_prints_the_stored_file_and_converts_older_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    fake_agent(
        &agents,
        "cc",
        "claude-code",
        "claude-code/success_multi_turn.jsonl",
    );
    let out = tmp.path().join("out");
    let single = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "single", "wordcount-001", "--agent", "cc", "--json"])
        .arg("--tasks-root")
        .arg(repo().join("examples/tasks"))
        .arg("--agents-root")
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&single.stdout).unwrap_or_else(|_| {
        panic!(
            "{}{}",
            String::from_utf8_lossy(&single.stdout),
            String::from_utf8_lossy(&single.stderr)
        )
    });
    let record = Path::new(v["record"].as_str().unwrap()).to_path_buf();
    let dir = record.parent().unwrap();
    assert!(dir.join("a1/trajectory.json").is_file());

    // Stored: the instruction first, then the five API responses with every tool call.
    let (code, t, stderr) = trajectory(dir, &["--pretty"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(t.steps[0].source, Source::User);
    assert!(!t.steps[0].message.is_empty(), "the instruction");
    assert_eq!(
        t.steps.iter().filter(|s| s.source == Source::Agent).count(),
        5
    );
    let calls = tool_calls(&t);
    let transcript = std::fs::read_to_string(
        repo().join("core/tests/fixtures/agents/claude-code/success_multi_turn.jsonl"),
    )
    .unwrap();
    assert_eq!(
        calls.len(),
        transcript.matches("\"type\":\"tool_use\"").count()
    );
    assert!(calls.iter().all(|(_, answered)| *answered), "{calls:?}");
    // The record file itself is accepted too.
    let (_, same, _) = trajectory(&record, &["--attempt", "1"]);
    assert_eq!(same, t);

    // An older run (no trajectory.json): converted from the stored stdout, without the
    // instruction the record does not hold.
    std::fs::remove_file(dir.join("a1/trajectory.json")).unwrap();
    let (code, converted, stderr) = trajectory(dir, &[]);
    assert_eq!(code, 0);
    assert!(
        stderr.contains("converted from the agent's stored stdout"),
        "{stderr}"
    );
    assert_eq!(converted.steps.len(), t.steps.len() - 1);
    assert_eq!(tool_calls(&converted), calls);

    // Bad input: exit 2 with a message naming it.
    let bad = akbench(&[
        "run".into(),
        "trajectory".into(),
        tmp.path().join("nope").into(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("failed to read the run record"));
    let bad = akbench(&[
        "run".into(),
        "trajectory".into(),
        dir.into(),
        "--attempt".into(),
        "7".into(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("failed to find attempt 7"));
}
