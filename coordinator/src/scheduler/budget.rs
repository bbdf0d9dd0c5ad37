//! Run budgets in the coordinator: after records are accepted, the runs they belong to that
//! have an `execution.budget` are checked with `core::budget::verdict` over their accepted
//! records; a run whose budget is spent gets its ready items cancelled with the reason
//! "budget" (so claims never see them again) and ends once its leased items finish.

use akbench_core::budget::{verdict, Budget, Spent};
use uuid::Uuid;

use crate::store::{StoreError, Tx};

const BUDGET_SPEND_SQL: &str = include_str!("../../sql/scheduler/budget_spend.sql");
const BUDGET_CANCEL_SQL: &str = include_str!("../../sql/scheduler/budget_cancel.sql");

/// Cancels the ready items of the runs (of `attempts`) whose budget is spent.
pub(super) async fn enforce(tx: &Tx<'_>, attempts: &[Uuid]) -> Result<(), StoreError> {
    let mut spent_runs = Vec::new();
    for row in tx
        .query(&tx.prepare_cached(BUDGET_SPEND_SQL).await?, &[&attempts])
        .await?
    {
        let budget: Option<Budget> = serde_json::from_str(row.get::<_, &str>(1)).ok();
        let count = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
        let spent = Spent {
            attempts: count(2),
            cost_usd: row.get(3),
            attempts_without_cost: count(4),
            tokens: count(5),
            attempts_without_tokens: count(6),
        };
        if verdict(budget.as_ref(), &spent).is_some() {
            spent_runs.push(row.get::<_, Uuid>(0));
        }
    }
    if spent_runs.is_empty() {
        return Ok(());
    }
    tx.query(&tx.prepare_cached(BUDGET_CANCEL_SQL).await?, &[&spent_runs])
        .await?;
    super::report::finish_runs(tx, &spent_runs).await
}
