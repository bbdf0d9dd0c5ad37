//! `akbench run single` end to end over the example corpus: the real binary, real git
//! bundles, real test suites.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn out(&self) -> PathBuf {
        self.tmp.path().join("out")
    }
    fn akbench(&self, args: &[&str]) -> (i32, Value, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(["run", "single"])
            .args(args)
            .arg("--tasks-root")
            .arg(examples().join("tasks"))
            .arg("--agents-root")
            .arg(examples().join("agents"))
            .arg("--out")
            .arg(self.out())
            .arg("--cache")
            .arg(self.tmp.path().join("cache"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        (
            out.status.code().unwrap_or(-1),
            json,
            format!("{stdout}{stderr}"),
        )
    }
    fn record(&self, v: &Value) -> Value {
        let p = v["record"].as_str().unwrap();
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    }
}

const GOOD_TASKS: [&str; 8] = [
    "wordcount-001",
    "wordcount-002",
    "wordcount-003",
    "wordcount-004",
    "pyslug-001",
    "pyslug-002",
    "pyslug-003",
    "pyslug-004",
];

const ELEVEN: [&str; 11] = [
    "pending",
    "preparing",
    "validating",
    "configuring_runtime",
    "creating_workspace",
    "starting_agent",
    "executing",
    "collecting",
    "evaluating",
    "finalizing",
    "completed",
];

fn states(rec: &Value) -> Vec<String> {
    rec["attempts"][0]["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn oracle_solves_every_task_and_a_failing_agent_solves_none() {
    let env = Env::new();
    for task in GOOD_TASKS {
        let (code, v, all) = env.akbench(&[task, "--agent", "oracle", "--json"]);
        assert_eq!(code, 0, "oracle on {task}: {all}");
        assert_eq!(v["state"], "completed");
        assert_eq!(v["ok"], true);
        assert_eq!(v["verdict"], "solved");
        let rec = env.record(&v);
        assert_eq!(states(&rec), ELEVEN, "{task}");
        assert!(
            !rec["attempts"][0]["grade"]["tests"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{task}: per-test results from the JUnit report"
        );

        let (code, v, all) = env.akbench(&[task, "--agent", "fail", "--json"]);
        assert_eq!(code, 1, "fail on {task}: {all}");
        assert_eq!(v["state"], "completed");
        assert_eq!(v["ok"], false);
        assert_eq!(states(&env.record(&v)), ELEVEN, "{task}");
    }
}

#[test]
fn no_mutation_runs_the_pristine_repository() {
    let env = Env::new();
    let (code, v, all) = env.akbench(&["pyslug-003", "--agent", "noop", "--no-mutation", "--json"]);
    assert_eq!(
        code, 0,
        "the pristine repository passes the hidden tests: {all}"
    );
    let rec = env.record(&v);
    assert_eq!(rec["task"]["mutation_applied"], false);
    let (code, _, _) = env.akbench(&["pyslug-003", "--agent", "noop", "--json"]);
    assert_eq!(code, 1);
}

#[test]
fn the_sandbox_applies_the_planned_default_limits() {
    let env = Env::new();
    let (_, v, all) = env.akbench(&["pyslug-003", "--agent", "noop", "--json"]);
    let rec = env.record(&v);
    let rt = &rec["attempts"][0]["agent_process"]["runtime"];
    if rt["name"] != "sandbox" {
        akbench_core::testkit::skip(
            "the_sandbox_applies_the_planned_default_limits",
            &format!("the sandbox does not work here: {all}"),
        );
        return;
    }
    // The same limits a planned run gets from a manifest that names none.
    assert_eq!(
        rt["limits"],
        format!(
            "memory_mb={} cpus={} pids=1024 disk_mb=4096",
            akbench_core::spec::DEFAULT_MEMORY_MB,
            akbench_core::spec::DEFAULT_CPUS
        ),
        "{all}"
    );
}

#[test]
fn broken_commit_is_an_infrastructure_error_and_is_retried() {
    let env = Env::new();
    let (code, v, all) = env.akbench(&[
        "broken-missing-commit",
        "--agent",
        "oracle",
        "--infrastructure-retries",
        "1",
        "--json",
    ]);
    assert_eq!(code, 1, "{all}");
    assert_eq!(v["state"], "infrastructure_error");
    assert_eq!(v["attempts"], 2);
    assert!(v["cause"]
        .as_str()
        .unwrap()
        .contains("failed to find commit"));
}

#[test]
fn hang_is_stopped_at_the_timeout_and_crash_is_an_agent_failure() {
    let env = Env::new();
    let (code, v, all) = env.akbench(&[
        "pyslug-001",
        "--agent",
        "hang",
        "--agent-timeout",
        "1",
        "--json",
    ]);
    assert_eq!(code, 1, "{all}");
    assert_eq!(v["state"], "timeout");
    let (code, v, _) = env.akbench(&["pyslug-001", "--agent", "crash", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(v["state"], "failed");
    assert_eq!(v["attempts"], 1);
}

#[test]
fn peek_finds_no_tests() {
    let env = Env::new();
    let (code, v, all) = env.akbench(&["wordcount-003", "--agent", "peek", "--json"]);
    // It exits 0 having fixed nothing: graded, not solved, so `run single` says no.
    assert_eq!(code, 1, "{all}");
    assert_eq!(v["state"], "completed", "{all}");
    assert_eq!(v["ok"], false, "{all}");
    let rec = env.record(&v);
    let dir = Path::new(v["record"].as_str().unwrap()).parent().unwrap();
    let stdout = std::fs::read_to_string(
        dir.join(
            rec["attempts"][0]["agent_process"]["stdout_path"]
                .as_str()
                .unwrap(),
        ),
    )
    .unwrap();
    assert!(stdout.contains("PEEK: nothing found"), "{stdout}\n{all}");
    assert!(!stdout.contains("PEEK: found"), "{stdout}");
}

#[test]
fn bad_inputs_give_clear_errors_and_write_nothing() {
    let env = Env::new();
    let cases: [(&[&str], &str); 5] = [
        (&["broken-malformed", "--agent", "oracle"], "source.commit"),
        (&["pyslug-001", "--agent", "no-such-agent"], "no-such-agent"),
        (&["no-such-task", "--agent", "oracle"], "no-such-task"),
        (
            &["pyslug-001", "--agent", "oracle", "--agent-timeout=-3"],
            "agent-timeout",
        ),
        // Past Duration's range: refused, not a panic (exit 101).
        (
            &["pyslug-001", "--agent", "oracle", "--agent-timeout=1e20"],
            "--agent-timeout 100000000000000000000",
        ),
    ];
    for (args, needle) in cases {
        let (code, _, all) = env.akbench(args);
        assert_eq!(code, 2, "{args:?}: {all}");
        assert!(
            all.contains(needle) && all.contains("error:"),
            "{args:?}: {all}"
        );
        assert!(!env.out().exists(), "{args:?} wrote something");
    }
    // A descriptor with an unknown adapter.
    let agents = env.tmp.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("weird.toml"), "adapter = \"telepathy\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args([
            "run",
            "single",
            "pyslug-001",
            "--agent",
            "weird",
            "--tasks-root",
        ])
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(&agents)
        .arg("--out")
        .arg(env.out())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("telepathy") && err.contains("weird.toml"),
        "{err}"
    );
    assert!(!env.out().exists());
}
