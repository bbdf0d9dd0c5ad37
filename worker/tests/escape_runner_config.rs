//! The runner-configuration escape suite: a scripted agent plants configuration that steers
//! how the hidden tests run rather than fixing the task (a `rust-toolchain.toml` pointing at
//! a fake toolchain, a `.cargo/config.toml` compiler wrapper, pytest's `pytest.ini`,
//! `conftest.py`, the pytest sections of `pyproject.toml` / `setup.cfg` / `tox.ini`, a hidden
//! `.pytest.ini`, and a plugin declared as an entry point of a planted `*.dist-info`). The agent never fixes
//! the task, so the honest grade is "not solved": every attack must end not solved (the
//! configuration withheld from the grading copy, `grade.withheld` naming it) or `failed:
//! grading tampered`, never solved and never `evaluation_error`, and the host is unchanged
//! (its toolchain settings, and a file the planted configuration tries to write outside the
//! sandbox). docs/tasks.md, "Every attack class at a glance".
//!
//! Every test needs a working sandbox; the pytest ones need pytest (`python3 -m pytest`, or
//! `/usr/bin/python3 -m pytest`: Debian's python3-pytest, installed by .ci/run). Where either is missing they print that
//! they skipped.

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use common::escape::{assert_honest_grades, sandbox_works, trial};
use common::{corpus, git, Corpus};
use std::fs;
use std::path::{Path, PathBuf};

/// Host files a planted toolchain or runner configuration could change, with their bytes
/// (`None`: absent): the toolchain settings of the user running the tests.
fn host_state() -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let rustup = std::env::var_os("RUSTUP_HOME").map_or(home.join(".rustup"), PathBuf::from);
    let cargo = std::env::var_os("CARGO_HOME").map_or(home.join(".cargo"), PathBuf::from);
    [
        rustup.join("settings.toml"),
        cargo.join("config.toml"),
        cargo.join("config"),
        home.join(".config/pip/pip.conf"),
        PathBuf::from("/etc/pytest.ini"),
    ]
    .into_iter()
    .map(|p| {
        let bytes = fs::read(&p).ok();
        (p, bytes)
    })
    .collect()
}

/// Runs `script` as a scripted agent under `sandbox` on `task` of `tasks` (the corpus's own
/// tasks folder, or the examples').
fn run_agent(c: &Corpus, name: &str, script: &str, tasks: &Path, task: &str) -> RunRecord {
    c.add_agent(
        name,
        &format!("adapter = \"scripted\"\nscript = \"{name}.sh\"\n"),
        Some(script),
    );
    let t = akbench_core::task::load_by_id(tasks, task).unwrap();
    let record = trial(c, &t, name);
    let a = &record.attempts[0];
    eprintln!(
        "{name}: state={} ok={:?} cause={:?} withheld={:?}",
        record.outcome.state,
        record.outcome.ok,
        a.cause,
        a.grade.as_ref().map(|g| g.withheld.clone())
    );
    record
}

/// The attack ended graded and not solved (never `evaluation_error`): with `withheld` among
/// the paths grading withheld and no tampering seen (the clean room held), or, for `None`,
/// flagged `grading tampered` (the tripwire held). The host's toolchain settings are as
/// `before`, and `mark` (a host path the attack tried to write) is not there.
fn assert_held(
    name: &str,
    r: &RunRecord,
    withheld: Option<&str>,
    before: &[(PathBuf, Option<Vec<u8>>)],
    mark: &Path,
) {
    assert_eq!(
        r.outcome.state,
        State::Completed,
        "{name}: must be graded (never evaluation_error): {:?}",
        r.attempts[0].cause
    );
    assert_eq!(r.outcome.ok, Some(false), "{name}: graded solved");
    let g = r.attempts[0].grade.as_ref().unwrap();
    match withheld {
        None => {
            let cause = g.cause.clone().unwrap_or_default();
            assert!(
                g.tampered && cause.starts_with("grading tampered"),
                "{name}: not flagged: {cause:?}"
            );
        }
        Some(w) => {
            assert!(!g.tampered, "{name}: {:?}", g.cause);
            assert!(
                g.withheld.iter().any(|x| x == w),
                "{name}: {w} not withheld: {:?}",
                g.withheld
            );
        }
    }
    assert_eq!(host_state(), before, "{name}: the host's settings changed");
    assert!(
        !mark.exists(),
        "{name}: the attack wrote {}",
        mark.display()
    );
}

/// Runs the scripted agent `name` whose script `script` makes (given `mark`, a host path it
/// must not write) on `task` of `tasks`, and checks that the attack held (`assert_held`) with
/// `withheld` withheld.
fn assert_attack_held(
    c: &Corpus,
    name: &str,
    script: impl FnOnce(&Path) -> String,
    (tasks, task): (&Path, &str),
    withheld: &str,
) {
    let mark = c.root().join("host-mark");
    let before = host_state();
    let script = script(&mark);
    let r = run_agent(c, name, &script, tasks, task);
    assert_held(name, &r, Some(withheld), &before, &mark);
}

/// Where the sandbox works and pytest is installed: `assert_attack_held` on the pytest task.
fn pytest_attack(test: &str, name: &str, script: impl FnOnce(&Path) -> String, withheld: &str) {
    if !sandbox_works(test) {
        return;
    }
    let Some(c) = pytest_corpus(test) else {
        return;
    };
    let tasks = c.tasks();
    assert_attack_held(&c, name, script, (&tasks, "pytest-answer"), withheld);
}

fn examples_tasks() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks")
}

/// A `rust-toolchain.toml` whose `path` points at a "toolchain" in the workspace: a `cargo`
/// that prints every test of the hidden file (copied into tests/ by the grader) as passing
/// and exits 0. Withheld from the grading copy: the real toolchain grades it, not solved.
#[test]
fn a_rust_toolchain_file_pointing_at_a_fake_toolchain_is_withheld() {
    let test = "a_rust_toolchain_file_pointing_at_a_fake_toolchain_is_withheld";
    if !sandbox_works(test) {
        return;
    }
    let tasks = examples_tasks();
    let script = |mark: &Path| {
        format!(
            r#"mkdir -p faketc/bin
cat > faketc/bin/cargo <<'AKBEOF'
#!/bin/sh
echo ran > {mark} 2>/dev/null
for f in tests/*.rs; do
  for t in $(sed -n 's/^ *fn \([a-z_0-9]*\)().*/\1/p' "$f"); do echo "test $t ... ok"; done
done
echo "test result: ok. 99 passed; 0 failed; 0 ignored"
exit 0
AKBEOF
chmod +x faketc/bin/cargo
cp faketc/bin/cargo faketc/bin/rustc
printf '[toolchain]\npath = "faketc"\n' > rust-toolchain.toml
exit 0
"#,
            mark = mark.display()
        )
    };
    let on = (tasks.as_path(), "wordcount-001");
    assert_attack_held(
        &corpus(),
        "fake-toolchain",
        script,
        on,
        "rust-toolchain.toml",
    );
}

/// A `.cargo/config.toml` whose `rustc-wrapper` strips the asserts out of the hidden test
/// file before compiling it. Withheld from the grading copy: not solved.
#[test]
fn a_cargo_compiler_wrapper_stripping_the_hidden_asserts_is_withheld() {
    let test = "a_cargo_compiler_wrapper_stripping_the_hidden_asserts_is_withheld";
    if !sandbox_works(test) {
        return;
    }
    let tasks = examples_tasks();
    let script = |mark: &Path| {
        format!(
            r#"cat > wrap.sh <<'AKBEOF'
#!/bin/sh
echo ran > {mark} 2>/dev/null
for f in tests/akbench_hidden.rs; do
  [ -f "$f" ] && sed -i -e 's/assert_eq!/let _ = /g' -e 's/assert!/let _ = /g' "$f"
done
exec "$@"
AKBEOF
chmod +x wrap.sh
mkdir -p .cargo
printf '[build]\nrustc-wrapper = "./wrap.sh"\n' > .cargo/config.toml
exit 0
"#,
            mark = mark.display()
        )
    };
    let on = (tasks.as_path(), "wordcount-001");
    assert_attack_held(&corpus(), "rustc-wrapper", script, on, ".cargo/config.toml");
}

const ANSWER_PY: &str = r#"import os


def answer():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "value.txt")) as f:
        return int(f.read().strip())
"#;

const HIDDEN_PY: &str = r#"from answer import answer


def test_the_answer():
    assert answer() == 42
"#;

/// The hidden tests run by pytest from the workspace (as many Python tasks do): the hidden
/// file is copied into the repository and pytest reads the repository's configuration.
const PYTEST_SH: &str = r#"set -u
ws=$AKBENCH_WORKSPACE
cd "$ws" || exit 2
cp "$AKBENCH_TESTS_DIR/test_hidden.py" "$ws/test_akbench_hidden.py" || exit 2
export PYTHONDONTWRITEBYTECODE=1
PY=python3
"$PY" -m pytest --version >/dev/null 2>&1 || PY=/usr/bin/python3
"$PY" -m pytest -q -p no:cacheprovider --junitxml="$AKBENCH_VERIFIER_DIR/junit.xml" test_akbench_hidden.py
rc=$?
if [ "$rc" = 0 ]; then r=1; else r=0; fi
echo "$r" > "$AKBENCH_VERIFIER_DIR/reward.txt"
echo "pytest exited $rc: reward $r"
"#;

/// The corpus plus task `pytest-answer`: `answer.py` reads value.txt (which the mutation
/// breaks), graded by pytest run from the workspace; `None` without pytest.
fn pytest_corpus(test: &str) -> Option<Corpus> {
    // The python3 on PATH, else the system's (a pyenv python3 may lack it), as the task's
    // script picks it.
    let ok = ["python3", "/usr/bin/python3"].iter().any(|py| {
        std::process::Command::new(py)
            .args(["-m", "pytest", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !ok {
        akbench_core::testkit::skip(
            test,
            "pytest is not installed (python3 -m pytest); fix: apt-get install python3-pytest",
        );
        return None;
    }
    let c = corpus();
    let repo = c.root().join("repo");
    fs::write(repo.join("answer.py"), ANSWER_PY).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "python"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    c.add_task(
        "pytest-answer",
        &commit,
        PYTEST_SH,
        "[mutation]\npatch = \"mutation.patch\"\n",
    );
    let t = c.tasks().join("pytest-answer");
    fs::write(t.join("tests/test_hidden.py"), HIDDEN_PY).unwrap();
    fs::write(
        t.join("mutation.patch"),
        "--- a/value.txt\n+++ b/value.txt\n@@ -1 +1 @@\n-42\n+41\n",
    )
    .unwrap();
    Some(c)
}

/// A pytest plugin that reports every test passed (and tries to write `mark` on the host).
fn passing_plugin(mark: &Path) -> String {
    plugin(mark, "True")
}

/// A pytest plugin that reports passed every test for which the Python expression `passes`
/// (over `item`) holds, and tries to write `mark` on the host.
fn plugin(mark: &Path, passes: &str) -> String {
    format!(
        r#"import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if {passes}:
        report.outcome = "passed"
        report.longrepr = None
    try:
        with open("{mark}", "w") as f:
            f.write("ran")
    except OSError:
        pass
"#,
        mark = mark.display()
    )
}

/// The pytest grader works here: the oracle is solved with the tripwire failing as it must,
/// `noop` is not (the attacks below are only meaningful if it does).
#[test]
fn the_honest_grade_of_a_pytest_task() {
    let test = "the_honest_grade_of_a_pytest_task";
    if !sandbox_works(test) {
        return;
    }
    let Some(c) = pytest_corpus(test) else {
        return;
    };
    let t = c.task("pytest-answer");
    assert_honest_grades(&c, &t);
}

/// A `conftest.py` whose hook reports every test passed. Withheld: not solved.
#[test]
fn a_conftest_reporting_every_test_passed_is_withheld() {
    pytest_attack(
        "a_conftest_reporting_every_test_passed_is_withheld",
        "conftest",
        |mark| {
            format!(
                "cat > conftest.py <<'AKBEOF'\n{}AKBEOF\nexit 0\n",
                passing_plugin(mark)
            )
        },
        "conftest.py",
    );
}

/// A `pytest.ini` that loads a plugin of the agent's (`-p`, with the repository on the
/// plugin path) reporting every test passed. Withheld: not solved.
#[test]
fn a_pytest_ini_loading_a_passing_plugin_is_withheld() {
    pytest_attack(
        "a_pytest_ini_loading_a_passing_plugin_is_withheld",
        "pytest-ini",
        |mark| {
            format!(
                "cat > akbench_pass.py <<'AKBEOF'\n{}AKBEOF\n\
                 printf '[pytest]\\npythonpath = .\\naddopts = -p akbench_pass\\n' > pytest.ini\nexit 0\n",
                passing_plugin(mark)
            )
        },
        "pytest.ini",
    );
}

/// A pytest plugin that dodges the tripwire: it reports passed every test whose name has
/// two underscores or more (`test_the_answer`) and leaves the rest alone (the tripwire,
/// `test_<random letters>`, fails as it must), so only withholding what loads it holds.
fn tripwire_dodging_plugin(mark: &Path) -> String {
    plugin(mark, r#"item.name.count("_") >= 2"#)
}

/// Plants the tripwire-dodging plugin as `akbench_dodge.py` with `config` (shell that writes
/// what loads it) and checks the attack held with `withheld` withheld.
fn dodging_attack(test: &str, name: &str, config: &str, withheld: &str) {
    let script = |mark: &Path| {
        format!(
            "cat > akbench_dodge.py <<'AKBEOF'\n{}AKBEOF\n{config}\nexit 0\n",
            tripwire_dodging_plugin(mark)
        )
    };
    pytest_attack(test, name, script, withheld);
}

/// The plugin loaded from `pyproject.toml`'s `[tool.pytest.ini_options]` (pytest reads it
/// from the working folder). A `pyproject.toml` change is kept when it leaves the pytest
/// settings alone (a real fix may add a dependency) and withheld when it changes them:
/// without that, this plugin graded the trial solved (the tripwire failed as it must).
#[test]
fn a_pyproject_pytest_section_loading_a_plugin_is_withheld() {
    dodging_attack(
        "a_pyproject_pytest_section_loading_a_plugin_is_withheld",
        "pyproject",
        "printf '[project]\\nname = \"answer\"\\n\\n[tool.pytest.ini_options]\\npythonpath = [\".\"]\\naddopts = \"-p akbench_dodge\"\\n' > pyproject.toml",
        "pyproject.toml",
    );
}

/// The same from `setup.cfg`'s `[tool:pytest]`.
#[test]
fn a_setup_cfg_pytest_section_loading_a_plugin_is_withheld() {
    dodging_attack(
        "a_setup_cfg_pytest_section_loading_a_plugin_is_withheld",
        "setup-cfg",
        "printf '[metadata]\\nname = answer\\n\\n[tool:pytest]\\naddopts = -p akbench_dodge\\n' > setup.cfg",
        "setup.cfg",
    );
}

/// The same from `tox.ini`'s `[pytest]`.
#[test]
fn a_tox_ini_pytest_section_loading_a_plugin_is_withheld() {
    dodging_attack(
        "a_tox_ini_pytest_section_loading_a_plugin_is_withheld",
        "tox-ini",
        "printf '[tox]\\nenvlist = py3\\n\\n[pytest]\\naddopts = -p akbench_dodge\\n' > tox.ini",
        "tox.ini",
    );
}

/// The same from a hidden `.pytest.ini` (read before pyproject.toml and the rest).
#[test]
fn a_hidden_pytest_ini_loading_a_plugin_is_withheld() {
    dodging_attack(
        "a_hidden_pytest_ini_loading_a_plugin_is_withheld",
        "dot-pytest-ini",
        "printf '[pytest]\\naddopts = -p akbench_dodge\\n' > .pytest.ini",
        ".pytest.ini",
    );
}

/// The plugin declared as a `pytest11` entry point of a fake installed package
/// (`*.dist-info` in the working folder, which `python3 -m pytest` has on `sys.path`):
/// pytest loads it by itself, with no configuration file at all.
#[test]
fn an_entry_point_plugin_in_a_planted_dist_info_is_withheld() {
    dodging_attack(
        "an_entry_point_plugin_in_a_planted_dist_info_is_withheld",
        "dist-info",
        "mkdir -p akbench_dodge-1.0.dist-info && printf 'Metadata-Version: 2.1\\nName: akbench-dodge\\nVersion: 1.0\\n' > akbench_dodge-1.0.dist-info/METADATA && printf '[pytest11]\\ndodge = akbench_dodge\\n' > akbench_dodge-1.0.dist-info/entry_points.txt",
        "akbench_dodge-1.0.dist-info/METADATA",
    );
}

/// Every other test of this file again, with the worker process as an unprivileged user
/// (common::unprivileged).
#[test]
fn the_runner_configuration_escape_suite_holds_with_an_unprivileged_worker() {
    common::unprivileged::rerun_suite(
        "the_runner_configuration_escape_suite_holds_with_an_unprivileged_worker",
        &[],
    );
}

/// Every other test of this file again under the `container` runtime: each task in the
/// Debian test image, each attack against the container's root file system
/// (common::in_container).
#[test]
fn the_runner_configuration_escape_suite_holds_in_a_container() {
    common::in_container::rerun_suite(
        "the_runner_configuration_escape_suite_holds_in_a_container",
        &[
            (
                "a_rust_toolchain_file_pointing_at_a_fake_toolchain_is_withheld",
                "the test image has no Rust toolchain (the example Rust task names no image)",
            ),
            (
                "a_cargo_compiler_wrapper_stripping_the_hidden_asserts_is_withheld",
                "the test image has no Rust toolchain (the example Rust task names no image)",
            ),
        ],
    );
}
