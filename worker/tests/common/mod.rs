//! A tiny real corpus built in a temp dir: a git repository, tasks and scripted agents.
#![allow(dead_code)]

use akbench_core::agent::Agent;
use akbench_core::clock::SystemClock;
use akbench_core::record::Identity;
use akbench_core::task::{load_by_id, Task};
use akbench_worker::orchestrator::{AttemptOptions, Orchestrator, TrialRequest};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

pub mod container_trial;
pub mod escape;
pub mod fake_provider;
pub mod in_container;
pub mod installers;
pub mod registry;
pub mod rerun;
pub mod unprivileged;
pub mod upstream;

pub struct Corpus {
    pub dir: tempfile::TempDir,
    pub commit: String,
    pub first_commit: String,
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Corpus {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn tasks(&self) -> PathBuf {
        self.root().join("tasks")
    }
    pub fn agents(&self) -> PathBuf {
        self.root().join("agents")
    }

    pub fn task(&self, id: &str) -> Task {
        load_by_id(&self.tasks(), id).unwrap()
    }
    pub fn agent(&self, name: &str) -> Agent {
        Agent::load(&self.agents(), name).unwrap()
    }

    pub fn orchestrator(&self) -> Orchestrator {
        let mut o = Orchestrator::new(&self.root().join("cache"), Arc::new(SystemClock));
        // Under the container rerun, one image cache for every test of the suite (the
        // image is pulled and unpacked once, not once per test).
        if let Some(images) = in_container::images_dir() {
            o.images = images;
        }
        o
    }

    pub fn request<'a>(&self, task: &'a Task, agent: &'a Agent, name: &str) -> TrialRequest<'a> {
        TrialRequest {
            task,
            agent,
            run: Identity {
                id: uuid::Uuid::now_v7(),
                key: "test-run".into(),
            },
            trial: Identity {
                id: uuid::Uuid::now_v7(),
                key: format!("test-run/{name}"),
            },
            out_dir: self.root().join("out").join(name),
            infrastructure_retries: 0,
            options: AttemptOptions {
                grace: std::time::Duration::from_millis(300),
                ..AttemptOptions::default()
            },
            candidate: None,
        }
    }

    /// Adds a task folder; `extra` is appended to task.toml.
    pub fn add_task(&self, id: &str, commit: &str, test_sh: &str, extra: &str) {
        // Under the container rerun (in_container), every task runs in the test image.
        let image = match in_container::image() {
            Some(i) if !extra.contains("[environment]") => {
                format!("[environment]\nimage = \"{i}\"\n")
            }
            _ => String::new(),
        };
        let extra = format!("{extra}\n{image}");
        let d = self.tasks().join(id);
        fs::create_dir_all(d.join("tests")).unwrap();
        fs::create_dir_all(d.join("solution")).unwrap();
        fs::write(
            d.join("task.toml"),
            format!(
                "version = \"1.0\"\n{extra}\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n\
                 [source]\nrepo = \"../repo\"\ncommit = \"{commit}\"\n"
            ),
        )
        .unwrap();
        fs::write(
            d.join("instruction.md"),
            "value.txt should hold the answer to everything.\n",
        )
        .unwrap();
        fs::write(d.join("tests/test.sh"), test_sh).unwrap();
        fs::write(d.join("solution/solve.sh"), "echo 42 > value.txt\n").unwrap();
    }

    pub fn add_agent(&self, name: &str, toml: &str, script: Option<&str>) {
        fs::create_dir_all(self.agents()).unwrap();
        fs::write(self.agents().join(format!("{name}.toml")), toml).unwrap();
        if let Some(s) = script {
            fs::write(self.agents().join(format!("{name}.sh")), s).unwrap();
        }
    }
}

/// Hidden tests of the corpus's answer (unittest): value.txt must hold 42.
pub const UNITTEST_ANSWER: &str = r#"import os
import unittest


def value():
    with open(os.path.join(os.getcwd(), "value.txt")) as f:
        return int(f.read().strip())


class AnswerTest(unittest.TestCase):
    def test_the_answer(self):
        self.assertEqual(value(), 42)

    def test_the_answer_is_even(self):
        self.assertEqual(value() % 2, 0, "odd")
"#;

/// What every test.sh of a `tests/test_answer.py` task starts with: the workspace as cwd, no bytecode in the read-only tests.
pub const SCRIPT_HEAD: &str = "set -uo pipefail\nexport PYTHONDONTWRITEBYTECODE=1\ncd \"$AKBENCH_WORKSPACE\"\nV=\"$AKBENCH_VERIFIER_DIR\"\nT=\"$AKBENCH_TESTS_DIR\"\nPY=python3\n$PY -c 'import pytest' 2>/dev/null || PY=/usr/bin/python3\n";

/// The rest of a test.sh that runs `tests/test_answer.py` quietly, through `tail`, and writes
/// the reward from unittest's exit status: no test name reaches the output.
pub const QUIET_UNITTEST: &str = "$PY -m unittest discover -s \"$T\" -p 'test_*.py' 2>&1 | tail -5\nif [ \"${PIPESTATUS[0]}\" -eq 0 ]; then echo 1 > \"$V/reward.txt\"; else echo 0 > \"$V/reward.txt\"; fi\n";

/// Makes task `id` of `c` graded by hidden unittest tests run quietly (its tripwire twin
/// changes their expected values; no test name is printed).
pub fn grade_quietly(c: &Corpus, id: &str) {
    let dir = c.tasks().join(id);
    fs::write(
        dir.join("tests/test.sh"),
        format!("{SCRIPT_HEAD}{QUIET_UNITTEST}"),
    )
    .unwrap();
    fs::write(dir.join("tests/test_answer.py"), UNITTEST_ANSWER).unwrap();
}

pub const TEST_SH: &str = r#"set -u
cd "$AKBENCH_WORKSPACE"
if [ "$(cat value.txt)" = "42" ]; then r=1; st='<testcase name="answer"/>'; else r=0; st='<testcase name="answer"><failure message="wrong answer"/></testcase>'; fi
echo "$r" > "$AKBENCH_VERIFIER_DIR/reward.txt"
echo "<testsuite>$st</testsuite>" > "$AKBENCH_VERIFIER_DIR/junit.xml"
echo "graded: reward $r"
"#;

/// A repository whose value.txt holds 42, a task whose mutation changes it to 41, and agents.
pub fn corpus() -> Corpus {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    fs::write(repo.join("value.txt"), "0\n").unwrap();
    fs::write(repo.join(".gitignore"), "ignored/\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "first"]);
    let first_commit = git(&repo, &["rev-parse", "HEAD"]);
    fs::write(repo.join("value.txt"), "42\n").unwrap();
    fs::write(repo.join("README"), "the answer\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "second"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let c = Corpus {
        dir,
        commit: commit.clone(),
        first_commit,
    };
    let mutation = "--- a/value.txt\n+++ b/value.txt\n@@ -1 +1 @@\n-42\n+41\n";
    c.add_task(
        "answer",
        &commit,
        TEST_SH,
        "[mutation]\npatch = \"mutation.patch\"\n",
    );
    fs::write(c.tasks().join("answer/mutation.patch"), mutation).unwrap();
    c.add_agent("oracle", "adapter = \"oracle\"\n", None);
    c.add_agent(
        "noop",
        "adapter = \"scripted\"\nscript = \"noop.sh\"\n",
        Some("exit 0\n"),
    );
    c
}
