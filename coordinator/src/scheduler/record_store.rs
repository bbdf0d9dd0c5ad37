//! Storing accepted attempt records: [`store_records`] is the one writer of `submissions`.
//! One statement stores a batch and counts its spend (`insert_submissions.sql`, migration
//! 0019); a record that arrives after its trial was settled re-buckets the trial
//! by core's rule (`Bucket::settled` over the rows `late_buckets.sql` locks, applied by
//! `rebucket.sql`), statements run only when there is such a record.

use std::collections::HashMap;

use akbench_core::accounting::Bucket;
use akbench_core::dispatch::machine::ItemState;
use akbench_core::lifecycle::State;
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::rows::{self, col};
use crate::store::StoreError;

const INSERT_SUBMISSIONS_SQL: &str = include_str!("../../sql/scheduler/insert_submissions.sql");
const LATE_BUCKETS_SQL: &str = include_str!("../../sql/scheduler/late_buckets.sql");
const REBUCKET_SQL: &str = include_str!("../../sql/scheduler/rebucket.sql");

/// An accepted record to store: its attempt, its digest and the record (JSON text).
pub type NewRecord = (Uuid, String, String);

/// Stores `records` (their attempts must exist: the foreign key refuses the whole batch
/// otherwise, SQLSTATE 23503 on `submissions_attempt_id_fkey`), counts their spend and sets
/// the bucket of every done trial whose record came after its finish was settled. Returns
/// the runs of the stored records, each once (for the budget check). Call it inside the
/// transaction that accepted the records; digests and conflicts are the caller's checks.
pub async fn store_records(
    client: &impl GenericClient,
    records: &[NewRecord],
) -> Result<Vec<Uuid>, StoreError> {
    Ok(store(client, records).await?.0)
}

/// [`store_records`], also returning each stored record's `ok` (the generated column of
/// migration 0003) by attempt.
pub(super) async fn store(
    client: &impl GenericClient,
    records: &[NewRecord],
) -> Result<(Vec<Uuid>, HashMap<Uuid, Option<bool>>), StoreError> {
    let mut oks = HashMap::new();
    if records.is_empty() {
        return Ok((Vec::new(), oks));
    }
    let ids: Vec<Uuid> = records.iter().map(|r| r.0).collect();
    let digests: Vec<&str> = records.iter().map(|r| r.1.as_str()).collect();
    let texts: Vec<&str> = records.iter().map(|r| r.2.as_str()).collect();
    let rows = client
        .query(
            &client.prepare_cached(INSERT_SUBMISSIONS_SQL).await?,
            &[&ids, &digests, &texts],
        )
        .await?;
    let mut settled = Vec::new();
    let mut runs = rows::all("insert_submissions.sql", &rows, |r| {
        let attempt: Uuid = col(r, "attempt_id")?;
        if col::<bool>(r, "settled")? {
            settled.push(attempt);
        }
        oks.insert(attempt, col::<Option<bool>>(r, "ok")?);
        col::<Uuid>(r, "run_id")
    })?;
    if !settled.is_empty() {
        rebucket(client, &settled).await?;
    }
    runs.sort();
    runs.dedup();
    Ok((runs, oks))
}

/// Re-buckets the done trials decided by the attempts in `settled`, whose records arrived
/// after their finish was settled: locks them with what their bucket is decided from, decides
/// with core's [`Bucket::settled`] and moves those whose bucket changes (one statement, with
/// the counters).
async fn rebucket(client: &impl GenericClient, settled: &[Uuid]) -> Result<(), StoreError> {
    let rows = client
        .query(
            &client.prepare_cached(LATE_BUCKETS_SQL).await?,
            &[&settled, &ItemState::Done.as_str()],
        )
        .await?;
    let (mut trials, mut old, mut new) = (Vec::new(), Vec::new(), Vec::new());
    for r in &rows {
        let bucket: Option<String> = col(r, "bucket")?;
        let terminal = rows::parsed(r, "terminal_state", State::parse)?;
        let decided = Bucket::settled(terminal, col(r, "ok")?).map(|b| b.as_str().to_string());
        if decided != bucket {
            trials.push(col::<Uuid>(r, "trial_id")?);
            old.push(bucket);
            new.push(decided);
        }
    }
    if !trials.is_empty() {
        client
            .execute(
                &client.prepare_cached(REBUCKET_SQL).await?,
                &[&trials, &old, &new, &ItemState::Done.as_str()],
            )
            .await?;
    }
    Ok(())
}
