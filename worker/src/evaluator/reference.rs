//! The task's reference solution graded by the same grader, for what a grade of the agent's
//! work needs to know of it: whether the grader works on this host (a run without a verdict
//! is the agent's failure only then: [`reference_check`]), whether the reference's own
//! reward disagrees with its runner as the agent's did ([`reward_disagreement`]), and how
//! it fares on a tripwire twin (evaluator::tripwire). One way to make and grade it:
//! [`grade_reference`] (for a grade made in the agent's environment, in a fresh environment
//! of the task's image where the solution ran as the agent).

use super::{run_once, EvalPlace, Run, Verdict};
use crate::process::CancelToken;
use akbench_core::grading::verdict::{disagreement, Reference};
use akbench_core::task::Task;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;

/// How grading the reference solution went.
// One per reference run, moved once: boxing the run would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Graded {
    /// The grading run ended so.
    Ran(Run),
    /// No reference run could be made: why.
    Unavailable(String),
    /// Cancelled while its workspace was made.
    Cancelled,
}

/// Grades the task's reference solution once: a fresh starting point with the solution
/// applied under `dir`, graded there with the tests copy (made into `twin` when given),
/// the logs as `{place.log_prefix}{log_name}evaluator.*.log`; `dir` is removed afterwards.
pub(super) fn grade_reference(
    task: &Task,
    place: &EvalPlace<'_>,
    dir: &Path,
    log_name: &str,
    twin: Option<&[(String, String)]>,
    cancel: &CancelToken,
) -> Graded {
    let Some(ws) = place.workspaces else {
        return Graded::Unavailable("no reference run".into());
    };
    if task.reference.is_none() {
        return Graded::Unavailable(
            "the task has no reference solution to show that the grader works".into(),
        );
    }
    if place.shared.is_some() {
        // Graded in the agent's environment: the reference in a fresh one of its own, as
        // an agent's attempt is (its ENTRYPOINT, its healthcheck, the solution run as the
        // agent), graded inside it.
        let r = match ws.reference_env(dir, cancel) {
            Ok(r) => r,
            Err(_) if cancel.is_cancelled() => return Graded::Cancelled,
            Err(e) => {
                return Graded::Unavailable(format!(
                    "the task's reference solution could not be graded in an environment of its own here: {e}"
                ))
            }
        };
        let inside = EvalPlace {
            workspace: &r.fresh.path,
            shared: Some(&r.env),
            ..place.clone()
        };
        let run = run_once(
            task,
            &inside,
            &r.fresh.path,
            &dir.join("eval"),
            &format!("{}{log_name}", place.log_prefix),
            twin,
            cancel,
        );
        drop(r);
        let _ = std::fs::remove_dir_all(dir);
        return Graded::Ran(run);
    }
    let fresh = match ws.reference(dir, cancel) {
        Ok(f) => f,
        Err(_) if cancel.is_cancelled() => return Graded::Cancelled,
        Err(e) => {
            return Graded::Unavailable(format!(
                "the task's reference solution could not be applied here: {e}"
            ))
        }
    };
    let run = run_once(
        task,
        place,
        &fresh.path,
        &dir.join("eval"),
        &format!("{}{log_name}", place.log_prefix),
        twin,
        cancel,
    );
    drop(fresh);
    let _ = std::fs::remove_dir_all(dir);
    Graded::Ran(run)
}

/// Task releases (their `Task::grading_key`: a step of one is its own) under a runtime whose reference solution's grade shows the same
/// disagreement between its reward and its runner ([`disagreement`]): `true` when it does.
static REFERENCE_DISAGREES: Mutex<Option<HashMap<(String, &'static str), bool>>> = Mutex::new(None);

/// A solved reward the test runner's own outcome disagrees with
/// ([`disagreement`]) is tampering when the task's reference
/// solution, graded by the same grader here, shows no such disagreement; when it does, or
/// cannot be checked, it is the task's own shape and nothing is flagged. `Err`: cancelled.
pub(super) fn reward_disagreement(
    task: &Task,
    place: &EvalPlace<'_>,
    v: &Verdict,
    cancel: &CancelToken,
) -> Result<Option<String>, ()> {
    let Some(seen) = disagreement(v.ok, v.exit_code, &v.tests) else {
        return Ok(None);
    };
    let key = (task.grading_key(), place.runtime.as_str());
    let cached = REFERENCE_DISAGREES
        .lock()
        .ok()
        .and_then(|m| m.as_ref().and_then(|m| m.get(&key).copied()));
    let reference_disagrees = match cached {
        Some(d) => Some(d),
        None => {
            let dir = place.eval_root.join("reference-agreement");
            match grade_reference(task, place, &dir, "reference.", None, cancel) {
                Graded::Cancelled | Graded::Ran(Run::Cancelled) => return Err(()),
                Graded::Ran(Run::Verdict(r)) if r.tampered.is_none() && r.ok => {
                    let d = disagreement(r.ok, r.exit_code, &r.tests).is_some();
                    if let Ok(mut m) = REFERENCE_DISAGREES.lock() {
                        m.get_or_insert_with(HashMap::new).insert(key, d);
                    }
                    Some(d)
                }
                _ => None,
            }
        }
    };
    Ok((reference_disagrees == Some(false)).then(|| {
        format!("{seen}, where the task's reference solution graded by the same grader shows no such disagreement")
    }))
}

/// Task releases (their `Task::grading_key`: a step of one is its own) under a runtime whose reference solution this process saw solved.
static REFERENCE_SOLVES: Mutex<Option<HashSet<(String, &'static str)>>> = Mutex::new(None);

/// What the same grader makes of the task's reference solution here (once per release and
/// runtime per process, when it solves): what decides whose fault a run without a verdict
/// is (core::grading::verdict::fault). `None`: cancelled.
pub(super) fn reference_check(
    task: &Task,
    place: &EvalPlace<'_>,
    cancel: &CancelToken,
) -> Option<Reference> {
    let key = (task.grading_key(), place.runtime.as_str());
    let seen = |set: &Mutex<Option<HashSet<_>>>| {
        set.lock()
            .map(|s| s.as_ref().is_some_and(|s| s.contains(&key)))
            .unwrap_or(false)
    };
    if seen(&REFERENCE_SOLVES) {
        return Some(Reference::Solved);
    }
    let dir = place.eval_root.join("reference");
    let run = match grade_reference(task, place, &dir, "reference.", None, cancel) {
        Graded::Ran(run) => run,
        Graded::Cancelled => return None,
        Graded::Unavailable(why) => return Some(Reference::Unavailable(why)),
    };
    Some(match run {
        Run::Cancelled => return None,
        Run::Verdict(v) => match v.tampered {
            Some(t) => Reference::Unavailable(format!(
                "grading its reference solution saw tampering ({t})"
            )),
            None if v.ok => {
                if let Ok(mut s) = REFERENCE_SOLVES.lock() {
                    s.get_or_insert_with(HashSet::new).insert(key);
                }
                Reference::Solved
            }
            None => Reference::NotSolved(v.score),
        },
        Run::NoVerdict { why, .. } => Reference::NoVerdict(why),
        Run::Machinery { cause, .. } => Reference::Unavailable(format!(
            "the grader broke on its reference solution: {cause}"
        )),
    })
}
