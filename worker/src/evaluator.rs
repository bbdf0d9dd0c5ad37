//! The evaluator engine: runs a task's hidden tests against a workspace.
//!
//! `tests/` is copied from the task release (never from the workspace) into a folder outside
//! the worktree, checked against the digest taken when the task was loaded, and the verifier
//! command runs with its own timeout. The verdict comes from a reward file when one is
//! written, else from the exit code; per-test results come from a JUnit XML report. An
//! evaluator that crashes, cannot start or times out is an evaluation error, never an agent
//! failure. See docs/tasks.md, "Evaluation".

use crate::process::{base_env, spawn, CancelToken, ProcessSpec};
use crate::runtime::{Exposure, Limits, RuntimeKind};
use akbench_core::clock::Clock;
use akbench_core::record::{Grade, TestOutcome, TestResult};
use akbench_core::task::{dir_digest, Task};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bytes of the evaluator's output kept in the record.
pub const REPORT_CAP: usize = 64 * 1024;

/// What evaluation gave.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalResult {
    /// A verdict.
    Graded(Grade),
    /// The measurement broke: `evaluation_error`.
    Broken {
        /// Why.
        cause: String,
        /// What the evaluator printed, capped.
        report: String,
    },
    /// Cancelled while evaluating.
    Cancelled,
}

/// Where evaluation runs.
#[derive(Debug, Clone)]
pub struct EvalPlace<'a> {
    /// The worktree as the agent left it.
    pub workspace: &'a Path,
    /// A fresh folder for the tests copy, verifier output and the evaluator's HOME.
    pub eval_root: &'a Path,
    /// Where the evaluator's stdout/stderr files go.
    pub artifacts_dir: &'a Path,
    /// Prefix of those files' names, so a later grade never overwrites an earlier log
    /// (`""` for the first grade, `"grade-2."` for the second...).
    pub log_prefix: &'a str,
    /// The runtime the verifier runs in (`sandbox`: it sees the worktree, its copy of the
    /// tests read-only, its verifier folder and home, nothing else).
    pub runtime: RuntimeKind,
}

/// Runs the task's evaluation.
pub fn evaluate(
    task: &Task,
    place: &EvalPlace<'_>,
    clock: &dyn Clock,
    cancel: &CancelToken,
) -> EvalResult {
    let started = Instant::now();
    let graded_at = clock.now();
    let broken = |cause: String| EvalResult::Broken {
        cause,
        report: String::new(),
    };
    let tests = place.eval_root.join("tests");
    let verifier = place.eval_root.join("verifier");
    let home = place.eval_root.join("home");
    for d in [&verifier, &home.join("tmp")] {
        if let Err(e) = std::fs::create_dir_all(d) {
            return broken(format!("failed to create {}: {e}", d.display()));
        }
    }
    if let Err(e) = copy_tree(&task.tests_dir, &tests) {
        return broken(format!("failed to copy the task's tests: {e}"));
    }
    match dir_digest(&tests) {
        Ok(d) if d == task.tests_digest => {}
        Ok(d) => {
            return broken(format!(
                "the task's tests changed since the task was loaded (digest {d}, expected {}); refusing to grade with different tests",
                task.tests_digest
            ))
        }
        Err(e) => return broken(format!("failed to digest the tests copy: {e}")),
    }
    let subst = |s: &String| {
        s.replace("{tests_dir}", &tests.display().to_string())
            .replace("{workspace}", &place.workspace.display().to_string())
            .replace("{verifier_dir}", &verifier.display().to_string())
    };
    let argv: Vec<String> = task.verifier_command.iter().map(subst).collect();
    let mut env = base_env(&home);
    env.extend(task.file.verifier.env.clone());
    env.insert("AKBENCH_TESTS_DIR".into(), tests.display().to_string());
    env.insert(
        "AKBENCH_VERIFIER_DIR".into(),
        verifier.display().to_string(),
    );
    env.insert(
        "AKBENCH_WORKSPACE".into(),
        place.workspace.display().to_string(),
    );
    let stdout_path = place
        .artifacts_dir
        .join(format!("{}evaluator.stdout.log", place.log_prefix));
    let stderr_path = place
        .artifacts_dir
        .join(format!("{}evaluator.stderr.log", place.log_prefix));
    let spec = ProcessSpec {
        argv: argv.clone(),
        cwd: place.workspace.to_path_buf(),
        env,
        stdout_path: stdout_path.clone(),
        stderr_path: stderr_path.clone(),
        output_cap: 4 * 1024 * 1024,
        timeout: Duration::from_secs_f64(task.verifier_timeout_sec),
        grace: Duration::from_secs(5),
        tag: format!("eval-{}", uuid::Uuid::now_v7()),
        hooks: Default::default(),
    };
    let (git_rw, git_ro) = crate::runtime::linked_git_dirs(place.workspace);
    let exposure = Exposure {
        writable: [
            vec![
                place.workspace.to_path_buf(),
                verifier.clone(),
                home.clone(),
            ],
            git_rw,
        ]
        .concat(),
        readable: [vec![tests.clone()], git_ro].concat(),
        endpoints: Vec::new(),
        disk_roots: vec![verifier.clone(), home.clone()],
        scratch: place.eval_root.join("runtime"),
    };
    let limits = Limits {
        pids: 4096,
        ..Limits::default()
    };
    let prepared = match crate::runtime::prepare(place.runtime, spec, &exposure, limits) {
        Ok(p) => p,
        Err(e) => return broken(e.to_string()),
    };
    let guard = prepared.guard;
    let running = match spawn(prepared.spec) {
        Ok(r) => r,
        Err(e) => {
            guard.finish();
            return broken(e.to_string());
        }
    };
    let end = running.wait(cancel);
    guard.finish();
    let (report, report_truncated) = read_report(&stdout_path, &stderr_path);
    let broken_with = |cause: String| EvalResult::Broken {
        cause,
        report: report.clone(),
    };
    if end.cancelled {
        return EvalResult::Cancelled;
    }
    if end.timed_out {
        return broken_with(format!(
            "the evaluation timed out after {}s (verifier.timeout_sec)",
            task.verifier_timeout_sec
        ));
    }
    if let Some(sig) = end.signal {
        return broken_with(format!("the evaluation was killed by signal {sig}"));
    }
    let code = end.exit_code.unwrap_or(-1);
    if !(0..126).contains(&code) {
        return broken_with(format!(
            "the evaluation command `{}` exited {code} (could not execute, not found, or killed)",
            argv.join(" ")
        ));
    }
    let reward = match read_reward(&verifier) {
        Ok(r) => r,
        Err(e) => return broken_with(e),
    };
    let (ok, score, source) = match reward {
        Some((r, source)) => (r >= task.pass_threshold, r, source),
        None => (code == 0, if code == 0 { 1.0 } else { 0.0 }, "exit_code"),
    };
    let (tests_results, junit_note) = match std::fs::read_to_string(verifier.join("junit.xml")) {
        Ok(xml) => match parse_junit(&xml) {
            Ok(mut t) => {
                // Test runners report in completion order, which varies between runs.
                t.sort_by(|a, b| a.name.cmp(&b.name));
                (t, None)
            }
            Err(e) => (
                Vec::new(),
                Some(format!("\n[akbench: junit.xml ignored: {e}]")),
            ),
        },
        Err(_) => (Vec::new(), None),
    };
    let mut report = report.clone();
    if let Some(n) = junit_note {
        report.push_str(&n);
    }
    EvalResult::Graded(Grade {
        ok,
        score,
        source: source.to_string(),
        exit_code: Some(code),
        tests: tests_results,
        report,
        report_truncated,
        tests_digest: task.tests_digest.clone(),
        graded_at,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

fn read_report(stdout: &Path, stderr: &Path) -> (String, bool) {
    let read = |p: &Path| std::fs::read(p).unwrap_or_default();
    let mut out = read(stdout);
    let err = read(stderr);
    if !err.is_empty() {
        out.extend_from_slice(b"\n--- stderr ---\n");
        out.extend_from_slice(&err);
    }
    let truncated = out.len() > REPORT_CAP;
    out.truncate(REPORT_CAP);
    (String::from_utf8_lossy(&out).into_owned(), truncated)
}

/// Reads `reward.txt` or `reward.json` from the verifier folder.
pub fn read_reward(verifier: &Path) -> Result<Option<(f64, &'static str)>, String> {
    let txt = verifier.join("reward.txt");
    if let Ok(s) = std::fs::read_to_string(&txt) {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("reward.txt holds `{}`, not a number", s.trim()))?;
        if !v.is_finite() {
            return Err("reward.txt is not a finite number".into());
        }
        return Ok(Some((v, "reward_txt")));
    }
    let json = verifier.join("reward.json");
    if let Ok(s) = std::fs::read_to_string(&json) {
        let v: serde_json::Value =
            serde_json::from_str(&s).map_err(|e| format!("reward.json does not parse: {e}"))?;
        let r = v
            .get("reward")
            .or_else(|| v.get("score"))
            .and_then(serde_json::Value::as_f64)
            .or_else(|| v.as_f64())
            .ok_or("reward.json has no numeric `reward` or `score`")?;
        if !r.is_finite() {
            return Err("reward.json's reward is not a finite number".into());
        }
        return Ok(Some((r, "reward_json")));
    }
    Ok(None)
}

/// Parses a JUnit XML report into per-test results; a failure's message is picked by
/// `akbench_core::test_failure::failure_message` (the assertion, not a diff line).
pub fn parse_junit(xml: &str) -> Result<Vec<TestResult>, String> {
    use akbench_core::test_failure::failure_message;
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = Vec::new();
    let mut current: Option<TestResult> = None;
    let mut capture_message = false;
    // The body of a <failure> or <error>, read whole before its message is picked.
    let mut body: Option<String> = None;
    loop {
        let ev = reader.read_event().map_err(|e| e.to_string())?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(ev, Event::Empty(_));
                match e.name().as_ref() {
                    b"testcase" => {
                        let mut name = String::new();
                        let mut class = String::new();
                        for a in e.attributes().flatten() {
                            let v = a
                                .unescape_value()
                                .map(|c| c.into_owned())
                                .unwrap_or_default();
                            match a.key.as_ref() {
                                b"name" => name = v,
                                b"classname" => class = v,
                                _ => {}
                            }
                        }
                        let full = if class.is_empty() {
                            name
                        } else {
                            format!("{class}::{name}")
                        };
                        let t = TestResult {
                            name: full,
                            outcome: TestOutcome::Passed,
                            message: None,
                        };
                        if empty {
                            out.push(t);
                        } else {
                            current = Some(t);
                        }
                    }
                    tag @ (b"failure" | b"error" | b"skipped") => {
                        if let Some(t) = current.as_mut() {
                            t.outcome = match tag {
                                b"failure" => TestOutcome::Failed,
                                b"error" => TestOutcome::Error,
                                _ => TestOutcome::Skipped,
                            };
                            for a in e.attributes().flatten() {
                                if a.key.as_ref() == b"message" {
                                    t.message = a.unescape_value().ok().map(|c| cap(&c));
                                }
                            }
                            capture_message = !empty && t.message.is_none();
                            if tag != b"skipped" {
                                capture_message = !empty;
                                body = (!empty).then(String::new);
                                if empty {
                                    t.message = failure_message(t.message.as_deref(), None);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            Event::Text(t) if capture_message && body.is_some() => {
                if let (Some(b), Ok(s)) = (body.as_mut(), t.decode()) {
                    b.push_str(&s);
                }
            }
            Event::Text(t) if capture_message => {
                if let (Some(cur), Ok(s)) = (current.as_mut(), t.decode()) {
                    let s = s.trim();
                    if !s.is_empty() {
                        cur.message = Some(cap(s));
                    }
                }
            }
            Event::End(ref e) => match e.name().as_ref() {
                b"testcase" => {
                    if let Some(t) = current.take() {
                        out.push(t);
                    }
                    capture_message = false;
                }
                b"failure" | b"error" | b"skipped" => {
                    if let (Some(b), Some(cur)) = (body.take(), current.as_mut()) {
                        cur.message =
                            failure_message(cur.message.as_deref(), Some(&b)).map(|m| cap(&m));
                    }
                    capture_message = false
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

fn cap(s: &str) -> String {
    s.chars().take(2000).collect()
}

/// Copies a folder tree (files with their permissions, symlinks as symlinks).
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        let target: PathBuf = to.join(entry.file_name());
        if ft.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_reports_parse_into_per_test_results() {
        let xml = r#"<?xml version="1.0"?>
<testsuites><testsuite name="s">
  <testcase classname="m.T" name="a"/>
  <testcase classname="m.T" name="b"><failure message="boom">trace</failure></testcase>
  <testcase name="c"><error>kaput</error></testcase>
  <testcase name="d"><skipped/></testcase>
</testsuite></testsuites>"#;
        let t = parse_junit(xml).unwrap();
        let got: Vec<(&str, TestOutcome, Option<&str>)> = t
            .iter()
            .map(|r| (r.name.as_str(), r.outcome, r.message.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("m.T::a", TestOutcome::Passed, None),
                ("m.T::b", TestOutcome::Failed, Some("boom")),
                ("c", TestOutcome::Error, Some("kaput")),
                ("d", TestOutcome::Skipped, None),
            ]
        );
        assert!(parse_junit("<testsuite><testcase name='x'>").is_ok());
        assert!(parse_junit("<a></b>").is_err());
    }

    #[test]
    fn a_failed_unittest_shows_its_assertion_not_the_diffs_last_line() {
        // What the example tasks' runner writes: message = the traceback's last line.
        let xml = r#"<testsuites><testsuite name="s">
  <testcase classname="m.T" name="a"><failure message="?  -">Traceback (most recent call last):
  File "t.py", line 9, in test_a
    self.assertEqual(slugify("a  b"), "a-b")
AssertionError: 'a--b' != 'a-b'
- a--b
?  -
+ a-b
</failure></testcase>
  <testcase classname="m.T" name="b"><skipped message="not here">why</skipped></testcase>
</testsuite></testsuites>"#;
        let t = parse_junit(xml).unwrap();
        assert_eq!(
            t[0].message.as_deref(),
            Some("AssertionError: 'a--b' != 'a-b'")
        );
        assert_eq!(t[1].message.as_deref(), Some("not here"));
    }

    #[test]
    fn reward_files() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read_reward(tmp.path()).unwrap(), None);
        std::fs::write(tmp.path().join("reward.json"), r#"{"reward": 0.5}"#).unwrap();
        assert_eq!(read_reward(tmp.path()).unwrap(), Some((0.5, "reward_json")));
        std::fs::write(tmp.path().join("reward.txt"), "1\n").unwrap();
        assert_eq!(read_reward(tmp.path()).unwrap(), Some((1.0, "reward_txt")));
        std::fs::write(tmp.path().join("reward.txt"), "yes").unwrap();
        assert!(read_reward(tmp.path()).is_err());
    }
}
