//! Tokens and cost in the sweep's table and `run aggregate`: per agent, they equal the sum
//! over the records. The agents are the real `claude-code` and `codex` adapters with a
//! `program` that prints event streams captured from the real CLIs.

mod common;

use common::local_sweep;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

mod fake_cli;
use fake_cli::fake_agent;

fn records(dir: &Path, out: &mut Vec<Value>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            records(&p, out);
        } else if p.file_name().unwrap() == "run_record.json" {
            out.push(serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap());
        }
    }
}

/// Sum of one observation over every attempt of every record of `agent`.
fn sum(records: &[Value], agent: &str, field: &str) -> f64 {
    records
        .iter()
        .filter(|r| r["agent"]["name"] == agent)
        .flat_map(|r| r["attempts"].as_array().unwrap().iter())
        .filter_map(|a| a["observations"][field].as_f64())
        .sum()
}

#[test]
fn tokens_and_cost_per_agent_equal_the_sum_over_the_records() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    fake_agent(
        &agents,
        "cc",
        "claude-code",
        "claude-code/captured_solved.jsonl",
    );
    fake_agent(&agents, "cx", "codex", "codex/captured_solved.jsonl");
    let m = tmp.path().join("experiment.yaml");
    std::fs::write(
        &m,
        "experiment: spend\ntasks:\n  ids: [pyslug-001, wordcount-001]\nagents:\n  conditions:\n    - descriptor: cc\n    - descriptor: cx\nrepetitions: 2\n",
    )
    .unwrap();
    let out = local_sweep(&m, &agents, tmp.path())
        .arg("--json")
        .output()
        .unwrap();
    let sweep: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut recs = Vec::new();
    records(&tmp.path().join("out"), &mut recs);
    assert_eq!(recs.len(), 8);

    let agg = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "aggregate", "--json"])
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    let agg: Value = serde_json::from_slice(&agg.stdout).unwrap();

    for summary in [&sweep["summary"], &agg["summary"]] {
        for agent in ["cc", "cx"] {
            let s = &summary["by_agent"][agent]["spend"];
            for field in ["input_tokens", "cached_input_tokens", "output_tokens"] {
                let want = sum(&recs, agent, field);
                assert!(want > 0.0, "{agent} {field}");
                assert_eq!(s[field].as_f64(), Some(want), "{agent} {field}: {s}");
            }
        }
        // claude-code reports a cost; codex does not: its cost is absent, never 0.
        let cc = &summary["by_agent"]["cc"]["spend"];
        let want = sum(&recs, "cc", "cost_usd");
        assert!(
            (cc["cost_usd"].as_f64().unwrap() - want).abs() < 1e-12,
            "{cc}"
        );
        assert!((want - 4.0 * 0.000912).abs() < 1e-12);
        let cx = &summary["by_agent"]["cx"]["spend"];
        assert!(cx["cost_usd"].is_null(), "{cx}");
        assert_eq!(cx["trials_without_cost"], 4);
        assert_eq!(
            summary["total"]["spend"]["input_tokens"].as_f64(),
            Some(sum(&recs, "cc", "input_tokens") + sum(&recs, "cx", "input_tokens"))
        );
    }

    // The human table has the columns.
    let md = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args(["run", "aggregate"])
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("| input tokens | cached tokens | output tokens | cost | cost per solved |"),
        "{md}"
    );
    assert!(md.contains("| 800 | 160 | 80 | $0.0036 |"), "{md}");
}
