//! Execute now, grade later: `run execute`, `run evaluate`, `run aggregate` over the example
//! corpus with the real binary.

mod common;

use common::examples;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Env {
    tmp: tempfile::TempDir,
    tasks: PathBuf,
}

impl Env {
    fn new() -> Self {
        Self {
            tmp: tempfile::tempdir().unwrap(),
            tasks: examples().join("tasks"),
        }
    }

    /// An environment with a private copy of the tasks (to change one).
    fn with_task_copy() -> Self {
        let mut e = Self::new();
        let tasks = e.tmp.path().join("tasks");
        let st = Command::new("cp")
            .arg("-R")
            .arg(examples().join("tasks"))
            .arg(&tasks)
            .status()
            .unwrap();
        assert!(st.success());
        // The tasks point at ../repos/*.bundle.
        std::os::unix::fs::symlink(examples().join("repos"), e.tmp.path().join("repos")).unwrap();
        e.tasks = tasks;
        e
    }

    fn raw(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_akbench"))
            .args(args)
            .env("AKBENCH_TASKS_ROOT", &self.tasks)
            .env("AKBENCH_AGENTS_ROOT", examples().join("agents"))
            .env("AKBENCH_CACHE", self.tmp.path().join("cache"))
            .env("AKBENCH_OUT", self.tmp.path().join("out"))
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `run HOW TASK --agent AGENT EXTRA... --json`.
    fn trial(&self, how: &str, task: &str, agent: &str, extra: &[&str]) -> (i32, Value) {
        let head = ["run", how, task, "--agent", agent];
        self.json(&[&head[..], extra, &["--json"]].concat())
    }

    /// `run execute TASK --agent AGENT EXTRA... --json`.
    fn execute(&self, task: &str, agent: &str, extra: &[&str]) -> (i32, Value) {
        self.trial("execute", task, agent, extra)
    }

    /// `run single TASK --agent AGENT EXTRA... --json`.
    fn single(&self, task: &str, agent: &str, extra: &[&str]) -> (i32, Value) {
        self.trial("single", task, agent, extra)
    }

    /// `run evaluate ARGS...` is refused as a usage error (exit 2) saying `says`; its stderr.
    fn evaluate_refused(&self, args: &[&str], says: &str) -> String {
        let (code, _, err) = self.raw(&[&["run", "evaluate"][..], args].concat());
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err}");
        err
    }

    fn json(&self, args: &[&str]) -> (i32, Value) {
        let (code, out, err) = self.raw(args);
        let v = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{args:?}: {out}\n{err}"));
        (code, v)
    }
}

fn record(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn run_dir(v: &Value) -> PathBuf {
    Path::new(v["record"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf()
}

/// (name, outcome) of each test in the grade.
fn tests_of(rec: &Value) -> Vec<(String, String)> {
    let last = rec["attempts"].as_array().unwrap().last().unwrap().clone();
    last["grade"]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().into(),
                t["outcome"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn run_single_and_execute_then_evaluate_agree_over_the_corpus() {
    let env = Env::new();
    let cases = [
        ("wordcount-001", "oracle"),
        ("wordcount-002", "oracle"),
        ("wordcount-003", "oracle"),
        ("wordcount-004", "oracle"),
        ("pyslug-001", "oracle"),
        ("pyslug-002", "oracle"),
        ("pyslug-003", "oracle"),
        ("pyslug-004", "oracle"),
        ("wordcount-003", "fail"),
        ("pyslug-004", "fail"),
        ("pyslug-001", "noop"),
    ];
    for (task, agent) in cases {
        let (single_code, single) = env.single(task, agent, &[]);
        let (code, exec) = env.execute(task, agent, &[]);
        assert_eq!(
            code, 0,
            "{task} {agent}: execute ends not_graded with exit 0"
        );
        assert_eq!(exec["state"], "not_graded");
        assert!(
            exec["score"].is_null(),
            "an ungraded score is absent, never 0"
        );
        let dir = run_dir(&exec);
        let (eval_code, graded) = env.json(&["run", "evaluate", dir.to_str().unwrap(), "--json"]);
        assert_eq!(eval_code, single_code, "{task} {agent}");
        assert_eq!(graded["state"], single["state"], "{task} {agent}");
        assert_eq!(graded["ok"], single["ok"], "{task} {agent}");
        assert_eq!(graded["score"], single["score"], "{task} {agent}");
        assert_eq!(graded["workspace_used"], "copy");
        let a = record(Path::new(single["record"].as_str().unwrap()));
        let b = record(Path::new(graded["record"].as_str().unwrap()));
        assert_eq!(
            tests_of(&a),
            tests_of(&b),
            "{task} {agent}: per-test results"
        );
        assert!(!tests_of(&a).is_empty());
    }
}

#[test]
fn grading_keeps_the_agents_timings_logs_and_the_pre_grade_record() {
    let env = Env::new();
    let (_, exec) = env.execute("pyslug-002", "oracle", &[]);
    let dir = run_dir(&exec);
    let before = record(&dir.join("run_record.json"));
    let stdout_before = std::fs::read(dir.join("a1/agent.stdout.log")).unwrap();
    let (code, _) = env.json(&["run", "evaluate", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let after = record(&dir.join("run_record.json"));
    assert_eq!(record(&dir.join("run_record.execute.json")), before);
    let (a0, a1) = (&before["attempts"][0], &after["attempts"][0]);
    assert_eq!(
        a0["timings_ms"], a1["timings_ms"],
        "the agent run's timings stay"
    );
    assert_eq!(a0["agent_process"], a1["agent_process"]);
    assert_eq!(a0["observations"], a1["observations"]);
    assert_eq!(before["started_at"], after["started_at"]);
    assert!(
        a1["grade"]["duration_ms"].is_u64(),
        "grading time is recorded separately"
    );
    assert_eq!(
        std::fs::read(dir.join("a1/agent.stdout.log")).unwrap(),
        stdout_before
    );
    // The history: the first EVALUATING is the no-op, then the later grade appends its own.
    let states: Vec<&str> = a1["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        &states[8..],
        [
            "evaluating",
            "finalizing",
            "not_graded",
            "evaluating",
            "finalizing",
            "completed"
        ]
    );
    assert!(dir.join("a1/grade-1.evaluator.stdout.log").is_file());
}

#[test]
fn evaluate_copy_then_in_place_still_finds_its_workspace() {
    let env = Env::new();
    let (_, exec) = env.execute("wordcount-001", "oracle", &["--keep-workspace"]);
    let dir = run_dir(&exec);
    let d = dir.to_str().unwrap();
    let (code, v) = env.json(&["run", "evaluate", d, "--copy", "--json"]);
    assert_eq!((code, v["workspace_used"].as_str()), (0, Some("copy")));
    let rec = record(&dir.join("run_record.json"));
    assert_eq!(rec["attempts"][0]["workspace"]["path"], "a1/workspace");
    let (code, v) = env.json(&["run", "evaluate", d, "--in-place", "--json"]);
    assert_eq!((code, v["workspace_used"].as_str()), (0, Some("in_place")));
    assert!(
        dir.join("a1/workspace").is_dir(),
        "grading never moves or deletes it"
    );
    assert!(dir.join("run_record.pre-grade-2.json").is_file());
}

#[test]
fn timeouts_and_infrastructure_errors_are_never_graded() {
    let env = Env::new();
    let (code, v) = env.execute("pyslug-001", "hang", &["--agent-timeout", "1"]);
    assert_eq!((code, v["state"].as_str()), (1, Some("timeout")));
    let (code, v2) = env.execute("broken-missing-commit", "oracle", &[]);
    assert_eq!(
        (code, v2["state"].as_str()),
        (4, Some("infrastructure_error")),
        "no verdict, not the agent's: exit 4"
    );
    for (v, state) in [(&v, "timeout"), (&v2, "infrastructure_error")] {
        let dir = run_dir(v);
        let before = std::fs::read(dir.join("run_record.json")).unwrap();
        env.evaluate_refused(&[dir.to_str().unwrap()], state);
        assert_eq!(std::fs::read(dir.join("run_record.json")).unwrap(), before);
        assert!(!dir.join("run_record.execute.json").exists());
    }
}

#[test]
fn a_symlinked_artifacts_folder_escaping_the_run_directory_is_refused() {
    let env = Env::new();
    let (_, exec) = env.execute("pyslug-001", "oracle", &[]);
    let dir = run_dir(&exec);
    let outside = env.tmp.path().join("outside-a1");
    std::fs::rename(dir.join("a1"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("a1")).unwrap();
    let before = std::fs::read(dir.join("run_record.json")).unwrap();
    env.evaluate_refused(&[dir.to_str().unwrap()], "outside the run directory");
    assert_eq!(std::fs::read(dir.join("run_record.json")).unwrap(), before);
}

#[test]
fn a_changed_reference_or_tests_refuse_to_grade() {
    let env = Env::with_task_copy();
    for (task, file) in [
        ("pyslug-003", "solution/solve.sh"),
        ("wordcount-002", "tests/test.sh"),
    ] {
        let (code, exec) = env.execute(task, "oracle", &[]);
        assert_eq!(code, 0);
        let dir = run_dir(&exec);
        let f = env.tasks.join(task).join(file);
        let mut text = std::fs::read_to_string(&f).unwrap();
        text.push_str("\n# changed after the run\n");
        std::fs::write(&f, text).unwrap();
        env.evaluate_refused(&[dir.to_str().unwrap()], "changed since this run");
        assert!(!dir.join("run_record.execute.json").exists());
    }
}

#[test]
fn rates_over_zero_graded_trials_are_na_in_aggregate() {
    let env = Env::new();
    for agent in ["oracle", "crash"] {
        env.execute("pyslug-001", agent, &[]);
    }
    let out = env.tmp.path().join("out");
    let junit = env.tmp.path().join("junit.xml");
    let md = env.tmp.path().join("summary.md");
    let (code, v) = env.json(&[
        "run",
        "aggregate",
        out.to_str().unwrap(),
        "--json",
        "--junit",
        junit.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(v["records"], 2);
    assert!(v["summary"]["total"]["rates"]["pass_rate"].is_null());
    assert!(v["summary"]["total"]["rates"]["solve_rate"].is_null());
    assert_eq!(
        v["summary"]["by_agent"]["crash"]["counts"]["agent_failed"],
        1
    );
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("n/a") && !md.contains("0.0%"), "{md}");
    let junit = std::fs::read_to_string(junit).unwrap();
    assert!(
        junit.contains("<skipped message=\"not_graded\"/>"),
        "{junit}"
    );
    let (_, human, _) = env.raw(&["run", "aggregate", out.to_str().unwrap()]);
    assert!(human.contains("n/a") && !human.contains("0.0%"), "{human}");
    // An output path that is a folder: a usage error naming it, nothing written.
    let folder = env.tmp.path().join("reports");
    std::fs::create_dir(&folder).unwrap();
    let (code, _, err) = env.raw(&[
        "run",
        "aggregate",
        out.to_str().unwrap(),
        "--junit",
        folder.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--junit") && err.contains("is a folder"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
}

#[test]
fn aggregate_refuses_invalid_records_without_using_them() {
    let env = Env::new();
    let (_, exec) = env.single("pyslug-001", "oracle", &[]);
    let dir = run_dir(&exec);
    let mut rec = record(&dir.join("run_record.json"));
    rec["outcome"]["ok"] = Value::Bool(false);
    let bad = env.tmp.path().join("out/forged");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("run_record.json"),
        serde_json::to_vec(&rec).unwrap(),
    )
    .unwrap();
    let (code, v) = env.json(&[
        "run",
        "aggregate",
        env.tmp.path().join("out").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 1);
    assert_eq!(v["records"], 1);
    assert_eq!(v["refused"].as_array().unwrap().len(), 1);
    assert_eq!(v["summary"]["total"]["counts"]["succeeded"], 1);
}

#[test]
fn evaluate_all_grades_every_executed_trial_under_a_folder_once() {
    let env = Env::new();
    for (task, agent) in [("pyslug-001", "oracle"), ("pyslug-002", "fail")] {
        let (code, v) = env.execute(task, agent, &[]);
        assert_eq!((code, v["state"].as_str()), (0, Some("not_graded")), "{v}");
    }
    // A trial with a verdict already and one whose agent crashed are left alone.
    let (_, v) = env.single("pyslug-003", "oracle", &[]);
    assert_eq!(v["state"], "completed");
    let (_, v) = env.single("pyslug-003", "crash", &[]);
    assert_eq!(v["state"], "failed");
    let out = env.tmp.path().join("out");
    let (code, v) = env.json(&["run", "evaluate", "--all", out.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["graded"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["left_alone"], 2, "{v}");
    let oks: Vec<&Value> = v["graded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["ok"])
        .collect();
    assert!(
        oks.contains(&&Value::Bool(true)) && oks.contains(&&Value::Bool(false)),
        "{v}"
    );
    // Everything has a verdict now: nothing more to grade.
    let (code, v) = env.json(&["run", "evaluate", "--all", out.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["graded"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["left_alone"], 4, "{v}");
}

#[test]
fn a_record_whose_base_commit_is_not_its_tasks_is_not_graded() {
    let env = Env::new();
    let (code, exec) = env.execute("pyslug-001", "oracle", &[]);
    assert_eq!(code, 0);
    let dir = run_dir(&exec);
    let path = dir.join("run_record.json");
    let mut rec = record(&path);
    let base = rec["attempts"][0]["workspace"]["base_commit"]
        .as_str()
        .unwrap()
        .to_string();
    let other = if base.starts_with('0') { "1" } else { "0" }.repeat(40);
    rec["attempts"][0]["workspace"]["base_commit"] = Value::String(other.clone());
    std::fs::write(&path, serde_json::to_vec_pretty(&rec).unwrap()).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = env.evaluate_refused(&["--copy", dir.to_str().unwrap()], "base_commit");
    assert!(err.contains(&other), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.join("run_record.execute.json").exists());
}
