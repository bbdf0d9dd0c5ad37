//! `FetchRecords`: each done or cancelled trial's `run_record.json`, assembled by
//! [`akbench_core::trial_record::assemble`] from the run's spec, the planned trial and every
//! finished attempt (the worker's accepted record, or one reconstructed from the stored
//! transitions when it never arrived), streamed in plan order as canonical JSON with its
//! digest. A trial its run cancelled before an attempt ran to an end is exported too:
//! `cancelled` with its reason and the attempts it had made (none when it never started). Rows
//! are typed ([`crate::rows`]): a damaged row ends the stream with an error. A trial that
//! cannot be assembled (a completed attempt whose record never arrived, a stored row that no
//! longer parses) is never sent half-made: it is logged and sent as a message with only
//! `not_exported` (why) set, so the client names it and fails.

use akbench_core::digest::{canonical_json, digest_bytes};
use akbench_core::dispatch::machine::ItemState;
use akbench_core::lifecycle::State;
use akbench_core::plan::PlannedTrial;
use akbench_core::record::{AttemptRecord, Transition};
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::trial_record::{assemble, assemble_cancelled, StoredAttempt};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;

use crate::rows::{col, parsed, FromRow, RowError};
use akbench_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::Status;
use uuid::Uuid;

const TRIAL_ATTEMPTS_SQL: &str = include_str!("../sql/control/trial_attempts.sql");

/// One row of `trial_attempts.sql`, typed.
struct TrialRow {
    trial_id: Uuid,
    ordinal: i32,
    key: String,
    planned: String,
    /// `done` or `cancelled`.
    cancelled: bool,
    cancel_reason: String,
    item_updated_at: DateTime<Utc>,
    /// The finished attempt, absent for a trial cancelled before any attempt finished.
    attempt: Option<Result<StoredAttempt, String>>,
}

impl FromRow for TrialRow {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        let attempt_id: Option<Uuid> = col(row, "attempt_id")?;
        let state = parsed(row, "item_state", ItemState::parse)?;
        Ok(TrialRow {
            trial_id: col(row, "trial_id")?,
            ordinal: col(row, "ordinal")?,
            key: col(row, "trial_key")?,
            planned: col(row, "planned")?,
            cancelled: match state {
                ItemState::Done => false,
                ItemState::Cancelled => true,
                other @ (ItemState::Ready | ItemState::Leased) => {
                    return Err(RowError::Value {
                        column: "item_state",
                        problem: format!("`{other}` is neither done nor cancelled"),
                    })
                }
            },
            cancel_reason: col(row, "cancel_reason")?,
            item_updated_at: col(row, "item_updated_at")?,
            attempt: attempt_id.map(|id| stored(row, id)).transpose()?,
        })
    }
}

/// The attempts of one trial, gathered from consecutive rows.
struct Gathered {
    trial_id: Uuid,
    ordinal: i32,
    key: String,
    planned: String,
    /// Cancelled (with its reason, at) before an attempt ran to an end.
    cancelled: Option<(String, DateTime<Utc>)>,
    attempts: Vec<StoredAttempt>,
    /// Why a stored attempt of the trial could not be read, when one could not.
    unreadable: Option<String>,
}

/// The attempt of a row: a bad column is a [`RowError`]; a stored document that does not
/// parse leaves the trial out (`Err` inside).
fn stored(row: &Row, id: Uuid) -> Result<Result<StoredAttempt, String>, RowError> {
    let number: i32 = col(row, "number")?;
    let number = u32::try_from(number).map_err(|_| RowError::Value {
        column: "number",
        problem: format!("{number} is not an attempt number"),
    })?;
    let terminal = parsed(row, "terminal_state", State::parse)?;
    let cause: Option<String> = col(row, "cause")?;
    let finished_at: DateTime<Utc> = col(row, "finished_at")?;
    let record: Option<&str> = col(row, "record")?;
    let transitions: Option<&str> = col(row, "transitions")?;
    let worker_id: Option<String> = col(row, "worker_id")?;
    let record = match record
        .map(serde_json::from_str::<AttemptRecord>)
        .transpose()
    {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("a stored record does not parse: {e}"))),
    };
    let transitions = match transitions
        .map(serde_json::from_str::<Vec<Transition>>)
        .transpose()
    {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => return Ok(Err(format!("stored transitions do not parse: {e}"))),
    };
    Ok(Ok(StoredAttempt {
        id,
        number,
        terminal,
        cause,
        finished_at,
        record,
        transitions,
        worker_id,
    }))
}

/// The message for one trial, or why it is left out.
fn message(spec: &ResolvedRunSpec, g: Gathered) -> Result<pb::RunRecord, String> {
    if let Some(why) = g.unreadable {
        return Err(why);
    }
    let trial: PlannedTrial = serde_json::from_str(&g.planned)
        .map_err(|e| format!("the planned trial does not parse: {e}"))?;
    let written_by = format!("akbench-coordinator {}", env!("CARGO_PKG_VERSION"));
    let record = match &g.cancelled {
        Some((reason, at)) => {
            assemble_cancelled(spec, &trial, g.attempts, reason, *at, &written_by)?
        }
        None => assemble(spec, &trial, g.attempts, &written_by)?,
    };
    let record_json = canonical_json(&record);
    Ok(pb::RunRecord {
        trial_id: g.trial_id.to_string(),
        attempt_id: record
            .attempts
            .last()
            .map(|a| a.attempt.id.to_string())
            .unwrap_or_default(),
        ordinal: u64::try_from(g.ordinal).unwrap_or(0),
        digest: digest_bytes(record_json.as_bytes()),
        record_json,
        not_exported: String::new(),
        trial_key: g.key,
    })
}

/// Streams the records of `trials` (empty: all) of the run to `tx`, in plan order.
pub async fn send(
    client: deadpool_postgres::Object,
    spec: std::sync::Arc<ResolvedRunSpec>,
    trials: Vec<Uuid>,
    tx: mpsc::Sender<Result<pb::RunRecord, Status>>,
    db: impl Fn(tokio_postgres::Error) -> Status,
) {
    let run_id = spec.identity.run_id;
    let rows = match client
        .query_raw(
            TRIAL_ATTEMPTS_SQL,
            [
                &run_id as &(dyn tokio_postgres::types::ToSql + Sync),
                &trials,
            ],
        )
        .await
    {
        Ok(rows) => rows,
        Err(e) => {
            let _ = tx.send(Err(db(e))).await;
            return;
        }
    };
    let mut rows = std::pin::pin!(rows);
    let mut current: Option<Gathered> = None;
    loop {
        let row = match rows.next().await {
            Some(Ok(row)) => Some(row),
            Some(Err(e)) => {
                let _ = tx.send(Err(db(e))).await;
                return;
            }
            None => None,
        };
        let row = match row.as_ref().map(TrialRow::from_row).transpose() {
            Ok(r) => r,
            Err(e) => {
                let _ = tx
                    .send(Err(Status::data_loss(format!(
                        "failed to export the records of run `{}`: a stored row is damaged: {e}",
                        spec.identity.run_key
                    ))))
                    .await;
                return;
            }
        };
        let trial_id: Option<Uuid> = row.as_ref().map(|r| r.trial_id);
        if current.as_ref().map(|g| g.trial_id) != trial_id {
            if let Some(g) = current.take() {
                let (id, ordinal, key) = (g.trial_id, g.ordinal, g.key.clone());
                match message(&spec, g) {
                    Ok(m) => {
                        if tx.send(Ok(m)).await.is_err() {
                            return;
                        }
                    }
                    Err(why) => {
                        tracing::warn!(run = %spec.identity.run_key, trial = %id, "record not exported: {why}");
                        // Said to the client too: it counts the trial and must name it.
                        let m = pb::RunRecord {
                            trial_id: id.to_string(),
                            ordinal: u64::try_from(ordinal).unwrap_or(0),
                            not_exported: why,
                            trial_key: key,
                            ..Default::default()
                        };
                        if tx.send(Ok(m)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        let Some(row) = row else { return };
        let g = current.get_or_insert_with(|| Gathered {
            trial_id: row.trial_id,
            ordinal: row.ordinal,
            key: row.key.clone(),
            planned: row.planned.clone(),
            cancelled: row
                .cancelled
                .then(|| (row.cancel_reason.clone(), row.item_updated_at)),
            attempts: Vec::new(),
            unreadable: None,
        });
        match row.attempt {
            Some(Ok(a)) => g.attempts.push(a),
            Some(Err(why)) => g.unreadable = Some(why),
            None => {}
        }
    }
}
