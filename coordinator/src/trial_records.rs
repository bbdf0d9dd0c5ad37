//! `FetchRecords`: each done trial's `run_record.json`, assembled by
//! [`akbench_core::trial_record::assemble`] from the run's spec, the planned trial and every
//! finished attempt (the worker's accepted record, or one reconstructed from the stored
//! transitions when it never arrived), streamed in plan order as canonical JSON with its
//! digest. A trial that cannot be assembled (a completed attempt whose record has not arrived
//! yet, a stored row that no longer parses) is left out and logged, never sent half-made; the
//! client sees fewer records than planned trials.

use akbench_core::digest::{canonical_json, digest_bytes};
use akbench_core::lifecycle::State;
use akbench_core::plan::PlannedTrial;
use akbench_core::record::{AttemptRecord, Transition};
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::trial_record::{assemble, StoredAttempt};
use akbench_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::Status;
use uuid::Uuid;

const TRIAL_ATTEMPTS_SQL: &str = include_str!("../sql/control/trial_attempts.sql");

/// The attempts of one trial, gathered from consecutive rows.
struct Gathered {
    trial_id: Uuid,
    ordinal: i32,
    planned: String,
    attempts: Vec<StoredAttempt>,
    /// Why a stored attempt of the trial could not be read, when one could not.
    unreadable: Option<String>,
}

fn stored(row: &tokio_postgres::Row) -> Result<StoredAttempt, String> {
    let number: i32 = row.get(4);
    let terminal: &str = row.get(5);
    let record: Option<&str> = row.get(8);
    let transitions: Option<&str> = row.get(9);
    Ok(StoredAttempt {
        id: row.get(3),
        number: u32::try_from(number).map_err(|e| e.to_string())?,
        terminal: State::parse(terminal)
            .ok_or_else(|| format!("unknown terminal state `{terminal}`"))?,
        cause: row.get(6),
        finished_at: row.get(7),
        record: record
            .map(serde_json::from_str::<AttemptRecord>)
            .transpose()
            .map_err(|e| format!("a stored record does not parse: {e}"))?,
        transitions: transitions
            .map(serde_json::from_str::<Vec<Transition>>)
            .transpose()
            .map_err(|e| format!("stored transitions do not parse: {e}"))?
            .unwrap_or_default(),
        worker_id: row.get(10),
    })
}

/// The message for one trial, or why it is left out.
fn message(spec: &ResolvedRunSpec, g: Gathered) -> Result<pb::RunRecord, String> {
    if let Some(why) = g.unreadable {
        return Err(why);
    }
    let trial: PlannedTrial = serde_json::from_str(&g.planned)
        .map_err(|e| format!("the planned trial does not parse: {e}"))?;
    let written_by = format!("akbench-coordinator {}", env!("CARGO_PKG_VERSION"));
    let record = assemble(spec, &trial, g.attempts, &written_by)?;
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
    })
}

/// Streams the records of `trials` (empty: all) of the run to `tx`, in plan order.
pub async fn send(
    client: deadpool_postgres::Object,
    spec: ResolvedRunSpec,
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
        let trial_id: Option<Uuid> = row.as_ref().map(|r| r.get(0));
        if current.as_ref().map(|g| g.trial_id) != trial_id {
            if let Some(g) = current.take() {
                let id = g.trial_id;
                match message(&spec, g) {
                    Ok(m) => {
                        if tx.send(Ok(m)).await.is_err() {
                            return;
                        }
                    }
                    Err(why) => {
                        tracing::warn!(run = %spec.identity.run_key, trial = %id, "record not exported: {why}");
                    }
                }
            }
        }
        let Some(row) = row else { return };
        let g = current.get_or_insert_with(|| Gathered {
            trial_id: row.get(0),
            ordinal: row.get(1),
            planned: row.get(2),
            attempts: Vec::new(),
            unreadable: None,
        });
        match stored(&row) {
            Ok(a) => g.attempts.push(a),
            Err(why) => g.unreadable = Some(why),
        }
    }
}
