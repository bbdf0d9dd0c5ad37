//! Test scripts of every common shape grade an honest solution solved and never flag it
//! (issue: "Honest solutions are graded `grading tampered` on tasks whose test script runs
//! its tests quietly"). One Python task per shape, the way such tasks are written: the
//! hidden tests in `tests/test_answer.py` (unittest or pytest), `tests/test.sh` running
//! them quietly, verbosely, through `tail`, with a JUnit report, or writing only a reward
//! file. The reference solution (`oracle`) must be solved with the tripwire twin failing as
//! it must, a no-op agent not solved, and nothing flagged. Under `sandbox`, and again in the
//! test image (`container`); and a Rust task graded by `cargo test --quiet`.

mod common;

use akbench_core::lifecycle::State;
use akbench_core::record::TRIPWIRE_OK;
use akbench_worker::orchestrator::Silent;
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::sandbox_available;
use std::fs;

const PYTEST: &str = r#"import os


def value():
    with open(os.path.join(os.getcwd(), "value.txt")) as f:
        return int(f.read().strip())


def test_the_answer():
    assert value() == 42, "not the answer"


def test_the_answer_as_text():
    with open("value.txt") as f:
        assert f.read().strip() == "42"
"#;

/// (task id, hidden tests, the rest of test.sh)
const SHAPES: &[(&str, &str, &str)] = &[
    (
        "unittest-quiet",
        common::UNITTEST_ANSWER,
        common::QUIET_UNITTEST,
    ),
    (
        "unittest-verbose",
        common::UNITTEST_ANSWER,
        "if $PY -m unittest discover -v -s \"$T\" -p 'test_*.py'; then echo 1 > \"$V/reward.txt\"; else echo 0 > \"$V/reward.txt\"; fi\n",
    ),
    (
        "pytest-quiet",
        PYTEST,
        "$PY -m pytest -q -p no:cacheprovider \"$T/test_answer.py\" > /dev/null 2>&1\nrc=$?\n[ $rc -eq 0 ] && echo 1 > \"$V/reward.txt\" || echo 0 > \"$V/reward.txt\"\n",
    ),
    (
        "pytest-junit",
        PYTEST,
        "$PY -m pytest -rA -p no:cacheprovider --junitxml=\"$V/junit.xml\" \"$T/test_answer.py\"\nif [ $? -eq 0 ]; then echo 1 > \"$V/reward.txt\"; else echo 0 > \"$V/reward.txt\"; fi\n",
    ),
    (
        "reward-txt-only",
        common::UNITTEST_ANSWER,
        "$PY -m unittest discover -s \"$T\" -p 'test_*.py' > /dev/null 2>&1 && echo 1 > \"$V/reward.txt\" || echo 0 > \"$V/reward.txt\"\n",
    ),
    (
        "reward-json-only",
        PYTEST,
        "if $PY -m pytest -q -p no:cacheprovider \"$T/test_answer.py\" > /dev/null 2>&1; then r=1.0; else r=0.0; fi\necho \"{\\\"reward\\\": $r}\" > \"$V/reward.json\"\n",
    ),
];

#[test]
fn every_test_script_shape_grades_the_reference_solved_and_flags_nothing() {
    if let Err(e) = sandbox_available() {
        akbench_core::testkit::skip(
            "every_test_script_shape_grades_the_reference_solved_and_flags_nothing",
            &format!("the sandbox does not work here: {e}"),
        );
        return;
    }
    if std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import pytest"])
        .output()
        .map_or(true, |o| !o.status.success())
        && common::in_container::image().is_none()
    {
        panic!("pytest is needed (apt-get install python3-pytest)");
    }
    let c = common::corpus();
    let mutation = "--- a/value.txt\n+++ b/value.txt\n@@ -1 +1 @@\n-42\n+41\n";
    let mut seen = Vec::new();
    for (id, hidden, script) in SHAPES {
        c.add_task(
            id,
            &c.commit,
            &format!("{}{script}", common::SCRIPT_HEAD),
            "[mutation]\npatch = \"mutation.patch\"\n",
        );
        let dir = c.tasks().join(id);
        fs::write(dir.join("mutation.patch"), mutation).unwrap();
        fs::write(dir.join("tests/test_answer.py"), hidden).unwrap();
        for (agent, solved) in [("oracle", true), ("noop", false)] {
            let t = c.task(id);
            let a = c.agent(agent);
            let mut req = c.request(&t, &a, &format!("{id}-{agent}"));
            req.options.runtime = common::in_container::isolated();
            let r = c
                .orchestrator()
                .run_trial(
                    &req,
                    &akbench_core::dispatch::Backoff::NONE,
                    &Silent,
                    &CancelToken::new(),
                )
                .unwrap()
                .record;
            let at = &r.attempts[0];
            let g = at.grade.as_ref();
            let line = format!(
                "{id} {agent}: state={} ok={:?} cause={:?} tripwire={:?}",
                r.outcome.state,
                r.outcome.ok,
                at.cause,
                g.and_then(|g| g.tripwire.as_ref()).map(|t| &t.result)
            );
            eprintln!("{line}");
            assert_eq!(r.outcome.state, State::Completed, "{line}");
            assert_eq!(r.outcome.ok, Some(solved), "{line}");
            let g = g.unwrap();
            assert!(!g.tampered, "{line}");
            if solved {
                let trip = g.tripwire.as_ref().unwrap();
                assert_eq!(trip.result, TRIPWIRE_OK, "{line}");
                assert_eq!(trip.file, "test_answer.py", "{line}");
            }
            seen.push(line);
        }
    }
    assert_eq!(seen.len(), SHAPES.len() * 2);
}

/// A Rust task graded by `cargo test --quiet` with its output thrown away, the reward from
/// cargo's exit status (wordcount-001, its test.sh cut down to that): the reference is
/// solved with its twin failing as it must, a no-op agent is not, nothing is flagged.
#[test]
fn a_rust_task_graded_by_cargo_test_quiet_grades_the_reference_solved() {
    if let Err(e) = sandbox_available() {
        akbench_core::testkit::skip(
            "a_rust_task_graded_by_cargo_test_quiet_grades_the_reference_solved",
            &format!("the sandbox does not work here: {e}"),
        );
        return;
    }
    let c = common::corpus();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    fs::create_dir_all(c.root().join("repos")).unwrap();
    fs::copy(
        examples.join("repos/wordcount.bundle"),
        c.root().join("repos/wordcount.bundle"),
    )
    .unwrap();
    let task = c.tasks().join("wc-quiet");
    assert!(std::process::Command::new("cp")
        .arg("-r")
        .arg(examples.join("tasks/wordcount-001"))
        .arg(&task)
        .status()
        .unwrap()
        .success());
    let sh = fs::read_to_string(task.join("tests/test.sh")).unwrap();
    let cut = sh
        .find("log=")
        .expect("the example's test.sh runs cargo after `log=`");
    let quiet = format!(
        "{}if cargo test --offline --quiet > /dev/null 2>&1; then r=1; else r=0; fi\necho $r > \"$AKBENCH_VERIFIER_DIR/reward.txt\"\n",
        &sh[..cut]
    );
    fs::write(task.join("tests/test.sh"), quiet).unwrap();
    for (agent, solved) in [("oracle", true), ("noop", false)] {
        let t = c.task("wc-quiet");
        let a = c.agent(agent);
        let req = c.request(&t, &a, agent);
        let r = c
            .orchestrator()
            .run_trial(
                &req,
                &akbench_core::dispatch::Backoff::NONE,
                &Silent,
                &CancelToken::new(),
            )
            .unwrap()
            .record;
        let g = r.attempts[0].grade.as_ref();
        let line = format!(
            "wc-quiet {agent}: state={} ok={:?} cause={:?} tripwire={:?}",
            r.outcome.state,
            r.outcome.ok,
            r.attempts[0].cause,
            g.and_then(|g| g.tripwire.as_ref()).map(|t| &t.result)
        );
        eprintln!("{line}");
        assert_eq!(r.outcome.state, State::Completed, "{line}");
        assert_eq!(r.outcome.ok, Some(solved), "{line}");
        let g = g.unwrap();
        assert!(!g.tampered, "{line}");
        if solved {
            assert_eq!(g.tripwire.as_ref().unwrap().result, TRIPWIRE_OK, "{line}");
        }
    }
}

/// The same shapes in the Debian test image (common::in_container).
#[test]
fn every_test_script_shape_holds_in_a_container() {
    common::in_container::rerun_suite(
        "every_test_script_shape_holds_in_a_container",
        &[(
            "a_rust_task_graded_by_cargo_test_quiet_grades_the_reference_solved",
            "the test image has no Rust toolchain",
        )],
    );
}
