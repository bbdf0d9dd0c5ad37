//! Evidence in PostgreSQL: a run's resolved spec, its draft and ready plan and its planned
//! trials, stored once, never changed, and found again by run key or UUID.
//!
//! [`submit`] checks everything before committing anything: both documents parse as core
//! types, each digest matches the document's content (`core::digest::sealed_digest`) and the
//! digest in the request, the plan expands that spec (run id, run key, spec digest, trial
//! count) and holds its invariants (`RunPlan::check`). It writes, in one transaction: the
//! spec, the planned trials (one row per trial with its canonical JSON, by binary `COPY`),
//! the draft and ready plan *headers* (the plan documents with `"trials": []`), a
//! `run_catalog` row and the `runs` row. The checks that read every trial (digests, plan
//! invariants) run on a blocking thread while the spec and the trials are written; the
//! headers are written and the transaction committed only once they passed, and a refusal
//! rolls it back. Submitting the same documents again is a
//! no-op; different documents under the same run id or key are refused. [`ready_plan`]
//! reassembles the ready plan and checks its digest again.

use std::pin::pin;
use std::sync::Arc;

mod submit_stream;
mod trial_copy;

pub use submit_stream::{submit_stream, SubmitHead};

use akbench_core::plan::{sealed_plan_digest, PlanSealer, Sealed};

/// Both sealed digests of a plan in memory, each trial serialized once (`PlanSealer`).
fn seal(plan: &RunPlan) -> Sealed {
    let mut s = PlanSealer::new(plan);
    for t in &plan.trials {
        s.add(&canonical_json(t));
    }
    s.finish()
}

use akbench_core::digest::canonical_json;
use akbench_core::plan::{PlanStage, PlannedTrial, RunPlan};
use akbench_core::spec::ResolvedRunSpec;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::error::ControlError;
use crate::store::{Store, StoreError, Tx};

use crate::rows::{col, count, parsed, FromRow, RowError};
use akbench_core::dispatch::RunState;

const SUMMARY_SQL: &str = include_str!("../sql/control/run_summary.sql");
const SPEC_DOCUMENT_SQL: &str = include_str!("../sql/control/spec_document.sql");
const READY_PLAN_HEADER_SQL: &str = include_str!("../sql/control/ready_plan_header.sql");
const PLANNED_TRIAL_DOCUMENTS_SQL: &str =
    include_str!("../sql/control/planned_trial_documents.sql");
const INSERT_SPEC_SQL: &str = include_str!("../sql/control/insert_spec.sql");
const INSERT_HEADERS_SQL: &str = include_str!("../sql/control/insert_plan_headers.sql");
const COPY_TRIALS_SQL: &str = "COPY planned_trials (trial_id, run_id, ordinal, key, task_id, \
                               agent, repetition, retries, document) FROM STDIN BINARY";
/// A trial's `planned_trials.retries` (migration 0025): its infrastructure retries, capped
/// at the column's maximum as `start_items.sql` caps the document's value.
fn retries(t: &PlannedTrial) -> i32 {
    i32::try_from(t.attempt.infrastructure_retries).unwrap_or(i32::MAX)
}
/// The advisory lock that serialises submissions ("akb-sub" in ASCII).
const SUBMIT_LOCK: i64 = 0x0061_6b62_2d73_7562;
const ACTION: &str = "submit plan";
/// Submissions of at least this many trials return their freed heap to the system.
const RELEASE_AFTER_TRIALS: i64 = 10_000;

/// What every response says about a run (the proto's `RunSummary`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// UUIDv7.
    pub run_id: Uuid,
    /// Readable key.
    pub run_key: String,
    /// Experiment name.
    pub experiment: String,
    /// The run's state (core's enum; serialized as its stored name).
    pub state: RunState,
    /// Digest of the resolved spec.
    pub spec_digest: String,
    /// Digest of the ready plan.
    pub plan_digest: String,
    /// Planned trials.
    pub trial_count: u64,
    /// When the plan was stored.
    pub created_at: DateTime<Utc>,
    /// When the run was started.
    pub started_at: Option<DateTime<Utc>>,
}

impl FromRow for RunSummary {
    /// A row of `run_summary.sql`: by column name; an unknown state or a NULL where none
    /// belongs is an error.
    fn from_row(row: &tokio_postgres::Row) -> Result<RunSummary, RowError> {
        Ok(RunSummary {
            run_id: col(row, "run_id")?,
            run_key: col(row, "run_key")?,
            experiment: col(row, "experiment")?,
            state: parsed(row, "state", RunState::parse)?,
            spec_digest: col(row, "spec_digest")?,
            plan_digest: col(row, "plan_digest")?,
            trial_count: count(row, "trial_count")?,
            created_at: col(row, "created_at")?,
            started_at: col(row, "started_at")?,
        })
    }
}

impl RunSummary {
    /// True when nothing more will happen to the run (`finished` or `cancelled`).
    pub fn is_over(&self) -> bool {
        self.state.is_ended()
    }

    /// The summary of a row, a damaged one as [`ControlError::Corrupt`].
    fn read(row: &tokio_postgres::Row) -> Result<RunSummary, ControlError> {
        RunSummary::from_row(row).map_err(|e| ControlError::Corrupt {
            run: row
                .try_get::<_, String>("run_key")
                .unwrap_or_else(|_| "?".into()),
            problem: e.to_string(),
        })
    }
}

/// The result of [`submit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The run as stored.
    pub run: RunSummary,
    /// False when exactly these documents were already stored.
    pub created: bool,
}

fn check_digest_syntax(field: &'static str, digest: &str) -> Result<(), ControlError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(ControlError::invalid(
            ACTION,
            field,
            format!("`{digest}` is not a digest; fix: send `sha256:` and 64 lowercase hex digits (the document's `digest` field)"),
        ))
    }
}

/// Parses the request and makes the checks that need no pass over the trials; returns the
/// spec (when sent) and the plan as sent. [`validate`] makes the others.
/// With `head`, `plan_json` is a plan's head (no trials; they follow in a stream) and the
/// trial count checked is its summary's.
fn parse_request(
    spec_json: &str,
    spec_digest: &str,
    plan_json: &str,
    plan_digest: &str,
    head: bool,
) -> Result<(Option<ResolvedRunSpec>, RunPlan), ControlError> {
    let field = if head { "plan_head_json" } else { "plan_json" };
    if plan_json.trim().is_empty() {
        return Err(ControlError::invalid(
            ACTION,
            field,
            "is empty; fix: send the RunPlan made by `akbench plan`",
        ));
    }
    check_digest_syntax("plan_digest", plan_digest)?;
    let plan: RunPlan = serde_json::from_str(plan_json)
        .map_err(|e| ControlError::invalid(ACTION, field, format!("is not a RunPlan: {e}")))?;
    if head && !plan.trials.is_empty() {
        return Err(ControlError::invalid(
            ACTION,
            field,
            "carries trials; fix: send `\"trials\": []` and the trials in trials_json",
        ));
    }
    let trial_count = if head {
        plan.summary.trials
    } else {
        plan.trials.len() as u64
    };
    if plan.digest != plan_digest {
        return Err(ControlError::invalid(
            ACTION,
            "plan_digest",
            format!(
                "`{plan_digest}` differs from the plan's digest field `{}`; fix: send the plan's own digest",
                plan.digest
            ),
        ));
    }
    if spec_json.trim().is_empty() {
        if !spec_digest.is_empty() && spec_digest != plan.spec_digest {
            return Err(ControlError::invalid(
                ACTION,
                "spec_digest",
                format!(
                    "`{spec_digest}` differs from the plan's spec digest `{}`",
                    plan.spec_digest
                ),
            ));
        }
        return Ok((None, plan));
    }
    check_digest_syntax("spec_digest", spec_digest)?;
    let spec: ResolvedRunSpec = serde_json::from_str(spec_json).map_err(|e| {
        ControlError::invalid(
            ACTION,
            "spec_json",
            format!("is not a ResolvedRunSpec: {e}"),
        )
    })?;
    if spec.digest != spec_digest {
        return Err(ControlError::invalid(
            ACTION,
            "spec_digest",
            format!(
                "`{spec_digest}` differs from the spec's digest field `{}`; fix: send the spec's own digest",
                spec.digest
            ),
        ));
    }
    if !spec.verify() {
        return Err(ControlError::invalid(
            ACTION,
            "spec_json",
            "its content does not match its digest; fix: the spec was edited or damaged, resolve it again",
        ));
    }
    let belongs = [
        ("run_id", plan.run_id.to_string(), spec.run_id().to_string()),
        ("run_key", plan.run_key.clone(), spec.run_key().to_string()),
        ("spec_digest", plan.spec_digest.clone(), spec.digest.clone()),
        (
            "trial count",
            trial_count.to_string(),
            spec.trial_count().to_string(),
        ),
    ];
    for (what, in_plan, in_spec) in belongs {
        if in_plan != in_spec {
            return Err(ControlError::invalid(
                ACTION,
                field,
                format!("its {what} `{in_plan}` differs from the spec's `{in_spec}`: the plan does not expand this spec; fix: send the spec the plan was made from"),
            ));
        }
    }
    Ok((Some(spec), plan))
}

/// The checks over every trial: the plan's content matches its digest, and it holds its
/// invariants (`RunPlan::check`). Returns its draft and ready digests.
fn validate(plan: &RunPlan) -> Result<Sealed, ControlError> {
    // The digests and the plan's own checks are independent: on two cores, side by side.
    let (sealed, checked) = std::thread::scope(|s| {
        let checked = s.spawn(|| plan.check().map_err(|e| e.to_string()));
        let sealed = seal(plan);
        let checked = checked
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (sealed, checked)
    });
    let computed = sealed.digest(plan.stage);
    if computed != plan.digest {
        return Err(ControlError::invalid(
            ACTION,
            "plan_json",
            format!(
                "its content does not match its digest {} (computed {computed}); fix: the plan was edited or damaged, plan again",
                plan.digest
            ),
        ));
    }
    checked.map_err(|e| {
        ControlError::invalid(ACTION, "plan_json", format!("is not a valid plan: {e}"))
    })?;
    Ok(sealed)
}

/// The ready plan's header (no trials): the plan as sent, at stage ready.
fn ready_header(plan: &RunPlan, sealed: &Sealed) -> RunPlan {
    let mut ready = plan.head();
    ready.digest = sealed.ready_digest.clone();
    ready.stage = PlanStage::Ready;
    ready
}

/// Stores a spec and its plan (see the module docs). `spec_json` may be empty to submit a
/// plan for a spec stored earlier.
pub async fn submit(
    store: &Store,
    spec_json: &str,
    spec_digest: &str,
    plan_json: &str,
    plan_digest: &str,
) -> Result<Submitted, ControlError> {
    let started = std::time::Instant::now();
    let (spec, plan) = parse_request(spec_json, spec_digest, plan_json, plan_digest, false)?;
    let trial_count = plan.trials.len() as i64;
    tracing::debug!(elapsed = ?started.elapsed(), trials = trial_count, "submission parsed");
    // The checks over every trial run on a blocking thread while the trials are written;
    // nothing commits unless they pass, and their refusal comes first on every path.
    let plan = Arc::new(plan);
    let validation = Validation {
        handle: {
            let plan = Arc::clone(&plan);
            tokio::task::spawn_blocking(move || validate(&plan))
        },
        started,
    };
    let written = write(store, &plan, spec.as_ref(), validation).await;
    drop(plan);
    if trial_count >= RELEASE_AFTER_TRIALS {
        release_freed_memory();
    }
    match written? {
        // Stored earlier, or by a concurrent submitter first.
        (Some(found), ready) => same_or_conflict(found, &ready, spec.as_ref()),
        (None, ready) => Ok(Submitted {
            run: find_run(store, &ready.run_id.to_string()).await?,
            created: true,
        }),
    }
}

/// The checks over every trial, running on a blocking thread.
struct Validation {
    handle: tokio::task::JoinHandle<Result<Sealed, ControlError>>,
    started: std::time::Instant,
}

impl Validation {
    async fn outcome(self) -> Result<Sealed, ControlError> {
        let sealed = match self.handle.await {
            Ok(result) => result,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
        tracing::debug!(elapsed = ?self.started.elapsed(), "plan digests and checks done");
        sealed
    }
}

/// Writes a new run in one transaction: the spec and the planned trials while `validation`
/// runs, then, once it passed, the plan headers, the catalog row and the runs row. Returns
/// the run found stored instead (nothing written), or `None` when written, with the ready
/// plan's header. A refused validation is returned before any store error.
async fn write(
    store: &Store,
    plan: &RunPlan,
    spec: Option<&ResolvedRunSpec>,
    validation: Validation,
) -> Result<(Option<RunSummary>, RunPlan), ControlError> {
    let started = validation.started;
    let client = match store.client().await {
        Ok(c) => c,
        Err(e) => {
            validation.outcome().await?;
            return Err(ControlError::store(ACTION)(e));
        }
    };
    let existing = existing_run(&client, plan.run_id, &plan.run_key).await;
    drop(client);
    let existing = match existing {
        Ok(existing) => existing,
        Err(e) => {
            validation.outcome().await?;
            return Err(e);
        }
    };
    if let Some(found) = existing {
        let sealed = validation.outcome().await?;
        return Ok((Some(found), ready_header(plan, &sealed)));
    }
    let Some(spec) = spec else {
        validation.outcome().await?;
        return Err(ControlError::Precondition {
            action: ACTION,
            run: plan.run_key.clone(),
            problem: format!(
                "its spec (run id {}, digest {}) is not stored; fix: send spec_json with the plan",
                plan.run_id, plan.spec_digest
            ),
        });
    };
    let spec_text = canonical_json(spec);
    let mut client = match store.client().await {
        Ok(c) => c,
        Err(e) => {
            validation.outcome().await?;
            return Err(ControlError::store(ACTION)(e));
        }
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => {
            validation.outcome().await?;
            return Err(ControlError::store(ACTION)(e.into()));
        }
    };
    let trials = async {
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SUBMIT_LOCK])
            .await?;
        if let Some(found) = existing_run(&tx, plan.run_id, &plan.run_key)
            .await
            .map_err(|e| StoreError::Invalid(e.to_string()))?
        {
            return Ok(Some(found));
        }
        tx.execute(
            INSERT_SPEC_SQL,
            &[&plan.run_id, &plan.run_key, &spec.digest, &spec_text],
        )
        .await?;
        copy_trials(&tx, plan.run_id, &plan.trials).await?;
        tracing::debug!(elapsed = ?started.elapsed(), "spec inserted, planned trials copied");
        Ok::<_, StoreError>(None)
    }
    .await;
    let found = match trials {
        Ok(found) => found,
        Err(e) => {
            let _ = tx.rollback().await;
            validation.outcome().await?;
            return Err(ControlError::store(ACTION)(e));
        }
    };
    let sealed = match validation.outcome().await {
        Ok(sealed) => sealed,
        Err(e) => {
            let _ = tx.rollback().await;
            return Err(e);
        }
    };
    let ready = ready_header(plan, &sealed);
    if let Some(found) = found {
        let _ = tx.rollback().await;
        return Ok((Some(found), ready));
    }
    // Headers: the documents with `"trials": []`; the trials are rows of planned_trials.
    let ready_text = canonical_json(&ready);
    let draft_text = {
        let mut draft = plan.head();
        draft.stage = PlanStage::Draft;
        draft.digest = sealed.draft_digest.clone();
        canonical_json(&draft)
    };
    let trial_count = plan.trials.len() as i64;
    let by_agent = canonical_json(&plan.summary.by_agent);
    let inserted = tx
        .execute(
            INSERT_HEADERS_SQL,
            &[
                &plan.run_id,
                &plan.run_key,
                &spec.digest,
                &sealed.draft_digest,
                &draft_text,
                &sealed.ready_digest,
                &ready_text,
                &spec.condition.experiment,
                &trial_count,
                &by_agent,
            ],
        )
        .await;
    let committed = match inserted {
        Ok(_) => tx.commit().await,
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    };
    committed.map_err(|e| ControlError::store(ACTION)(e.into()))?;
    tracing::debug!(elapsed = ?started.elapsed(), "headers inserted, committed");
    Ok((None, ready))
}

/// Returns the heap a large submission freed to the system: the trial texts are built on
/// two threads, and glibc keeps the freed memory of their arenas otherwise (the
/// coordinator's RSS stayed about 70 MiB higher after a 100,000-trial plan).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only hands free heap pages back to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Writes the planned trials, each with its canonical JSON.
async fn copy_trials(tx: &Tx<'_>, run_id: Uuid, trials: &[PlannedTrial]) -> Result<(), StoreError> {
    let mut copy = trial_copy::TrialCopy::start(tx).await?;
    for t in trials {
        copy.row(&run_id, t, &canonical_json(t)).await?;
    }
    copy.finish().await?;
    Ok(())
}

/// A run stored under `run_id` or `run_key`, with its stored spec digest.
async fn existing_run(
    client: &impl deadpool_postgres::GenericClient,
    run_id: Uuid,
    run_key: &str,
) -> Result<Option<RunSummary>, ControlError> {
    let sql = format!("{SUMMARY_SQL} WHERE c.run_id = $1 OR c.run_key = $2");
    let row = client
        .query_opt(&sql, &[&run_id, &run_key])
        .await
        .map_err(|e| ControlError::store(ACTION)(e.into()))?;
    if let Some(row) = row {
        return RunSummary::read(&row).map(Some);
    }
    // A spec stored without a plan cannot exist (both go in one transaction), but a key
    // taken in run_specs alone must still be refused.
    let taken = client
        .query_opt(
            "SELECT run_id FROM run_specs WHERE run_id = $1 OR run_key = $2",
            &[&run_id, &run_key],
        )
        .await
        .map_err(|e| ControlError::store(ACTION)(e.into()))?;
    match taken {
        Some(_) => Err(ControlError::Conflict(format!(
            "run {run_id} / `{run_key}` has a spec without a catalog entry"
        ))),
        None => Ok(None),
    }
}

fn same_or_conflict(
    found: RunSummary,
    ready: &RunPlan,
    spec: Option<&ResolvedRunSpec>,
) -> Result<Submitted, ControlError> {
    if found.run_id != ready.run_id {
        return Err(ControlError::Conflict(format!(
            "run key `{}` already names run {}, not {}",
            found.run_key, found.run_id, ready.run_id
        )));
    }
    if spec.is_some_and(|s| s.digest != found.spec_digest) {
        return Err(ControlError::Conflict(format!(
            "run `{}` already has spec {}, not {}",
            found.run_key,
            found.spec_digest,
            spec.map(|s| s.digest.as_str()).unwrap_or_default()
        )));
    }
    if found.plan_digest != ready.digest {
        return Err(ControlError::Conflict(format!(
            "run `{}` already has ready plan {}, not {}",
            found.run_key, found.plan_digest, ready.digest
        )));
    }
    Ok(Submitted {
        run: found,
        created: false,
    })
}

/// The run named by `run`: a UUID or a run key.
pub async fn find_run(store: &Store, run: &str) -> Result<RunSummary, ControlError> {
    let client = store
        .client()
        .await
        .map_err(ControlError::store("find run"))?;
    find_run_with(&client, run).await
}

/// [`find_run`] on a given connection.
pub async fn find_run_with(
    client: &impl deadpool_postgres::GenericClient,
    run: &str,
) -> Result<RunSummary, ControlError> {
    let run = crate::client_input::client_id("find run", "run", run)?;
    let row = match Uuid::parse_str(run) {
        Ok(id) => {
            let sql = format!("{SUMMARY_SQL} WHERE c.run_id = $1");
            client.query_opt(&sql, &[&id]).await
        }
        Err(_) => {
            let sql = format!("{SUMMARY_SQL} WHERE c.run_key = $1");
            client.query_opt(&sql, &[&run]).await
        }
    }
    .map_err(|e| ControlError::store("find run")(e.into()))?;
    match row {
        Some(r) => RunSummary::read(&r),
        None => Err(ControlError::RunNotFound(run.to_string())),
    }
}

/// Runs, newest submission first, `limit` at most, submitted before the run whose
/// submission number is `before` (keyset paging), whose key starts with `key_prefix`; each
/// with its submission number.
pub async fn list_runs(
    store: &Store,
    limit: u32,
    before: Option<i64>,
    key_prefix: &str,
) -> Result<Vec<(i64, RunSummary)>, ControlError> {
    let client = store
        .client()
        .await
        .map_err(ControlError::store("list runs"))?;
    let sql = format!(
        "{SUMMARY_SQL} WHERE ($1::bigint IS NULL OR c.seq < $1) \
         AND starts_with(c.run_key, $2) ORDER BY c.seq DESC LIMIT $3"
    );
    let rows = client
        .query(&sql, &[&before, &key_prefix, &i64::from(limit)])
        .await
        .map_err(|e| ControlError::store("list runs")(e.into()))?;
    rows.iter()
        .map(|r| {
            let seq: i64 = col(r, "seq").map_err(|e| ControlError::Corrupt {
                run: "?".into(),
                problem: e.to_string(),
            })?;
            Ok((seq, RunSummary::read(r)?))
        })
        .collect()
}

/// The stored spec of a run, checked against its digest.
pub async fn spec(store: &Store, run: &RunSummary) -> Result<ResolvedRunSpec, ControlError> {
    let client = store
        .client()
        .await
        .map_err(ControlError::store("read spec"))?;
    let row = client
        .query_one(SPEC_DOCUMENT_SQL, &[&run.run_id])
        .await
        .map_err(|e| ControlError::store("read spec")(e.into()))?;
    let corrupt = |problem: String| ControlError::Corrupt {
        run: run.run_key.clone(),
        problem,
    };
    let text: &str = crate::rows::one("spec_document.sql", &row, |r| col(r, "document"))
        .map_err(|e| corrupt(e.to_string()))?;
    let spec: ResolvedRunSpec =
        serde_json::from_str(text).map_err(|e| corrupt(format!("the spec does not parse: {e}")))?;
    if !spec.verify() || spec.digest != run.spec_digest {
        return Err(ControlError::Corrupt {
            run: run.run_key.clone(),
            problem: "the spec does not match its digest".into(),
        });
    }
    Ok(spec)
}

/// The stored ready plan of a run, reassembled from its header and planned trials and
/// checked against its digest.
pub async fn ready_plan(store: &Store, run: &RunSummary) -> Result<RunPlan, ControlError> {
    let corrupt = |problem: String| ControlError::Corrupt {
        run: run.run_key.clone(),
        problem,
    };
    let client = store
        .client()
        .await
        .map_err(ControlError::store("read plan"))?;
    let header = client
        .query_one(READY_PLAN_HEADER_SQL, &[&run.run_id])
        .await
        .map_err(|e| ControlError::store("read plan")(e.into()))?;
    let text: &str = crate::rows::one("ready_plan_header.sql", &header, |r| col(r, "document"))
        .map_err(|e| corrupt(e.to_string()))?;
    let mut plan: RunPlan = serde_json::from_str(text)
        .map_err(|e| corrupt(format!("the plan header does not parse: {e}")))?;
    // Each trial parsed as its row arrives: the rows' text (about as large as the plan's
    // JSON, ~850 MiB at a million trials) is never held all at once.
    let rows = client
        .query_raw(
            PLANNED_TRIAL_DOCUMENTS_SQL,
            [&run.run_id as &(dyn ToSql + Sync)],
        )
        .await
        .map_err(|e| ControlError::store("read plan")(e.into()))?;
    let mut rows = pin!(rows);
    plan.trials = Vec::new();
    while let Some(row) = tokio_stream::StreamExt::next(&mut rows).await {
        let row = row.map_err(|e| ControlError::store("read plan")(e.into()))?;
        let text: &str = col(&row, "document").map_err(|e| corrupt(e.to_string()))?;
        plan.trials.push(
            serde_json::from_str::<PlannedTrial>(text)
                .map_err(|e| corrupt(format!("a planned trial does not parse: {e}")))?,
        );
    }
    if sealed_plan_digest(&plan, plan.stage) != plan.digest || plan.digest != run.plan_digest {
        return Err(corrupt("the plan does not match its digest".into()));
    }
    Ok(plan)
}
