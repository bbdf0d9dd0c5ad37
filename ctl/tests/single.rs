//! `akbench run single` end to end over the example corpus: the real binary, real git
//! bundles, real test suites.

mod common;

use common::examples;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

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
        let grade = &rec["attempts"][0]["grade"];
        assert_eq!(
            grade["tripwire"]["result"], "failed as it must",
            "{task}: the tripwire is placed in the example tests and seen failing: {}",
            grade["tripwire"]
        );
        assert_eq!(grade["runtime"]["name"], "sandbox", "{task}");

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
        "2",
        "--json",
    ]);
    assert_eq!(
        code, 4,
        "no verdict (not the agent's doing) is not exit 1: {all}"
    );
    assert_eq!(v["state"], "infrastructure_error");
    assert_eq!(v["attempts"], 3);
    // Issue 48: the retries back off as the coordinator's do (core's settle: 2 s then 4 s
    // nominal, never less than half), not 0.05 s apart.
    let rec = env.record(&v);
    let at = |a: &Value, first: bool| {
        let t = a["transitions"].as_array().unwrap();
        let t = if first { &t[0] } else { t.last().unwrap() };
        chrono::DateTime::parse_from_rfc3339(t["at"].as_str().unwrap()).unwrap()
    };
    let attempts = rec["attempts"].as_array().unwrap();
    for (i, least_ms) in [(0usize, 1000i64), (1, 2000)] {
        let gap = at(&attempts[i + 1], true) - at(&attempts[i], false);
        assert!(
            gap.num_milliseconds() >= least_ms,
            "retry {} came {} ms after the attempt before it",
            i + 1,
            gap.num_milliseconds()
        );
    }
    let key = v["trial"]["key"].as_str().unwrap();
    assert!(
        key.ends_with("/broken-missing-commit/oracle/r1"),
        "repetitions count from 1, as in sweeps: {key}"
    );
    assert!(v["cause"]
        .as_str()
        .unwrap()
        .contains("failed to find commit"));

    // `run execute` answers the same way: executed is 0, the broken environment 4.
    let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
        .args([
            "run",
            "execute",
            "broken-missing-commit",
            "--agent",
            "oracle",
        ])
        .arg("--tasks-root")
        .arg(examples().join("tasks"))
        .arg("--agents-root")
        .arg(examples().join("agents"))
        .arg("--out")
        .arg(env.out())
        .arg("--cache")
        .arg(env.tmp.path().join("cache"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
            "1e20 seconds is outside 0.001 to 604800 seconds",
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

#[test]
fn a_task_given_by_path_finds_its_repository_beside_it_not_under_tasks_root() {
    let env = Env::new();
    // A copy of pyslug-001 elsewhere, whose repository is only beside the copy.
    let elsewhere = env.tmp.path().join("elsewhere");
    let task = elsewhere.join("tasks/pyslug-001");
    std::fs::create_dir_all(elsewhere.join("own-repos")).unwrap();
    std::fs::copy(
        examples().join("repos/pyslug.bundle"),
        elsewhere.join("own-repos/pyslug.bundle"),
    )
    .unwrap();
    let src = examples().join("tasks/pyslug-001");
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        std::fs::create_dir_all(task.join(&rel)).unwrap();
        for e in std::fs::read_dir(src.join(&rel)).unwrap().flatten() {
            let r = rel.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                todo.push(r);
            } else {
                std::fs::copy(e.path(), task.join(&r)).unwrap();
            }
        }
    }
    let toml = task.join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(text.contains("../repos/pyslug.bundle"), "{text}");
    std::fs::write(&toml, text.replace("../repos/", "../own-repos/")).unwrap();
    // --tasks-root (examples/tasks, from Env) holds no `own-repos`: only the task's own
    // folder can find it.
    let (code, v, all) = env.akbench(&[task.to_str().unwrap(), "--agent", "oracle", "--json"]);
    assert_eq!(code, 0, "{all}");
    assert_eq!(v["state"], "completed", "{all}");
}

/// A task with sidecar services (environment/docker-compose.yaml) is bad input under a
/// runtime other than `container` (it never runs without its services), naming the fix.
/// (Under `container` its services start: `worker/tests/container_world.rs`.)
#[test]
fn a_task_with_sidecars_is_bad_input_under_another_runtime() {
    let env = Env::new();
    let tasks = env.tmp.path().join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(examples().join("tasks/tb-wordfreq-001"))
        .arg(&tasks)
        .status()
        .unwrap()
        .success());
    let dir = tasks.join("tb-wordfreq-001");
    let hex = "c".repeat(64);
    let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
    std::fs::write(
        dir.join("task.toml"),
        toml.replace(
            "tb-wordfreq-001:1.0\"",
            &format!("tb-wordfreq-001@sha256:{hex}\""),
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("environment/docker-compose.yaml"),
        format!("services:\n  db:\n    image: reg.example/db@sha256:{hex}\n  cache:\n    image: reg.example/cache@sha256:{hex}\n"),
    )
    .unwrap();
    let run = |runtime: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args([
                "run",
                "single",
                "tb-wordfreq-001",
                "--agent",
                "oracle",
                "--json",
            ])
            .args(["--runtime", runtime])
            .arg("--tasks-root")
            .arg(&tasks)
            .arg("--agents-root")
            .arg(examples().join("agents"))
            .arg("--out")
            .arg(env.out())
            .arg("--cache")
            .arg(env.tmp.path().join("cache"))
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, stderr) = run("sandbox");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("only the `container` runtime starts") && stderr.contains("fix:"),
        "{stderr}"
    );
}
