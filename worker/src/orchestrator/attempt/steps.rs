//! A multi-step attempt (a finite lifecycle, `[[steps]]`, Harbor 0.25's `MultiStepTrial`):
//! one environment for the whole attempt, its steps run in order inside the one EXECUTING
//! phase (no lifecycle state of their own: the attempt's states are a one-step attempt's).
//!
//! STARTING_AGENT starts the environment (the task's image, its `[environment]
//! healthcheck`) as for a task graded in the agent's environment. Then, per step, in
//! Harbor's order (`harbor/trial/multi_step.py`, `_run_step`): the step's `workdir/`
//! uploaded into the working folder and its `setup.sh` run there (exiting non-zero: the step
//! is not graded and stops the trial, as in Harbor), the step's healthcheck polled (failing
//! is the infrastructure's, as the task's is), the agent run with the step's instruction
//! ([`akbench_core::task::Task::step_view`]: its time limit, its solution for the oracle),
//! the step's artifacts collected, and the step graded in the environment with the task's
//! `tests/` merged with the step's. Each grading run gets its verifier folder and `/tests`
//! fresh (a grading slot of its own, bound only in the grader's mount namespace), so no
//! state of the previous step's grading is left. An agent that fails or runs out of time in
//! a step is still graded, as in Harbor. Whether the trial stops after a step (its
//! `min_reward` gate) and the trial's grade (`mean` or `final`) are core's
//! ([`akbench_core::record::steps`]); this module applies them.
//!
//! A step is graded as a one-step task graded in the agent's environment is: its tripwire
//! twin runs in the environment after the graded run, and the step's reference solution
//! (the twin's judge, the check that the grader works) is graded in a fresh environment
//! where every step before it ran first, each with its own solution
//! ([`StepReferences`], `orchestrator::container::stage::replay`). A cancel or an infrastructure failure in any step ends the attempt (retried whole
//! by the trial, never a step alone); the record keeps the steps that ran.

use super::phases::{
    launch, spawn_agent, start_env, wait_agent, Checked, StepMounts, WorkspacePaths,
};
use super::{Phase, Run};
use crate::evaluator::{evaluate, EvalPlace, EvalResult};
use crate::orchestrator::container::stage::{before_agent, refill, views, Place};
use crate::orchestrator::AttemptRequest;
use crate::process::CancelToken;
use crate::runtime::container::Image;
use crate::runtime::shared::Env;
use akbench_core::lifecycle::Event;
use akbench_core::record::steps::{
    end_step, rewards_from_json, summed_observations, take_spend, trial_grade, GradeBase,
    StepResult,
};
use akbench_core::record::Observations;
use akbench_core::task::Task;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The request of step `view` (named `name`): its task, its artifacts under
/// `steps/<name>/`.
fn step_request<'a>(req: &AttemptRequest<'a>, view: &'a Task, name: &str) -> AttemptRequest<'a> {
    AttemptRequest {
        task: view,
        agent: req.agent,
        attempt: req.attempt.clone(),
        number: req.number,
        artifacts_dir: req.artifacts_dir.join("steps").join(name),
        artifacts_rel: format!("{}/steps/{name}", req.artifacts_rel),
        options: req.options.clone(),
    }
}

/// STARTING_AGENT and EXECUTING of a multi-step attempt (see the module documentation);
/// `r.steps` holds every step, run or not, when it returns, also when it ends the attempt.
pub(super) fn run(
    r: &mut Run<'_>,
    req: &AttemptRequest<'_>,
    cancel: &CancelToken,
    checked: Checked,
    image: Option<&Image>,
    paths: &WorkspacePaths,
    env_slot: &mut Option<Env>,
) -> Phase {
    let task = req.task;
    r.advance(None)?;
    r.steps = task
        .steps
        .iter()
        .map(|s| StepResult::not_run(&s.config.name))
        .collect();
    let Some(image) = image else {
        return r.end(
            Event::Rejected,
            format!(
                "task `{}` is a multi-step task (`[[steps]]`), whose steps run in one environment, which only `runtime: container` provides; fix: run it with `--runtime container`",
                task.release.id
            ),
        );
    };
    let views = match views(task, &paths.root) {
        Ok(v) => v,
        Err(e) => return r.end(Event::InfrastructureFailed, e),
    };
    for (view, name) in views.iter().zip(task.steps.iter().map(|s| &s.config.name)) {
        if let Err(e) = checked.check_task(view) {
            return r.end(Event::Rejected, format!("step `{name}`: {e}"));
        }
    }
    let solution_folder = paths.root.join("solution");
    if let Err(e) = std::fs::create_dir_all(&solution_folder) {
        return r.end(
            Event::InfrastructureFailed,
            format!("failed to create {}: {e}", solution_folder.display()),
        );
    }
    let mounts = StepMounts {
        solutions: views
            .iter()
            .filter_map(|v| v.reference.as_ref().map(|(d, _)| d.clone()))
            .collect(),
        solution_folder: Some(solution_folder.clone()),
    };
    let names: Vec<String> = task.steps.iter().map(|s| s.config.name.clone()).collect();
    let first = step_request(req, &views[0], &names[0]);
    if let Err(e) = std::fs::create_dir_all(&first.artifacts_dir) {
        return r.end(
            Event::InfrastructureFailed,
            format!("failed to create {}: {e}", first.artifacts_dir.display()),
        );
    }
    let launched = launch(r, &first, cancel, &checked, Some(image), paths, &mounts)?;
    // The environment's own processes (upload, setup.sh, probes): without the credentials.
    let template = launched.without_secrets();
    let env = start_env(r, &first, req, cancel, &launched, &paths.root)?;
    let env = &*env_slot.insert(env);
    r.advance(Some(format!(
        "{} steps in one environment: {}; reward strategy `{}`",
        names.len(),
        names.join(", "),
        task.reward_strategy.as_str()
    )))?;
    let place = Place {
        env,
        template: &template,
        scratch: &paths.root,
        cancel,
    };
    let mut first_launch = Some(launched);
    let mut spent: Vec<Observations> = Vec::new();
    let mut grading = GradeBase {
        tests_digest: task.tests_digest.clone(),
        graded_at: r.orch.clock.now(),
        duration_ms: 0,
        tampered: None,
    };
    let mut graded_any = false;
    for (i, view) in views.iter().enumerate() {
        r.stop_if_cancelled(cancel)?;
        let step = &task.steps[i];
        let sreq = step_request(req, view, &names[i]);
        r.steps[i].started_at = Some(r.orch.clock.now());
        if let Err(e) = std::fs::create_dir_all(&sreq.artifacts_dir) {
            let cause = format!("failed to create {}: {e}", sreq.artifacts_dir.display());
            return end_in_step(r, i, Event::InfrastructureFailed, cause);
        }
        // The oracle's `/solution` is this step's.
        if let Err(e) = refill(
            &solution_folder,
            view.reference.as_ref().map(|(d, _)| d.as_path()),
        ) {
            return end_in_step(r, i, Event::InfrastructureFailed, e);
        }
        match before_agent(&place, step, &image.workdir) {
            Ok(None) => {}
            Ok(Some(why)) => r.steps[i].cause = Some(why),
            Err(e) => return end_in_step(r, i, Event::InfrastructureFailed, e),
        }
        if r.steps[i].cause.is_none() {
            // The agent, told the step's instruction.
            let launched = match first_launch.take() {
                Some(l) => l,
                None => launch(r, &sreq, cancel, &checked, Some(image), paths, &mounts)?,
            };
            let started = spawn_agent(r, &sreq, launched, Some(env))?;
            let agent_event = wait_agent(r, &sreq, cancel, started);
            r.steps[i].agent_exit = r.process.as_ref().and_then(|p| p.exit_code);
            take_spend(&mut r.steps[i], &r.observations);
            spent.push(r.observations.clone());
            r.observations = summed_observations(&spent);
            match agent_event {
                // Harbor grades a step whose agent failed or ran out of time.
                None | Some((Event::AgentFailed | Event::AgentTimedOut, _)) => {}
                Some((event, cause)) => {
                    return end_in_step(r, i, event, format!("step `{}`: {cause}", names[i]))
                }
            }
            r.steps[i].artifacts =
                collect_artifacts(r, &sreq, &step.config.artifacts, &image.workdir, paths);
            // Harbor's per-step `/logs/agent`: what the step's agent wrote there goes to the
            // step's artifacts (`steps/<name>/logs/agent/`), and the next step's agent
            // starts with it empty (`MultiStepTrial._reset_agent_logs_for_step`).
            r.collect_logs_of(&paths.root, &sreq.artifacts_dir, &["agent"]);
            if let Err(e) = refill(&paths.root.join("logs").join("agent"), None) {
                return end_in_step(r, i, Event::InfrastructureFailed, e);
            }
            if req.options.grade {
                let eval_root = paths.root.join("eval-steps").join(i.to_string());
                let evaluated = evaluate(
                    view,
                    &EvalPlace {
                        workspace: &paths.worktree,
                        eval_root: &eval_root,
                        artifacts_dir: &sreq.artifacts_dir,
                        log_prefix: "",
                        runtime: req.options.runtime,
                        // The tripwire twin runs here after the graded run; the step's
                        // reference in a fresh environment that replays the steps before.
                        workspaces: Some(&StepReferences {
                            orch: r.orch,
                            view,
                            image,
                            mutation_applied: req.options.apply_mutation,
                        }),
                        withheld: &[],
                        image: Some(image),
                        shared: Some(env),
                    },
                    r.orch.clock.as_ref(),
                    cancel,
                );
                match evaluated {
                    EvalResult::Graded(g) => {
                        if !graded_any {
                            grading.graded_at = g.graded_at;
                            graded_any = true;
                        }
                        grading.duration_ms = grading.duration_ms.saturating_add(g.duration_ms);
                        if g.tampered && grading.tampered.is_none() {
                            grading.tampered =
                                g.cause.clone().map(|c| format!("step `{}`: {c}", names[i]));
                        }
                        r.steps[i].rewards = Some(step_rewards(&g, &eval_root));
                        r.steps[i].tripwire = g.tripwire.clone();
                    }
                    EvalResult::Broken { cause, .. } => {
                        return end_in_step(
                            r,
                            i,
                            Event::EvaluationFailed,
                            format!("step `{}`: {cause}", names[i]),
                        )
                    }
                    EvalResult::FetchFailed { cause, .. } => {
                        return end_in_step(
                            r,
                            i,
                            Event::InfrastructureFailed,
                            format!("step `{}`: {cause}", names[i]),
                        )
                    }
                    EvalResult::Cancelled => {
                        let (event, cause) = cancel
                            .stop()
                            .unwrap_or(akbench_core::dispatch::Stop::Cancelled)
                            .end("while grading a step");
                        return end_in_step(r, i, event, cause);
                    }
                }
            }
        }
        r.steps[i].ended_at = Some(r.orch.clock.now());
        let stop = end_step(
            &mut r.steps[i],
            step.config.min_reward.as_ref(),
            task.pass_threshold,
            req.options.grade,
        );
        if stop {
            break;
        }
    }
    r.steps_grading = Some(grading);
    Ok(())
}

/// The other workspaces a step's grade needs: only the reference environment. A step is
/// graded in the agent's environment, so its tripwire twin runs there and no fresh copy of
/// the agent's work is made; its reference solution runs in a fresh environment of the
/// image where the steps before it ran with their solutions (`rebuild::reference_env`
/// replays the view's `StepOf::replay`).
struct StepReferences<'a> {
    orch: &'a crate::orchestrator::Orchestrator,
    view: &'a Task,
    image: &'a Image,
    mutation_applied: bool,
}

impl crate::evaluator::Workspaces for StepReferences<'_> {
    fn agent_copy(&self, _dir: &Path) -> Result<crate::evaluator::FreshWorkspace, String> {
        Err(
            "a step is graded in the agent's environment: there is no fresh copy of its work"
                .into(),
        )
    }

    fn reference(
        &self,
        _dir: &Path,
        _cancel: &CancelToken,
    ) -> Result<crate::evaluator::FreshWorkspace, String> {
        Err("a step's reference solution is graded in an environment of its own".into())
    }

    fn reference_env(
        &self,
        dir: &Path,
        cancel: &CancelToken,
    ) -> Result<crate::evaluator::ReferenceEnv, String> {
        crate::orchestrator::rebuild::reference_env(
            self.orch,
            self.view,
            self.image,
            dir,
            (self.mutation_applied, true),
            cancel,
        )?
        .map_err(|e| format!("the step's reference solution did not run to its end: {e}"))
    }
}

/// A graded step's rewards: every numeric key of the `reward.json` its grading wrote (a
/// keyed `min_reward` reads them), else its score as `reward` (a `reward.txt`, a grade
/// without a reward file, or tampering: then 0).
fn step_rewards(g: &akbench_core::record::Grade, eval_root: &Path) -> BTreeMap<String, f64> {
    let score = BTreeMap::from([("reward".to_string(), g.score)]);
    if g.tampered || g.source != "reward_json" {
        return score;
    }
    // The grader's own folder, bound only in its mount namespace.
    let file = eval_root
        .join(crate::evaluator::SLOT)
        .join("verifier")
        .join("reward.json");
    akbench_core::bounded_read::read_text(
        &file,
        crate::evaluator::outputs::REWARD_CAP,
        akbench_core::bounded_read::Links::Refuse,
    )
    .ok()
    .and_then(|t| rewards_from_json(&t))
    .unwrap_or(score)
}

/// Ends the attempt with `event` while step `i` ran: the step's end time and cause kept.
fn end_in_step(r: &mut Run<'_>, i: usize, event: Event, cause: String) -> Phase {
    let step = &mut r.steps[i];
    step.ended_at = Some(r.orch.clock.now());
    step.cause.get_or_insert_with(|| cause.clone());
    step.verdict = akbench_core::record::steps::StepVerdict::NotGraded;
    r.end(event, cause)
}

/// EVALUATING of a multi-step attempt: the trial's grade from its steps' by the task's
/// strategy ([`trial_grade`]); none when no step was graded.
pub(super) fn evaluating(r: &mut Run<'_>, req: &AttemptRequest<'_>) -> Phase {
    if !req.options.grade {
        return r.advance(Some(crate::orchestrator::rebuild::NOT_REQUESTED.into()));
    }
    r.advance(None)?;
    let Some(base) = r.steps_grading.take() else {
        return Ok(());
    };
    let task = req.task;
    match trial_grade(&r.steps, task.reward_strategy, task.pass_threshold, base) {
        Some(g) => {
            let note = crate::orchestrator::rebuild::verdict_note(&g);
            if let Some(c) = g.cause.clone() {
                r.join_cause(c);
            }
            r.grade = Some(g);
            r.annotate(note);
        }
        None => {
            let why = r
                .steps
                .iter()
                .find_map(|s| s.cause.clone())
                .unwrap_or_else(|| "no step was graded".into());
            r.join_cause(format!("no step was graded: {why}"));
        }
    }
    Ok(())
}

/// Copies the step's `artifacts` (paths in the working folder or under `/logs/artifacts`,
/// as the task's checks allow) into `steps/<name>/artifacts/`, capped and scrubbed like the
/// agent's logs; a path through a link is left out. Returns their paths relative to the
/// record's folder.
fn collect_artifacts(
    r: &mut Run<'_>,
    sreq: &AttemptRequest<'_>,
    sources: &[String],
    workdir: &str,
    paths: &WorkspacePaths,
) -> Vec<String> {
    use akbench_core::artifacts::{Budget, CAP_BYTES};
    let mut budget = Budget::new(CAP_BYTES);
    let mut out = Vec::new();
    let workdir = workdir.trim_end_matches('/');
    for source in sources {
        let (root, rel) = if let Some(rel) = source
            .strip_prefix(&format!("{workdir}/"))
            .or_else(|| (!source.starts_with('/')).then_some(source.as_str()))
        {
            (paths.worktree.clone(), rel.to_string())
        } else if let Some(rel) = source.strip_prefix("/logs/artifacts/") {
            (paths.root.join("logs").join("artifacts"), rel.to_string())
        } else {
            continue;
        };
        let Some(from) = no_links(&root, &rel) else {
            continue;
        };
        let name = rel.trim_matches('/').to_string();
        let to = sreq.artifacts_dir.join("artifacts").join(&name);
        if let Some(parent) = to.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                r.join_cause(format!(
                    "failed to collect the step's artifact {source}: {e}"
                ));
                continue;
            }
        }
        match crate::scrub::collect(&r.redactor, &from, &to, &name, &mut budget, &mut r.redacted) {
            Ok(()) if to.exists() => out.push(format!("{}/artifacts/{name}", sreq.artifacts_rel)),
            Ok(()) => {}
            Err(e) => r.join_cause(format!(
                "failed to collect the step's artifact {source}: {e}"
            )),
        }
    }
    out
}

/// `root/rel` when no component of `rel` is a link (the agent's files are never followed
/// out of its folder).
fn no_links(root: &Path, rel: &str) -> Option<PathBuf> {
    let mut p = root.to_path_buf();
    for part in rel.split('/').filter(|s| !s.is_empty() && *s != ".") {
        if part == ".." {
            return None;
        }
        p.push(part);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => return None,
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    Some(p)
}
