//! The grade requeue as a transaction step: core's run machine decides whether a run takes
//! grade work (`machine::decide_run`, a `RunEvent::Grade`), then the owed items move to grade
//! work as core's item machine moves a grade requeue (`sql/grading/requeue.sql`, guarded by
//! the class each was decided on). `grade_work` (which trials are owed, their documents,
//! paging) and the scheduler's `DispatchStore` both apply it here, so the grade work queue
//! sits above the scheduler and nothing in the scheduler reaches back up to it.

use super::machine::{decide_run, with_moves, ItemEvent, MoveColumns, RunDecision};
use crate::store::{StoreError, Tx};
use akbench_core::dispatch::machine::RunEvent;
use chrono::{DateTime, Utc};
use uuid::Uuid;

const REQUEUE_SQL: &str = include_str!("../../sql/grading/requeue.sql");

/// Queues `ids` of run `run_id` (owed a grade; their grade work `documents` and retry
/// `budgets`) in `tx`: core's run machine decides whether the run takes grade work (a
/// finished run runs again; a cancelled one refuses it) before any item moves, under the
/// run's lock; then [`requeue_in`]. Returns the decision (`None`: no such run) and how many
/// were queued.
pub async fn queue_owed(
    tx: &Tx<'_>,
    run_id: Uuid,
    ids: &[Uuid],
    documents: &[Option<serde_json::Value>],
    budgets: &[i32],
    now: DateTime<Utc>,
) -> Result<(Option<RunDecision>, u64), StoreError> {
    let has_work = !ids.is_empty();
    let decided = decide_run(tx, run_id, |_| RunEvent::Grade { has_work }, true).await?;
    if !matches!(decided.map(|d| d.decided), Some(Ok(_))) || !has_work {
        return Ok((decided, 0));
    }
    let queued = requeue_in(tx, run_id, ids, documents, budgets, now).await?;
    Ok((decided, queued))
}

/// Moves `ids` of run `run_id` to grade work as core's item machine moves a grade requeue
/// (`requeue.sql`, each guarded by the class it was decided on), ready at `now`. Returns how
/// many moved.
pub async fn requeue_in(
    tx: &Tx<'_>,
    run_id: Uuid,
    ids: &[Uuid],
    documents: &[Option<serde_json::Value>],
    budgets: &[i32],
    now: DateTime<Utc>,
) -> Result<u64, StoreError> {
    let m = MoveColumns::of(ItemEvent::GradeRequeue);
    let row = tx
        .query_one(
            REQUEUE_SQL,
            &with_moves(&[&run_id, &ids, &documents, &budgets, &now], &m),
        )
        .await?;
    Ok(crate::rows::count(&row, "queued")?)
}
