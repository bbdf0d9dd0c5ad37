//! `akbench view --coordinator URL`: the coordinator's gRPC `Control` API (with the token and
//! TLS of every remote command) as a viewer [`Backend`]: runs from `ListRuns`, live status
//! from `GetStatus`, the run page's compact trial rows from `ListTrialRows` (the rows the
//! coordinator's own HTTP listener aggregates, never whole records) and one trial's record
//! from `FetchRecords`. Artifacts (logs, diffs) live in the workers' artifact store;
//! `--artifacts DIR` points at it when it is a folder.

use crate::remote::{state_name, Client};
use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_core::spend::Spend;
use akbench_proto::v1 as pb;
use akbench_viewer::live::{Live, PausedRoute};
use akbench_viewer::model::{bucket_named, CompactTrial, RunItem, TrialRow};
use akbench_viewer::source::{
    artifacts_under, run_of_trial, Artifacts, Backend, Snapshot, SourceError,
};
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use tokio_stream::StreamExt;
use tonic::Code;

/// Runs shown on the runs list (the newest).
pub const LIST_RUNS: u32 = 50;

/// The coordinator behind a gRPC client.
#[derive(Debug, Clone)]
pub struct GrpcBackend {
    /// The connected client.
    pub client: Client,
    /// The artifact folder, when the workers' store is one this machine can read.
    pub artifacts: Option<PathBuf>,
}

fn at(unix_ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(unix_ms).unwrap_or_default()
}

/// A `ListTrialRows` row as the viewer's trial row ([`TrialRow::compact`], as the
/// coordinator's own viewer builds it; the run key is the trial key's first part); an unknown
/// bucket or terminal state is an error.
pub fn trial_row(r: pb::TrialRow) -> Result<TrialRow, String> {
    let bucket = bucket_named(&r.bucket)
        .ok_or_else(|| format!("trial `{}` has an unknown bucket `{}`", r.key, r.bucket))?;
    let state = State::parse(&r.terminal).ok_or_else(|| {
        format!(
            "trial `{}` has an unknown terminal state `{}`",
            r.key, r.terminal
        )
    })?;
    Ok(TrialRow::compact(CompactTrial {
        run: run_of_trial(&r.key).to_string(),
        bucket,
        state,
        cause: r.cause,
        attempts: r.attempts,
        score: r.score,
        spend: Spend {
            input_tokens: r.input_tokens,
            cached_input_tokens: r.cached_input_tokens,
            output_tokens: r.output_tokens,
            cost_usd: r.cost_usd,
        },
        duration_ms: r.duration_ms,
        grading: akbench_core::grading::integrity::GradeFlags {
            tampered: r.tampered,
            withheld: r.withheld,
            unguarded: r.unguarded,
        },
        ordinal: r.ordinal,
        key: r.key,
        agent: r.agent,
    }))
}

/// A gRPC status as the viewer's live status.
pub fn snapshot(s: &pb::RunStatus) -> Snapshot {
    let run = s.run.clone().unwrap_or_default();
    Snapshot {
        run: run.run_key,
        live: Live {
            state: state_name(run.state),
            planned: s.planned,
            queued: s.queued,
            running: s.running,
            finished: s.finished,
            workers: s.workers,
            throughput_per_minute: s.throughput_per_minute,
            eta: s.eta_unix_ms.map(at),
            as_of: at(s.as_of_unix_ms),
            paused_routes: s
                .paused_routes
                .iter()
                .map(|p| PausedRoute {
                    route: p.route.clone(),
                    consecutive_failures: p.consecutive_failures,
                    paused_until: at(p.paused_until_unix_ms),
                    last_error: p.last_error.clone(),
                })
                .collect(),
        },
        outcomes: s
            .outcomes
            .iter()
            .filter(|c| c.count > 0)
            .map(|c| (c.state.clone(), c.count))
            .collect(),
        agents: s
            .agents
            .iter()
            .map(|a| {
                let r = a.rates.unwrap_or_default();
                (a.agent.clone(), (r.pass_rate, r.graded))
            })
            .collect(),
    }
}

impl GrpcBackend {
    fn read_error(&self, what: &str, s: tonic::Status) -> SourceError {
        SourceError::read(what, self.client.error(s))
    }

    async fn get_status(&self, run: &str) -> Result<Option<pb::RunStatus>, SourceError> {
        let mut c = self.client.inner.clone();
        match c
            .get_status(self.client.request(pb::GetStatusRequest {
                run: run.to_string(),
            }))
            .await
        {
            Ok(r) => Ok(Some(r.into_inner())),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(self.read_error(&format!("the status of run `{run}`"), s)),
        }
    }

    async fn fetch(&self, run: &str, trials: Vec<String>) -> Result<Vec<RunRecord>, SourceError> {
        let what = format!("the records of run `{run}`");
        let mut c = self.client.inner.clone();
        let opened = c
            .fetch_records(self.client.request(pb::FetchRecordsRequest {
                run: run.to_string(),
                trials,
            }))
            .await;
        let mut out = Vec::new();
        self.drain(&what, opened, |m| {
            if !m.not_exported.is_empty() {
                // A trial the coordinator counts but cannot export: nothing to show.
                return Ok(());
            }
            let r: RunRecord = serde_json::from_str(&m.record_json)
                .map_err(|e| SourceError::read(&what, format!("a record does not parse: {e}")))?;
            out.push(r);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// `ListTrialRows`: the done trials of `run` after `after`, at most `limit` (0: all).
    async fn list(
        &self,
        what: String,
        run: &str,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<TrialRow>, SourceError> {
        let mut c = self.client.inner.clone();
        let opened = c
            .list_trial_rows(self.client.request(pb::ListTrialRowsRequest {
                run: run.to_string(),
                after,
                limit,
                ended_after_unix_ms: None,
            }))
            .await;
        let mut out = Vec::new();
        self.drain(&what, opened, |batch| {
            for r in batch.rows {
                out.push(trial_row(r).map_err(|e| SourceError::read(&what, e))?);
            }
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Reads a server stream opened for `what` to its end, each message through `each`. A run
    /// the coordinator does not know (or a name it refuses) reads as an empty stream.
    async fn drain<M>(
        &self,
        what: &str,
        opened: Result<tonic::Response<tonic::Streaming<M>>, tonic::Status>,
        mut each: impl FnMut(M) -> Result<(), SourceError>,
    ) -> Result<(), SourceError> {
        let mut stream = match opened {
            Ok(r) => r.into_inner(),
            Err(s) if matches!(s.code(), Code::NotFound | Code::InvalidArgument) => return Ok(()),
            Err(s) => return Err(self.read_error(what, s)),
        };
        while let Some(m) = stream.next().await {
            each(m.map_err(|s| self.read_error(what, s))?)?;
        }
        Ok(())
    }
}

impl Backend for GrpcBackend {
    fn origin(&self) -> String {
        format!("the coordinator at {}", self.client.url())
    }

    async fn runs(&self) -> Result<Vec<RunItem>, SourceError> {
        let mut c = self.client.inner.clone();
        let list = c
            .list_runs(self.client.request(pb::ListRunsRequest {
                page_size: LIST_RUNS,
                ..Default::default()
            }))
            .await
            .map_err(|s| self.read_error("the runs", s))?
            .into_inner();
        let mut out = Vec::with_capacity(list.runs.len());
        for r in list.runs {
            let status = self.get_status(&r.run_key).await?;
            let rates = status.as_ref().and_then(|s| s.rates).unwrap_or_default();
            out.push(RunItem {
                state: Some(state_name(r.state)),
                created: chrono::DateTime::from_timestamp_millis(r.created_at_unix_ms),
                done: status.as_ref().map_or(0, |s| s.finished),
                planned: Some(r.trial_count),
                agents: status
                    .as_ref()
                    .map(|s| s.agents.iter().map(|a| a.agent.clone()).collect())
                    .unwrap_or_default(),
                tasks: None,
                pass_rate: rates.pass_rate,
                solve_rate: rates.solve_rate,
                key: r.run_key,
            });
        }
        Ok(out)
    }

    async fn status(&self, run: &str) -> Result<Option<Snapshot>, SourceError> {
        Ok(self.get_status(run).await?.as_ref().map(snapshot))
    }

    async fn rows(&self, run: &str) -> Result<Vec<TrialRow>, SourceError> {
        self.list(format!("the trials of run `{run}`"), run, None, 0)
            .await
    }

    async fn page(
        &self,
        run: &str,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<TrialRow>, SourceError> {
        self.list(
            format!("a page of the trials of run `{run}`"),
            run,
            after,
            limit,
        )
        .await
    }

    async fn record(&self, trial: &str) -> Result<Option<RunRecord>, SourceError> {
        Ok(self
            .fetch(run_of_trial(trial), vec![trial.to_string()])
            .await?
            .into_iter()
            .next())
    }

    fn artifacts(&self, trial: &str) -> Artifacts {
        artifacts_under(self.artifacts.as_deref(), trial)
    }
}
