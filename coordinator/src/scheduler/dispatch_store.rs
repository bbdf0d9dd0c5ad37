//! The scheduler as core's [`DispatchStore`]: each event goes through the product's own
//! transaction code and guarded statements (the start, cancel and resume of
//! `Scheduler::start_run` / `cancel_run` / `resume_run`, `machine::finish_runs`, the claim's
//! `claim_create.sql`, the settle of `apply`, the revoke of a budget stop, `budget_cancel.sql`,
//! the grade requeue of `grade_requeue`), so core's one table (`store::conformance`) walks
//! PostgreSQL as it walks the memory store. Nothing here decides a transition.

use akbench_core::dispatch::machine::{ItemClass, ItemMove, ItemState};
use akbench_core::dispatch::store::{DispatchStore, ItemAsk, RunAsk, RunDecision};
use akbench_core::dispatch::RunState;
use akbench_core::lifecycle::State;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::apply::{self, AttemptWrite, Effects, Ending};
use super::run_moves::{cancel_in, cancel_items_in, resume_in, resume_items_in};
use super::{Caps, RunAgent, Scheduler, SchedulerError};
use crate::rows::{self, col, parsed, parsed_opt};
use crate::store::{StoreError, Tx};

const ITEMS_OF_SQL: &str = include_str!("../../sql/scheduler/items_of.sql");
const RUN_STATE_SQL: &str = include_str!("../../sql/scheduler/run_state.sql");

/// Lease time of a claim made through the trait, in milliseconds.
const CLAIM_TTL_MS: i64 = 60_000;

/// A run of the store: its id, its trials in plan order (an item is its plan index), its
/// agents (what its start is given) and the registered worker claims through the trait take
/// leases for.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The run.
    pub run_id: Uuid,
    /// Its planned trials, by ordinal.
    pub trials: Vec<Uuid>,
    /// Its agents.
    pub agents: Vec<RunAgent>,
    /// The worker claims are made for.
    pub worker: String,
}

/// A work item as read for an event.
struct ItemRow {
    class: ItemClass,
    document: Option<serde_json::Value>,
    retry_budget: i32,
    attempts_used: i32,
    /// The attempt numbered `attempts_used`, with its last seq.
    attempt: Option<(Uuid, i32)>,
}

/// Reads `trial`'s item (`None`: no such item).
async fn item_of(client: &impl GenericClient, trial: Uuid) -> Result<Option<ItemRow>, StoreError> {
    let rows = client
        .query(&client.prepare_cached(ITEMS_OF_SQL).await?, &[&vec![trial]])
        .await?;
    let mut items = rows::all("items_of.sql", &rows, |r| {
        let attempt: Option<Uuid> = col(r, "attempt_id")?;
        let last_seq: Option<i32> = col(r, "last_seq")?;
        Ok(ItemRow {
            class: ItemClass {
                state: parsed(r, "state", ItemState::parse)?,
                outcome: parsed_opt(r, "outcome", State::parse)?,
            },
            document: col(r, "document")?,
            retry_budget: col(r, "retry_budget")?,
            attempts_used: col(r, "attempts_used")?,
            attempt: attempt.zip(last_seq),
        })
    })?;
    Ok(items.pop())
}

/// Ends `trial`'s live attempt in `terminal` and settles it as a report does (`apply`:
/// core's settle, guarded by the attempt and the run's state).
async fn end_attempt(
    tx: &Tx<'_>,
    trial: Uuid,
    item: &ItemRow,
    terminal: State,
    retry: &super::RetryPolicy,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut effects = Effects::default();
    if let (ItemState::Leased, Some((attempt_id, last_seq))) = (item.class.state, item.attempt) {
        let seq = last_seq + 1;
        effects.attempts.push(AttemptWrite {
            attempt_id,
            state: terminal,
            last_seq: u32::try_from(seq).unwrap_or(0),
            steps: vec![(seq, terminal.as_str().to_string(), now, String::new())],
            terminal: Some(terminal),
            cause: None,
            fenced: false,
        });
        effects.leases_ended.push(attempt_id);
    }
    let ending = Ending {
        trial_id: trial,
        number: item.attempts_used,
        terminal,
        ok: None,
    };
    apply::apply(tx, effects, &[ending], Default::default(), retry, now).await?;
    Ok(())
}

/// Applies item event `ask` to `trial` of run `run_id` in `tx`, through the statement the
/// product applies it with.
async fn item_in(
    tx: &Tx<'_>,
    run: (Uuid, Uuid, &str),
    item: &ItemRow,
    ask: ItemAsk,
    retry: &super::RetryPolicy,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let (run_id, trial, worker) = run;
    match ask {
        ItemAsk::Claim => {
            super::claim::create_leases(tx, &[worker], &[trial], CLAIM_TTL_MS, now).await?;
        }
        ItemAsk::Ended(terminal) => end_attempt(tx, trial, item, terminal, retry, now).await?,
        ItemAsk::Revoke => {
            super::revoke::revoke_unstarted(tx, &[run_id], &[], now).await?;
        }
        ItemAsk::Cancel => {
            cancel_items_in(tx, run_id).await?;
        }
        ItemAsk::BudgetStop => super::budget::stop_items(tx, &[run_id]).await?,
        ItemAsk::Resume => {
            resume_items_in(tx, run_id, now).await?;
        }
        ItemAsk::GradeRequeue => {
            super::grade_requeue::requeue_in(
                tx,
                run_id,
                &[trial],
                std::slice::from_ref(&item.document),
                &[item.retry_budget],
                now,
            )
            .await?;
        }
    }
    Ok(())
}

impl DispatchStore for Scheduler {
    type Run = StoredRun;
    type Error = SchedulerError;

    async fn run_event(
        &mut self,
        run: &StoredRun,
        ask: &RunAsk,
    ) -> Result<Option<RunDecision>, SchedulerError> {
        let run_id = run.run_id;
        let now = self.now();
        let decided = match ask {
            RunAsk::Start => {
                self.start_run_decided(run_id, &Caps::default(), &run.agents)
                    .await?
                    .0
            }
            RunAsk::Cancel => {
                self.store
                    .tx(|tx| Box::pin(async move { Ok(cancel_in(tx, run_id).await?.map(|r| r.0)) }))
                    .await?
            }
            RunAsk::Idle => {
                self.store
                    .tx(|tx| {
                        Box::pin(async move { super::machine::finish_runs(tx, &[run_id]).await })
                    })
                    .await?;
                None
            }
            RunAsk::Resume => {
                self.store
                    .tx(|tx| Box::pin(async move { Ok(resume_in(tx, run_id, now).await?.1) }))
                    .await?
            }
            RunAsk::Grade { owed } => {
                let ids: Vec<Uuid> = owed.iter().map(|&i| run.trials[i]).collect();
                self.store
                    .tx(|tx| {
                        let ids = ids.clone();
                        Box::pin(async move {
                            let mut documents = Vec::new();
                            let mut budgets = Vec::new();
                            for t in &ids {
                                let item = item_of(tx, *t).await?;
                                documents.push(item.as_ref().and_then(|i| i.document.clone()));
                                budgets.push(item.map_or(0, |i| i.retry_budget));
                            }
                            let q = super::grade_requeue::queue_owed(
                                tx, run_id, &ids, &documents, &budgets, now,
                            );
                            Ok(q.await?.0)
                        })
                    })
                    .await?
            }
        };
        Ok(decided)
    }

    async fn item_event(
        &mut self,
        run: &StoredRun,
        item: usize,
        ask: ItemAsk,
    ) -> Result<ItemMove, SchedulerError> {
        let trial = run.trials[item];
        let run_id = run.run_id;
        let now = self.now();
        let retry = self.retry().clone();
        let worker = run.worker.clone();
        let moved = self
            .store
            .tx(|tx| {
                let (retry, worker) = (retry.clone(), worker.clone());
                Box::pin(async move {
                    let Some(before) = item_of(tx, trial).await? else {
                        return Ok(ItemMove::Stays);
                    };
                    item_in(tx, (run_id, trial, &worker), &before, ask, &retry, now).await?;
                    let after = item_of(tx, trial).await?.map(|i| i.class);
                    Ok(match after {
                        Some(after) if after != before.class => ItemMove::To(after),
                        _ => ItemMove::Stays,
                    })
                })
            })
            .await?;
        Ok(moved)
    }

    async fn run_state(&mut self, run: &StoredRun) -> Result<RunState, SchedulerError> {
        let client = self.store.client().await?;
        let row = client
            .query_one(&client.prepare_cached(RUN_STATE_SQL).await?, &[&run.run_id])
            .await
            .map_err(StoreError::from)?;
        Ok(parsed(&row, "state", RunState::parse).map_err(StoreError::from)?)
    }

    async fn item_class(
        &mut self,
        run: &StoredRun,
        item: usize,
    ) -> Result<Option<ItemClass>, SchedulerError> {
        let Some(&trial) = run.trials.get(item) else {
            return Ok(None);
        };
        let client = self.store.client().await?;
        Ok(item_of(&client, trial).await?.map(|i| i.class))
    }
}
