//! The coordinator's own data as a viewer [`Backend`] ([`akbench_viewer`]): runs from the
//! evidence store with their progress from the runs' counters ([`runs_progress`], one query
//! for the whole list), live status from [`run_status`] (the projection gRPC and
//! `/api/.../status` show), one compact row per done trial for the run page
//! (`sql/control/view_rows.sql`: never whole records, read in keyset pages by plan ordinal,
//! a whole run for a page that aggregates it, one page for a run too big to), and a trial's record
//! assembled by [`crate::trial_records`] exactly as `FetchRecords` streams it. The HTTP listener serves the viewer's pages over it ([`crate::http`]). Read-only.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::spend::Spend;
use akbench_proto::v1 as pb;
use akbench_viewer::live::{Live, PausedRoute};
use akbench_viewer::model::{bucket_named, CompactTrial, RunItem, TrialRow};
use akbench_viewer::source::{
    artifacts_under, run_of_trial, Artifacts, Backend, Snapshot, SourceError,
};
use tokio::sync::mpsc;
use tonic::Status;
use uuid::Uuid;

use crate::error::ControlError;
use crate::evidence::{self, RunSummary};
use crate::rows::{self, col, count, count_opt, parsed, RowError};
use crate::status::{run_status, runs_progress, RunStatus, StatusOptions};
use crate::store::Store;

const VIEW_ROWS_SQL: &str = include_str!("../sql/control/view_rows.sql");
const TRIAL_OF_KEY_SQL: &str = include_str!("../sql/control/trial_of_key.sql");

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
    /// The verified specs of the runs whose records were read lately.
    pub specs: SpecCache,
}

/// How many runs' verified specs a [`SpecCache`] keeps.
pub const SPECS_KEPT: usize = 2;

/// The verified specs of the last [`SPECS_KEPT`] runs whose records were read, by run and
/// spec digest. A stored spec never changes (append-only), and a trial page needs its run's
/// whole spec: a 50,000-task spec is 22 MB to read and ~0.35 s to verify, which every trial
/// page of a million-trial run paid. Two at most: a parsed spec of that size holds tens of
/// MB (not measured).
#[derive(Debug, Clone, Default)]
pub struct SpecCache(Arc<Mutex<Vec<KeptSpec>>>);

/// A run, its spec's digest and the verified spec.
type KeptSpec = (Uuid, String, Arc<ResolvedRunSpec>);

impl SpecCache {
    /// The spec of `run`, from the cache or read (and verified) from `store`.
    pub async fn spec(
        &self,
        store: &Store,
        run: &RunSummary,
    ) -> Result<Arc<ResolvedRunSpec>, ControlError> {
        if let Some(spec) = self.get(run) {
            return Ok(spec);
        }
        let spec = Arc::new(evidence::spec(store, run).await?);
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(id, _, _)| *id != run.run_id);
        if kept.len() >= SPECS_KEPT {
            kept.remove(0);
        }
        kept.push((run.run_id, run.spec_digest.clone(), Arc::clone(&spec)));
        Ok(spec)
    }

    /// The cached spec of `run` (the same digest), if any.
    pub fn get(&self, run: &RunSummary) -> Option<Arc<ResolvedRunSpec>> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .find(|(id, digest, _)| *id == run.run_id && *digest == run.spec_digest)
            .map(|(_, _, spec)| Arc::clone(spec))
    }
}

/// The coordinator's status as the viewer's live status.
pub fn snapshot(s: &RunStatus) -> Snapshot {
    Snapshot {
        run: s.run.run_key.clone(),
        live: Live {
            state: s.run.state.as_str().to_string(),
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

/// A row of `view_rows.sql` as the viewer's trial row ([`TrialRow::compact`]: the bucket is
/// the one the scheduler stored, `ok` follows from it). A bad row (an unknown bucket or
/// terminal state, a negative count, a NULL where none belongs) is an error.
fn row(run: &str, r: &tokio_postgres::Row) -> Result<TrialRow, RowError> {
    let attempts = count(r, "attempts")?;
    Ok(TrialRow::compact(CompactTrial {
        run: run.to_string(),
        key: col(r, "key")?,
        agent: col(r, "agent")?,
        bucket: parsed(r, "bucket", bucket_named)?,
        state: parsed(r, "terminal", State::parse)?,
        cause: col(r, "cause")?,
        attempts: u32::try_from(attempts).map_err(|_| RowError::Value {
            column: "attempts",
            problem: format!("{attempts} attempts is more than a trial can have"),
        })?,
        score: col(r, "score")?,
        spend: Spend {
            input_tokens: count_opt(r, "input_tokens")?,
            cached_input_tokens: count_opt(r, "cached_input_tokens")?,
            output_tokens: count_opt(r, "output_tokens")?,
            cost_usd: col(r, "cost_usd")?,
        },
        duration_ms: col(r, "duration_ms")?,
        grading: akbench_core::grading::integrity::GradeFlags {
            tampered: col(r, "tampered")?,
            withheld: col(r, "withheld")?,
            unguarded: col(r, "unguarded")?,
        },
        ordinal: count(r, "ordinal")?,
    }))
}

/// Rows read per query when [`trial_rows`] reads a whole run.
pub const TRIAL_ROWS_PAGE: u32 = 10_000;

/// One page of the compact rows of `run`'s done trials, in plan order (`view_rows.sql`):
/// those whose ordinal is above `after` (all, when `None`), at most `limit` of them (all,
/// when `None`). Keyset paging on the partial index of migration 0027: a page costs its own
/// rows at any run size, and consecutive pages (each `after` the last row's ordinal) lose
/// and repeat no trial that stays done.
pub async fn trial_rows_page(
    store: &Store,
    run: &RunSummary,
    after: Option<u64>,
    limit: Option<u32>,
) -> Result<Vec<TrialRow>, ControlError> {
    Ok(trial_rows_ended(store, run, after, limit, None)
        .await?
        .into_iter()
        .map(|(row, _)| row)
        .collect())
}

/// [`trial_rows_page`] of the trials that ended at or after `ended_after` (milliseconds since
/// the epoch, the database's clock; `None`: every done trial), each row with when it ended
/// (milliseconds, rounded down): what `ListTrialRows` streams. Read through the partial
/// index `work_items_done_at` when bounded, so a poll for what ended since costs those rows.
pub async fn trial_rows_ended(
    store: &Store,
    run: &RunSummary,
    after: Option<u64>,
    limit: Option<u32>,
    ended_after: Option<i64>,
) -> Result<Vec<(TrialRow, i64)>, ControlError> {
    let client = store
        .client()
        .await
        .map_err(ControlError::store("read the trial rows"))?;
    // Ordinals are int4 in the database: anything above that range pages past the end.
    let after: i64 = after.map_or(-1, |a| i64::try_from(a).unwrap_or(i64::MAX));
    let limit: Option<i64> = limit.map(i64::from);
    let rows = client
        .query(VIEW_ROWS_SQL, &[&run.run_id, &after, &limit, &ended_after])
        .await
        .map_err(|e| ControlError::store("read the trial rows")(e.into()))?;
    rows::all("view_rows.sql", &rows, |r| {
        Ok((row(&run.run_key, r)?, col(r, "ended_unix_ms")?))
    })
    .map_err(|e| ControlError::Corrupt {
        run: run.run_key.clone(),
        problem: e.to_string(),
    })
}

/// One compact row per done trial of `run`, in plan order: what the run page aggregates,
/// here and, through the `ListTrialRows` RPC, in `akbench view --coordinator`. Read
/// [`TRIAL_ROWS_PAGE`] rows a query ([`trial_rows_page`]).
pub async fn trial_rows(store: &Store, run: &RunSummary) -> Result<Vec<TrialRow>, ControlError> {
    let mut out: Vec<TrialRow> = Vec::new();
    loop {
        let after = out.last().and_then(|r| r.ordinal);
        let page = trial_rows_page(store, run, after, Some(TRIAL_ROWS_PAGE)).await?;
        let last = page.len() < TRIAL_ROWS_PAGE as usize;
        out.extend(page);
        if last {
            return Ok(out);
        }
    }
}

fn read(what: &str) -> impl Fn(ControlError) -> SourceError + '_ {
    move |e| SourceError::read(what, e)
}

impl StoreBackend {
    /// The run named `run`, or `None` when there is none (an unknown or malformed name
    /// shows as an empty page, as the status does); `what` names the read in an error.
    async fn summary_of(&self, run: &str, what: &str) -> Result<Option<RunSummary>, SourceError> {
        match evidence::find_run(&self.store, run).await {
            Ok(s) => Ok(Some(s)),
            Err(ControlError::RunNotFound(_) | ControlError::Invalid { .. }) => Ok(None),
            Err(e) => Err(read(what)(e)),
        }
    }

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
        let Some(summary) = self.summary_of(run, &what).await? else {
            return Ok(Vec::new());
        };
        let spec = self
            .specs
            .spec(&self.store, &summary)
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
            if !m.not_exported.is_empty() {
                // A trial without a record to show (logged by the export itself).
                continue;
            }
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
        let summaries: Vec<_> = runs.into_iter().map(|(_, r)| r).collect();
        let mut progress = runs_progress(&self.store, &summaries)
            .await
            .map_err(read("the progress of the runs"))?;
        Ok(summaries
            .into_iter()
            .map(|r| {
                let p = progress.remove(&r.run_id);
                RunItem {
                    done: p.as_ref().map_or(0, |p| p.finished),
                    planned: Some(r.trial_count),
                    tasks: None,
                    pass_rate: p.as_ref().and_then(|p| p.rates.pass_rate),
                    solve_rate: p.as_ref().and_then(|p| p.rates.solve_rate),
                    agents: p.map(|p| p.agents).unwrap_or_default(),
                    state: Some(r.state.as_str().to_string()),
                    created: Some(r.created_at),
                    key: r.run_key,
                }
            })
            .collect())
    }

    async fn status(&self, run: &str) -> Result<Option<Snapshot>, SourceError> {
        Ok(self.status_of(run).await?.as_ref().map(snapshot))
    }

    async fn rows(&self, run: &str) -> Result<Vec<TrialRow>, SourceError> {
        let what = format!("the trials of run `{run}`");
        let Some(summary) = self.summary_of(run, &what).await? else {
            return Ok(Vec::new());
        };
        trial_rows(&self.store, &summary).await.map_err(read(&what))
    }

    async fn page(
        &self,
        run: &str,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Vec<TrialRow>, SourceError> {
        let what = format!("a page of the trials of run `{run}`");
        let Some(summary) = self.summary_of(run, &what).await? else {
            return Ok(Vec::new());
        };
        trial_rows_page(&self.store, &summary, after, Some(limit))
            .await
            .map_err(read(&what))
    }

    async fn record(&self, trial: &str) -> Result<Option<RunRecord>, SourceError> {
        let what = format!("the record of trial `{trial}`");
        let client = self
            .store
            .client()
            .await
            .map_err(|e| SourceError::read(&what, e))?;
        let row = client
            .query_opt(TRIAL_OF_KEY_SQL, &[&trial])
            .await
            .map_err(|e| SourceError::read(&what, e))?;
        let Some(row) = row else { return Ok(None) };
        let id: Uuid = rows::one("trial_of_key.sql", &row, |r| col(r, "trial_id"))
            .map_err(|e| SourceError::read(&what, e))?;
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
