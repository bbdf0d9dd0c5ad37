//! `akbench run trajectory` with the real binary: `run single` of a fake claude-code agent
//! (a recorded transcript as its stdout) stores `trajectory.json`; the command prints it, and
//! converts the stored stdout when the file is absent (runs recorded before it existed).

mod common;

use common::spawn_view;

use akbench_core::trajectory::{validate, Source, Trajectory};
use serde_json::Value;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output};

/// Shared with the viewer tests; this file uses only part of it.
#[allow(dead_code)]
#[path = "view/chromium.rs"]
mod chromium;
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

/// `run single` of a fake claude-code agent replaying `success_multi_turn.jsonl`; returns
/// the record's path.
fn single_claude(tmp: &Path) -> std::path::PathBuf {
    single_fake(tmp, "claude-code", "claude-code/success_multi_turn.jsonl")
}

/// `run single` of a fake `adapter` agent replaying `fixture`; returns the record's path.
fn single_fake(tmp: &Path, adapter: &str, fixture: &str) -> std::path::PathBuf {
    let agents = tmp.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    fake_agent(&agents, "cc", adapter, fixture);
    let single = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "single", "wordcount-001", "--agent", "cc", "--json"])
        .arg("--tasks-root")
        .arg(repo().join("examples/tasks"))
        .arg("--agents-root")
        .arg(&agents)
        .arg("--out")
        .arg(tmp.join("out"))
        .arg("--cache")
        .arg(tmp.join("cache"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&single.stdout).unwrap_or_else(|_| {
        panic!(
            "{}{}",
            String::from_utf8_lossy(&single.stdout),
            String::from_utf8_lossy(&single.stderr)
        )
    });
    Path::new(v["record"].as_str().unwrap()).to_path_buf()
}

/// `akbench view <out>` on a free port: the child and its URL.
fn view(out: &Path) -> (std::process::Child, String) {
    spawn_view(
        Command::new(env!("CARGO_BIN_EXE_akbench"))
            .arg("view")
            .arg(out)
            .args(["--listen", "127.0.0.1:0"]),
    )
}

#[test]
fn run_trajectory_prints_the_stored_file_and_converts_older_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let record = single_claude(tmp.path());
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

#[test]
fn a_codex_attempt_stores_its_commands_and_file_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let record = single_fake(tmp.path(), "codex", "codex/success.jsonl");
    let (code, t, stderr) = trajectory(record.parent().unwrap(), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(t.agent.name, "codex");
    assert_eq!(t.steps[0].source, Source::User);
    let names: Vec<&str> = t
        .steps
        .iter()
        .flat_map(|s| s.tool_calls.iter().flatten())
        .map(|c| c.function_name.as_str())
        .collect();
    assert!(names.contains(&"command_execution"), "{names:?}");
    assert!(names.contains(&"file_change"), "{names:?}");
    let answered = tool_calls(&t)
        .into_iter()
        .zip(&names)
        .filter(|(_, n)| **n != "todo_list")
        .all(|((_, answered), _)| answered);
    assert!(answered, "{t:#?}");
    assert!(t.final_metrics.unwrap().total_prompt_tokens.is_some());
}

#[test]
fn the_trial_page_shows_the_transcript_in_chromium() {
    let Some(bin) = chromium::binary() else {
        return akbench_core::testkit::skip(
            "the_trial_page_shows_the_transcript_in_chromium",
            "chromium is not installed (CI installs it in .ci/run)",
        );
    };
    let tmp = tempfile::tempdir().unwrap();
    let record = single_claude(tmp.path());
    let r: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let (mut child, url) = view(&tmp.path().join("out"));
    let trial_url = format!("{url}trials/{}", r["trial"]["key"].as_str().unwrap());
    let profile = tmp.path().join("chromium");
    let dom = chromium::dump_dom(&bin, &profile, &trial_url);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("view-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    chromium::screenshot(&bin, &profile, &trial_url, &shots.join("transcript.png"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(dom.contains("<ol class=\"transcript\">"), "{dom}");
    // The instruction and five agent steps; every tool call with its output.
    assert_eq!(dom.matches("<li class=\"step s-user\"").count(), 1, "{dom}");
    assert_eq!(
        dom.matches("<li class=\"step s-agent\"").count(),
        5,
        "{dom}"
    );
    assert_eq!(dom.matches("<div class=\"call\">").count(), 4, "{dom}");
    assert_eq!(dom.matches("no result recorded").count(), 0, "{dom}");
    assert!(
        dom.contains("python -m pytest -x tests/test_parser.py"),
        "{dom}"
    );
    assert!(
        dom.contains("output (error)"),
        "the failing test's result: {dom}"
    );
    assert!(dom.contains("cached) · "), "tokens per step: {dom}");
    // The attempt's observations and the agent CLI's version, as the record states them.
    let obs = &r["attempts"][0]["observations"];
    for (label, value) in [
        ("turns", obs["turns"].to_string()),
        ("output tokens", obs["output_tokens"].to_string()),
        (
            "cost",
            akbench_core::spend::fmt_cost(obs["cost_usd"].as_f64().unwrap()),
        ),
        (
            "agent CLI",
            r["attempts"][0]["provenance"]["agent_cli_version"]
                .as_str()
                .unwrap()
                .to_string(),
        ),
    ] {
        assert!(
            dom.contains(&format!("<dt>{label}</dt><dd>{value}</dd>")),
            "{label} {value}: {dom}"
        );
    }
    assert!(
        dom.contains("<pre id=\"console-errors\" hidden=\"\"></pre>"),
        "{dom}"
    );
}
