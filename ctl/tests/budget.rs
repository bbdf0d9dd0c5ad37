//! `execution.budget` under `sweep --local`: once the finished trials' reported cost reaches
//! the cap no new trial starts, and the trials left are accounted `cancelled` with the reason
//! "budget" (accounting valid and complete). An agent that reports no cost under a USD cap
//! stops the run after its first trial: unreported cost is unknown, never zero. The agents
//! are the real `claude-code` / `codex` adapters with a `program` that prints event streams
//! captured from the real CLIs (claude-code's reports $0.000912 per trial, codex's no cost).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

mod fake_cli;
use fake_cli::{fake_agent, repo};

/// The records of trials that ran (any attempt); every planned trial has a record, those
/// the budget cancelled say `cancelled`, reason `budget`, with no attempt.
fn count_records(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += count_records(&p);
        } else if p.file_name().unwrap() == "run_record.json" {
            let r: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            if r["attempts"].as_array().unwrap().is_empty() {
                assert_eq!(r["outcome"]["state"], "cancelled", "{r}");
                assert_eq!(r["outcome"]["cancelled"], "budget", "{r}");
            } else {
                n += 1;
            }
        }
    }
    n
}

/// Runs a one-job local sweep of `agent` over 2 tasks x 3 repetitions with `budget`.
fn sweep(agent: (&str, &str), budget: &str) -> (Value, String, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    fake_agent(&agents, "a", agent.0, agent.1);
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        format!("experiment: budget\ntasks:\n  ids: [pyslug-001, wordcount-001]\nagents:\n  conditions:\n    - descriptor: a\nrepetitions: 3\nexecution:\n  budget: {budget}\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .arg("sweep")
        .arg(&m)
        .args(["--local", "--jobs", "1", "--tasks-root"])
        .arg(repo().join("examples/tasks"))
        .arg("--agents-root")
        .arg(&agents)
        .arg("--store-root")
        .arg(tmp.path().join("runs"))
        .arg("--out")
        .arg(tmp.path().join("out"))
        .arg("--cache")
        .arg(tmp.path().join("cache"))
        .arg("--json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "stdout:\n{}\nstderr:\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // `run aggregate` over the records says what the sweep said: one definition of the
    // trials without cost (the never-started are not) and of the cost per solved.
    let agg = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "aggregate"])
        .arg(tmp.path().join("out"))
        .arg("--json")
        .output()
        .unwrap();
    let a: Value = serde_json::from_slice(&agg.stdout).unwrap();
    for field in ["trials_without_cost", "cost_per_solved_usd", "cost_usd"] {
        assert_eq!(
            a["summary"]["total"]["spend"][field], v["summary"]["total"]["spend"][field],
            "{field}: aggregate {a} sweep {v}"
        );
    }
    (v, stderr, count_records(&tmp.path().join("out")))
}

#[test]
fn a_usd_cap_stops_new_trials_and_cancels_the_rest_with_reason_budget() {
    // $0.000912 per trial: the first leaves $0.0010 open, the second reaches it.
    let (v, _, records) = sweep(
        ("claude-code", "claude-code/captured_solved.jsonl"),
        "{usd: 0.001}",
    );
    let acc = &v["accounting"];
    assert_eq!(acc["valid"], true, "{v}");
    assert_eq!(acc["complete"], true, "{v}");
    assert_eq!(acc["planned"], 6, "{v}");
    assert_eq!(acc["counts"]["cancelled"], 4, "{v}");
    assert_eq!(records, 2, "two trials ran, four never started");
}

#[test]
fn a_usd_cap_with_an_agent_that_reports_no_cost_stops_after_its_first_trial() {
    let (v, _, records) = sweep(("codex", "codex/captured_solved.jsonl"), "{usd: 100}");
    assert_eq!(v["accounting"]["valid"], true, "{v}");
    assert_eq!(v["accounting"]["counts"]["cancelled"], 5, "{v}");
    assert_eq!(records, 1);
    assert_eq!(
        v["summary"]["total"]["spend"]["trials_without_cost"], 1,
        "the trial that ran reported no cost; the five the budget kept from starting spent nothing: {v}"
    );
}

#[test]
fn a_token_cap_counts_input_plus_output_tokens() {
    // codex's captured stream reports tokens but no cost: a token cap works for it.
    let (v, _, _) = sweep(
        ("codex", "codex/captured_solved.jsonl"),
        "{tokens: 1000000}",
    );
    assert_eq!(v["accounting"]["counts"]["cancelled"], 0, "{v}");
    let (v, stderr, records) = sweep(("codex", "codex/captured_solved.jsonl"), "{tokens: 1}");
    assert_eq!(v["accounting"]["counts"]["cancelled"], 5, "{v}");
    assert_eq!(records, 1, "{stderr}");
}

#[test]
fn an_unusable_budget_is_refused_at_plan_time() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: budget\ntasks:\n  ids: [pyslug-001]\nagents:\n  conditions:\n    - descriptor: a\nexecution:\n  budget: {usd: 0}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "plan", "--config"])
        .arg(&m)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("execution.budget"), "{stderr}");
}
