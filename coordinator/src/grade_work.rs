//! Queuing grade work (`ResumeRun{grade: true}`, `akbench run grade`): the trials of a run
//! that were executed but not graded become grade work items, leased and fenced like any
//! other, that workers answer by rebuilding the agent's workspace from its stored diff and
//! grading it; the agent never runs again.
//!
//! Only a done trial whose agent ran and that has no verdict is selected
//! (`sql/grading/owed.sql`, by core's one rule `grading::owes_grade`): its deciding attempt
//! ended `not_graded` or `evaluation_error`, or was a grading attempt that ended
//! `infrastructure_error`; what is graded is the record of its latest execute attempt that
//! ended `not_graded` or `evaluation_error`. A trial with a
//! verdict, one whose agent failed, timed out or never ran (invalid configuration,
//! infrastructure error, cancelled) and one still queued or running are never touched. Each selected work item becomes `kind = 'grade'`, `ready`,
//! with a document carrying the trial, its agent condition and the accepted record of the
//! attempt to grade ([`GradeSource`]), and the plan's retry budget again. Trials are queued a
//! page of [`PAGE`] at a time in plan order, each page in one transaction (a large run never
//! holds every record in memory at once; workers start grading the first page while the next
//! is queued; calling again after a failure queues what is left). A finished run runs again
//! until the grades are in. The run's decision and the items' move are
//! `scheduler::grade_requeue`'s (the scheduler's `DispatchStore` applies the same).

use crate::rows::col;
use crate::scheduler::grade_requeue::queue_owed;
use crate::scheduler::Scheduler;
use crate::store::StoreError;
use akbench_core::grading::owing_states;
use akbench_core::record::AttemptRecord;
use akbench_core::work::{GradeSource, WorkItem, WorkKind};
use uuid::Uuid;

const OWED_SQL: &str = include_str!("../sql/grading/owed.sql");

/// Trials queued per transaction.
pub const PAGE: i64 = 500;

/// What [`queue_grading`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GradingQueued {
    /// Trials queued for grading.
    pub queued: u64,
    /// Trials owed a grade that could not be queued, with why (their stored documents do not
    /// parse or cannot be graded); they keep their `not_graded` outcome.
    pub skipped: Vec<(Uuid, String)>,
}

/// The grade work document of one owed trial, or why there cannot be one.
fn grade_document(
    document: Option<&str>,
    record: &str,
) -> Result<(serde_json::Value, i32), String> {
    let document =
        document.ok_or("the work item has no document (it was not created by StartRun)")?;
    let work: WorkItem = serde_json::from_str(document)
        .map_err(|e| format!("the stored work item does not parse: {e}"))?;
    let attempt: AttemptRecord = serde_json::from_str(record)
        .map_err(|e| format!("the accepted record does not parse: {e}"))?;
    let source = GradeSource { attempt };
    source.check(u32::MAX)?;
    let budget = i32::try_from(work.trial.attempt.infrastructure_retries).unwrap_or(i32::MAX);
    let graded = WorkItem {
        grade: Some(source),
        ..work
    };
    let value = serde_json::to_value(&graded).map_err(|e| e.to_string())?;
    Ok((value, budget))
}

/// Queues grade work for every trial of `run_id` owed a grade, in one transaction, and wakes
/// the dispatchers.
pub async fn queue_grading(
    scheduler: &Scheduler,
    run_id: Uuid,
) -> Result<GradingQueued, StoreError> {
    queue_grading_paged(scheduler, run_id, PAGE).await
}

/// [`queue_grading`] with `page` trials per transaction.
pub async fn queue_grading_paged(
    scheduler: &Scheduler,
    run_id: Uuid,
    page: i64,
) -> Result<GradingQueued, StoreError> {
    let page_size = page.max(1);
    let mut done = GradingQueued::default();
    let mut after: i32 = -1;
    loop {
        let now = scheduler.now();
        let page = scheduler
            .store()
            .tx(|tx| {
                Box::pin(async move {
                    let rows = tx
                        .query(
                            OWED_SQL,
                            &[
                                &run_id,
                                &after,
                                &page_size,
                                &owing_states(WorkKind::Execute),
                                &owing_states(WorkKind::Grade),
                            ],
                        )
                        .await?;
                    let mut out = GradingQueued::default();
                    let last: Option<i32> = rows.last().map(|r| col(r, "ordinal")).transpose()?;
                    let mut ids = Vec::new();
                    let mut documents = Vec::new();
                    let mut budgets = Vec::new();
                    for r in &rows {
                        let trial: Uuid = col(r, "trial_id")?;
                        match grade_document(col(r, "document")?, col(r, "record")?) {
                            Ok((doc, budget)) => {
                                ids.push(trial);
                                documents.push(Some(doc));
                                budgets.push(budget);
                            }
                            Err(why) => out.skipped.push((trial, why)),
                        }
                    }
                    if !ids.is_empty() {
                        out.queued = queue_owed(tx, run_id, &ids, &documents, &budgets, now)
                            .await?
                            .1;
                    }
                    Ok((out, last))
                })
            })
            .await?;
        let (out, last) = page;
        for (trial, why) in &out.skipped {
            tracing::warn!(%run_id, %trial, "not queued for grading: {why}");
        }
        if out.queued > 0 {
            scheduler.wake_claimer();
        }
        done.queued += out.queued;
        done.skipped.extend(out.skipped);
        match last {
            Some(ordinal) => after = ordinal,
            None => break,
        }
    }
    if done.queued > 0 {
        tracing::info!(%run_id, queued = done.queued, "grading queued");
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_unparsable_document_or_record_is_refused_with_the_reason() {
        assert!(grade_document(None, "{}")
            .unwrap_err()
            .contains("no document"));
        assert!(grade_document(Some("{"), "{}")
            .unwrap_err()
            .contains("work item does not parse"));
    }
}
