//! The coordinator's own data as a viewer [`Backend`] ([`akbench_viewer`]): runs from the
//! evidence store, live status from [`run_status`] (the projection gRPC and `/api/.../status`
//! show), records assembled by [`crate::trial_records`] exactly as `FetchRecords` streams
//! them. The HTTP listener serves the viewer's pages over it ([`crate::http`]). Read-only.

use std::path::PathBuf;

use akbench_core::record::RunRecord;
use akbench_proto::v1 as pb;
use akbench_viewer::live::{Live, PausedRoute};
use akbench_viewer::source::{
    artifacts_under, run_of_trial, Artifacts, Backend, RunItem, Snapshot, SourceError,
};
use tokio::sync::mpsc;
use tonic::Status;
use uuid::Uuid;

use crate::error::ControlError;
use crate::evidence;
use crate::status::{run_status, RunStatus, StatusOptions};
use crate::store::Store;

/// Runs shown on the runs list (the newest).
pub const LIST_RUNS: u32 = 50;

/// The coordinator's database as a viewer backend.
#[derive(Debug, Clone)]
pub struct StoreBackend {
    /// The database.
    pub store: Store,
    /// Status windows.
    pub status: StatusOptions,
    /// The workers' artifact folder, when the coordinator was given one (`--artifacts`).
    pub artifacts: Option<PathBuf>,
}

/// The coordinator's status as the viewer's live status.
pub fn snapshot(s: &RunStatus) -> Snapshot {
    Snapshot {
        run: s.run.run_key.clone(),
        live: Live {
            state: s.run.state.clone(),
            planned: s.planned,
            queued: s.queued,
            running: s.running,
            finished: s.finished,
            workers: s.workers,
            throughput_per_minute: s.throughput_per_minute,
            eta: s.eta,
            as_of: s.as_of,
            paused_routes: s
                .paused_routes
                .iter()
                .map(|p| PausedRoute {
                    route: p.route.clone(),
                    consecutive_failures: p.consecutive_failures,
                    paused_until: p.paused_until,
                    last_error: p.last_error.clone(),
                })
                .collect(),
        },
        outcomes: s.outcomes.clone(),
        agents: s
            .agents
            .iter()
            .map(|a| (a.agent.clone(), (a.rates.pass_rate, a.rates.graded)))
            .collect(),
    }
}

fn read(what: &str) -> impl Fn(ControlError) -> SourceError + '_ {
    move |e| SourceError::read(what, e)
}

impl StoreBackend {
    async fn status_of(&self, run: &str) -> Result<Option<RunStatus>, SourceError> {
        match run_status(&self.store, run, self.status).await {
            Ok(s) => Ok(Some(s)),
            Err(ControlError::RunNotFound(_) | ControlError::Invalid { .. }) => Ok(None),
            Err(e) => Err(SourceError::read(format!("the status of run `{run}`"), e)),
        }
    }

    /// The records of `run` (of `trials` only, unless empty), in plan order.
    async fn fetch(&self, run: &str, trials: Vec<Uuid>) -> Result<Vec<RunRecord>, SourceError> {
        let what = format!("the records of run `{run}`");
        let summary = match evidence::find_run(&self.store, run).await {
            Ok(s) => s,
            Err(ControlError::RunNotFound(_) | ControlError::Invalid { .. }) => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(read(&what)(e)),
        };
        let spec = evidence::spec(&self.store, &summary)
            .await
            .map_err(read(&what))?;
        let client = self
            .store
            .client()
            .await
            .map_err(|e| SourceError::read(&what, e))?;
        let (tx, mut rx) = mpsc::channel::<Result<pb::RunRecord, Status>>(64);
        let db = |e: tokio_postgres::Error| Status::unavailable(e.to_string());
        tokio::spawn(crate::trial_records::send(client, spec, trials, tx, db));
        let mut out = Vec::new();
        while let Some(m) = rx.recv().await {
            let m = m.map_err(|s| SourceError::read(&what, s.message()))?;
            out.push(
                serde_json::from_str(&m.record_json).map_err(|e| {
                    SourceError::read(&what, format!("a record does not parse: {e}"))
                })?,
            );
        }
        Ok(out)
    }
}

impl Backend for StoreBackend {
    fn origin(&self) -> String {
        "this coordinator".into()
    }

    async fn runs(&self) -> Result<Vec<RunItem>, SourceError> {
        let runs = evidence::list_runs(&self.store, LIST_RUNS, None, "")
            .await
            .map_err(read("the runs"))?;
        let mut out = Vec::with_capacity(runs.len());
        for (_, r) in runs {
            let s = self.status_of(&r.run_key).await?;
            out.push(RunItem {
                done: s.as_ref().map_or(0, |s| s.finished),
                planned: Some(r.trial_count),
                agents: s
                    .as_ref()
                    .map(|s| s.agents.iter().map(|a| a.agent.clone()).collect())
                    .unwrap_or_default(),
                tasks: None,
                pass_rate: s.as_ref().and_then(|s| s.rates.pass_rate),
                solve_rate: None,
                state: Some(r.state),
                key: r.run_key,
            });
        }
        Ok(out)
    }

    async fn status(&self, run: &str) -> Result<Option<Snapshot>, SourceError> {
        Ok(self.status_of(run).await?.as_ref().map(snapshot))
    }

    async fn records(&self, run: &str) -> Result<Vec<RunRecord>, SourceError> {
        self.fetch(run, Vec::new()).await
    }

    async fn record(&self, trial: &str) -> Result<Option<RunRecord>, SourceError> {
        let what = format!("the record of trial `{trial}`");
        let client = self
            .store
            .client()
            .await
            .map_err(|e| SourceError::read(&what, e))?;
        let row = client
            .query_opt(
                "SELECT trial_id FROM planned_trials WHERE key = $1",
                &[&trial],
            )
            .await
            .map_err(|e| SourceError::read(&what, e))?;
        let Some(row) = row else { return Ok(None) };
        let id: Uuid = row.get(0);
        Ok(self
            .fetch(run_of_trial(trial), vec![id])
            .await?
            .into_iter()
            .next())
    }

    fn artifacts(&self, trial: &str) -> Artifacts {
        artifacts_under(self.artifacts.as_deref(), trial)
    }
}
