//! The run-wide moves of a cancel and a resume, applied in a transaction as core's machine
//! decides them: the run is decided under its lock (`machine::decide_run`) and its items
//! move by the guarded statements of the event (`cancel_run.sql`, `resume_items.sql`,
//! [`MoveColumns::of`]). [`super::Scheduler::cancel_run`] and
//! [`super::Scheduler::resume_run`] run them; so does the scheduler's
//! [`akbench_core::dispatch::store::DispatchStore`] (`super::dispatch_store`).

use akbench_core::dispatch::machine::{RunEvent, RunMove};
use akbench_core::dispatch::store::RunDecision;
use akbench_core::dispatch::RunState;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::machine::{decide_run, with_moves, ItemEvent, MoveColumns};
use super::CancelReport;
use crate::rows::{col, RowError};
use crate::store::{StoreError, Tx};

const CANCEL_RUN_SQL: &str = include_str!("../../sql/scheduler/cancel_run.sql");
const LIVE_OF_RUN_SQL: &str = include_str!("../../sql/scheduler/live_attempts_of_run.sql");
const RESUME_ITEMS_SQL: &str = include_str!("../../sql/scheduler/resume_items.sql");

/// Re-queues, in `tx`, the trials of `run_id` core's item machine moves on a resume
/// (`resume_items.sql`, ready at `now`). Returns them.
pub(super) async fn resume_items_in(
    tx: &Tx<'_>,
    run_id: Uuid,
    now: DateTime<Utc>,
) -> Result<Vec<Uuid>, StoreError> {
    let m = MoveColumns::of(ItemEvent::Resume);
    let rows = tx
        .query(RESUME_ITEMS_SQL, &with_moves(&[&run_id, &now], &m))
        .await?;
    Ok(crate::rows::all("resume_items.sql", &rows, |r| {
        col(r, "trial_id")
    })?)
}

/// A resume in `tx`: the trials are re-queued ([`resume_items_in`]), then a run with work
/// again runs again (core's run machine decides it). Returns the trials and the decision
/// (`None`: no such run).
pub(super) async fn resume_in(
    tx: &Tx<'_>,
    run_id: Uuid,
    now: DateTime<Utc>,
) -> Result<(Vec<Uuid>, Option<RunDecision>), StoreError> {
    let ids = resume_items_in(tx, run_id, now).await?;
    let d = decide_run(tx, run_id, |has_work| RunEvent::Resume { has_work }, true).await?;
    Ok((ids, d))
}

/// Cancels, in `tx`, the items of `run_id` core's item machine moves on a cancel (the ready
/// ones, `cancel_run.sql`). Returns how many.
pub(super) async fn cancel_items_in(tx: &Tx<'_>, run_id: Uuid) -> Result<u64, StoreError> {
    let m = MoveColumns::of(ItemEvent::Cancel);
    let row = tx
        .query_one(
            &tx.prepare_cached(CANCEL_RUN_SQL).await?,
            &with_moves(&[&run_id], &m),
        )
        .await?;
    let items: i64 = col(&row, "items")?;
    Ok(u64::try_from(items).unwrap_or(0))
}

/// A cancel in `tx`, as core's run machine decides it (see [`Scheduler::cancel_run`]).
/// Returns the decision and the report (`None`: no such run).
pub(super) async fn cancel_in(
    tx: &Tx<'_>,
    run_id: Uuid,
) -> Result<Option<(RunDecision, CancelReport)>, StoreError> {
    super::keyed_plans(tx).await?;
    let Some(d) = decide_run(tx, run_id, |_| RunEvent::Cancel, true).await? else {
        return Ok(None);
    };
    // A run being cancelled meets a second cancel with nothing new to decide, but its
    // waiting items and live attempts are those of a cancel: they are cancelled (again) and
    // told to stop. An ended run changes nothing.
    let unchanged = match d.decided {
        Ok(RunMove::Stays(why)) => Some((d.from, why)),
        _ => None,
    };
    let cancels = matches!(d.decided, Ok(RunMove::To(_))) || d.from == RunState::Cancelling;
    if !cancels {
        let report = CancelReport {
            cancelled_items: 0,
            live: Vec::new(),
            unchanged,
        };
        return Ok(Some((d, report)));
    }
    let cancelled_items = cancel_items_in(tx, run_id).await?;
    let live: Vec<(Uuid, String)> = tx
        .query(&tx.prepare_cached(LIVE_OF_RUN_SQL).await?, &[&run_id])
        .await?
        .iter()
        .map(|r| Ok((col(r, "attempt_id")?, col(r, "worker_id")?)))
        .collect::<Result<_, RowError>>()
        .map_err(|e| e.in_query("live_attempts_of_run.sql"))?;
    // Nothing live: the run ends now, by the one rule of idle runs.
    super::machine::finish_runs(tx, &[run_id]).await?;
    let report = CancelReport {
        cancelled_items,
        live,
        unchanged,
    };
    Ok(Some((d, report)))
}
