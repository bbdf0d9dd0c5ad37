//! The grading escape suite: one scripted agent per attack on the grade (not on the sandbox),
//! each run under `sandbox` on a Python task whose hidden tests import the agent's code and
//! whose runner discovers the workspace's own `tests/` (the example tasks' runner,
//! examples/tasks/pyslug-001/tests). The agent never fixes the task (value.txt stays 41), so
//! the honest grade is "not solved": every attack must end not solved, never
//! `evaluation_error`, and the ones that forge a verdict must be flagged
//! `grading tampered`. docs/agents.md has the threat-model table.
//!
//! Every test needs a working sandbox (bubblewrap and writable cgroups); where there is none
//! it prints that it skipped.

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_core::task::Task;
use common::escape::{assert_honest_grades, sandbox_works, trial};
use common::{corpus, Corpus};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh corpus with the Python task (`py_corpus`), or `None` (said skipped) where the
/// sandbox does not work.
fn py_corpus_if_sandboxed(test: &str) -> Option<Corpus> {
    sandbox_works(test).then(py_corpus)
}

/// The repository's examples folder.
fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The example Rust task `wordcount-001`.
fn wordcount() -> Task {
    akbench_core::task::load_by_id(&examples().join("tasks"), "wordcount-001").unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

const HIDDEN_PY: &str = r#"import unittest

from answer import answer


class AnswerTest(unittest.TestCase):
    def test_the_answer(self):
        self.assertEqual(answer(), 42)
"#;

const ANSWER_PY: &str = r#"import os


def answer():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "value.txt")) as f:
        return int(f.read().strip())
"#;

/// The corpus plus task `pyanswer`: a Python package (`answer.py` reading value.txt, which
/// the mutation breaks) graded by the example tasks' unittest runner.
fn py_corpus() -> Corpus {
    let c = corpus();
    let repo = c.root().join("repo");
    fs::write(repo.join("answer.py"), ANSWER_PY).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "python"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let examples = examples().join("tasks/pyslug-001/tests");
    let test_sh = fs::read_to_string(examples.join("test.sh")).unwrap();
    c.add_task(
        "pyanswer",
        &commit,
        &test_sh,
        "[mutation]\npatch = \"mutation.patch\"\n",
    );
    let t = c.tasks().join("pyanswer");
    fs::copy(examples.join("run_tests.py"), t.join("tests/run_tests.py")).unwrap();
    fs::write(t.join("tests/test_hidden.py"), HIDDEN_PY).unwrap();
    fs::write(
        t.join("mutation.patch"),
        "--- a/value.txt\n+++ b/value.txt\n@@ -1 +1 @@\n-42\n+41\n",
    )
    .unwrap();
    c
}

/// An agent that leaves `tests/test_evil.py` (discovered and run by the grader) holding
/// `python`, with `HOSTFILE` replaced by the path of a host file (`host_file`) holding
/// `host`.
fn attack(c: &Corpus, name: &str, python: &str, host: &str) -> RunRecord {
    let hostfile = host_file(c, host);
    let python = python.replace("HOSTFILE", &hostfile.display().to_string());
    let script = format!(
        "mkdir -p tests\n: > tests/__init__.py\ncat > tests/test_evil.py <<'AKBEOF'\n{python}\nAKBEOF\nexit 0\n"
    );
    run_agent(c, name, &script, "pyanswer")
}

/// Runs `script` as a scripted agent under `sandbox` on `t`; prints how it ended.
fn run_script(c: &Corpus, name: &str, script: &str, t: &Task) -> RunRecord {
    c.add_agent(
        name,
        &format!("adapter = \"scripted\"\nscript = \"{name}.sh\"\n"),
        Some(script),
    );
    let record = trial(c, t, name);
    let a = &record.attempts[0];
    eprintln!(
        "{name}: state={} ok={:?} cause={:?} grade.cause={:?} withheld={:?}",
        record.outcome.state,
        record.outcome.ok,
        a.cause,
        a.grade.as_ref().and_then(|g| g.cause.clone()),
        a.grade.as_ref().map(|g| g.withheld.clone())
    );
    record
}

/// Runs `script` as a scripted agent under `sandbox` on `task` of the corpus.
fn run_agent(c: &Corpus, name: &str, script: &str, task: &str) -> RunRecord {
    run_script(c, name, script, &c.task(task))
}

/// Python that, when the test process exits, replaces `file` of the verifier folder with a
/// symlink to `target`.
fn link_at_exit(file: &str, target: &str) -> String {
    format!(
        r#"import atexit, os
def _swap():
    p = os.path.join(os.environ["AKBENCH_VERIFIER_DIR"], "{file}")
    try:
        os.remove(p)
    except OSError:
        pass
    os.symlink("{target}", p)
atexit.register(_swap)"#
    )
}

/// The attack ended graded, not solved, flagged as tampering; nothing of the host leaked.
fn assert_tampered(name: &str, r: &RunRecord) {
    assert_eq!(
        r.outcome.state,
        State::Completed,
        "{name}: must be graded (never evaluation_error): {:?}",
        r.attempts[0].cause
    );
    assert_eq!(r.outcome.ok, Some(false), "{name}: graded solved");
    let g = r.attempts[0].grade.as_ref().unwrap();
    assert!(g.tampered, "{name}: not flagged");
    let cause = g.cause.clone().unwrap_or_default();
    assert!(
        cause.starts_with("grading tampered"),
        "{name}: cause {cause:?}"
    );
    assert_eq!(r.attempts[0].cause.as_deref(), Some(cause.as_str()));
}

/// Where the sandbox works: `attack` (on the Python task, with a host file holding `host`)
/// ends graded, not solved, flagged as tampering (`assert_tampered`).
fn assert_attack_tampers(test: &str, name: &str, python: &str, host: &str) {
    let Some(c) = py_corpus_if_sandboxed(test) else {
        return;
    };
    let r = attack(&c, name, python, host);
    assert_tampered(name, &r);
}

/// Python that makes every unittest test case report a pass without running.
const PASS_EVERY_TEST: &str = "def _run(self, result=None):
    result.startTest(self)
    result.addSuccess(self)
    result.stopTest(self)
    return result
unittest.TestCase.run = _run";

/// The attack ended graded (never `evaluation_error`: `why`), not solved (else `solved`).
fn assert_not_solved(r: &RunRecord, why: &str, solved: &str) {
    assert_eq!(
        r.outcome.state,
        State::Completed,
        "{why}: {:?}",
        r.attempts[0].cause
    );
    assert_eq!(r.outcome.ok, Some(false), "{solved}");
}

/// The attack ended as the agent's own failure: graded, not solved, not tampering.
fn assert_agents_failure(r: &RunRecord) -> &akbench_core::record::Grade {
    assert_not_solved(r, "must stay in the agent's denominator", "graded solved");
    let g = r.attempts[0].grade.as_ref().unwrap();
    assert!(!g.tampered);
    g
}

fn host_file(c: &Corpus, content: &str) -> std::path::PathBuf {
    let p = c.root().join("host-secret.txt");
    fs::write(&p, content).unwrap();
    p
}

#[test]
fn the_honest_grade_of_the_python_task() {
    let Some(c) = py_corpus_if_sandboxed("the_honest_grade_of_the_python_task") else {
        return;
    };
    let t = c.task("pyanswer");
    for (agent, solved) in [("oracle", true), ("noop", false)] {
        let r = trial(&c, &t, agent);
        assert_eq!(r.outcome.state, State::Completed, "{agent}");
        assert_eq!(r.outcome.ok, Some(solved), "{agent}");
        let g = r.attempts[0].grade.as_ref().unwrap();
        assert!(!g.tampered, "{agent}");
        let rt = g.runtime.as_ref().expect("the grade says how it ran");
        assert_eq!(
            (rt.name.as_str(), rt.isolated),
            (common::in_container::isolated().as_str(), true)
        );
        let trip = g.tripwire.as_ref().expect("a tripwire ran");
        if solved {
            assert_eq!(trip.result, "failed as it must", "{trip:?}");
            assert!(
                trip.name.is_empty() && trip.file == "test_hidden.py",
                "the twin of the hidden tests: {trip:?}"
            );
        } else {
            assert!(trip.result.starts_with("not run"), "{trip:?}");
        }
    }
}

#[test]
fn a_reward_symlinked_to_a_host_file_holding_1_is_tampering() {
    assert_attack_tampers(
        "a_reward_symlinked_to_a_host_file_holding_1_is_tampering",
        "reward-link",
        &link_at_exit("reward.txt", "HOSTFILE"),
        "1\n",
    );
}

#[test]
fn a_reward_symlinked_to_the_workers_environment_leaks_nothing() {
    let Some(c) =
        py_corpus_if_sandboxed("a_reward_symlinked_to_the_workers_environment_leaks_nothing")
    else {
        return;
    };
    let python = link_at_exit("reward.txt", "/proc/self/environ");
    let r = attack(&c, "reward-environ", &python, "unused");
    let text = serde_json::to_string(&r).unwrap();
    assert!(!text.contains("PATH="), "the worker's environment leaked");
    assert_tampered("reward-environ", &r);
}

#[test]
fn a_junit_report_symlinked_to_a_host_file_leaks_nothing() {
    let Some(c) = py_corpus_if_sandboxed("a_junit_report_symlinked_to_a_host_file_leaks_nothing")
    else {
        return;
    };
    let python = link_at_exit("junit.xml", "HOSTFILE");
    let host = "<testsuite><testcase name=\"HOSTSECRET\"/></testsuite>\n";
    let r = attack(&c, "junit-link", &python, host);
    let text = serde_json::to_string(&r).unwrap();
    assert!(!text.contains("HOSTSECRET"), "the host file leaked");
    assert_tampered("junit-link", &r);
}

#[test]
fn a_late_write_of_the_reward_does_not_flip_the_verdict() {
    assert_attack_tampers(
        "a_late_write_of_the_reward_does_not_flip_the_verdict",
        "late-reward",
        r#"import atexit, os
def _late():
    with open(os.path.join(os.environ["AKBENCH_VERIFIER_DIR"], "reward.txt"), "w") as f:
        f.write("1\n")
atexit.register(_late)"#,
        "unused",
    );
}

#[test]
fn killing_the_test_process_is_the_agents_failure_not_an_evaluation_error() {
    let Some(c) = py_corpus_if_sandboxed(
        "killing_the_test_process_is_the_agents_failure_not_an_evaluation_error",
    ) else {
        return;
    };
    let r = attack(
        &c,
        "kill-tests",
        r#"import os, signal
if os.environ.get("AKBENCH_VERIFIER_DIR"):
    os.kill(os.getpid(), signal.SIGKILL)"#,
        "unused",
    );
    let g = assert_agents_failure(&r);
    let cause = g.cause.clone().unwrap_or_default();
    assert!(
        cause.contains("signal 9") && cause.contains("the agent's failure"),
        "{cause:?}"
    );
}

/// Code under test that fills the grading workspace (4 files of 20 MB, each under the
/// single-file limit, 80 MB together) while the task allows 32 MiB (`storage_mb`): the
/// grading run's disk limit counts the workspace it grades, so the run is stopped, the grade
/// says `limit_hit: disk_mb` and is the agent's failure (not solved, never
/// `evaluation_error`), and nothing it wrote is left on the host. Before, the limit counted
/// only the verifier folder and the home, and the red team wrote 12 GiB into the workspace.
#[test]
fn filling_the_grading_workspace_stops_at_the_disk_limit() {
    let Some(c) = py_corpus_if_sandboxed("filling_the_grading_workspace_stops_at_the_disk_limit")
    else {
        return;
    };
    let toml = c.tasks().join("pyanswer/task.toml");
    let text = fs::read_to_string(&toml).unwrap();
    let text = if text.contains("[environment]\n") {
        text.replacen("[environment]\n", "[environment]\nstorage_mb = 32\n", 1)
    } else {
        format!("{text}\n[environment]\nstorage_mb = 32\n")
    };
    fs::write(&toml, text).unwrap();
    let r = attack(
        &c,
        "fill-grading",
        r#"import os, time
if os.environ.get("AKBENCH_VERIFIER_DIR"):
    ws = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    chunk = os.urandom(1 << 20)
    for i in range(4):
        with open(os.path.join(ws, "akbench-fill-%d.bin" % i), "wb") as f:
            for _ in range(20):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    time.sleep(5)"#,
        "unused",
    );
    let g = assert_agents_failure(&r);
    let runtime = g.runtime.as_ref().unwrap();
    assert_eq!(runtime.limit_hit.as_deref(), Some("disk_mb"), "{runtime:?}");
    assert!(runtime.limits.contains("disk_mb=32"), "{runtime:?}");
    let cause = g.cause.clone().unwrap_or_default();
    assert!(
        cause.contains("disk_mb = 32") && cause.contains("the agent's failure"),
        "{cause:?}"
    );
    // Nothing the run wrote is left: the grading workspace went with the attempt.
    let mut left = Vec::new();
    let mut dirs = vec![c.root().to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                dirs.push(e.path());
            } else if e.file_name().to_string_lossy().starts_with("akbench-fill-") {
                left.push(e.path());
            }
        }
    }
    assert!(left.is_empty(), "left on the host: {left:?}");
}

/// The pid of the main grading run's verifier (`python3 .../run_tests.py` under `root`),
/// waited for while the trial runs on another thread.
fn verifier_pid(root: &Path, done: &std::sync::atomic::AtomicBool) -> Option<i32> {
    let root = root.display().to_string();
    // Until the trial has ended: one that never graded (it failed before, e.g. on a full
    // disk) has no verifier to find, and the test fails saying so instead of hanging.
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        for e in fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains("run_tests.py") && cmd.contains(&root) && cmd.contains("/eval/run/") {
                return Some(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

/// A worker told to stop (SIGTERM from a service manager, which signals every process of
/// the worker's control group: the graded verifier dies by it before the worker's drain
/// reaches the attempt) ends the attempt as the host's doing, retried: never the agent's
/// `failed`, although the same grader solves the reference and the verifier died by a
/// signal while the agent's code ran (core::grading::blame). The agent's own kill of its
/// test process stays its failure
/// (`killing_the_test_process_is_the_agents_failure_not_an_evaluation_error`).
#[test]
fn a_verifier_killed_by_the_workers_shutdown_is_not_the_agents_failure() {
    let Some(c) = py_corpus_if_sandboxed(
        "a_verifier_killed_by_the_workers_shutdown_is_not_the_agents_failure",
    ) else {
        return;
    };
    // The agent's test module waits while grading runs it (never on its own end).
    let root = c.root().to_path_buf();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = std::thread::spawn({
        let done = done.clone();
        move || {
            let pid = verifier_pid(&root, &done)?;
            akbench_worker::process::note_shutdown("SIGTERM");
            // SAFETY: kill(2) on the verifier process found above; no memory involved.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            Some(pid)
        }
    });
    let r = attack(
        &c,
        "wait-for-shutdown",
        r#"import os, time
if os.environ.get("AKBENCH_VERIFIER_DIR"):
    while True:
        time.sleep(3600)"#,
        "unused",
    );
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let killed = killer.join().unwrap();
    assert!(
        killed.is_some(),
        "the trial ended before its verifier ran: {:?}",
        r.attempts[0].cause
    );
    assert_eq!(
        r.outcome.state,
        State::InfrastructureError,
        "the worker's shutdown is the host's doing: {:?}",
        r.attempts[0].cause
    );
    let cause = r.attempts[0].cause.clone().unwrap_or_default();
    assert!(
        cause.contains("interrupted by its worker") && cause.contains("shutting down (SIGTERM)"),
        "{cause:?}"
    );
    assert!(r.attempts[0].grade.is_none(), "no verdict on the agent");
}

#[test]
fn patching_the_test_framework_is_caught_by_the_tripwire() {
    assert_attack_tampers(
        "patching_the_test_framework_is_caught_by_the_tripwire",
        "patch-run",
        &format!("import unittest\n{PASS_EVERY_TEST}"),
        "unused",
    );
}

#[test]
fn skipping_and_counting_skips_as_passes_is_caught_by_the_tripwire() {
    assert_attack_tampers(
        "skipping_and_counting_skips_as_passes_is_caught_by_the_tripwire",
        "skip-all",
        r#"import unittest
unittest.TestCase.setUp = lambda self: self.skipTest("not today")
def _skip(self, test, reason):
    self.addSuccess(test)
unittest.TestResult.addSkip = _skip
unittest.TextTestResult.addSkip = _skip
for _m in list(__import__("sys").modules.values()):
    try:
        _items = list(vars(_m).values())
    except TypeError:
        continue
    for _c in _items:
        if isinstance(_c, type) and issubclass(_c, unittest.TestResult) and "addSkip" in _c.__dict__:
            _c.addSkip = _skip"#,
        "unused",
    );
}

/// An interpreter start-up hook (`sitecustomize.py`, a `.pth` file) in the agent's diff,
/// on a task whose test script puts the workspace on `PYTHONPATH` (so Python would import
/// it before any test): the hook writes reward 1 and exits before the tests run. The clean
/// room withholds both paths, the grade is the honest "not solved" and lists them.
#[test]
fn an_interpreter_start_up_hook_is_withheld_from_grading() {
    let Some(c) = py_corpus_if_sandboxed("an_interpreter_start_up_hook_is_withheld_from_grading")
    else {
        return;
    };
    // The same task, with the workspace on PYTHONPATH (as some task scripts do).
    let t = c.tasks().join("pyanswer");
    let test_sh = fs::read_to_string(t.join("tests/test.sh")).unwrap();
    let test_sh = test_sh.replacen(
        "export PYTHONDONTWRITEBYTECODE=1",
        "export PYTHONDONTWRITEBYTECODE=1\nexport PYTHONPATH=\"$ws\"",
        1,
    );
    assert!(test_sh.contains("PYTHONPATH"), "{test_sh}");
    let pypath = c.tasks().join("pypath");
    akbench_worker::evaluator::copy_tree(&t, &pypath).unwrap();
    fs::write(pypath.join("tests/test.sh"), test_sh).unwrap();
    let hook = r#"import os
if os.environ.get("AKBENCH_VERIFIER_DIR"):
    with open(os.path.join(os.environ["AKBENCH_VERIFIER_DIR"], "reward.txt"), "w") as f:
        f.write("1\n")
    os._exit(0)
"#;
    let script = format!(
        "cat > sitecustomize.py <<'AKBEOF'\n{hook}AKBEOF\necho 'import os' > evil.pth\nexit 0\n"
    );
    let r = run_agent(&c, "startup-hook", &script, "pypath");
    assert_not_solved(&r, "graded", "the start-up hook graded solved");
    let g = r.attempts[0].grade.as_ref().unwrap();
    assert_eq!(
        g.withheld,
        vec!["evil.pth".to_string(), "sitecustomize.py".to_string()]
    );
}

/// The agent's package raises `unittest.SkipTest` when the grader imports it: the hidden
/// tests (and the tripwire beside them) are skipped, "OK (skipped=1)". Never solved.
#[test]
fn skipping_at_import_is_never_solved() {
    let Some(c) = py_corpus_if_sandboxed("skipping_at_import_is_never_solved") else {
        return;
    };
    let script = r#"cat >> answer.py <<'AKBEOF'

import os as _os
import unittest as _unittest
if _os.environ.get("AKBENCH_VERIFIER_DIR"):
    raise _unittest.SkipTest("not today")
AKBEOF
exit 0
"#;
    let r = run_agent(&c, "skip-import", script, "pyanswer");
    assert_not_solved(
        &r,
        "never evaluation_error",
        "skipped at import graded solved",
    );
}

/// Runs `script` as a scripted agent under `sandbox` on the example task `wordcount-001`
/// (Rust, `cargo test` with the hidden tests copied into tests/akbench_hidden.rs).
fn rust_attack(name: &str, script: &str) -> RunRecord {
    run_script(&corpus(), name, script, &wordcount())
}

/// The Rust grader works here (the attacks below are only meaningful if it does): the oracle
/// is solved with the tripwire failing as it must, `noop` is not.
#[test]
fn the_honest_grade_of_a_rust_task() {
    if !sandbox_works("the_honest_grade_of_a_rust_task") {
        return;
    }
    let c = corpus();
    let t = wordcount();
    assert_honest_grades(&c, &t);
}

#[test]
fn a_cargo_runner_rewriting_failed_to_ok_is_withheld_from_grading() {
    if !sandbox_works("a_cargo_runner_rewriting_failed_to_ok_is_withheld_from_grading") {
        return;
    }
    let r = rust_attack(
        "cargo-runner",
        r#"mkdir -p .cargo
cat > .cargo/config.toml <<'AKBEOF'
[target.'cfg(all())']
runner = ["sh", "-c", "\"$@\" 2>&1 | sed -e 's/FAILED/ok/g'; exit 0", "runner"]
AKBEOF
exit 0
"#,
    );
    assert_not_solved(&r, "graded", "the runner's rewrite graded solved");
    let g = r.attempts[0].grade.as_ref().unwrap();
    assert_eq!(g.withheld, vec![".cargo/config.toml".to_string()]);
}

#[test]
fn a_build_script_stripping_the_hidden_asserts_is_caught_by_the_tripwire() {
    if !sandbox_works("a_build_script_stripping_the_hidden_asserts_is_caught_by_the_tripwire") {
        return;
    }
    let r = rust_attack(
        "strip-asserts",
        r#"cat > build.rs <<'AKBEOF'
fn main() {
    let p = std::path::Path::new("tests/akbench_hidden.rs");
    if let Ok(s) = std::fs::read_to_string(p) {
        let t = s.replace("assert_eq!", "let _ = ").replace("assert!", "let _ = ");
        if t != s {
            let _ = std::fs::write(p, t);
        }
    }
}
AKBEOF
exit 0
"#,
    );
    assert_tampered("strip-asserts", &r);
}

/// The agent's module reads what the calling test expects (its source, through the frame)
/// and returns it. The old tripwire (an appended literal assertion) never called it; the
/// twin's changed expectation is read and returned just the same, which the reference
/// solution does not do.
#[test]
fn code_reading_the_tests_expectation_is_caught_by_the_twin() {
    let Some(c) =
        py_corpus_if_sandboxed("code_reading_the_tests_expectation_is_caught_by_the_twin")
    else {
        return;
    };
    let r = run_agent(
        &c,
        "read-expectation",
        r#"cat > answer.py <<'AKBEOF'
import inspect
import re


def answer():
    caller = inspect.currentframe().f_back
    try:
        source = inspect.getsource(caller.f_code)
    except (OSError, TypeError):
        return 0
    m = re.search(r"assertEqual\(answer\(\),\s*(-?\d+)\)", source)
    return int(m.group(1)) if m else 0
AKBEOF
exit 0
"#,
        "pyanswer",
    );
    assert_tampered("read-expectation", &r);
    let g = r.attempts[0].grade.as_ref().unwrap();
    assert!(
        g.cause
            .as_deref()
            .unwrap_or("")
            .contains("passed the tripwire twin"),
        "{:?}",
        g.cause
    );
}

/// The runner patched to report every test passing, except where the tests' path names the
/// tripwire (the old tripwire's run did): the twin runs at the graded run's own paths.
#[test]
fn a_runner_patch_that_looks_for_the_tripwire_by_path_is_caught_by_the_twin() {
    assert_attack_tampers(
        "a_runner_patch_that_looks_for_the_tripwire_by_path_is_caught_by_the_twin",
        "patch-unless-tripwire",
        &format!(
            r#"import os
import unittest
_where = " ".join([os.getcwd(), os.environ.get("AKBENCH_TESTS_DIR", ""), os.environ.get("AKBENCH_VERIFIER_DIR", ""), os.path.abspath(__file__)])
if "tripwire" not in _where and "twin" not in _where:
    {}"#,
            PASS_EVERY_TEST.replace('\n', "\n    ")
        ),
        "unused",
    );
}

/// Code under test plants `reward.json` and makes the verifier folder read-only, so the
/// runner cannot write its own reward (it fails, and exits non-zero). Never solved.
#[test]
fn a_reward_planted_in_a_folder_made_read_only_is_tampering() {
    let Some(c) =
        py_corpus_if_sandboxed("a_reward_planted_in_a_folder_made_read_only_is_tampering")
    else {
        return;
    };
    let r = run_agent(
        &c,
        "plant-reward",
        r#"cat > answer.py <<'AKBEOF'
import os

_d = os.environ.get("AKBENCH_VERIFIER_DIR", "/logs/verifier")
if "tripwire" not in _d:
    try:
        with open(os.path.join(_d, "reward.json"), "w") as f:
            f.write('{"reward": 1.0}')
        os.chmod(_d, 0o555)
    except OSError:
        pass


def answer():
    return 41
AKBEOF
exit 0
"#,
        "pyanswer",
    );
    assert_not_solved(&r, "graded", "the planted reward was taken");
    assert_tampered("plant-reward", &r);
}

/// The Rust library reads what the hidden test expects (the test file test.sh copied into
/// `tests/`) and returns it, falling back to its own (broken) answer. The old tripwire's
/// appended literal assertion never called it; the twin's changed expectation is read and
/// returned, which the reference solution does not do.
#[test]
fn a_rust_library_reading_the_hidden_tests_expectation_is_caught_by_the_twin() {
    if !sandbox_works("a_rust_library_reading_the_hidden_tests_expectation_is_caught_by_the_twin") {
        return;
    }
    let c = corpus();
    // wordcount-001 with hidden tests that each call count_lines directly.
    let examples = examples();
    fs::create_dir_all(c.root().join("repos")).unwrap();
    fs::copy(
        examples.join("repos/wordcount.bundle"),
        c.root().join("repos/wordcount.bundle"),
    )
    .unwrap();
    let task = c.tasks().join("wc-direct");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(examples.join("tasks/wordcount-001"))
        .arg(&task)
        .status()
        .unwrap();
    assert!(cp.success());
    fs::write(
        task.join("tests/hidden.rs"),
        r#"use wordcount::count_lines;

#[test]
fn last_line_without_newline_counts() {
    assert_eq!(count_lines("a\nb"), 2);
}

#[test]
fn single_line_without_newline() {
    assert_eq!(count_lines("hello"), 1);
}

#[test]
fn crlf_without_trailing_newline() {
    assert_eq!(count_lines("a\r\nb"), 2);
}
"#,
    )
    .unwrap();
    let r = run_agent(
        &c,
        "rust-read-expectation",
        r#"python3 - <<'PY'
p = "src/counts.rs"
s = open(p).read()
s = s.replace("pub fn count_lines(text: &str) -> usize {", """pub fn count_lines(text: &str) -> usize {
    if let Ok(src) = std::fs::read_to_string("tests/akbench_hidden.rs") {
        let needle = format!("count_lines({:?}), ", text);
        if let Some(at) = src.find(&needle) {
            let rest = &src[at + needle.len()..];
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = digits.parse() {
                return n;
            }
        }
    }
    count_lines_as_it_was(text)
}

fn count_lines_as_it_was(text: &str) -> usize {""", 1)
open(p, "w").write(s)
PY
exit 0
"#,
        "wc-direct",
    );
    assert_tampered("rust-read-expectation", &r);
}

/// Every other test of this file again, with the worker process as an unprivileged user
/// (common::unprivileged).
#[test]
fn the_grading_escape_suite_holds_with_an_unprivileged_worker() {
    common::unprivileged::rerun_suite(
        "the_grading_escape_suite_holds_with_an_unprivileged_worker",
        &[],
    );
}

/// Every other test of this file again under the `container` runtime: each task in the
/// Debian test image, each attack against the container's root file system
/// (common::in_container).
#[test]
fn the_grading_escape_suite_holds_in_a_container() {
    common::in_container::rerun_suite(
        "the_grading_escape_suite_holds_in_a_container",
        &[
            (
                "the_honest_grade_of_a_rust_task",
                "the test image has no Rust toolchain (the example Rust task names no image)",
            ),
            (
                "a_cargo_runner_rewriting_failed_to_ok_is_withheld_from_grading",
                "the test image has no Rust toolchain",
            ),
            (
                "a_build_script_stripping_the_hidden_asserts_is_caught_by_the_tripwire",
                "the test image has no Rust toolchain",
            ),
            (
                "a_rust_library_reading_the_hidden_tests_expectation_is_caught_by_the_twin",
                "the test image has no Rust toolchain",
            ),
        ],
    );
}
