//! [`SchedulerWork`]: the scheduler's implementation of [`WorkControl`] (`StartRun`,
//! `ResumeRun`, `CancelRun`).
//!
//! Starting a run fixes its ready plan: one work item per planned trial, with the plan's
//! retry budget and the run's concurrency caps, created by PostgreSQL from the stored plan
//! (the plan never passes through the coordinator: its memory stays flat in the plan size).
//! The run's agent conditions are stored once; each worker receives the canonical
//! `akbench_core::work::WorkItem` document (the trial plus its exact agent condition),
//! composed when the item is claimed. A run starts once; a second start creates nothing. Resuming expires stale leases (their attempts are recorded as
//! infrastructure errors and re-queued within budget) and wakes the dispatchers; with grading
//! on it also queues grade work for what was executed but not graded
//! ([`crate::grade_work`]). Cancelling
//! cancels queued items at once and tells the workers of running attempts to stop.

use crate::error::ControlError;
use crate::evidence::{find_run, RunSummary};
use crate::rows::col;
use crate::scheduler::{Caps, RunAgent, SchedulerError};
use crate::store::Store;
use crate::work_control::{Cancelled, Resumed, WorkControl, WorkFuture};
use crate::workers_service::WorkersService;
use akbench_core::digest::sealed_digest;
use akbench_core::dispatch::machine::{run_on, RunEvent};
use akbench_core::dispatch::RunState;
use akbench_core::spec::{ExecutionPolicy, SpecAgent};
use uuid::Uuid;

/// The [`WorkControl`] of a coordinator with its scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerWork {
    workers: WorkersService,
}

impl SchedulerWork {
    /// Runs start, resume and cancel through `workers` (its scheduler and session registry).
    pub fn new(workers: WorkersService) -> Self {
        Self { workers }
    }

    async fn summary(&self, run_id: Uuid) -> Result<RunSummary, ControlError> {
        find_run(self.workers.scheduler().store(), &run_id.to_string()).await
    }

    async fn start_run(&self, run_id: Uuid) -> Result<u64, ControlError> {
        let store = self.workers.scheduler().store();
        let run = self.summary(run_id).await?;
        if run.state != RunState::Planned {
            return Ok(0);
        }
        let (spec_agents, execution) = start_condition(store, &run).await?;
        let c = &execution.concurrency;
        let caps = Caps {
            limits: c.caps(),
            worker_labels: execution.worker_labels.clone(),
            share: execution.share(),
        };
        let agents = spec_agents
            .iter()
            .map(|a| {
                Ok(RunAgent {
                    label: a.label.clone(),
                    provider_route: a.provider_route.clone(),
                    document: serde_json::to_value(a).map_err(|e| ControlError::Corrupt {
                        run: run.run_key.clone(),
                        problem: e.to_string(),
                    })?,
                })
            })
            .collect::<Result<Vec<_>, ControlError>>()?;
        // Only the call that moves the run from planned to running creates its items, in
        // the same transaction.
        let Some(created) = self
            .workers
            .scheduler()
            .start_run(run_id, &caps, &agents)
            .await
            .map_err(|e| match e {
                SchedulerError::Malformed { reason, .. } => ControlError::Corrupt {
                    run: run.run_key.clone(),
                    problem: reason,
                },
                other => scheduler_error("start run", other),
            })?
        else {
            return Ok(0);
        };
        tracing::info!(run = %run.run_key, created, "run started");
        Ok(created)
    }

    async fn resume_run(&self, run_id: Uuid, grade: bool) -> Result<Resumed, ControlError> {
        let run = self.summary(run_id).await?;
        let state = run.state;
        if state != RunState::Planned && grade {
            // Core's run machine: a cancelled run takes no grade work.
            if let Err(refusal) = run_on(state, RunEvent::Grade { has_work: true }) {
                return Err(ControlError::Precondition {
                    action: "grade",
                    run: run.run_key,
                    problem: refusal.to_string(),
                });
            }
        }
        if state == RunState::Planned {
            // Nothing ran yet: starting it is all resuming can do (there is nothing to grade).
            let requeued = self.start_run(run_id).await?;
            return Ok(Resumed {
                requeued,
                ..Resumed::default()
            });
        }
        let s = self.workers.scheduler();
        let requeued = s
            .resume_run(run_id)
            .await
            .map_err(|e| scheduler_error("resume run", e))?;
        let mut resumed = Resumed {
            requeued: requeued.len() as u64,
            ..Resumed::default()
        };
        if grade {
            let queued = crate::grade_work::queue_grading(s, run_id)
                .await
                .map_err(ControlError::store("grade run"))?;
            resumed.grading = queued.queued;
            resumed.not_gradable = queued.skipped.len() as u64;
        }
        s.wake_claimer();
        Ok(resumed)
    }

    async fn cancel_run(&self, run_id: Uuid, reason: String) -> Result<Cancelled, ControlError> {
        let _ = self.summary(run_id).await?;
        let report = self
            .workers
            .cancel_run(run_id)
            .await
            .map_err(|e| scheduler_error("cancel run", e))?;
        let unchanged = report.unchanged.map(|(state, why)| why.explain(state));
        match &unchanged {
            Some(why) => tracing::info!(%run_id, %reason, "run not cancelled: {why}"),
            None => {
                tracing::info!(%run_id, %reason, queued = report.cancelled_items, live = report.live.len(), "run cancelled")
            }
        }
        Ok(Cancelled {
            live: report.live.len() as u64,
            unchanged,
        })
    }
}

const START_CONDITION_SQL: &str = include_str!("../sql/scheduler/start_condition.sql");

/// The agent conditions (each checked against its digest) and the execution policy of a
/// run's stored spec: only what starting needs, read by PostgreSQL out of the document, so
/// that the coordinator does not hold the spec's task list (as long as the plan's).
async fn start_condition(
    store: &Store,
    run: &RunSummary,
) -> Result<(Vec<SpecAgent>, ExecutionPolicy), ControlError> {
    let corrupt = |problem: String| ControlError::Corrupt {
        run: run.run_key.clone(),
        problem,
    };
    let client = store
        .client()
        .await
        .map_err(ControlError::store("read spec"))?;
    let row = client
        .query_one(START_CONDITION_SQL, &[&run.run_id])
        .await
        .map_err(|e| ControlError::store("read spec")(e.into()))?;
    let text = |name: &'static str| -> Result<String, ControlError> {
        col::<Option<String>>(&row, name)
            .map_err(|e| corrupt(e.to_string()))?
            .ok_or_else(|| corrupt(format!("the spec has no condition.{name}")))
    };
    let agents: Vec<SpecAgent> = serde_json::from_str(&text("agents")?)
        .map_err(|e| corrupt(format!("the spec's agents do not parse: {e}")))?;
    if let Some(a) = agents.iter().find(|a| a.digest != sealed_digest(a)) {
        return Err(corrupt(format!(
            "agent `{}` does not match its digest",
            a.label
        )));
    }
    let execution: ExecutionPolicy = serde_json::from_str(&text("execution")?)
        .map_err(|e| corrupt(format!("the spec's execution policy does not parse: {e}")))?;
    Ok((agents, execution))
}

fn scheduler_error(action: &'static str, e: SchedulerError) -> ControlError {
    match e {
        SchedulerError::Store(s) => ControlError::store(action)(s),
        other => ControlError::Unavailable {
            action,
            problem: other.to_string(),
        },
    }
}

impl WorkControl for SchedulerWork {
    fn start(&self, run_id: Uuid) -> WorkFuture<'_, u64> {
        Box::pin(self.start_run(run_id))
    }

    fn resume(&self, run_id: Uuid, grade: bool) -> WorkFuture<'_, Resumed> {
        Box::pin(self.resume_run(run_id, grade))
    }

    fn cancel(&self, run_id: Uuid, reason: String) -> WorkFuture<'_, Cancelled> {
        Box::pin(self.cancel_run(run_id, reason))
    }

    fn lift_route(&self, route: String) -> WorkFuture<'_, Option<akbench_core::route_pause::Lift>> {
        Box::pin(async move {
            let before = self
                .workers
                .scheduler()
                .lift_route_pause(&route)
                .await
                .map_err(|e| scheduler_error("resume route", e))?;
            if let Some(b) = &before {
                tracing::info!(%route, was_paused = b.was_paused, was_paused_until = ?b.before.paused_until, "route pause lifted by hand");
            }
            Ok(before)
        })
    }
}
