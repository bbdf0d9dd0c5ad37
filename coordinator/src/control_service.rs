//! The gRPC `Control` service (what the `akbench` CLI asks of the coordinator).
//!
//! Reads go to [`evidence`] and [`status`]; `StartRun`, `ResumeRun` and `CancelRun` go to a
//! [`WorkControl`] (the scheduler). Every failure is a [`ControlError`] converted once to a
//! `tonic::Status`; a malformed request is refused before anything is written. Write calls
//! need an operator token ([`auth::require_operator`]); the interceptor
//! ([`auth::control_interceptor`]) has already refused unknown and worker tokens.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use akbench_core::accounting::{Observation, RunAccounting, ALL_BUCKETS};
use akbench_core::digest::{canonical_json, digest_bytes};
use akbench_core::spec_diff::{diff, ChangeKind};
use akbench_proto::control_server::{Control, ControlServer};
use akbench_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::auth::{self, require_operator};
use crate::client_input;
use crate::convert;
use crate::error::ControlError;
use crate::evidence::{self, RunSummary};
use crate::reconcile::{self, Entries, Pager};
use crate::status::{self, StatusOptions};
use crate::store::Store;
use crate::work_control::WorkControl;

const TRIALS_NAMED_SQL: &str = include_str!("../sql/control/trials_named.sql");
/// `ListRuns` page size when the request says 0, and the most it may ask for.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// The largest page `ListRuns` returns.
pub const MAX_PAGE_SIZE: u32 = 500;
/// `WatchStatus` polls the database at most this often.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(500);
/// The range of `ListTrialRowsRequest.ended_after_unix_ms` (milliseconds since the Unix
/// epoch: about 4370 BC to year 255,000): beyond it PostgreSQL's timestamps or interval
/// arithmetic overflow.
const ENDED_AFTER_RANGE_MS: std::ops::RangeInclusive<i64> =
    -200_000_000_000_000..=8_000_000_000_000_000;
/// Rows per `ListTrialRows` message (about 100 KiB).
pub const TRIAL_ROW_BATCH: usize = 1000;
/// Largest request accepted, in bytes: near the largest legitimate message. A plan streams
/// in chunks of about 256 KiB after a first chunk holding the spec; the largest single
/// messages are `SubmitPlan` (older clients) and `Reconcile`, whose observations file comes
/// whole (a few hundred bytes per trial: some 100,000 trials fit). A larger message is
/// refused by its length before it is decoded, so a client cannot make the coordinator
/// hold more than this (a 400 MB `SubmitPlan` once took it from 21 MB to 862 MB).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// Largest response, in bytes: responses are the coordinator's own (records stream one
/// message per trial; a reconcile report or a spec diff of a large plan can be large), so
/// this only guards against a runaway, as the clients' own 512 MiB limit does.
pub const MAX_RESPONSE_BYTES: usize = 512 * 1024 * 1024;

type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The `Control` service.
#[derive(Debug, Clone)]
pub struct ControlService {
    store: Store,
    work: Arc<dyn WorkControl>,
    status: StatusOptions,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl ControlService {
    /// A service over `store`, starting, resuming and cancelling through `work`.
    pub fn new(store: Store, work: Arc<dyn WorkControl>, status: StatusOptions) -> Self {
        ControlService {
            store,
            work,
            status,
            metrics: None,
        }
    }

    /// The same service timing its status answers into `metrics`
    /// (`akbench_control_seconds`, the ones `/metrics` renders).
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The tonic server with the auth interceptor and large-request limits.
    pub fn into_server(
        self,
        tokens: auth::Tokens,
    ) -> tonic::service::interceptor::InterceptedService<
        ControlServer<ControlService>,
        impl tonic::service::Interceptor + Clone,
    > {
        let server = ControlServer::new(self)
            .max_decoding_message_size(MAX_REQUEST_BYTES)
            .max_encoding_message_size(MAX_RESPONSE_BYTES);
        tonic::service::interceptor::InterceptedService::new(
            server,
            auth::control_interceptor(tokens),
        )
    }

    async fn run(&self, run: &str) -> Result<RunSummary, ControlError> {
        evidence::find_run(&self.store, run).await
    }
}

/// Observations sent in a request: a JSON array, or JSON Lines; each checked.
fn parse_observations(text: &str) -> Result<Vec<Observation>, ControlError> {
    let invalid = |p: String| ControlError::invalid("reconcile", "observations_json", p);
    let observations: Vec<Observation> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text).map_err(|e| {
            invalid(format!(
                "is not a JSON array of observations: {e}; fix: see docs/observations.md"
            ))
        })?
    } else {
        akbench_core::accounting::parse_observations(
            text,
            std::path::Path::new("observations_json"),
        )
        .map_err(|e| invalid(e.to_string()))?
    };
    for (i, o) in observations.iter().enumerate() {
        o.check()
            .map_err(|e| invalid(format!("observation {} ({}): {e}", i + 1, o.trial_id)))?;
    }
    Ok(observations)
}

/// The observations of a request: `None` when it sent none (the coordinator's own count).
fn sent_observations(text: &str) -> Result<Option<Vec<Observation>>, ControlError> {
    if text.trim().is_empty() {
        Ok(None)
    } else {
        parse_observations(text).map(Some)
    }
}

/// The response of an accounting: its counts and its canonical JSON with that JSON's digest.
fn reconcile_response(run: &RunSummary, a: &RunAccounting) -> pb::ReconcileResponse {
    let report_json = canonical_json(a);
    let report_digest = digest_bytes(report_json.as_bytes());
    let partitions = ALL_BUCKETS
        .iter()
        .map(|b| pb::StateCount {
            state: b.as_str().to_string(),
            count: a.counts.get(*b),
        })
        .collect();
    let identical = a.duplicates.iter().filter(|d| d.identical).count() as u64;
    pb::ReconcileResponse {
        run: Some(convert::summary(run)),
        valid: a.valid,
        partitions,
        duplicates: identical,
        conflicts: a.duplicates.len() as u64 - identical,
        unexpected: a.unexpected.len() as u64,
        report_json,
        report_digest,
    }
}

fn section_and_path(path: &str) -> (String, String) {
    match path.split_once('.') {
        Some((section, rest)) => (section.to_string(), rest.to_string()),
        None => (path.to_string(), String::new()),
    }
}

/// Sections whose changes make two runs incomparable (task, agent, execution, evaluation).
const COMPARABILITY_SECTIONS: [&str; 4] = ["tasks", "agents", "execution", "evaluation"];

#[tonic::async_trait]
impl Control for ControlService {
    async fn submit_plan(
        &self,
        request: Request<pb::SubmitPlanRequest>,
    ) -> Result<Response<pb::SubmitPlanResponse>, Status> {
        require_operator(&request, "submit plan")?;
        let r = request.into_inner();
        let submitted = evidence::submit(
            &self.store,
            &r.spec_json,
            &r.spec_digest,
            &r.plan_json,
            &r.plan_digest,
        )
        .await?;
        tracing::info!(run = %submitted.run.run_key, created = submitted.created, "plan submitted");
        Ok(Response::new(pb::SubmitPlanResponse {
            run: Some(convert::summary(&submitted.run)),
            created: submitted.created,
        }))
    }

    async fn submit_plan_stream(
        &self,
        request: Request<tonic::Streaming<pb::SubmitPlanChunk>>,
    ) -> Result<Response<pb::SubmitPlanResponse>, Status> {
        require_operator(&request, "submit plan")?;
        let mut inbound = request.into_inner();
        let first = inbound.message().await?.ok_or_else(|| {
            ControlError::invalid(
                "submit plan",
                "stream",
                "is empty; fix: send the spec and the plan's head first",
            )
        })?;
        let head = evidence::SubmitHead {
            spec_json: first.spec_json,
            spec_digest: first.spec_digest,
            plan_head_json: first.plan_head_json,
            plan_digest: first.plan_digest,
        };
        // The first message's trials, then every later message's; a broken stream is an
        // error item (the transaction is rolled back).
        let rest = inbound.map(|m| {
            m.map(|c| c.trials_json).map_err(|s| {
                ControlError::invalid(
                    "submit plan",
                    "stream",
                    format!("broke before its end: {}; nothing was stored", s.message()),
                )
            })
        });
        let chunks = tokio_stream::once(Ok(first.trials_json)).chain(rest);
        let submitted = evidence::submit_stream(&self.store, head, chunks).await?;
        tracing::info!(run = %submitted.run.run_key, created = submitted.created, "plan submitted (streamed)");
        Ok(Response::new(pb::SubmitPlanResponse {
            run: Some(convert::summary(&submitted.run)),
            created: submitted.created,
        }))
    }

    async fn get_run(
        &self,
        request: Request<pb::GetRunRequest>,
    ) -> Result<Response<pb::GetRunResponse>, Status> {
        let r = request.into_inner();
        let run = self.run(&r.run).await?;
        let (spec_json, plan_json) = if r.include_documents {
            let spec = evidence::spec(&self.store, &run).await?;
            let plan = evidence::ready_plan(&self.store, &run).await?;
            (canonical_json(&spec), canonical_json(&plan))
        } else {
            (String::new(), String::new())
        };
        Ok(Response::new(pb::GetRunResponse {
            run: Some(convert::summary(&run)),
            spec_json,
            plan_json,
        }))
    }

    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let r = request.into_inner();
        let size = match r.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        let before = match r.page_token.as_str() {
            "" => None,
            t => Some(t.parse::<i64>().map_err(|_| {
                ControlError::invalid(
                    "list runs",
                    "page_token",
                    "is not a token this server gave; fix: pass next_page_token unchanged",
                )
            })?),
        };
        if !r.key_prefix.is_empty() {
            client_input::client_id("list runs", "key_prefix", &r.key_prefix)?;
        }
        let mut runs = evidence::list_runs(&self.store, size + 1, before, &r.key_prefix).await?;
        let next_page_token = if runs.len() > size as usize {
            runs.truncate(size as usize);
            runs.last()
                .map(|(seq, _)| seq.to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListRunsResponse {
            runs: runs.iter().map(|(_, s)| convert::summary(s)).collect(),
            next_page_token,
        }))
    }

    async fn diff_runs(
        &self,
        request: Request<pb::DiffRunsRequest>,
    ) -> Result<Response<pb::DiffRunsResponse>, Status> {
        let r = request.into_inner();
        let (left, right) = (self.run(&r.left).await?, self.run(&r.right).await?);
        let (ls, rs) = (
            evidence::spec(&self.store, &left).await?,
            evidence::spec(&self.store, &right).await?,
        );
        let d = diff(&ls, &rs);
        let changes: Vec<pb::SpecChange> = d
            .changes
            .iter()
            .map(|c| {
                let (section, path) = section_and_path(&c.path);
                pb::SpecChange {
                    section,
                    path,
                    kind: match c.kind {
                        ChangeKind::Added => pb::ChangeKind::Added,
                        ChangeKind::Removed => pb::ChangeKind::Removed,
                        ChangeKind::Changed => pb::ChangeKind::Changed,
                    } as i32,
                    left_json: c.left.as_ref().map(canonical_json).unwrap_or_default(),
                    right_json: c.right.as_ref().map(canonical_json).unwrap_or_default(),
                }
            })
            .collect();
        let comparable = !changes
            .iter()
            .any(|c| COMPARABILITY_SECTIONS.contains(&c.section.as_str()));
        Ok(Response::new(pb::DiffRunsResponse {
            left: Some(convert::summary(&left)),
            right: Some(convert::summary(&right)),
            comparable,
            changes,
        }))
    }

    async fn start_run(
        &self,
        request: Request<pb::StartRunRequest>,
    ) -> Result<Response<pb::StartRunResponse>, Status> {
        require_operator(&request, "start run")?;
        let run = self.run(&request.get_ref().run).await?;
        let created = self.work.start(run.run_id).await?;
        let run = self.run(&run.run_id.to_string()).await?;
        tracing::info!(run = %run.run_key, created, "run started");
        Ok(Response::new(pb::StartRunResponse {
            run: Some(convert::summary(&run)),
            work_items_created: created,
        }))
    }

    async fn resume_run(
        &self,
        request: Request<pb::ResumeRunRequest>,
    ) -> Result<Response<pb::ResumeRunResponse>, Status> {
        require_operator(&request, "resume run")?;
        let r = request.into_inner();
        let run = self.run(&r.run).await?;
        let resumed = self.work.resume(run.run_id, r.grade).await?;
        let run = self.run(&run.run_id.to_string()).await?;
        tracing::info!(run = %run.run_key, requeued = resumed.requeued, grading = resumed.grading,
            not_gradable = resumed.not_gradable, "run resumed");
        Ok(Response::new(pb::ResumeRunResponse {
            run: Some(convert::summary(&run)),
            requeued: resumed.requeued,
            grading: resumed.grading,
            not_gradable: resumed.not_gradable,
        }))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        require_operator(&request, "cancel run")?;
        let r = request.into_inner();
        client_input::client_text("cancel run", "reason", &r.reason)?;
        let run = self.run(&r.run).await?;
        let cancelled = self.work.cancel(run.run_id, r.reason).await?;
        let run = self.run(&run.run_id.to_string()).await?;
        tracing::info!(run = %run.run_key, cancelling = cancelled.live, "run cancel handled");
        Ok(Response::new(pb::CancelRunResponse {
            run: Some(convert::summary(&run)),
            attempts_cancelling: cancelled.live,
            unchanged: cancelled.unchanged.unwrap_or_default(),
        }))
    }

    async fn resume_route(
        &self,
        request: Request<pb::ResumeRouteRequest>,
    ) -> Result<Response<pb::ResumeRouteResponse>, Status> {
        require_operator(&request, "resume route")?;
        let r = request.into_inner();
        let route = client_input::client_text("resume route", "route", &r.route)?;
        if route.is_empty() {
            return Err(Status::invalid_argument(
                "resume route: `route` is empty; name the provider route (as `run status` shows it)",
            ));
        }
        let Some(lift) = self.work.lift_route(route.to_string()).await? else {
            return Err(Status::not_found(format!(
                "resume route: no attempt ever ran on provider route `{route}`; check the name \
                 (`akbench run status` lists paused routes)"
            )));
        };
        // Whether it was paused is the scheduler's word, by its clock.
        let before = lift.before;
        let paused_until = before.paused_until.filter(|_| lift.was_paused);
        Ok(Response::new(pb::ResumeRouteResponse {
            was_paused: paused_until.is_some(),
            paused_until_unix_ms: paused_until.map_or(0, |t| t.timestamp_millis()),
            last_error: before.last_error.unwrap_or_default(),
        }))
    }

    async fn get_status(
        &self,
        request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::RunStatus>, Status> {
        let started = std::time::Instant::now();
        let s = status::run_status(&self.store, &request.get_ref().run, self.status).await;
        if let Some(m) = &self.metrics {
            m.control_time("GetStatus", started.elapsed());
        }
        Ok(Response::new(convert::status(&s?)))
    }

    type WatchStatusStream = Stream_<pb::RunStatus>;

    async fn watch_status(
        &self,
        request: Request<pb::WatchStatusRequest>,
    ) -> Result<Response<Self::WatchStatusStream>, Status> {
        let r = request.into_inner();
        // The first projection is taken here, so an unknown run fails the call itself.
        let first = status::run_status(&self.store, &r.run, self.status).await?;
        let interval = WATCH_INTERVAL.max(Duration::from_millis(u64::from(r.min_interval_ms)));
        let (tx, rx) = mpsc::channel(4);
        let (store, options) = (self.store.clone(), self.status);
        let run = first.run.run_id.to_string();
        tokio::spawn(async move {
            let mut last = first;
            if tx.send(Ok(convert::status(&last))).await.is_err() {
                return;
            }
            while !last.run.is_over() {
                tokio::select! {
                    () = tx.closed() => return,
                    () = tokio::time::sleep(interval) => {}
                }
                match status::run_status(&store, &run, options).await {
                    Ok(now) => {
                        if now.progressed_from(&last) {
                            if tx.send(Ok(convert::status(&now))).await.is_err() {
                                return;
                            }
                            last = now;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.into())).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn reconcile(
        &self,
        request: Request<pb::ReconcileRequest>,
    ) -> Result<Response<pb::ReconcileResponse>, Status> {
        let r = request.into_inner();
        let run = self.run(&r.run).await?;
        // Parse first: a malformed file fails fast, before the plan is read.
        let sent = sent_observations(&r.observations_json)?;
        let mut entries = Entries::Keep(Vec::new());
        let accounting = reconcile::account(&self.store, &run, sent.as_deref(), &mut entries)
            .await?
            .ok_or_else(|| Status::cancelled("the client went away"))?;
        Ok(Response::new(reconcile_response(&run, &accounting)))
    }

    type ReconcileStreamStream = Stream_<pb::ReconcilePart>;

    async fn reconcile_stream(
        &self,
        request: Request<pb::ReconcileStreamRequest>,
    ) -> Result<Response<Self::ReconcileStreamStream>, Status> {
        let r = request.into_inner();
        let run = self.run(&r.run).await?;
        let sent = sent_observations(&r.observations_json)?;
        let list = pb::TrialList::try_from(r.trials).map_err(|_| {
            ControlError::invalid(
                "reconcile",
                "trials",
                format!(
                    "{} is not a TrialList; fix: send none, unaccounted or all",
                    r.trials
                ),
            )
        })?;
        let (tx, rx) = mpsc::channel(4);
        let store = self.store.clone();
        tokio::spawn(async move {
            let mut entries = Entries::Send(Pager::new(list, r.trials_limit, tx.clone()));
            let part = match reconcile::account(&store, &run, sent.as_deref(), &mut entries).await {
                Ok(Some(a)) => Ok(pb::ReconcilePart {
                    trials_json: Vec::new(),
                    summary: Some(reconcile_response(&run, &a)),
                }),
                Ok(None) => return,
                Err(e) => Err(e.into()),
            };
            let _ = tx.send(part).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type FetchRecordsStream = Stream_<pb::RunRecord>;

    async fn fetch_records(
        &self,
        request: Request<pb::FetchRecordsRequest>,
    ) -> Result<Response<Self::FetchRecordsStream>, Status> {
        let r = request.into_inner();
        for t in &r.trials {
            client_input::client_id("fetch records", "trials", t)?;
        }
        let run = self.run(&r.run).await?;
        let client = self
            .store
            .client()
            .await
            .map_err(ControlError::store("fetch records"))?;
        let db = |e: tokio_postgres::Error| -> Status {
            ControlError::store("fetch records")(e.into()).into()
        };
        let mut ids: Vec<Uuid> = Vec::new();
        if !r.trials.is_empty() {
            let rows = client
                .query(TRIALS_NAMED_SQL, &[&run.run_id, &r.trials])
                .await
                .map_err(db)?;
            let found = crate::rows::all("trials_named.sql", &rows, |row| {
                use crate::rows::col;
                let id: Uuid = col(row, "trial_id")?;
                Ok((id, id.to_string(), col::<String>(row, "key")?))
            })
            .map_err(|e| ControlError::Corrupt {
                run: run.run_key.clone(),
                problem: e.to_string(),
            })?;
            let unknown: Vec<&String> = r
                .trials
                .iter()
                .filter(|t| !found.iter().any(|(_, id, key)| id == *t || key == *t))
                .collect();
            if !unknown.is_empty() {
                return Err(ControlError::invalid(
                    "fetch records",
                    "trials",
                    format!("{unknown:?} are not trials of run `{}`; fix: pass trial UUIDs or keys of this run", run.run_key),
                )
                .into());
            }
            ids = found.into_iter().map(|(id, _, _)| id).collect();
        }
        let spec = evidence::spec(&self.store, &run).await?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(crate::trial_records::send(
            client,
            std::sync::Arc::new(spec),
            ids,
            tx,
            db,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type ListTrialRowsStream = Stream_<pb::TrialRowBatch>;

    async fn list_trial_rows(
        &self,
        request: Request<pb::ListTrialRowsRequest>,
    ) -> Result<Response<Self::ListTrialRowsStream>, Status> {
        let r = request.into_inner();
        // A bound PostgreSQL's timestamps cannot hold is the client's mistake, said as such,
        // not a failed query.
        if let Some(ms) = r
            .ended_after_unix_ms
            .filter(|ms| !ENDED_AFTER_RANGE_MS.contains(ms))
        {
            return Err(Status::invalid_argument(format!(
                "failed to list trial rows: ended_after_unix_ms {ms} is out of range; fix: send \
                 milliseconds since the Unix epoch, {} to {}",
                ENDED_AFTER_RANGE_MS.start(),
                ENDED_AFTER_RANGE_MS.end()
            )));
        }
        let run = self.run(&r.run).await?;
        // The rows the coordinator's HTTP viewer reads, a keyset page of TRIAL_ROW_BATCH per
        // query and per message as the client reads them (memory flat in the run's size),
        // until `limit` rows (0: every done trial after `after`); with `ended_after_unix_ms`,
        // of the trials that ended since then only.
        let store = self.store.clone();
        let (tx, rx) = mpsc::channel(2);
        tokio::spawn(async move {
            let mut after = r.after;
            let mut left = (r.limit > 0).then_some(r.limit as usize);
            loop {
                let want = left.map_or(TRIAL_ROW_BATCH, |l| l.min(TRIAL_ROW_BATCH));
                if want == 0 {
                    return;
                }
                let page = match crate::view_source::trial_rows_ended(
                    &store,
                    &run,
                    after,
                    Some(want as u32),
                    r.ended_after_unix_ms,
                )
                .await
                {
                    Ok(page) => page,
                    Err(e) => {
                        let _ = tx.send(Err(e.into())).await;
                        return;
                    }
                };
                let full = page.len() == want;
                after = page.last().and_then(|(t, _)| t.ordinal).or(after);
                left = left.map(|l| l - page.len());
                if !page.is_empty() {
                    let batch = pb::TrialRowBatch {
                        rows: page
                            .into_iter()
                            .map(|(t, ended)| pb::TrialRow {
                                ended_unix_ms: Some(ended),
                                ..convert::trial_row(t)
                            })
                            .collect(),
                    };
                    if tx.send(Ok(batch)).await.is_err() {
                        return; // the client went away
                    }
                }
                if !full {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_parse_as_array_or_lines_and_are_checked() {
        let id = "019a0000-0000-7000-8000-000000000000";
        let one = format!(
            r#"{{"trial_id":"{id}","state":"not_graded","ok":null,"score":null,"attempt_id":null,"source":null}}"#
        );
        assert_eq!(parse_observations(&format!("[{one}]")).unwrap().len(), 1);
        assert_eq!(parse_observations(&one).unwrap().len(), 1);
        let bad = format!(
            r#"[{{"trial_id":"{id}","state":"completed","ok":null,"score":null,"attempt_id":null,"source":null}}]"#
        );
        let e = parse_observations(&bad).unwrap_err().to_string();
        assert!(
            e.contains("observations_json") && e.contains("observation 1"),
            "{e}"
        );
        assert!(parse_observations("[{").is_err());
    }
}
