//! The tripwire twin of a solved grade: the task's hidden tests with the expected values of
//! one test, chosen at random per grade, changed ([`akbench_core::grading::twin`]), or the
//! task's declared tripwire test
//! (`[verifier.tripwire]`), run over a fresh copy of the agent's work in a grading run that
//! the code under test cannot tell from the graded one: the same workspace path, the same
//! tests, verifier and home paths, the same log files, the same environment (the graded
//! run's workspace and folders are moved aside while the twin runs, then put back). Any
//! honest solution fails the twin. When it is solved, the task's reference solution is
//! graded on the same twin: only a twin the reference fails flags the grade
//! ([`akbench_core::grading::judge_twin`]). The evidence is each run's own reward, never what
//! the test script prints.
//!
//! A grade made in the agent's environment (`shared`) has no fresh copy of the agent's work
//! (its files outside the workspace and its processes are part of it): the twin runs there,
//! after the graded run, over the live workspace at the graded run's own paths, and the
//! reference solution is graded on the twin in a fresh environment of its own. So a planted
//! interpreter hook, a patched test runner or a reward writer left in the environment meets
//! the twin as it met the graded run. What it cannot catch: code that tells the second
//! grading run of an environment from the first (by state it keeps between them) and passes
//! only the first (docs/tasks.md, "Grading the agent cannot forge").

mod twins;

use super::{run_once, EvalPlace, Run};
use crate::process::CancelToken;
use akbench_core::grading::{judge_twin, ReferenceOnTwin, TwinRun, TWIN_INEFFECTIVE};
use akbench_core::record::TripwireFacts;
use akbench_core::task::Task;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use twins::{random_word, Twin, Twins};

pub(super) enum Tripwire {
    Done(TripwireFacts, Option<String>),
    Broken(String),
    Cancelled,
}

/// Paths moved aside for the twin run and put back when dropped: `(where it was, where it
/// waits)`, put back in reverse order.
struct Aside(Vec<(PathBuf, PathBuf)>);

impl Aside {
    fn take(&mut self, path: &Path, hold: &Path) -> std::io::Result<()> {
        std::fs::rename(path, hold)?;
        self.0.push((path.to_path_buf(), hold.to_path_buf()));
        Ok(())
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        while let Some((path, hold)) = self.0.pop() {
            let _ = std::fs::remove_dir_all(&path);
            let _ = std::fs::rename(&hold, &path);
        }
    }
}

/// Twins tried at most per grade: one whose changes the reference solution survives too
/// (`ineffective`) is followed by the next test, so a grade whose first pick cannot tell is
/// still checked.
const MAX_TWINS: usize = 8;

/// A test of a task release (of one step of it) graded under a runtime: (its
/// `Task::grading_key`, runtime, file, test).
type TestKey = (String, &'static str, String, String);

/// Tests whose twin the reference solution passed in this process: tried last.
static INEFFECTIVE: Mutex<Option<HashSet<TestKey>>> = Mutex::new(None);

/// The tripwire of a solved grade: twins of the hidden tests (one test's expected values
/// changed, the next test when the reference solution passes a twin too), or the task's
/// declared one, each run at the graded run's own paths.
pub(super) fn run(task: &Task, place: &EvalPlace<'_>, cancel: &CancelToken) -> Tripwire {
    let twins = match twins::twins_of(task) {
        Err(cause) => return Tripwire::Broken(cause),
        Ok(Err(none)) => return Tripwire::Done(facts("", "", none), None),
        Ok(Ok(t)) => t,
    };
    let started = std::time::Instant::now();
    let mut outcome = None;
    let key = |c: &twins::Candidate| {
        (
            task.grading_key(),
            place.runtime.as_str(),
            c.file.clone(),
            c.test.clone(),
        )
    };
    let known_ineffective = |c: &twins::Candidate| {
        INEFFECTIVE
            .lock()
            .map(|s| s.as_ref().is_some_and(|s| s.contains(&key(c))))
            .unwrap_or(false)
    };
    let ordered: Vec<(Twin, Option<&twins::Candidate>)> = match &twins {
        Twins::Declared(t) => vec![(t.clone(), None)],
        Twins::Tests(cands) => {
            let mut v: Vec<&twins::Candidate> = cands.iter().collect();
            // Stable: the random order kept, the tests known to be ineffective last.
            v.sort_by_key(|c| known_ineffective(c));
            v.into_iter()
                .take(MAX_TWINS)
                .map(|c| (c.twin(), Some(c)))
                .collect()
        }
    };
    for (twin, candidate) in &ordered {
        let (result, tamper) = match run_twin(task, place, twin, cancel) {
            Ok(r) => r,
            Err(stop) => return stop,
        };
        let ineffective = result.starts_with(TWIN_INEFFECTIVE);
        outcome = Some((twin, result, tamper));
        if !ineffective {
            break;
        }
        if let (Some(c), Ok(mut s)) = (candidate, INEFFECTIVE.lock()) {
            s.get_or_insert_with(HashSet::new).insert(key(c));
        }
    }
    let Some((twin, result, tamper)) = outcome else {
        return Tripwire::Done(facts("", "", "none: no twin to run".into()), None);
    };
    let files = twin
        .files
        .iter()
        .map(|(f, _)| f.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let mut f = facts(&twin.name, &files, result);
    f.duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    Tripwire::Done(f, tamper)
}

/// One twin run: a fresh copy of the agent's work at the graded run's own paths, the tests
/// copy made into the twin; the reference solution graded on the same twin when it is
/// solved. `Ok((result, tampering))`, or `Err` with how the tripwire ends (broken,
/// cancelled, not run).
fn run_twin(
    task: &Task,
    place: &EvalPlace<'_>,
    twin: &Twin,
    cancel: &CancelToken,
) -> Result<(String, Option<String>), Tripwire> {
    let Some(ws) = place.workspaces else {
        return Ok(("not run: no fresh workspace to run it in".into(), None));
    };
    let hold = place.eval_root.join(format!("held-{}", random_word(10)));
    let run = match place.shared {
        Some(_) => in_the_agents_environment(task, place, twin, &hold, cancel),
        None => in_a_fresh_copy(task, place, ws, twin, &hold, cancel)?,
    };
    judge(task, place, twin, &hold, run, cancel)
}

/// The twin run in the agent's environment, after the graded run: over the live workspace
/// (there is no other copy of what the agent left: its files outside the workspace, its
/// processes), with the tests copy, verifier folder and home at the graded run's own
/// paths (the graded run's wait under `hold`).
fn in_the_agents_environment(
    task: &Task,
    place: &EvalPlace<'_>,
    twin: &Twin,
    hold: &Path,
    cancel: &CancelToken,
) -> Run {
    let slot = place.eval_root.join(super::SLOT);
    let mut aside = Aside(Vec::new());
    if std::fs::create_dir_all(hold).is_ok() {
        let _ = aside.take(&slot, &hold.join("graded-slot"));
    }
    let run = run_once(
        task,
        place,
        place.workspace,
        &slot,
        &format!("{}tripwire.", place.log_prefix),
        Some(&twin.files),
        cancel,
    );
    let _ = std::fs::remove_dir_all(&slot);
    drop(aside);
    run
}

/// The twin run over a fresh copy of the agent's work, moved to the graded run's workspace
/// path when it can be.
fn in_a_fresh_copy(
    task: &Task,
    place: &EvalPlace<'_>,
    ws: &dyn super::Workspaces,
    twin: &Twin,
    hold: &Path,
    cancel: &CancelToken,
) -> Result<Run, Tripwire> {
    let fresh = ws.agent_copy(&hold.join("twin")).map_err(|e| {
        Tripwire::Broken(format!("failed to make the tripwire run's workspace: {e}"))
    })?;
    // The graded run's workspace and folders wait under `hold` while the twin runs in their
    // places. A workspace that is not a grading copy of this evaluation (the preserved one
    // of `run evaluate --in-place`) is never moved, nor one that cannot be (another file
    // system): the twin then runs where its copy was made.
    let slot = place.eval_root.join(super::SLOT);
    let ours = place
        .eval_root
        .parent()
        .is_some_and(|scratch| place.workspace.starts_with(scratch));
    let mut aside = Aside(Vec::new());
    let at_same_path = ours
        && aside.take(place.workspace, &hold.join("graded-ws")).is_ok()
        && std::fs::rename(&fresh.path, place.workspace).is_ok();
    let workspace = if at_same_path {
        // Given back to its own place before `fresh` removes it.
        aside
            .0
            .push((fresh.path.clone(), place.workspace.to_path_buf()));
        place.workspace.to_path_buf()
    } else {
        fresh.path.clone()
    };
    let _ = aside.take(&slot, &hold.join("graded-slot"));
    let run = run_once(
        task,
        place,
        &workspace,
        &slot,
        &format!("{}tripwire.", place.log_prefix),
        Some(&twin.files),
        cancel,
    );
    // The twin's folders go, its workspace back to where `fresh` removes it, and the
    // graded run's come back (Aside, in reverse order).
    let _ = std::fs::remove_dir_all(&slot);
    drop(aside);
    drop(fresh);
    Ok(run)
}

/// What the twin's run shows, the reference solution graded on the same twin when it is
/// solved; `hold` removed.
fn judge(
    task: &Task,
    place: &EvalPlace<'_>,
    twin: &Twin,
    hold: &Path,
    run: Run,
    cancel: &CancelToken,
) -> Result<(String, Option<String>), Tripwire> {
    let seen = match run {
        Run::Cancelled => return Err(Tripwire::Cancelled),
        // A vouched fetch of the twin's run failed and it wrote no passing reward: what an
        // honest solution's twin shows too, so not evidence either way; the graded verdict
        // stands (a second, network-bound run must not turn a solved grade into an
        // evaluation error).
        Run::Machinery {
            cause,
            fetch_failed: true,
            ..
        } => TwinRun::NoVerdict(cause),
        Run::Machinery { cause, .. } => {
            let _ = std::fs::remove_dir_all(hold);
            return Err(Tripwire::Broken(format!("the tripwire run: {cause}")));
        }
        Run::NoVerdict { cause, .. } => TwinRun::NoVerdict(cause),
        Run::Verdict(v) => match v.tampered {
            Some(t) => TwinRun::Tampered(t),
            None if v.ok => TwinRun::Solved,
            None => TwinRun::NotSolved,
        },
    };
    let mut cancelled = false;
    let judged = judge_twin(seen, &twin.what, || {
        reference_on_twin(task, place, twin, hold, cancel).unwrap_or_else(|| {
            cancelled = true;
            ReferenceOnTwin::Unknown("cancelled".into())
        })
    });
    let _ = std::fs::remove_dir_all(hold);
    if cancelled {
        return Err(Tripwire::Cancelled);
    }
    Ok(judged)
}

fn facts(name: &str, file: &str, result: String) -> TripwireFacts {
    TripwireFacts {
        name: name.to_string(),
        file: file.to_string(),
        result,
        duration_ms: None,
    }
}

/// The task's reference solution graded on the same twin. `None`: cancelled.
fn reference_on_twin(
    task: &Task,
    place: &EvalPlace<'_>,
    twin: &Twin,
    hold: &Path,
    cancel: &CancelToken,
) -> Option<ReferenceOnTwin> {
    let graded = super::reference::grade_reference(
        task,
        place,
        &hold.join("reference"),
        "tripwire.reference.",
        Some(&twin.files),
        cancel,
    );
    use super::reference::Graded;
    Some(match graded {
        Graded::Cancelled | Graded::Ran(Run::Cancelled) => return None,
        Graded::Unavailable(why) => ReferenceOnTwin::Unknown(why),
        Graded::Ran(Run::Verdict(v)) if v.tampered.is_none() && v.ok => ReferenceOnTwin::Passes,
        Graded::Ran(Run::Verdict(v)) if v.tampered.is_none() => ReferenceOnTwin::Fails,
        Graded::Ran(Run::Verdict(v)) => ReferenceOnTwin::Unknown(format!(
            "grading the reference on it saw tampering: {}",
            v.tampered.unwrap_or_default()
        )),
        Graded::Ran(Run::NoVerdict { cause, .. }) => {
            ReferenceOnTwin::Unknown(format!("the reference's run gave no verdict: {cause}"))
        }
        Graded::Ran(Run::Machinery { cause, .. }) => {
            ReferenceOnTwin::Unknown(format!("the reference's run broke: {cause}"))
        }
    })
}
