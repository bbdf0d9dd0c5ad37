//! Run budgets in the coordinator: after records are accepted, the runs they belong to that
//! have an `execution.budget` are checked with `core::budget::verdict` over their accepted
//! records; a run whose budget is spent gets its ready items cancelled with the reason
//! "budget" (so claims never see them again) and ends once its leased items finish.
//! [`budget_status`] is the same reading for the status projection. [`BudgetedRuns`]
//! remembers which runs have a budget (a run's spec never changes), so the report path
//! reads no spend for runs without one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use akbench_core::budget::{verdict, Budget, BudgetStatus, Spent};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::rows::{self, col, count, RowError};
use crate::store::{StoreError, Tx};

const BUDGET_SPEND_SQL: &str = include_str!("../../sql/scheduler/budget_spend.sql");
const BUDGET_CANCEL_SQL: &str = include_str!("../../sql/scheduler/budget_cancel.sql");
const RUNS_BUDGETED_SQL: &str = include_str!("../../sql/scheduler/runs_budgeted.sql");

/// Runs remembered at most; past it the memory starts over (a miss costs one keyed read).
const REMEMBERED_RUNS: usize = 100_000;

/// Whether runs have an `execution.budget`, read once per run and process: run specs are
/// immutable (migration 0003), so the answer never changes.
#[derive(Debug, Clone, Default)]
pub(super) struct BudgetedRuns(Arc<Mutex<HashMap<Uuid, bool>>>);

impl BudgetedRuns {
    /// Those of `runs` that have a budget, reading only the runs not seen before.
    pub(super) async fn of(
        &self,
        client: &impl GenericClient,
        runs: &[Uuid],
    ) -> Result<Vec<Uuid>, StoreError> {
        let unknown: Vec<Uuid> = {
            let known = self.0.lock().unwrap_or_else(|e| e.into_inner());
            runs.iter()
                .filter(|r| !known.contains_key(r))
                .copied()
                .collect()
        };
        let read: HashMap<Uuid, bool> = if unknown.is_empty() {
            HashMap::new()
        } else {
            let rows = client
                .query(
                    &client.prepare_cached(RUNS_BUDGETED_SQL).await?,
                    &[&unknown],
                )
                .await?;
            rows::all("runs_budgeted.sql", &rows, |r| {
                Ok((col(r, "run_id")?, col(r, "budgeted")?))
            })?
            .into_iter()
            .collect()
        };
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() + unknown.len() > REMEMBERED_RUNS {
            // Start over, but keep what this call answers from.
            known.retain(|r, _| runs.contains(r));
        }
        for run in unknown {
            // A run without a spec row has no budget (and cannot get one).
            known.insert(run, read.get(&run).copied().unwrap_or(false));
        }
        Ok(runs
            .iter()
            .filter(|r| known.get(r).copied().unwrap_or(false))
            .copied()
            .collect())
    }
}

/// Reads the cap and the spend of those of `runs` that have a budget.
async fn spend_of(
    client: &impl GenericClient,
    runs: &[Uuid],
) -> Result<Vec<(Uuid, Budget, Spent)>, StoreError> {
    let rows = client
        .query(&client.prepare_cached(BUDGET_SPEND_SQL).await?, &[&runs])
        .await?;
    rows.iter()
        .map(|row| {
            let text: &str = col(row, "budget")?;
            // A stored budget that does not parse is an error: a run never loses its cap.
            let budget: Budget = serde_json::from_str(text).map_err(|e| RowError::Value {
                column: "budget",
                problem: format!("`{text}` does not parse: {e}"),
            })?;
            let spent = Spent {
                attempts: count(row, "attempts")?,
                cost_usd: col(row, "cost_usd")?,
                attempts_without_cost: count(row, "without_cost")?,
                tokens: count(row, "tokens")?,
                attempts_without_tokens: count(row, "without_tokens")?,
            };
            Ok((col(row, "run_id")?, budget, spent))
        })
        .collect::<Result<_, RowError>>()
        .map_err(|e| StoreError::from(e.in_query("budget_spend.sql")))
}

/// Spend against the cap of `run`, when it has a budget.
pub async fn budget_status(
    client: &impl GenericClient,
    run: Uuid,
) -> Result<Option<BudgetStatus>, StoreError> {
    Ok(spend_of(client, &[run])
        .await?
        .into_iter()
        .next()
        .map(|(_, b, s)| BudgetStatus::of(b, s)))
}

/// Cancels the ready items of those of `runs` whose budget is spent, after taking back their
/// leases that have not started ([`super::revoke`]: prefetched work is held too). Returns
/// the revoked leases, whose workers are sent `Cancel` after commit.
pub(super) async fn enforce(
    tx: &Tx<'_>,
    runs: &[Uuid],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<super::revoke::Revoked>, StoreError> {
    let spent_runs: Vec<Uuid> = spend_of(tx, runs)
        .await?
        .into_iter()
        .filter(|(_, b, s)| verdict(Some(b), s).is_some())
        .map(|(r, _, _)| r)
        .collect();
    if spent_runs.is_empty() {
        return Ok(Vec::new());
    }
    let revoked = super::revoke::revoke_unstarted(tx, &spent_runs, &[], now).await?;
    stop_items(tx, &spent_runs).await?;
    super::machine::finish_runs(tx, &spent_runs).await?;
    Ok(revoked)
}

/// Cancels, in `tx`, the items of `runs` core's item machine moves on a budget stop (the
/// ready ones, `budget_cancel.sql`, reason "budget").
pub(super) async fn stop_items(tx: &Tx<'_>, runs: &[Uuid]) -> Result<(), StoreError> {
    let m = super::machine::MoveColumns::of(super::machine::ItemEvent::BudgetStop);
    tx.query(
        &tx.prepare_cached(BUDGET_CANCEL_SQL).await?,
        &super::machine::with_moves(&[&runs], &m),
    )
    .await?;
    Ok(())
}
