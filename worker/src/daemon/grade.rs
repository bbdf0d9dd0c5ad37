//! A `GRADE` assignment: grade, on this host, the recorded work of an attempt executed
//! earlier (perhaps on another host). The agent is never run.
//!
//! The work item carries the accepted record of the executed attempt. The grading attempt's
//! record starts as a copy of it (its transition log up to `not_graded`, workspace facts,
//! agent process, observations and timings: the agent's run stays as it was) under the new
//! attempt's identity, with `graded_from` naming the source; then EVALUATING, the workspace
//! rebuilt from the task release (pinned commit + mutation) and the agent's stored diff,
//! checked against both recorded tree fingerprints, and the grade (FINALIZING, COMPLETED) or
//! `evaluation_error`. The copied transitions are streamed first, so the coordinator's log of
//! the attempt is a valid lifecycle path from `pending`.
//!
//! Refused before anything starts (`invalid_configuration`): a source that cannot be graded,
//! a task that is no longer the planned release (grading would score another task), a stored
//! diff that does not match its recorded digest, a `container` run whose plan pinned no
//! image digest. `infrastructure_error` (retried by the coordinator within the trial's
//! budget): the diff cannot be fetched, the workspace cannot be set up on this host, the
//! run's runtime does not work here, or its image cannot be pulled. A `container` run is
//! graded in the image its plan pinned, never over this host's toolchain.

use super::runner::{
    ended_before_start, safe_key, Artifacts, Context, Forward, ATTEMPT_RECORD_FILE,
};
use crate::image::TaskImageError;
use crate::orchestrator::{write_json_atomic, Observer};
use crate::process::CancelToken;
use crate::regrade::{
    grades_of, grading_image, grading_runtime, record_grade, GradeNotRecorded, RebuildError,
    Rebuilder, RecordedWork,
};
use akbench_core::clock::Clock;
use akbench_core::digest::digest_bytes;
use akbench_core::ids;
use akbench_core::lifecycle::{Event, State};
use akbench_core::manifest::Runtime as RuntimeKind;
use akbench_core::record::{resolve_inside, AttemptRecord, Identity};
use akbench_core::task::load_by_id;
use akbench_core::work::{GradeSource, WorkItem};
use akbench_proto::v1 as pb;
use uuid::Uuid;

/// Runs a grade assignment to its end (on the blocking thread of the assignment).
pub(super) fn grade(
    ctx: &Context,
    a: &pb::Assignment,
    work: &WorkItem,
    source: &GradeSource,
    attempt_uuid: Uuid,
    cancel: &CancelToken,
    fwd: &Forward,
) -> (AttemptRecord, Option<Artifacts>) {
    let number = a.attempt_number.max(1);
    let key = ids::attempt_key(&work.trial.key, number);
    let refuse = |state: State, cause: String| {
        ended_before_start(&ctx.worker_id, a, &key, state, cause, fwd)
    };
    if let Err(e) = source.check(number) {
        return refuse(State::InvalidConfiguration, format!("cannot grade: {e}"));
    }
    let src = &source.attempt;
    let mut task = match load_by_id(&ctx.tasks_root, &work.trial.task.id) {
        Ok(t) => t,
        Err(e) => {
            return refuse(
                State::InvalidConfiguration,
                format!("cannot grade: the task cannot be loaded ({e})"),
            )
        }
    };
    if task.release != work.trial.task {
        return refuse(
            State::InvalidConfiguration,
            format!(
                "cannot grade: task `{}` changed since the run was planned (now {} {}, planned {} {}); grading now would score the agent's work against a different task, so it is refused; restore the task release",
                work.trial.task.id, task.release.version, task.release.digest, work.trial.task.version, work.trial.task.digest
            ),
        );
    }
    task.verifier_timeout_sec = work.trial.compute.verifier_timeout_sec;
    let Some(change) = src.workspace.recorded_change() else {
        unreachable!("GradeSource::check requires the fingerprints and the diff")
    };
    let (diff_rel, diff_digest) = (change.diff_path, change.diff_digest);
    if let Err(e) = safe_key(diff_rel) {
        return refuse(
            State::InvalidConfiguration,
            format!("cannot grade: the recorded diff path is unusable: {e}"),
        );
    }
    let diff = match fetch_diff(ctx, &work.trial.key, diff_rel) {
        Ok(d) => d,
        Err(e) => return refuse(State::InfrastructureError, e),
    };
    if digest_bytes(&diff) != diff_digest {
        return refuse(
            State::InvalidConfiguration,
            format!(
                "cannot grade: the stored diff `{}/{diff_rel}` does not match the digest recorded by attempt {}; the artifact was changed or corrupted",
                work.trial.key, src.attempt.key
            ),
        );
    }

    // Never a silent fallback to `direct`, never a container run over this host's
    // toolchain: a host whose sandbox (or container runtime) does not work cannot grade
    // the run (another host may: infrastructure_error is retried).
    let recorded = work.trial.compute.runtime;
    let runtime = match grading_runtime(recorded.as_str()) {
        Ok(r) => r,
        Err(e) => return refuse(State::InfrastructureError, format!("cannot grade: {e}")),
    };
    // A container run is graded in the image its plan pinned (the digest its attempt ran).
    let held = match runtime {
        RuntimeKind::Container => {
            let planned = work.trial.task_source.image.as_deref();
            match grading_image(&ctx.orchestrator, &mut task, planned) {
                Ok(h) => Some(h),
                Err(TaskImageError::Refused(e)) => {
                    return refuse(State::InvalidConfiguration, format!("cannot grade: {e}"))
                }
                Err(e @ TaskImageError::Pull(_)) => {
                    return refuse(State::InfrastructureError, format!("cannot grade: {e}"))
                }
            }
        }
        _ => None,
    };
    let image = held.as_ref().map(|(_, i)| i);

    tracing::info!(attempt = %key, attempt_id = %a.attempt_id, epoch = a.epoch, source = %src.attempt.key, "grading started");
    let rel = format!("a{number}");
    let artifacts_dir = ctx.out_root.join(&work.trial.key).join(&rel);
    let _ = std::fs::create_dir_all(&artifacts_dir);
    let mut record = src.clone();
    record.attempt = Identity {
        id: attempt_uuid,
        key: key.clone(),
    };
    record.number = number;
    record.artifacts_dir = rel.clone();
    record.graded_from = Some(src.attempt.clone());
    record.workspace.path = None;
    record.workspace.kept = false;
    let clock = ctx.orchestrator.clock.as_ref();
    let announced = format!(
        "grading attempt {}'s recorded work, rebuilt from its stored diff",
        src.attempt.key
    );
    // GradeSource::check let only a source the lifecycle may regrade through.
    if let Err(e) = record.step(Event::Regrade, clock.now(), Some(announced)) {
        return refuse(State::InvalidConfiguration, format!("cannot grade: {e}"));
    }
    for t in &record.transitions {
        fwd.transition(&record.attempt, number, t);
    }
    let sent = record.transitions.len();

    let scratch = ctx
        .orchestrator
        .work_root
        .join(format!("grade-{attempt_uuid}"));
    let recorded = RecordedWork {
        tree_after_mutation: change.tree_after_mutation,
        tree_after_agent: change.tree_after_agent,
        diff: &diff,
    };
    // Daemon attempts always apply the mutation; the starting-tree check would catch one
    // that did not.
    let rebuilder = Rebuilder {
        orch: &ctx.orchestrator,
        task: &task,
        mutation_applied: true,
        work: recorded,
        runtime,
        image,
    };
    let outcome = match rebuilder.clean_room(&scratch) {
        Err(RebuildError::Setup(e)) => Err((Event::InfrastructureFailed, e)),
        Err(RebuildError::Mismatch(e)) => Err((Event::EvaluationFailed, e)),
        Ok(w) => {
            let prefix = format!("grade-{}.", grades_of(src) + 1);
            let withheld = w.withheld.clone();
            let result = crate::evaluator::evaluate(
                &task,
                &crate::evaluator::EvalPlace {
                    workspace: &w.path,
                    eval_root: &scratch.join("eval"),
                    artifacts_dir: &artifacts_dir,
                    log_prefix: &prefix,
                    runtime,
                    workspaces: Some(&rebuilder),
                    withheld: &withheld,
                    image,
                    shared: None,
                },
                clock,
                cancel,
            );
            drop(w);
            Ok(result)
        }
    };
    let _ = std::fs::remove_dir_all(&scratch);
    match outcome {
        Ok(result) => {
            let note = "graded later (rebuilt from the recorded diff)";
            let recorded = record_grade(
                &mut record,
                result,
                note,
                clock,
                &artifacts_dir,
                grades_of(src) + 1,
            );
            match recorded {
                Ok(()) => {}
                Err(GradeNotRecorded::Cancelled) => {
                    // A cancel, or the worker's own interruption (core::dispatch::Stop).
                    let stop = cancel
                        .stop()
                        .unwrap_or(akbench_core::dispatch::Stop::Cancelled);
                    let (event, cause) = stop.end("while grading");
                    end(&mut record, clock, event, cause);
                }
                Err(refused @ GradeNotRecorded::Lifecycle { .. }) => {
                    end(
                        &mut record,
                        clock,
                        Event::InfrastructureFailed,
                        refused.to_string(),
                    );
                    record.grade = None;
                }
            }
        }
        Err((event, cause)) => {
            end(&mut record, clock, event, cause);
            record.grade = None;
        }
    }
    finish(work, &rel, artifacts_dir, record, sent, number, &key, fwd)
}

/// Ends the grading attempt with `event` (from EVALUATING), `cause` as its note and cause.
/// A step the lifecycle refuses is logged and leaves the record as it is.
fn end(record: &mut AttemptRecord, clock: &dyn Clock, event: Event, cause: String) {
    match record.step(event, clock.now(), Some(cause.clone())) {
        Ok(_) => record.cause = Some(cause),
        Err(e) => tracing::error!(attempt = %record.attempt.key, "failed to end the grade: {e}"),
    }
}

/// Streams the transitions after `sent`, writes the attempt record and names its artifacts.
#[allow(clippy::too_many_arguments)]
fn finish(
    work: &WorkItem,
    rel: &str,
    artifacts_dir: std::path::PathBuf,
    record: AttemptRecord,
    sent: usize,
    number: u32,
    key: &str,
    fwd: &Forward,
) -> (AttemptRecord, Option<Artifacts>) {
    for t in &record.transitions[sent..] {
        fwd.transition(&record.attempt, number, t);
    }
    if let Err(e) = write_json_atomic(&artifacts_dir.join(ATTEMPT_RECORD_FILE), &record) {
        tracing::warn!(attempt = %key, "failed to write {ATTEMPT_RECORD_FILE}: {e}");
    }
    let art = Artifacts {
        dir: artifacts_dir,
        key: format!("{}/{rel}", work.trial.key),
    };
    (record, Some(art))
}

/// The agent's stored diff: from the artifact store when one is configured, else (or when
/// the store does not have it) from this worker's own output folder.
fn fetch_diff(ctx: &Context, trial_key: &str, diff_rel: &str) -> Result<Vec<u8>, String> {
    let object = format!("{trial_key}/{diff_rel}");
    let mut tried = Vec::new();
    if let Some(store) = &ctx.artifacts {
        let got = tokio::runtime::Handle::current().block_on(store.get(&object));
        match got {
            Ok(b) => return Ok(b),
            Err(e) => tried.push(format!("{e} (store {})", store.url())),
        }
    }
    let trial_dir = ctx.out_root.join(trial_key);
    match resolve_inside(&trial_dir, diff_rel).and_then(|p| {
        akbench_core::bounded_read::ReadKind::Log
            .read(&p, akbench_core::bounded_read::Links::Follow)
            .map_err(|e| format!("{} {e}", p.display()))
    }) {
        Ok(b) => Ok(b),
        Err(e) => {
            tried.push(format!("not under {}: {e}", ctx.out_root.display()));
            Err(format!(
                "cannot fetch the agent's stored diff `{object}`: {}; a worker that grades needs the artifact store the executing workers wrote to (--artifacts)",
                tried.join("; ")
            ))
        }
    }
}
