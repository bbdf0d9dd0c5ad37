//! One attempt, phase by phase. Every exit path records a terminal transition with its cause
//! and removes the workspace unless it is to be kept.
//!
//! Each lifecycle phase is one function (`preparing`, `validating`, ..., `finalizing`) that
//! either hands the next phase what it needs or ends the attempt ([`Phase`]); [`drive`] runs
//! them in order. Every step goes through `core::lifecycle::apply`: a step it refuses is an
//! orchestrator bug, which ends the attempt `infrastructure_error` naming the refused step,
//! never a panic.

use super::{AttemptRequest, Observer, Orchestrator};
use crate::process::CancelToken;
use crate::workspace::Workspace;
use akbench_core::lifecycle::{apply, Event, State, TransitionError};
use akbench_core::record::{
    AttemptRecord, Grade, Identity, Observations, ProcessFacts, Provenance, Transition,
    WorkspaceFacts,
};
use akbench_core::redact::Redactor;
use akbench_core::trajectory;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

mod phases;
mod steps;
use phases::{
    collecting, configuring_runtime, creating_workspace, evaluating, executing, finalizing,
    preparing, starting_agent, validating,
};

/// The notes of the agent's `/logs` collection (what was skipped or truncated), in
/// `<artifacts>/logs/`.
pub const NOTES_FILE: &str = "collected.txt";

/// The attempt being built: state, log and facts.
struct Run<'a> {
    orch: &'a Orchestrator,
    attempt: Identity,
    number: u32,
    observer: &'a dyn Observer,
    state: State,
    entered: Instant,
    transitions: Vec<Transition>,
    timings: BTreeMap<State, u64>,
    cause: Option<String>,
    workspace: WorkspaceFacts,
    process: Option<ProcessFacts>,
    observations: Observations,
    grade: Option<Grade>,
    /// The declared credentials' values, scrubbed from everything stored.
    redactor: Redactor,
    /// Names of the credentials found (and replaced) so far.
    redacted: BTreeSet<String>,
    /// Who runs this attempt and with what, filled in as it is observed.
    provenance: Provenance,
    /// A multi-step task's steps, as far as they ran ([`steps`]).
    steps: Vec<akbench_core::record::steps::StepResult>,
    /// What the steps' grading ran with, once every step that ran is done.
    steps_grading: Option<akbench_core::record::steps::GradeBase>,
    /// An interactive world's sidecars, as started and ended (written by the running
    /// world, `runtime::world`, which ends before the record is made).
    services: std::sync::Arc<std::sync::Mutex<Vec<akbench_core::record::services::ServiceFacts>>>,
}

impl<'a> Run<'a> {
    /// Attempt `number`, PENDING recorded.
    fn new(
        orch: &'a Orchestrator,
        attempt: Identity,
        number: u32,
        observer: &'a dyn Observer,
    ) -> Self {
        let mut r = Run {
            orch,
            attempt,
            number,
            observer,
            state: State::Pending,
            entered: Instant::now(),
            transitions: Vec::new(),
            timings: BTreeMap::new(),
            cause: None,
            workspace: WorkspaceFacts::default(),
            process: None,
            observations: Observations::default(),
            grade: None,
            redactor: Redactor::default(),
            redacted: BTreeSet::new(),
            provenance: crate::provenance::here(&orch.worker_id),
            steps: Vec::new(),
            steps_grading: None,
            services: Default::default(),
        };
        r.record(State::Pending, None);
        r
    }

    fn scrub(&mut self, note: Option<String>) -> Option<String> {
        note.map(|mut n| {
            self.redactor.text(&mut n, &mut self.redacted);
            n
        })
    }

    /// Scrubs a stored file in place, in constant memory (a missing file is fine).
    fn scrub_file(&mut self, path: &Path) {
        if self.redactor.is_empty() {
            return;
        }
        if let Err(e) = crate::scrub::scrub_file(&self.redactor, path, &mut self.redacted) {
            self.join_cause(format!(
                "failed to scrub credentials from {}: {e}; delete it before sharing the run",
                path.display()
            ));
        }
    }

    fn join_cause(&mut self, msg: String) {
        self.cause = Some(match self.cause.take() {
            Some(c) => format!("{c}; {msg}"),
            None => msg,
        });
    }

    /// Copies the agent's `/logs` (`work/logs/{agent,artifacts}`, the `container` runtime's
    /// mounts) into `<artifacts>/logs/`, whatever the attempt's outcome: regular files
    /// only, capped, scrubbed on the way (`akbench_core::artifacts`); what was skipped or
    /// truncated is listed in `logs/collected.txt`.
    fn collect_logs(&mut self, work: &Path, artifacts: &Path) {
        self.collect_logs_of(work, artifacts, &crate::orchestrator::container::LOGS);
    }

    /// [`Run::collect_logs`] of the folders `names` of `/logs` only (a step's `agent`).
    fn collect_logs_of(&mut self, work: &Path, artifacts: &Path, names: &[&str]) {
        use akbench_core::artifacts::{Budget, CAP_BYTES};
        let from = work.join("logs");
        if !from.is_dir() {
            return;
        }
        let to = artifacts.join("logs");
        let mut budget = Budget::new(CAP_BYTES);
        for &name in names {
            if let Err(e) = crate::scrub::collect(
                &self.redactor,
                &from.join(name),
                &to.join(name),
                name,
                &mut budget,
                &mut self.redacted,
            ) {
                self.join_cause(format!("failed to collect the agent's /logs/{name}: {e}"));
            }
        }
        if !budget.notes().is_empty() {
            let mut text = budget.notes().join("\n");
            text.push('\n');
            let _ = std::fs::create_dir_all(&to);
            if let Err(e) = akbench_core::output::write(&to.join(NOTES_FILE), text.as_bytes()) {
                tracing::warn!("failed to write {NOTES_FILE}: {e}");
            }
        }
    }

    /// Writes the agent's trajectory (ATIF, converted from its scrubbed stdout) beside its
    /// logs, scrubbed like them. Best effort: a failure is logged, the attempt goes on.
    fn write_trajectory(&mut self, path: &Path, adapter: &str, stdout: &str, instruction: &str) {
        let version = self.provenance.agent_cli_version.clone();
        let t = trajectory::convert(adapter, stdout, Some(instruction), version.as_deref());
        let written = serde_json::to_vec_pretty(&t)
            .map_err(|e| e.to_string())
            .and_then(|json| akbench_core::output::write(path, &json).map_err(|e| e.to_string()));
        match written {
            Ok(()) => self.scrub_file(path),
            Err(e) => tracing::warn!(
                "failed to write the trajectory {}: {e}; `akbench run trajectory` converts the agent's stdout instead",
                path.display()
            ),
        }
    }

    /// Scrubs every file of the attempt's artifacts, a kept workspace's files included (its
    /// `.git` is then a fresh copy of the baseline repository, not the agent's).
    fn scrub_artifacts(&mut self, dir: &Path) {
        if self.redactor.is_empty() {
            return;
        }
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                match e.file_type() {
                    Ok(t)
                        if t.is_dir()
                            && !(d == dir.join("workspace") && e.file_name() == ".git") =>
                    {
                        stack.push(p);
                    }
                    Ok(t) if t.is_file() => self.scrub_file(&p),
                    _ => {}
                }
            }
        }
    }

    fn record(&mut self, state: State, note: Option<String>) {
        let note = self.scrub(note);
        let t = Transition {
            seq: u32::try_from(self.transitions.len()).unwrap_or(u32::MAX),
            state,
            at: self.orch.clock.now(),
            note,
        };
        self.observer.transition(&self.attempt, self.number, &t);
        self.transitions.push(t);
    }

    /// Takes `event` through the lifecycle and records the state it enters; [`Ended`] once
    /// that state is terminal. A step the lifecycle refuses is an orchestrator bug, never a
    /// panic: the attempt ends `infrastructure_error` naming it ([`Run::refused`]).
    fn step(&mut self, event: Event, note: Option<String>) -> Phase {
        let note = self.scrub(note);
        let to = match apply(self.state, event) {
            Ok(to) => to,
            Err(e) => return self.refused(&e),
        };
        self.enter(to, note);
        if to.is_terminal() {
            Err(Ended)
        } else {
            Ok(())
        }
    }

    fn enter(&mut self, to: State, note: Option<String>) {
        let ms = u64::try_from(self.entered.elapsed().as_millis()).unwrap_or(u64::MAX);
        *self.timings.entry(self.state).or_default() += ms;
        self.entered = Instant::now();
        self.state = to;
        if to.is_terminal() && to != State::Completed && to != State::NotGraded {
            self.cause.clone_from(&note);
        }
        self.record(to, note);
    }

    /// A step the lifecycle refused: the attempt ends `infrastructure_error` with the refusal
    /// as its cause (when it had ended already, the refusal joins its cause).
    fn refused(&mut self, e: &TransitionError) -> Phase {
        let cause = format!("orchestrator bug: {e}");
        tracing::error!(attempt = %self.attempt.key, "{cause}");
        if apply(self.state, Event::InfrastructureFailed).is_ok() {
            self.enter(State::InfrastructureError, Some(cause));
        } else {
            self.cause = Some(match self.cause.take() {
                Some(c) => format!("{c}; {cause}"),
                None => cause,
            });
        }
        Err(Ended)
    }

    /// Ends the attempt with `event` (a terminal one), `cause` its note and cause.
    fn end<T>(&mut self, event: Event, cause: String) -> Phase<T> {
        let _ = self.step(event, Some(cause));
        Err(Ended)
    }

    /// Ends the attempt when it was cancelled or its worker is stopping.
    fn stop_if_cancelled(&mut self, cancel: &CancelToken) -> Phase {
        match cancel.stop() {
            Some(stop) => {
                let (event, cause) = stop.end("");
                self.end(event, cause)
            }
            None => Ok(()),
        }
    }

    /// Attaches a note to the last transition (facts known only once its phase has run).
    fn annotate(&mut self, note: String) {
        let note = self.scrub(Some(note)).unwrap_or_default();
        if let Some(last) = self.transitions.last_mut() {
            last.note = Some(note);
            self.observer.annotate(&self.attempt, self.number, last);
        }
    }

    fn advance(&mut self, note: Option<String>) -> Phase {
        self.step(Event::Advance, note)
    }
}

/// The attempt ended: its terminal transition is recorded and no later phase runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ended;

/// What a phase hands the next one, or [`Ended`].
type Phase<T = ()> = Result<T, Ended>;

pub(super) fn run(
    orch: &Orchestrator,
    req: &AttemptRequest<'_>,
    observer: &dyn Observer,
    cancel: &CancelToken,
) -> AttemptRecord {
    let mut r = Run::new(orch, req.attempt.clone(), req.number, observer);
    let mut ws: Option<Workspace> = None;
    // Every phase that ends the attempt has recorded its terminal state.
    let _ = drive(&mut r, req, cancel, &mut ws);
    // Every agent process is gone: its /logs are collected, whatever the outcome.
    r.collect_logs(
        &orch.work_root.join(req.attempt.id.to_string()),
        &req.artifacts_dir,
    );
    if let Some(w) = ws {
        let result = if req.options.keep_workspace {
            let dest = req.artifacts_dir.join("workspace");
            // With credentials declared, the kept repository is the baseline's again: the
            // agent's git objects are compressed, so a value in them could not be scrubbed.
            let kept = w.keep_at(&orch.cache, &dest).and_then(|()| {
                if r.redactor.is_empty() {
                    return Ok(());
                }
                w.reset_kept_history(&dest).inspect_err(|_| {
                    // Nothing that may hold a credential stays.
                    let _ = std::fs::remove_dir_all(&dest);
                })
            });
            kept.map(|()| {
                r.workspace.kept = true;
                r.workspace.path = Some(format!("{}/workspace", req.artifacts_rel));
            })
        } else {
            w.remove(&orch.cache)
        };
        if let Err(e) = result {
            // The verdict stands; the leftover is reported, not hidden.
            let msg = format!("workspace cleanup failed: {e}");
            r.cause = Some(match r.cause.take() {
                Some(c) => format!("{c}; {msg}"),
                None => msg,
            });
        }
    }
    // Everything stored is scrubbed: the files (evaluator output, report, logs, diff) and
    // the record's free text.
    r.scrub_artifacts(&req.artifacts_dir);
    let cause = r.cause.take();
    r.cause = r.scrub(cause);
    if !r.redactor.is_empty() {
        r.redactor.value(&mut r.observations, &mut r.redacted);
        r.redactor.value(&mut r.grade, &mut r.redacted);
        r.redactor.value(&mut r.process, &mut r.redacted);
    }
    AttemptRecord {
        attempt: r.attempt,
        number: r.number,
        transitions: r.transitions,
        state: r.state,
        cause: r.cause,
        workspace: r.workspace,
        agent_process: r.process,
        observations: r.observations,
        timings_ms: r.timings,
        grade: r.grade,
        artifacts_dir: req.artifacts_rel.clone(),
        graded_from: None,
        redacted: r.redacted.into_iter().collect(),
        provenance: Some(r.provenance),
        steps: r.steps,
        services: r.services.lock().map(|s| s.clone()).unwrap_or_default(),
    }
}

/// The phases in order, each ending the attempt or handing the next what it needs.
fn drive(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
    ws_slot: &mut Option<Workspace>,
) -> Phase {
    let work = preparing(r, req, cancel)?;
    let checked = validating(r, req, cancel)?;
    // The `container` runtime's image is held in use until the attempt ends.
    let image = configuring_runtime(r, req, &checked.endpoints, cancel)?;
    let image = image.as_ref().map(|(_, i)| i);
    let paths = creating_workspace(r, req, &work, ws_slot, image, cancel)?;
    // The agent's environment when the task grades in it: every process of it ends when
    // this returns, before the workspace is removed.
    let mut env = None;
    if !req.task.steps.is_empty() {
        // A multi-step task: its steps in one environment, inside EXECUTING; the trial's
        // grade from theirs.
        steps::run(r, req, cancel, checked, image, &paths, &mut env)?;
        let ws = ws_slot.as_ref().expect("workspace exists from here on");
        collecting(r, req, ws, None)?;
        r.stop_if_cancelled(cancel)?;
        steps::evaluating(r, req)?;
        return finalizing(r);
    }
    let started = starting_agent(r, req, cancel, checked, image, &paths, &mut env)?;
    let agent_event = executing(r, req, cancel, started)?;
    let ws = ws_slot.as_ref().expect("workspace exists from here on");
    let collected = collecting(r, req, ws, agent_event)?;
    r.stop_if_cancelled(cancel)?;
    evaluating(
        r,
        req,
        cancel,
        ws,
        &collected,
        &paths.root,
        phases::GradeIn {
            image,
            env: env.as_ref(),
        },
    )?;
    finalizing(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::lifecycle::validate_path;
    use std::sync::Arc;

    /// A step the lifecycle refuses is an orchestrator bug: the attempt ends
    /// `infrastructure_error` with the refusal as its cause, a valid history (it was a panic
    /// that took the worker's attempt thread down with no record).
    #[test]
    fn a_refused_step_ends_the_attempt_infrastructure_error_instead_of_panicking() {
        let tmp = tempfile::tempdir().unwrap();
        let orch = Orchestrator::new(tmp.path(), Arc::new(akbench_core::clock::SystemClock));
        let attempt = Identity {
            id: uuid::Uuid::now_v7(),
            key: "t/a1".into(),
        };
        let mut r = Run::new(&orch, attempt, 1, &super::super::Silent);
        assert_eq!(r.advance(None), Ok(()));
        // COMPLETED straight from PREPARING.
        assert_eq!(r.step(Event::Complete, None), Err(Ended));
        let states: Vec<State> = r.transitions.iter().map(|t| t.state).collect();
        assert_eq!(
            states,
            [State::Pending, State::Preparing, State::InfrastructureError]
        );
        validate_path(&states).unwrap();
        assert_eq!(r.state, State::InfrastructureError);
        let cause = r.cause.clone().unwrap();
        assert!(
            cause.starts_with("orchestrator bug: ") && cause.contains("Complete"),
            "{cause}"
        );
        assert_eq!(r.transitions[2].note.as_deref(), Some(cause.as_str()));
        // Once ended, a further refused step only joins the cause.
        assert_eq!(r.advance(None), Err(Ended));
        assert_eq!(r.transitions.len(), 3);
        assert_eq!(r.cause.unwrap().matches("orchestrator bug").count(), 2);
    }
}
