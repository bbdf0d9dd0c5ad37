//! Reports count, per agent, the trials whose grade was flagged `grading tampered` and those
//! graded with paths of the agent's diff withheld (core::grading::integrity): attacking
//! scripted agents run with `akbench run single` on the example task pyslug-001 under the
//! sandbox, then `akbench run aggregate` (JSON and the human table) counts them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

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

#[test]
fn aggregate_counts_tampered_and_withheld_trials_per_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = tmp.path().join("agents");
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
    assert!(row("tamper").ends_with("| 1 | 0 |"), "{human}");
    assert!(row("withhold").ends_with("| 0 | 1 |"), "{human}");
    assert!(row("noop").ends_with("| 0 | 0 |"), "{human}");
}
