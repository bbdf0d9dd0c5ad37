//! The evaluator engine: runs a task's hidden tests against a workspace, and keeps the grade
//! honest against the code under test (docs/tasks.md, "Grading the agent cannot forge").
//!
//! `tests/` is copied from the task release (never from the workspace) into a folder outside
//! the worktree, checked against the digest taken when the task was loaded, and the verifier
//! command runs with its own timeout. The verdict comes from a reward file the verifier
//! wrote, never from its exit code alone (a run without a reward gives no verdict:
//! [`akbench_core::grading::verdict`]); per-test results come from a JUnit XML report. Verifier
//! outputs are read without following links and size-capped ([`outputs`]); the reward is read
//! when the verifier's top process ended and again once every process of its tree is gone,
//! and must not have changed; a verifier folder made read-only while grading, or a solved
//! reward the test runner's own outcome disagrees with where the reference solution's does
//! not ([`reference`]), is tampering. A solved grade is checked by the tripwire twin
//! ([`tripwire`]): a second run, in a fresh copy of the agent's work at the same paths, of
//! the tests with one test's expected values changed, which any honest solution fails.
//! Anything of this that fails is tampering: graded not solved, flagged, never an
//! evaluation error.
//!
//! Whose failure: a grader that cannot start or set up (tests copy, digest, runtime) is an
//! evaluation error. Who ended the verifier is recorded first
//! ([`akbench_core::grading::blame::EndedBy`]) and core's rule applies
//! ([`akbench_core::grading::blame::judge`]): a verifier that ran the agent's code and then
//! died by a signal of its own, timed out, ran into a limit of the grading run, exited as
//! "could not execute" or left no usable reward is the agent's failure (graded not solved,
//! cause named) when the same grader solves the task's reference solution on this host
//! (checked once per task release and runtime); else an evaluation error naming the task
//! ([`akbench_core::grading::verdict::fault`]). What the harness
//! or the host did is never the agent's: the sandbox launcher failing before the verifier
//! started, or the host's out-of-memory killer, is an evaluation error; a cancel ends the
//! attempt cancelled, and the worker's shutdown (a signal to the worker while the verifier
//! died by a signal, or its drain) an infrastructure error.

mod fetches;
pub mod outputs;
mod reference;
mod tripwire;

use crate::process::{base_env, spawn, CancelToken, ProcessSpec};
use crate::runtime::{Exposure, Limits, RuntimeKind};
use akbench_core::clock::Clock;
use akbench_core::egress::vouch::GradingFetches;
use akbench_core::grading::blame::{judge, EndedBy, Judgement};
use akbench_core::grading::verdict::{
    fault, no_verdict, task_fault_cause, Fault, NoVerdict, RewardRead, RunEnd,
};
use akbench_core::record::{Grade, RuntimeFacts, TestOutcome, TestResult, TripwireFacts};
use akbench_core::task::{dir_digest, Task};
use outputs::{read_capped, read_reward, OutputError, JUNIT_CAP};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bytes of the evaluator's output kept in the record.
pub const REPORT_CAP: usize = 64 * 1024;

/// The prefix of every cause of a tampered grade.
pub const TAMPERED: &str = "grading tampered";

/// What evaluation gave.
#[derive(Debug, Clone, PartialEq)]
// One per grade, moved once: boxing the grade would buy nothing.
#[allow(clippy::large_enum_variant)]
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
    /// A fetch of the grading run failed and it wrote no passing reward
    /// ([`akbench_core::egress::grading_fetch_failure`]): `infrastructure_error`, retried,
    /// never a verdict.
    FetchFailed {
        /// Why, naming the fetch.
        cause: String,
        /// What the evaluator printed, capped.
        report: String,
    },
    /// Cancelled while evaluating.
    Cancelled,
}

/// A workspace made for one grading run; removed when dropped.
pub struct FreshWorkspace {
    /// The worktree.
    pub path: PathBuf,
    /// Paths of the agent's diff not taken into it.
    pub withheld: Vec<String>,
    cleanup: Option<Box<dyn FnOnce() + 'static>>,
}

impl FreshWorkspace {
    /// A workspace at `path`; `cleanup` removes it.
    pub fn new(path: PathBuf, withheld: Vec<String>, cleanup: Box<dyn FnOnce() + 'static>) -> Self {
        Self {
            path,
            withheld,
            cleanup: Some(cleanup),
        }
    }
}

impl Drop for FreshWorkspace {
    fn drop(&mut self) {
        if let Some(c) = self.cleanup.take() {
            c();
        }
    }
}

impl std::fmt::Debug for FreshWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshWorkspace")
            .field("path", &self.path)
            .field("withheld", &self.withheld)
            .finish()
    }
}

/// Makes the workspaces a grade needs besides the first one: a fresh copy of the agent's
/// work (the tripwire run) and the baseline with the reference solution applied (the check
/// that the grader works, when a run gave no verdict).
pub trait Workspaces {
    /// A fresh copy of the agent's work (baseline plus the recorded diff, grader-steering
    /// paths withheld) under `dir`.
    fn agent_copy(&self, dir: &Path) -> Result<FreshWorkspace, String>;
    /// The baseline with the task's reference solution applied, under `dir`.
    fn reference(&self, dir: &Path, cancel: &CancelToken) -> Result<FreshWorkspace, String>;
    /// A fresh environment of the task's image, its healthcheck polled, with the task's
    /// reference solution run in it as the agent, under `dir`: where a grade made in the
    /// agent's environment grades the reference (the tripwire twin's judge, the check that
    /// the grader works).
    fn reference_env(&self, dir: &Path, cancel: &CancelToken) -> Result<ReferenceEnv, String>;
}

/// A fresh environment of a task's image in which its reference solution ran as the agent,
/// and the workspace it ran in ([`Workspaces::reference_env`]). The environment ends before
/// the workspace is removed (field order).
#[derive(Debug)]
pub struct ReferenceEnv {
    /// The environment, with whatever the solution left running.
    pub env: crate::runtime::shared::Env,
    /// Its workspace.
    pub fresh: FreshWorkspace,
}

/// Where evaluation runs.
#[derive(Clone)]
pub struct EvalPlace<'a> {
    /// The workspace to grade: a fresh copy of the agent's work (never the agent's live
    /// worktree, except for `grade --in-place`).
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
    /// The other workspaces a grade needs; `None`: no tripwire run and no reference check
    /// (the record says so).
    pub workspaces: Option<&'a dyn Workspaces>,
    /// Paths withheld from `workspace` (recorded in the grade).
    pub withheld: &'a [String],
    /// The task's image, for the `container` runtime: every grading run is a fresh
    /// copy-on-write view of it, with the verifier folder at `/logs/verifier`.
    pub image: Option<&'a crate::runtime::container::Image>,
    /// The agent's environment, when the task grades in it (`environment_mode =
    /// "shared"`): the verifier runs inside it, its verifier folder, tests and home bound
    /// where only it sees them ([`crate::runtime::shared`]).
    pub shared: Option<&'a crate::runtime::shared::Env>,
}

impl std::fmt::Debug for EvalPlace<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalPlace")
            .field("workspace", &self.workspace)
            .field("eval_root", &self.eval_root)
            .field("runtime", &self.runtime)
            .field("withheld", &self.withheld)
            .finish()
    }
}

/// Memory of every grading run, MiB: a hidden test suite's build and run fit (the examples'
/// `cargo test` stays under 1 GiB); a tree that goes over it is killed by the kernel at the
/// run's own limit, which is the code under test's doing, instead of growing until the
/// host's out-of-memory killer picks a victim, which would be the host's.
pub const GRADING_MEMORY_MB: u64 = 8192;

/// The limits every grading run of `task` has: memory ([`GRADING_MEMORY_MB`], or the
/// task's `memory_mb` when higher), 4096 processes, and the task's disk limit
/// ([`akbench_core::task::requirements::grading_disk_mb`]), counted over every writable
/// place of the run, the grading workspace included.
pub fn grading_limits(task: &Task) -> Limits {
    use akbench_core::task::requirements::{grading_disk_mb, grading_memory_mb};
    Limits {
        pids: 4096,
        memory_mb: Some(grading_memory_mb(&task.requirements, GRADING_MEMORY_MB)),
        disk_mb: grading_disk_mb(&task.requirements),
        ..Limits::default()
    }
}

/// One verdict of one run.
#[derive(Debug, Clone)]
struct Verdict {
    ok: bool,
    score: f64,
    source: &'static str,
    exit_code: Option<i32>,
    tests: Vec<TestResult>,
    report: String,
    report_truncated: bool,
    runtime: RuntimeFacts,
    tampered: Option<String>,
    cause: Option<String>,
    ended_by: Option<EndedBy>,
}

/// How one run of the verifier ended.
#[derive(Debug)]
enum Run {
    Verdict(Verdict),
    /// The verifier ran (the agent's code with it) but gave no usable verdict.
    NoVerdict {
        why: NoVerdict,
        cause: String,
        report: String,
        report_truncated: bool,
        exit_code: Option<i32>,
        runtime: RuntimeFacts,
        ended_by: EndedBy,
    },
    /// The grader's own machinery failed; `fetch_failed`: an outbound fetch of the run
    /// failed and it wrote no passing reward (the network's fault, not the grader's).
    Machinery {
        cause: String,
        report: String,
        fetch_failed: bool,
    },
    Cancelled,
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
    let main = run_once(
        task,
        place,
        place.workspace,
        &place.eval_root.join(SLOT),
        place.log_prefix,
        None,
        cancel,
    );
    let mut v = match main {
        Run::Cancelled => return EvalResult::Cancelled,
        Run::Machinery {
            cause,
            report,
            fetch_failed: true,
        } => return EvalResult::FetchFailed { cause, report },
        Run::Machinery { cause, report, .. } => return EvalResult::Broken { cause, report },
        Run::NoVerdict {
            why: _,
            cause,
            report,
            report_truncated,
            exit_code,
            runtime,
            ended_by,
        } => match reference::reference_check(task, place, cancel).map(|r| fault(&r)) {
            None => return EvalResult::Cancelled,
            Some(Fault::Task(why)) => {
                let r = &task.release;
                return EvalResult::Broken {
                    cause: task_fault_cause(&r.id, &r.version, &cause, &why),
                    report,
                };
            }
            Some(Fault::Agent) => Verdict {
                ok: false,
                score: 0.0,
                source: "no_verdict",
                exit_code,
                tests: Vec::new(),
                report,
                report_truncated,
                runtime,
                tampered: None,
                cause: Some(format!(
                    "{cause} while the agent's code ran; the same grader solves the task's reference solution, so this is the agent's failure"
                )),
                ended_by: (ended_by != EndedBy::Itself).then_some(ended_by),
            },
        },
        Run::Verdict(v) => v,
    };
    if v.tampered.is_none() {
        match reference::reward_disagreement(task, place, &v, cancel) {
            Err(()) => return EvalResult::Cancelled,
            Ok(t) => v.tampered = t,
        }
    }
    let tripwire = if v.tampered.is_some() {
        not_run("tampering was seen in the first run")
    } else if !v.ok {
        not_run("the grade is not solved")
    } else {
        match tripwire::run(task, place, cancel) {
            tripwire::Tripwire::Cancelled => return EvalResult::Cancelled,
            tripwire::Tripwire::Broken(cause) => {
                return EvalResult::Broken {
                    cause,
                    report: v.report,
                }
            }
            tripwire::Tripwire::Done(facts, tamper) => {
                if let Some(t) = tamper {
                    v.tampered = Some(t);
                }
                facts
            }
        }
    };
    let (cause, tampered) = match &v.tampered {
        Some(t) => (Some(format!("{TAMPERED}: {t}")), true),
        None => (v.cause.clone(), false),
    };
    EvalResult::Graded(Grade {
        ok: v.ok && !tampered,
        score: if tampered { 0.0 } else { v.score },
        source: v.source.to_string(),
        exit_code: v.exit_code,
        tests: v.tests,
        report: v.report,
        report_truncated: v.report_truncated,
        tests_digest: task.tests_digest.clone(),
        graded_at,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        runtime: Some(v.runtime),
        cause,
        tampered,
        tripwire: Some(tripwire),
        withheld: place.withheld.to_vec(),
        ended_by: v.ended_by,
        environment: None,
    })
}

fn not_run(why: &str) -> TripwireFacts {
    TripwireFacts {
        name: String::new(),
        file: String::new(),
        result: format!("not run: {why}"),
        duration_ms: None,
    }
}
/// The folder of `eval_root` the graded run's tests copy, verifier folder, home and logs are
/// made in; the tripwire twin runs in the same one (evaluator::tripwire).
pub(crate) const SLOT: &str = "run";

/// Runs the verifier once over `workspace`, with a fresh tests copy, verifier folder and home
/// under `eval_root`, its output written under `eval_root/out` (the same paths for every run
/// made in the same `eval_root`) and then moved to the artifacts as
/// `{log_prefix}evaluator.{stdout,stderr}.log`; `twin` is (file under tests/, text) written
/// over the tests copy.
fn run_once(
    task: &Task,
    place: &EvalPlace<'_>,
    workspace: &Path,
    eval_root: &Path,
    log_prefix: &str,
    twin: Option<&[(String, String)]>,
    cancel: &CancelToken,
) -> Run {
    let machinery = |cause: String| Run::Machinery {
        fetch_failed: false,
        cause,
        report: String::new(),
    };
    let tests = eval_root.join("tests");
    let verifier = eval_root.join("verifier");
    let home = eval_root.join("home");
    for d in [&verifier, &home.join("tmp")] {
        if let Err(e) = std::fs::create_dir_all(d) {
            return machinery(format!("failed to create {}: {e}", d.display()));
        }
    }
    if let Err(e) = copy_tree(&task.tests_dir, &tests) {
        return machinery(format!("failed to copy the task's tests: {e}"));
    }
    match dir_digest(&tests) {
        Ok(d) if d == task.tests_digest => {}
        Ok(d) => {
            return machinery(format!(
                "the task's tests changed since the task was loaded (digest {d}, expected {}); refusing to grade with different tests",
                task.tests_digest
            ))
        }
        Err(e) => return machinery(format!("failed to digest the tests copy: {e}")),
    }
    for (file, text) in twin.unwrap_or_default() {
        if let Err(e) = write_over(&tests.join(file), text) {
            return machinery(format!(
                "failed to make the tripwire twin of {}: {e}",
                tests.join(file).display()
            ));
        }
    }
    let verifier_mode = std::fs::symlink_metadata(&verifier)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
        .unwrap_or(0);
    let subst = |s: &String| {
        s.replace("{tests_dir}", &tests.display().to_string())
            .replace("{workspace}", &workspace.display().to_string())
            .replace("{verifier_dir}", &verifier.display().to_string())
    };
    let argv: Vec<String> = task.verifier_command.iter().map(subst).collect();
    let mut env = base_env(&home);
    // The task's `[environment] env` (every process of the task gets it), then `[verifier] env`.
    match crate::adapters::task_env(task) {
        Ok(e) => env.extend(e),
        Err(e) => return machinery(e),
    }
    env.extend(task.file.verifier.env.clone());
    env.insert("AKBENCH_TESTS_DIR".into(), tests.display().to_string());
    env.insert(
        "AKBENCH_VERIFIER_DIR".into(),
        verifier.display().to_string(),
    );
    env.insert("AKBENCH_WORKSPACE".into(), workspace.display().to_string());
    // Written where every run of this `eval_root` writes (a process can read its output's
    // path), moved to the artifacts under this run's own names once it is over.
    let out = eval_root.join("out");
    if let Err(e) = std::fs::create_dir_all(&out) {
        return machinery(format!("failed to create {}: {e}", out.display()));
    }
    let run_stdout = out.join("evaluator.stdout.log");
    let run_stderr = out.join("evaluator.stderr.log");
    let stdout_path = place
        .artifacts_dir
        .join(format!("{log_prefix}evaluator.stdout.log"));
    let stderr_path = place
        .artifacts_dir
        .join(format!("{log_prefix}evaluator.stderr.log"));
    let spec = ProcessSpec {
        argv: argv.clone(),
        cwd: workspace.to_path_buf(),
        env,
        stdout_path: run_stdout.clone(),
        stderr_path: run_stderr.clone(),
        output_cap: 4 * 1024 * 1024,
        timeout: Duration::from_secs_f64(task.verifier_timeout_sec),
        grace: Duration::from_secs(5),
        tag: format!("eval-{}", uuid::Uuid::now_v7()),
        hooks: Default::default(),
    };
    let (git_rw, git_ro) = crate::runtime::linked_git_dirs(workspace);
    let writable = [
        vec![workspace.to_path_buf(), verifier.clone(), home.clone()],
        git_rw,
    ]
    .concat();
    let exposure = Exposure {
        hosts: Vec::new(),
        budget: None,
        // The task's network for grading (docs/network.md).
        egress: match crate::runtime::egress::Policy::for_phase(task.network.verifier.clone()) {
            Ok(p) => Some(p),
            Err(e) => return machinery(e),
        },
        // Every writable place counts in the disk limit, the grading workspace included.
        disk_roots: writable.clone(),
        writable,
        readable: [vec![tests.clone()], git_ro].concat(),
        endpoints: Vec::new(),
        scratch: eval_root.join("runtime"),
        container: place.image.map(|i| crate::runtime::container::View {
            workspace: true,
            image: i.clone(),
            mounts: vec![(verifier.clone(), "/logs/verifier".into())],
            // Harbor's place of the tests, as its test.sh files name it.
            ro_mounts: vec![(tests.clone(), "/tests".into())],
            tools: Vec::new(),
        }),
    };
    let limits = grading_limits(task);
    // Who grades (refused in a fresh container before the agent started, by
    // orchestrator::attempt::phases; a regrade or a check meets the refusal here).
    let ids = match place
        .image
        .map(|i| crate::runtime::container::phase_users(i, task, place.shared.is_some()))
    {
        Some(Err(e)) => return machinery(e),
        Some(Ok(u)) => Some(u.verifier),
        None => None,
    };
    let prepared = match place.shared {
        None => crate::runtime::prepare(place.runtime, spec, &exposure, limits),
        Some(env) => {
            // Harbor's places and the host paths the variables name, in the grader's own
            // mount namespace only.
            let at = |p: &Path| p.display().to_string();
            env.exec_as(
                spec,
                crate::runtime::shared::ExecAs::Grader {
                    mounts: vec![
                        (verifier.clone(), "/logs/verifier".into(), false),
                        (verifier.clone(), at(&verifier), false),
                        (tests.clone(), "/tests".into(), true),
                        (tests.clone(), at(&tests), true),
                        (home.clone(), at(&home), false),
                    ],
                    writable: vec![verifier.clone(), home.clone()],
                    limits,
                },
                // Grading's network, in the environment the agent left.
                exposure.egress.clone(),
                ids,
                &[],
            )
        }
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => return machinery(e.to_string()),
    };
    let guard = prepared.guard;
    let running = match spawn(prepared.spec) {
        Ok(r) => r,
        Err(e) => {
            guard.finish();
            return machinery(e.to_string());
        }
    };
    let end = running.wait(cancel);
    // The reward as the verifier's top process left it, and again once every process of
    // its tree is gone: a change in between is a late write by the code under test.
    let at_exit = read_reward(&verifier);
    let finished = guard.finish();
    let runtime = finished.facts;
    for (from, to) in [(&run_stdout, &stdout_path), (&run_stderr, &stderr_path)] {
        if std::fs::rename(from, to).is_err() {
            let _ = std::fs::copy(from, to);
        }
    }
    let (report, report_truncated) = read_report(&stdout_path, &stderr_path);
    let code = end.exit_code;
    let by = ended_by(&end, finished.ended_by, cancel);
    if matches!(by, EndedBy::Shutdown | EndedBy::Cancel) {
        if let (EndedBy::Shutdown, false, Some(why)) =
            (by, cancel.is_cancelled(), crate::process::shutting_down())
        {
            // The worker's doing, not a cancel: the attempt ends as the host's
            // (core::dispatch::Stop), not as the agent's failure.
            cancel.interrupt(&format!(
                "the worker was shutting down ({why}) when the graded process died by a signal"
            ));
        }
        return Run::Cancelled;
    }
    let reward = read_reward(&verifier);
    let junit = read_capped(&verifier, "junit.xml", JUNIT_CAP);
    let made_read_only = std::fs::symlink_metadata(&verifier)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
        .is_ok_and(|m| m & 0o200 == 0 && verifier_mode & 0o200 != 0);
    let tamper = match (&at_exit, &reward, &junit) {
        (Err(OutputError::Tampered(t)), _, _)
        | (_, Err(OutputError::Tampered(t)), _)
        | (_, _, Err(OutputError::Tampered(t))) => Some(t.clone()),
        (a, b, _) if a != b => {
            Some("the reward changed after the verifier's top process ended".to_string())
        }
        _ if made_read_only => Some(
            "the verifier folder was made read-only while grading (a reward planted where the test runner could not write its own)"
                .to_string(),
        ),
        _ => None,
    };
    if let Some(t) = tamper {
        return Run::Verdict(Verdict {
            ok: false,
            score: 0.0,
            source: "tampered",
            exit_code: code,
            tests: Vec::new(),
            report,
            report_truncated,
            runtime,
            tampered: Some(t),
            cause: None,
            ended_by: (by != EndedBy::Itself).then_some(by),
        });
    }
    // Fails closed: a vouched fetch that failed, and no passing reward, is the network's
    // doing, never a verdict on the agent; an unvouched one (the agent's code may fetch an
    // unreachable host on purpose) leaves the verdict standing, with a note
    // (core::egress::vouch).
    let passing = matches!(&reward, Ok(Some((s, _))) if *s >= task.pass_threshold);
    let fetch_note = match fetches::judge(task, &runtime.egress, passing) {
        Err(e) => return machinery(e),
        Ok(GradingFetches::Infrastructure(cause)) => {
            return Run::Machinery {
                cause,
                report,
                fetch_failed: true,
            }
        }
        Ok(GradingFetches::Stands(note)) => Some(note),
        Ok(GradingFetches::Clean) => None,
    };
    // Why the run gave no usable verdict, when it did not (whoever ended it): core's rule,
    // a reward written by a run that ended itself is the only verdict.
    let read = match &reward {
        Ok(Some((r, _))) => RewardRead::Written(*r),
        Ok(None) => RewardRead::Missing,
        Err(OutputError::Invalid(e) | OutputError::Tampered(e)) => RewardRead::Unusable(e.clone()),
    };
    let run_end = RunEnd {
        by,
        exit_code: code,
        signal: end.signal,
    };
    let why = no_verdict(run_end, &read);
    let missing = why
        .as_ref()
        .map(|w| missing_cause(w, task, &argv, finished.limit_cause.as_deref()));
    match judge(by, missing.is_none()) {
        Judgement::Stopped => return Run::Cancelled,
        Judgement::Grader => {
            return Run::Machinery {
                cause: format!(
                    "the grader could not judge the agent's work: {}{}",
                    by.describe(),
                    finished
                        .limit_cause
                        .as_deref()
                        .map(|c| format!(" ({c})"))
                        .unwrap_or_default()
                ),
                report,
                fetch_failed: false,
            }
        }
        Judgement::AgentIfValidated => {
            return Run::NoVerdict {
                why: why.unwrap_or(NoVerdict::Limit),
                cause: noted(
                    missing.unwrap_or_else(|| by.describe().to_string()),
                    fetch_note,
                ),
                report,
                report_truncated,
                exit_code: code,
                runtime,
                ended_by: by,
            }
        }
        Judgement::Verdict => {}
    }
    let code = code.unwrap_or(-1);
    let Ok(Some((score, source))) = reward else {
        // no_verdict() and judge() give a verdict only when a reward was written.
        return Run::Machinery {
            cause: "the grader read a missing or unusable reward as a verdict".into(),
            report,
            fetch_failed: false,
        };
    };
    let ok = score >= task.pass_threshold;
    let (tests_results, junit_note) = match junit {
        Ok(Some(bytes)) => match parse_junit(&String::from_utf8_lossy(&bytes)) {
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
        _ => (Vec::new(), None),
    };
    let mut report = report;
    if let Some(n) = junit_note {
        report.push_str(&n);
    }
    Run::Verdict(Verdict {
        ok,
        score,
        source,
        exit_code: Some(code),
        tests: tests_results,
        report,
        report_truncated,
        runtime,
        tampered: None,
        cause: fetch_note,
        ended_by: None,
    })
}

/// `cause`, then the note on fetches not counted as infrastructure, when there is one.
fn noted(cause: String, note: Option<String>) -> String {
    match note {
        Some(n) => format!("{cause}; {n}"),
        None => cause,
    }
}

/// The cause naming why a run gave no verdict (`why`, core's), with its particulars: the
/// verifier's timeout, the limit it ran into, the command.
fn missing_cause(why: &NoVerdict, task: &Task, argv: &[String], limit: Option<&str>) -> String {
    let command = argv.join(" ");
    match why {
        NoVerdict::TimedOut => format!(
            "the evaluation timed out after {}s (verifier.timeout_sec)",
            task.verifier_timeout_sec
        ),
        NoVerdict::Limit => match limit {
            Some(c) => format!("the evaluation was stopped: {c}"),
            None => EndedBy::Limit.describe().to_string(),
        },
        NoVerdict::Signal(sig) => format!("the evaluation was killed by signal {sig}"),
        NoVerdict::CouldNotExecute(c) => {
            let killed = if *c > 128 && *c < 160 {
                format!(" (killed by signal {})", c - 128)
            } else {
                String::new()
            };
            format!(
                "the evaluation command `{command}` exited {c}{killed} (could not execute, not found, or killed)"
            )
        }
        NoVerdict::NoReward { exit_code } => format!(
            "the evaluation command `{command}` {} without writing a reward (no reward.txt or reward.json in the verifier folder)",
            exit_code.map_or_else(|| "ended".to_string(), |c| format!("exited {c}"))
        ),
        NoVerdict::Unusable(e) => e.clone(),
    }
}

/// Who ended the verifier: a cancel or the worker's own stop (the process layer saw the
/// token), the verifier's timeout, one of the runtime's watchers (a limit, the host's OOM
/// killer, a launcher that failed), the worker's shutdown when the process died by a signal
/// after the worker was told to stop, else the tree itself.
fn ended_by(
    end: &crate::process::ProcessEnd,
    runtime: Option<EndedBy>,
    cancel: &CancelToken,
) -> EndedBy {
    use akbench_core::dispatch::Stop;
    if end.cancelled {
        return match cancel.stop() {
            Some(Stop::Interrupted(_)) => EndedBy::Shutdown,
            _ => EndedBy::Cancel,
        };
    }
    if end.timed_out {
        return EndedBy::Timeout;
    }
    if let Some(by) = runtime {
        return by;
    }
    let by_signal = end.signal.is_some() || end.exit_code.is_some_and(|c| c > 128 && c < 160);
    if by_signal && crate::process::shutting_down().is_some() {
        return EndedBy::Shutdown;
    }
    EndedBy::Itself
}

/// Writes `text` over the regular file at `path` of a tests copy (never through a link: one
/// could lead back into the task release), made writable first (the release's file may be
/// read-only).
fn write_over(path: &Path, text: &str) -> std::io::Result<()> {
    let m = std::fs::symlink_metadata(path)?;
    if !m.file_type().is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    let mut perms = m.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut perms,
        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) | 0o200,
    );
    std::fs::set_permissions(path, perms)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    std::io::Write::write_all(&mut f, text.as_bytes())
}

fn read_report(stdout: &Path, stderr: &Path) -> (String, bool) {
    // Only what the report can hold is read (a FIFO or a link there is not read at all).
    let read = |p: &Path| {
        akbench_core::bounded_read::read_prefix(
            p,
            REPORT_CAP as u64 + 1,
            akbench_core::bounded_read::Links::Refuse,
        )
        .unwrap_or_default()
    };
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
}
