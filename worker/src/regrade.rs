//! Grading a recorded attempt later: the pure function (task release, base commit, mutation,
//! the agent's recorded diff) -> grade, applied to an untrusted run directory.
//!
//! The run directory is untrusted: every path read from it is resolved inside it, the record
//! must validate, the recorded diff must match its digest, and the task must still be the
//! exact release the run used (its digest covers the tests, the mutation and the reference),
//! else grading is refused, saying why. The workspace is rebuilt from the record (pinned
//! commit + mutation + diff), checked against the recorded fingerprint, with the paths that
//! steer the grader withheld (the clean room); or, only when asked for (`--in-place`), the
//! preserved one, adopted in place after checking it still holds exactly what the agent left.
//! A run that was sandboxed is graded in the sandbox or not at all ([`grading_runtime`]); a
//! `container` run in the image its record names ([`grading_image`]). The grade is
//! written back atomically; the record as it was before is kept beside it; the agent's timings
//! and logs are never touched.

use crate::evaluator::{evaluate, EvalPlace, EvalResult, FreshWorkspace, Workspaces};
use crate::image::{for_task, Store, TaskImageError, Unpacked};
pub use crate::orchestrator::rebuild::{
    rebuild, rebuild_for_grading, verdict_note, RebuildError, Rebuilder, RecordedWork,
    NOT_REQUESTED,
};
use crate::orchestrator::{write_json_atomic, Orchestrator};
use crate::process::CancelToken;
use crate::runtime::container::Image;
use crate::runtime::RuntimeKind;
use crate::workspace::fingerprint;
use akbench_core::bounded_read::{Links, ReadKind};
use akbench_core::clock::Clock;
use akbench_core::digest::digest_bytes;
use akbench_core::lifecycle::{apply, Event, State, TransitionError};
use akbench_core::record::{resolve_inside, AttemptRecord, RunRecord, RECORD_FILE};
use akbench_core::task::{load_by_id, Task};
use std::path::{Path, PathBuf};

/// Where grading happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceMode {
    /// A rebuilt copy (the clean room); the same as `Copy`.
    Auto,
    /// The preserved workspace, adopted in place (refused when there is none).
    InPlace,
    /// A copy rebuilt from the record; the run directory's workspace is left alone.
    Copy,
}

/// What grading did.
#[derive(Debug, Clone)]
pub struct Regraded {
    /// The record as written.
    pub record: RunRecord,
    /// Its path.
    pub record_path: PathBuf,
    /// Where the record as it was before grading was kept.
    pub backup_path: PathBuf,
    /// `in_place` or `copy`.
    pub workspace_used: &'static str,
}

/// Why grading was refused or failed. Nothing is written in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum RegradeError {
    /// A path in the run directory escapes it, or the directory itself is unusable.
    #[error("failed to grade {}: {reason}", run_dir.display())]
    Untrusted {
        /// The run directory.
        run_dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The record does not parse or validate.
    #[error("failed to grade {}: the run record is invalid: {reason}; nothing was changed", run_dir.display())]
    InvalidRecord {
        /// The run directory.
        run_dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The attempt holds nothing to grade.
    #[error("failed to grade {}: its last attempt ended `{state}`, which {why}; nothing was changed", run_dir.display())]
    NotGradable {
        /// The run directory.
        run_dir: PathBuf,
        /// The attempt's state.
        state: State,
        /// Why that cannot be graded.
        why: &'static str,
    },
    /// The task is not the release the run used.
    #[error("failed to grade {}: {reason}; grading now would score the agent's work against a different task, so it is refused", run_dir.display())]
    TaskChanged {
        /// The run directory.
        run_dir: PathBuf,
        /// What changed.
        reason: String,
    },
    /// The workspace could not be adopted or rebuilt faithfully.
    #[error("failed to grade {}: {reason}", run_dir.display())]
    Workspace {
        /// The run directory.
        run_dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// Cancelled while grading.
    #[error("failed to grade {}: cancelled", run_dir.display())]
    Cancelled {
        /// The run directory.
        run_dir: PathBuf,
    },
}

impl RegradeError {
    /// True when the user's input is at fault (a refusal), false for an environment failure.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, RegradeError::Cancelled { .. })
    }
}

fn why_not(state: State) -> &'static str {
    match state {
        State::Failed => "is the agent's own failure: there is no finished work to grade",
        State::Timeout => "means the agent ran out of time: its work is not a finished answer",
        State::Cancelled => "was cancelled before its work was finished",
        State::InfrastructureError => "never ran the agent to the end (an infrastructure error)",
        State::InvalidConfiguration => {
            "never ran the agent to the end (invalid configuration: rejected before it started, or refused by the agent or its model provider)"
        }
        _ => "is not a finished attempt",
    }
}

/// Reads and validates the record of a run directory.
pub fn read_record(run_dir: &Path) -> Result<(PathBuf, RunRecord), RegradeError> {
    let untrusted = |reason: String| RegradeError::Untrusted {
        run_dir: run_dir.to_path_buf(),
        reason,
    };
    if !run_dir.join(RECORD_FILE).exists()
        && std::fs::symlink_metadata(run_dir.join(RECORD_FILE)).is_err()
    {
        return Err(untrusted(format!(
            "it is not a run directory (no {RECORD_FILE}); fix: pass the folder holding the record printed by `run single` / `run execute`"
        )));
    }
    let path = resolve_inside(run_dir, RECORD_FILE).map_err(untrusted)?;
    let bytes =
        ReadKind::Record
            .read(&path, Links::Follow)
            .map_err(|e| RegradeError::Untrusted {
                run_dir: run_dir.to_path_buf(),
                reason: format!("{} {e}", path.display()),
            })?;
    let record: RunRecord =
        serde_json::from_slice(&bytes).map_err(|e| RegradeError::InvalidRecord {
            run_dir: run_dir.to_path_buf(),
            reason: e.to_string(),
        })?;
    record
        .validate()
        .map_err(|reason| RegradeError::InvalidRecord {
            run_dir: run_dir.to_path_buf(),
            reason,
        })?;
    Ok((path, record))
}

/// Grades the last attempt of the run in `run_dir` and writes the grade back.
pub fn regrade(
    orch: &Orchestrator,
    run_dir: &Path,
    tasks_root: &Path,
    mode: WorkspaceMode,
    cancel: &CancelToken,
) -> Result<Regraded, RegradeError> {
    let (record_path, mut record) = read_record(run_dir)?;
    let run_dir = record_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| run_dir.to_path_buf());
    let err_ws = |reason: String| RegradeError::Workspace {
        run_dir: run_dir.clone(),
        reason,
    };
    let untrusted = |reason: String| RegradeError::Untrusted {
        run_dir: run_dir.clone(),
        reason,
    };
    let before = record.clone();
    // A trial its run cancelled before any attempt ran has no attempt to grade.
    let Some(attempt) = record.attempts.last() else {
        return Err(RegradeError::NotGradable {
            run_dir,
            state: record.outcome.state,
            why: why_not(record.outcome.state),
        });
    };
    // A multi-step attempt's steps were graded as they ran, each in the state the steps
    // before it left; the final workspace alone cannot grade them again.
    if !attempt.steps.is_empty() {
        return Err(RegradeError::NotGradable {
            run_dir,
            state: attempt.state,
            why: "is a multi-step attempt (`[[steps]]`) whose steps were graded as they ran; grading again needs each step's environment, so run the trial again",
        });
    }
    if apply(attempt.state, Event::Regrade).is_err() {
        return Err(RegradeError::NotGradable {
            run_dir,
            state: attempt.state,
            why: why_not(attempt.state),
        });
    }
    let mut task =
        load_by_id(tasks_root, &record.task.release.id).map_err(|e| RegradeError::TaskChanged {
            run_dir: run_dir.clone(),
            reason: format!("the task cannot be loaded ({e})"),
        })?;
    check_same_task(&record, &task).map_err(|reason| RegradeError::TaskChanged {
        run_dir: run_dir.clone(),
        reason,
    })?;
    let artifacts = resolve_inside(&run_dir, &attempt.artifacts_dir).map_err(untrusted)?;
    let ws = &attempt.workspace;
    let Some(change) = ws.recorded_change() else {
        return Err(RegradeError::InvalidRecord {
            run_dir,
            reason: "the attempt has no recorded fingerprints or diff".into(),
        });
    };
    let (tree_mut, tree_agent, diff_rel, diff_digest) = (
        change.tree_after_mutation,
        change.tree_after_agent,
        change.diff_path,
        change.diff_digest,
    );
    let kept = match (&ws.path, ws.kept) {
        (Some(p), true) => Some(resolve_inside(&run_dir, p).map_err(untrusted)?),
        _ => None,
    };
    let in_place = match (mode, &kept) {
        (WorkspaceMode::InPlace, None) => return Err(err_ws(
            "the run kept no workspace to grade in place; use --copy to rebuild it from the record"
                .into(),
        )),
        // The clean room: unless asked for in place, grading never runs in the agent's
        // folder but in a copy rebuilt from the record.
        (WorkspaceMode::Copy | WorkspaceMode::Auto, _) => None,
        (WorkspaceMode::InPlace, Some(p)) => Some(p.clone()),
    };
    let runtime = grading_runtime(&record.options.runtime).map_err(err_ws)?;
    // A `container` run is graded in the image it ran in: the digest its record names.
    let held = match runtime {
        RuntimeKind::Container => Some(
            grading_image(orch, &mut task, record.task.image.as_deref()).map_err(|e| match e {
                TaskImageError::Refused(reason) => RegradeError::InvalidRecord {
                    run_dir: run_dir.clone(),
                    reason,
                },
                TaskImageError::Pull(e) => err_ws(format!("failed to pull the run's image: {e}")),
            })?,
        ),
        _ => None,
    };
    let image = held.as_ref().map(|(_, i)| i);
    let diff_path = resolve_inside(&run_dir, diff_rel).map_err(untrusted)?;
    let diff = ReadKind::Log
        .read(&diff_path, Links::Follow)
        .map_err(|e| untrusted(format!("the recorded diff {} {e}", diff_path.display())))?;
    if digest_bytes(&diff) != diff_digest {
        return Err(RegradeError::InvalidRecord {
            run_dir: run_dir.clone(),
            reason: format!("the recorded diff {diff_rel} does not match its digest"),
        });
    }
    let rebuilder = Rebuilder {
        orch,
        task: &task,
        mutation_applied: record.task.mutation_applied,
        work: RecordedWork {
            tree_after_mutation: tree_mut,
            tree_after_agent: tree_agent,
            diff: &diff,
        },
        runtime,
        image,
    };

    let prior_grades = grades_of(attempt);
    let grade_number = prior_grades + 1;
    let scratch = orch
        .work_root
        .join(format!("grade-{}", uuid::Uuid::now_v7()));
    let result = (|| {
        std::fs::create_dir_all(&scratch)
            .map_err(|e| err_ws(format!("cannot create {}: {e}", scratch.display())))?;
        let mut rebuilt: Option<FreshWorkspace> = None;
        let worktree = match &in_place {
            Some(p) => {
                let baseline = orch
                    .cache
                    .baseline_in(&task, record.task.mutation_applied, image)
                    .map_err(|e| err_ws(e.to_string()))?;
                if baseline.tree != *tree_mut {
                    return Err(err_ws(format!(
                        "the task's baseline here (tree {}) is not the recorded starting point {tree_mut}; check the task release",
                        baseline.tree
                    )));
                }
                let now = fingerprint(p, &baseline, &scratch).map_err(|e| err_ws(e.to_string()))?;
                if now != tree_agent {
                    return Err(err_ws(format!(
                        "the preserved workspace no longer holds what the agent left (tree {now}, recorded {tree_agent}); grade a rebuilt copy with --copy"
                    )));
                }
                p.clone()
            }
            None => {
                let w = rebuilder.agent_copy(&scratch).map_err(err_ws)?;
                let path = w.path.clone();
                rebuilt = Some(w);
                path
            }
        };
        let withheld = rebuilt
            .as_ref()
            .map(|w| w.withheld.clone())
            .unwrap_or_default();
        let prefix = format!("grade-{grade_number}.");
        let outcome = evaluate(
            &task,
            &EvalPlace {
                workspace: &worktree,
                eval_root: &scratch.join("eval"),
                artifacts_dir: &artifacts,
                log_prefix: &prefix,
                runtime,
                workspaces: Some(&rebuilder),
                withheld: &withheld,
                image,
                shared: None,
            },
            orch.clock.as_ref(),
            cancel,
        );
        drop(rebuilt);
        Ok(outcome)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    let outcome = result?;

    let attempt = record.attempts.last_mut().expect("validated");
    let how = if in_place.is_some() {
        "in place"
    } else {
        "rebuilt from the recorded diff"
    };
    let note = format!("graded later ({how})");
    record_grade(
        attempt,
        outcome,
        &note,
        orch.clock.as_ref(),
        &artifacts,
        grade_number,
    )
    .map_err(|e| match e {
        GradeNotRecorded::Cancelled => RegradeError::Cancelled {
            run_dir: run_dir.clone(),
        },
        refused @ GradeNotRecorded::Lifecycle { .. } => RegradeError::InvalidRecord {
            run_dir: run_dir.clone(),
            reason: refused.to_string(),
        },
    })?;
    record.outcome = RunRecord::outcome_of(&record.attempts).expect("validated");
    record
        .validate()
        .map_err(|reason| RegradeError::InvalidRecord {
            run_dir: run_dir.clone(),
            reason: format!("the graded record breaks the lifecycle rules: {reason}"),
        })?;
    let backup_name = if prior_grades == 0 {
        "run_record.execute.json".to_string()
    } else {
        format!("run_record.pre-grade-{grade_number}.json")
    };
    let backup_path = run_dir.join(backup_name);
    if !backup_path.exists() {
        write_json_atomic(&backup_path, &before)
            .map_err(|e| untrusted(format!("cannot keep the pre-grade record: {e}")))?;
    }
    write_json_atomic(&record_path, &record)
        .map_err(|e| untrusted(format!("cannot write the graded record: {e}")))?;
    Ok(Regraded {
        record,
        record_path,
        backup_path,
        workspace_used: if in_place.is_some() {
            "in_place"
        } else {
            "copy"
        },
    })
}

/// Why a grade was not appended to an attempt; the attempt is left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GradeNotRecorded {
    /// The attempt was cancelled while grading.
    #[error("grading was cancelled")]
    Cancelled,
    /// The lifecycle does not allow the grade's steps from the attempt's state.
    #[error("failed to record the grade of attempt {attempt}: {source}")]
    Lifecycle {
        /// The attempt's key.
        attempt: String,
        /// The refused step.
        source: TransitionError,
    },
}

/// Appends a grade to `attempt`: EVALUATING (noted `note` and the verdict), FINALIZING,
/// COMPLETED with the grade, or EVALUATING, EVALUATION_ERROR with the cause (the evaluator's
/// report kept as `grade-<n>.evaluator.report.txt` in `artifacts`). The agent's timings, logs
/// and observations are left as they are; the grade carries its own time. Every step goes
/// through core's lifecycle ([`AttemptRecord::step`]): a grade the lifecycle does not allow
/// from the attempt's state (an attempt whose agent never ran to the end) is refused and
/// nothing is changed or written.
pub fn record_grade(
    attempt: &mut AttemptRecord,
    outcome: EvalResult,
    note: &str,
    clock: &dyn Clock,
    artifacts: &Path,
    grade_number: usize,
) -> Result<(), GradeNotRecorded> {
    let mut graded = attempt.clone();
    let refused = |source: TransitionError| GradeNotRecorded::Lifecycle {
        attempt: attempt.attempt.key.clone(),
        source,
    };
    // A caller that announced the grading already entered EVALUATING: the verdict joins
    // that transition's note instead of a second EVALUATING.
    let evaluating = graded.state == State::Evaluating;
    let report = match outcome {
        EvalResult::Cancelled => return Err(GradeNotRecorded::Cancelled),
        EvalResult::Graded(g) => {
            let verdict = format!("{note}: {}", verdict_note(&g));
            match graded.transitions.last_mut() {
                Some(t) if evaluating => t.note = Some(verdict),
                _ => {
                    graded
                        .step(Event::Regrade, clock.now(), Some(verdict))
                        .map_err(refused)?;
                }
            }
            graded
                .step(Event::Advance, clock.now(), None)
                .map_err(refused)?;
            graded
                .step(Event::Complete, clock.now(), None)
                .map_err(refused)?;
            graded.cause = g.cause.clone();
            graded.grade = Some(g);
            None
        }
        EvalResult::Broken { cause, report } | EvalResult::FetchFailed { cause, report } => {
            if !evaluating {
                graded
                    .step(Event::Regrade, clock.now(), Some(note.to_string()))
                    .map_err(refused)?;
            }
            graded
                .step(Event::EvaluationFailed, clock.now(), Some(cause.clone()))
                .map_err(refused)?;
            graded.grade = None;
            graded.cause = Some(cause);
            Some(report)
        }
    };
    if let Some(report) = report {
        // Not over a FIFO or a device a tamperer left in the run folder.
        let _ = akbench_core::output::write(
            &artifacts.join(format!("grade-{grade_number}.evaluator.report.txt")),
            report.as_bytes(),
        );
    }
    *attempt = graded;
    Ok(())
}

/// How many times an attempt was actually graded (a no-op EVALUATING does not count).
pub fn grades_of(attempt: &akbench_core::record::AttemptRecord) -> usize {
    attempt
        .transitions
        .iter()
        .filter(|t| t.state == State::Evaluating && t.note.as_deref() != Some(NOT_REQUESTED))
        .count()
}

/// Checks that `task` is exactly the release, source and tests the record was made with.
pub fn check_same_task(record: &RunRecord, task: &Task) -> Result<(), String> {
    let r = &record.task;
    if task.release != r.release {
        return Err(format!(
            "the task `{}` changed since this run (now version {} digest {}, recorded version {} digest {})",
            r.release.id, task.release.version, task.release.digest, r.release.version, r.release.digest
        ));
    }
    if task.commit != r.commit || task.tests_digest != r.tests_digest {
        return Err("the task's pinned commit or tests differ from the record".into());
    }
    if task.reference.as_ref().map(|(_, d)| d) != r.reference_digest.as_ref() {
        return Err(
            "the task's reference solution no longer matches the recorded reference digest".into(),
        );
    }
    if task.mutation.as_ref().map(|(_, d)| d) != r.mutation_digest.as_ref() {
        return Err("the task's mutation no longer matches the recorded mutation digest".into());
    }
    Ok(())
}

/// The runtime a later grade (regrade, distributed grade) runs the verifier in: the sandbox,
/// never a silent fallback. `direct` only when the run itself said `runtime: direct` (and
/// then the grade's `runtime` says so); a run that was sandboxed is refused grading on a
/// host where the sandbox does not work.
///
/// A `runtime: container` run is graded under `container` (in the image the run recorded,
/// [`grading_image`]), never over this host's toolchain: refused on a host where that
/// runtime does not work.
pub fn grading_runtime(recorded: &str) -> Result<RuntimeKind, String> {
    if recorded == RuntimeKind::Direct.as_str() {
        return Ok(RuntimeKind::Direct);
    }
    if recorded == RuntimeKind::Container.as_str() {
        return crate::runtime::check(RuntimeKind::Container)
            .map(|()| RuntimeKind::Container)
            .map_err(|e| {
                format!(
                    "failed to grade later: the run used `runtime: {recorded}` and {e}; grading it over this host's toolchain instead of the task's image is refused; fix: grade on a host where the `container` runtime works"
                )
            });
    }
    crate::runtime::sandbox_available()
        .map(|()| RuntimeKind::Sandbox)
        .map_err(|e| {
            format!(
                "failed to grade in the sandbox here: {e}; the run used `runtime: {recorded}`, so grading it unsandboxed is refused; fix the sandbox on this host (or grade on another), or run with `runtime: direct`"
            )
        })
}

/// The image a later grade of a `container` run runs in: `task`'s image pinned to the
/// digest the run recorded (`recorded`, `registry/repository@sha256:...`; a tag is never
/// resolved again), pulled or taken from this host's cache, held in use until the returned
/// [`Unpacked`] is dropped. A record without a pinned image, or a task that pins another
/// digest, is [`TaskImageError::Refused`]; a registry or cache failure is
/// [`TaskImageError::Pull`].
pub fn grading_image(
    orch: &Orchestrator,
    task: &mut Task,
    recorded: Option<&str>,
) -> Result<(Unpacked, Image), TaskImageError> {
    let id = task.release.id.clone();
    let refused = |why: String| {
        TaskImageError::Refused(format!(
            "failed to grade task `{id}` in the run's image: {why}"
        ))
    };
    let Some(recorded) = recorded else {
        return Err(refused(
            "the record of this `container` run names no image (`task.image`); fix: grade it in the sweep that ran it".into(),
        ));
    };
    let digest = akbench_core::image::ImageRef::parse(recorded)
        .ok()
        .and_then(|r| r.digest)
        .ok_or_else(|| {
            refused(format!(
                "the recorded image `{}` is not pinned to a digest",
                akbench_core::limits::elide(recorded)
            ))
        })?;
    task.pin_image(&digest).map_err(refused)?;
    let store = Store::from_env(orch.images.clone()).map_err(refused)?;
    for_task(&store, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grading_never_falls_back_to_direct_silently() {
        assert_eq!(grading_runtime("direct").unwrap(), RuntimeKind::Direct);
        // A container run is graded under `container` where it works, else refused: never
        // the sandbox over this host's toolchain.
        match (
            crate::runtime::check(RuntimeKind::Container),
            grading_runtime("container"),
        ) {
            (Ok(()), Ok(k)) => assert_eq!(k, RuntimeKind::Container),
            (Err(_), Err(e)) => assert!(
                e.contains("task's image is refused") && e.contains("runtime: container"),
                "{e}"
            ),
            (s, g) => panic!("container {s:?} but grading runtime {g:?}"),
        }
        for recorded in ["sandbox"] {
            match (
                crate::runtime::sandbox_available(),
                grading_runtime(recorded),
            ) {
                (Ok(()), Ok(k)) => assert_eq!(k, RuntimeKind::Sandbox),
                (Err(_), Err(e)) => assert!(
                    e.contains("unsandboxed is refused") && e.contains(recorded),
                    "{e}"
                ),
                (s, g) => panic!("sandbox {s:?} but grading runtime {g:?}"),
            }
        }
    }

    /// A grade appended by hand to an attempt that never ran its agent to the end made a
    /// history the lifecycle forbids (`failed -> evaluating -> ... -> completed`): the grade is
    /// taken through core's lifecycle like every other step, so it is refused and the attempt
    /// and its artifacts stay as they were.
    #[test]
    fn a_grade_is_never_appended_where_the_lifecycle_forbids_it() {
        use akbench_core::testkit::attempt_record;
        let clock = akbench_core::clock::ManualClock::new(chrono::Utc::now());
        let tmp = tempfile::tempdir().unwrap();
        let id = uuid::Uuid::nil();
        let grade = attempt_record(id, "t", 1, State::Completed, Some(true))
            .grade
            .unwrap();
        let outcomes = || {
            [
                EvalResult::Graded(grade.clone()),
                EvalResult::Broken {
                    cause: "the evaluator broke".into(),
                    report: "report".into(),
                },
            ]
        };
        for state in [
            State::Failed,
            State::Timeout,
            State::Cancelled,
            State::InfrastructureError,
            State::InvalidConfiguration,
        ] {
            let attempt = attempt_record(id, "t", 1, state, None);
            for outcome in outcomes() {
                let mut a = attempt.clone();
                let got = record_grade(&mut a, outcome, "graded later", &clock, tmp.path(), 1);
                assert!(got.is_err(), "a grade was appended to a `{state}` attempt");
                assert_eq!(a, attempt, "a refused grade changes nothing");
                assert!(!tmp.path().join("grade-1.evaluator.report.txt").exists());
            }
        }
        // An executed attempt is graded: its history goes on through evaluating.
        let executed = attempt_record(id, "t", 1, State::Completed, Some(false));
        let logged = executed.transitions.len();
        for outcome in outcomes() {
            let mut a = executed.clone();
            record_grade(&mut a, outcome, "graded later", &clock, tmp.path(), 1).unwrap();
            let states: Vec<State> = a.transitions.iter().map(|t| t.state).collect();
            akbench_core::lifecycle::validate_path(&states).unwrap();
            assert_eq!(states[logged], State::Evaluating);
            assert_eq!(Some(a.state), states.last().copied());
        }
        // A caller that announced the grading (EVALUATING entered) gets the verdict there.
        let mut a = executed.clone();
        let at = a
            .transitions
            .iter()
            .position(|t| t.state == State::Evaluating)
            .unwrap();
        a.transitions.truncate(at + 1);
        a.state = State::Evaluating;
        let outcome = EvalResult::Graded(grade.clone());
        record_grade(&mut a, outcome, "graded later", &clock, tmp.path(), 1).unwrap();
        let states: Vec<State> = a.transitions.iter().map(|t| t.state).collect();
        akbench_core::lifecycle::validate_path(&states).unwrap();
        assert_eq!(
            states[at..],
            [State::Evaluating, State::Finalizing, State::Completed]
        );
        let note = a.transitions[at].note.as_deref().unwrap();
        assert!(note.starts_with("graded later: solved"), "{note}");
    }
}
