//! The scheduler: work items, attempts and leases in PostgreSQL.
//!
//! - [`Scheduler::start_run`] moves a planned run to `running` and creates its work items
//!   from its stored plan, in one transaction; [`Scheduler::enqueue`] creates given work
//!   items (one statement).
//! - [`Scheduler::claim`] leases ready work to a worker in one transaction (the slots divided
//!   among runs by priority and weighted fair share, `akbench_core::dispatch::share`; each
//!   run's items in plan order, `FOR UPDATE SKIP LOCKED`; per-run caps per agent and per
//!   provider route): one attempt, one lease and a new fencing epoch per item.
//! - [`Scheduler::heartbeat`] extends a worker's leases in one statement.
//! - [`Scheduler::report`] stores what workers say about attempts (transitions, finishes,
//!   records), many at once, each checked against its epoch and the core lifecycle, each
//!   accepted or refused on its own; [`Scheduler::record_transitions`],
//!   [`Scheduler::finish`] and [`Scheduler::upload_record`] are the one-report forms. The
//!   reports (and the claim riding on them) that sessions submit while others are being
//!   written share the next transaction (`rounds`: group commit).
//! - [`store_records`] stores accepted records and counts their spend (the report path's
//!   statement, public so that tests and benches store records as the product does).
//! - [`Scheduler::reap`] takes back expired leases; [`Scheduler::cancel_run`] cancels a run.
//!
//! Fencing: an epoch is valid for an attempt while it equals `attempts.epoch` and the
//! attempt was not reaped (`attempts.fenced`). A finished attempt keeps its epoch, so its
//! worker may still upload its record. Locks are always taken attempts first, then leases,
//! then work items.
//!
//! Transition seqs start at 1. The state before seq 1 is an implicit `pending`, which seq 1
//! may state again (`pending`) or leave (`preparing`, or a failure state).

mod apply;
mod batch;
#[cfg(any(test, feature = "test-support"))]
pub use apply::hook as settle_hook;
mod budget;
pub use budget::budget_status;
mod claim;
mod dispatch_store;
pub use dispatch_store::StoredRun;
mod error;
pub(crate) mod grade_requeue;
pub mod machine;
mod reap;
mod record;
mod record_store;
mod report;
mod retry;
mod revoke;
mod rounds;
pub use rounds::{RoundsWritten, ROUND_TOGETHER, ROUND_WRITERS};
mod routes;
mod run_moves;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
mod types;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use akbench_core::clock::{Clock, SystemClock};
use akbench_core::dispatch::machine::{RunEvent, RunMove};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::store::{Store, StoreError};

pub use batch::frees;
pub use error::SchedulerError;
pub use record_store::{store_records, NewRecord};
pub use retry::{JitterSource, RetryPolicy};
pub use revoke::Revoked;
pub use types::{
    placement_key, Assignment, CancelReport, Caps, ClaimAfter, Disposition, NewWorkItem, Reaped,
    Report, ReportAck, RunAgent, TransitionIn, WorkKind,
};

const ENQUEUE_SQL: &str = include_str!("../../sql/scheduler/enqueue.sql");
const HEARTBEAT_SQL: &str = include_str!("../../sql/scheduler/heartbeat.sql");
const REGISTER_WORKER_SQL: &str = include_str!("../../sql/scheduler/register_worker.sql");
const DISCONNECT_WORKER_SQL: &str = include_str!("../../sql/scheduler/disconnect_worker.sql");

/// An enqueue of at least this many items refreshes the planner's statistics of
/// `work_items` at once (see [`Scheduler::enqueue`]).
const ANALYZE_AFTER_ENQUEUED: u64 = 1000;

/// The scheduler: a store, a clock and the in-process wake-up for idle sessions.
#[derive(Debug, Clone)]
pub struct Scheduler {
    store: Store,
    clock: Arc<dyn Clock>,
    work_available: Arc<Notify>,
    retry: RetryPolicy,
    budgeted: budget::BudgetedRuns,
    revoked_to: RevokedTo,
    heard_from: HeardFrom,
    replica: Uuid,
    rounds: rounds::Rounds,
}

/// Where revoked leases go once committed: the service that sends their workers `Cancel`.
type RevokedFn = Arc<dyn Fn(&[Revoked]) + Send + Sync>;

#[derive(Clone, Default)]
struct RevokedTo(Arc<std::sync::Mutex<Option<RevokedFn>>>);

impl std::fmt::Debug for RevokedTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RevokedTo")
    }
}

/// A lease a worker was last heard holding, in a heartbeat this process received (whether
/// or not the database took it): see [`Scheduler::on_heard`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeardLease {
    /// The worker that listed it.
    pub worker_id: String,
    /// The epoch it listed.
    pub epoch: i64,
    /// When that heartbeat arrived (scheduler clock).
    pub at: chrono::DateTime<chrono::Utc>,
}

/// What this process heard workers hold, by attempt, and the lease TTL it judges by.
#[derive(Debug, Clone, Default)]
pub struct Heard {
    /// The last heartbeat's leases of each worker with a session here.
    pub leases: std::collections::HashMap<Uuid, HeardLease>,
    /// The lease TTL.
    pub ttl: Duration,
}

type HeardFn = Arc<dyn Fn() -> Heard + Send + Sync>;

#[derive(Clone, Default)]
struct HeardFrom(Arc<std::sync::Mutex<Option<HeardFn>>>);

impl std::fmt::Debug for HeardFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeardFrom")
    }
}

impl Scheduler {
    /// A scheduler on `store` with the system clock.
    pub fn new(store: Store) -> Self {
        Self::with_clock(store, Arc::new(SystemClock))
    }

    /// A scheduler with an injected clock (what [`Scheduler::now`] returns).
    pub fn with_clock(store: Store, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            work_available: Arc::new(Notify::new()),
            retry: RetryPolicy::default(),
            budgeted: budget::BudgetedRuns::default(),
            revoked_to: RevokedTo::default(),
            heard_from: HeardFrom::default(),
            replica: Uuid::now_v7(),
            rounds: rounds::Rounds::new(ROUND_WRITERS, ROUND_TOGETHER),
        }
    }

    /// This replica's id, new for every scheduler (one per coordinator process): it names
    /// the replica of the worker sessions registered through it and its marks of being
    /// alive (docs/remote.md "Replicas"). Clones share it.
    pub fn replica(&self) -> Uuid {
        self.replica
    }

    /// Has every reap of this scheduler (and its clones) ask `f` which leases workers were
    /// heard holding, so that a lease whose stored expiry passed while its worker kept
    /// heartbeating (the database down or frozen: the heartbeat could not be stored) lives
    /// on instead of being taken back ([`akbench_core::dispatch::reap`]). The `Workers`
    /// service answers from its sessions. A later call replaces `f`.
    pub fn on_heard(&self, f: impl Fn() -> Heard + Send + Sync + 'static) {
        *self.heard_from.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(f));
    }

    /// What [`Scheduler::on_heard`]'s function answers now (nothing heard without one).
    fn heard(&self) -> Heard {
        let f = self
            .heard_from
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        f.map(|f| f()).unwrap_or_default()
    }

    /// Calls `f` with the leases taken back before their attempt started (a budget stop, a
    /// route pause: [`Revoked`]) once their transaction committed, for every clone of this
    /// scheduler; the `Workers` service sends their workers `Cancel`. A later call replaces
    /// `f`.
    pub fn on_revoked(&self, f: impl Fn(&[Revoked]) + Send + Sync + 'static) {
        *self.revoked_to.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(f));
    }

    /// Hands committed revocations to [`Scheduler::on_revoked`]'s function.
    fn revoked(&self, revoked: &[Revoked]) {
        if revoked.is_empty() {
            return;
        }
        let f = self
            .revoked_to
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match f {
            Some(f) => f(revoked),
            None => tracing::warn!(
                revoked = revoked.len(),
                "leases revoked before they started, but no service sends their workers Cancel; \
                 their reports will be refused as stale"
            ),
        }
    }

    /// This scheduler with another retry backoff and jitter source.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The retry backoff and jitter source.
    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The current instant by the injected clock.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// Notified whenever work may have become claimable: items enqueued or re-queued.
    /// Sessions of this process with a free slot wait on it; other replicas poll. The
    /// scheduler wakes one session ([`Scheduler::wake_claimer`]), and a session that
    /// claims all it asked for wakes the next, so that one item does not wake every idle
    /// session to race for it.
    pub fn work_available(&self) -> &Arc<Notify> {
        &self.work_available
    }

    /// Lifts the pause of provider route `route` by hand (an operator's `akbench run
    /// resume-route`): core's `route_pause::lifted` under the route's lock, then a claim is
    /// woken. Returns the route's state before, `None` when no attempt ever ran on it.
    pub async fn lift_route_pause(
        &self,
        route: &str,
    ) -> Result<Option<akbench_core::route_pause::Lift>, SchedulerError> {
        let route = route.to_string();
        let before = self
            .store
            .tx(|tx| {
                let route = route.clone();
                Box::pin(async move { routes::lift(tx, &route).await })
            })
            .await?;
        if before.is_some() {
            self.wake_claimer();
        }
        let now = self.now();
        Ok(before.map(|before| akbench_core::route_pause::Lift {
            was_paused: before.paused_at(now),
            before,
        }))
    }

    /// Wakes one idle session (or the next one to wait) to claim.
    pub fn wake_claimer(&self) {
        self.work_available.notify_one();
    }

    /// Creates the work items of `run_id`, all in one statement. The planned trials and the
    /// run must exist. Returns how many were created.
    pub async fn enqueue(
        &self,
        run_id: Uuid,
        items: &[NewWorkItem],
    ) -> Result<u64, SchedulerError> {
        check_items(items)?;
        let items: Arc<[NewWorkItem]> = items.into();
        let now = self.now();
        let created = self
            .store
            .tx(|tx| {
                let items = Arc::clone(&items);
                Box::pin(async move { insert_items(tx, run_id, &items, now).await })
            })
            .await?;
        self.after_enqueue(created).await;
        Ok(created)
    }

    /// Starts a planned run: in one transaction, moves it to `running` with `caps` and
    /// creates one execute work item per planned trial, in one statement from the stored
    /// plan (`start_items.sql`), so that no reader (status, the reaper's end-of-run check, a
    /// claimer) ever sees a running run whose items do not all exist yet. The run's `agents`
    /// are stored once; the document a worker receives for an item is composed from them
    /// and the planned trial when it is claimed. Nothing of the plan passes through this
    /// process, so its memory does not grow with the plan. `None` when the run was not
    /// `planned` (already started: nothing is created). A planned trial whose agent is not
    /// among `agents` is refused before anything changes.
    pub async fn start_run(
        &self,
        run_id: Uuid,
        caps: &Caps,
        agents: &[RunAgent],
    ) -> Result<Option<u64>, SchedulerError> {
        Ok(self.start_run_decided(run_id, caps, agents).await?.1)
    }

    /// [`Scheduler::start_run`], with what core's run machine decided (`None`: no such run).
    pub(crate) async fn start_run_decided(
        &self,
        run_id: Uuid,
        caps: &Caps,
        agents: &[RunAgent],
    ) -> Result<(Option<machine::RunDecision>, Option<u64>), SchedulerError> {
        let caps = serde_json::to_value(caps)
            .map_err(|e| SchedulerError::malformed("the caps", e.to_string()))?;
        let labels: Arc<[String]> = agents.iter().map(|a| a.label.clone()).collect();
        let routes: Arc<[Option<String>]> =
            agents.iter().map(|a| a.provider_route.clone()).collect();
        let documents: Arc<[serde_json::Value]> =
            agents.iter().map(|a| a.document.clone()).collect();
        if labels.iter().collect::<HashSet<_>>().len() != labels.len() {
            return Err(SchedulerError::malformed(
                "the run's agents",
                "an agent label appears more than once",
            ));
        }
        // Planned trials are append-only: checking before the transaction is enough.
        let client = self.store.client().await?;
        if let Some(row) = client
            .query_opt(START_UNKNOWN_AGENT_SQL, &[&run_id, &&*labels])
            .await?
        {
            let key: String = crate::rows::col(&row, "key").map_err(StoreError::from)?;
            let agent: String = crate::rows::col(&row, "agent").map_err(StoreError::from)?;
            return Err(SchedulerError::malformed(
                "the planned trials",
                format!("trial {key} names agent `{agent}`, absent from the spec"),
            ));
        }
        drop(client);
        let now = self.now();
        let created = self
            .store
            .tx(|tx| {
                let (labels, routes, documents) = (
                    Arc::clone(&labels),
                    Arc::clone(&routes),
                    Arc::clone(&documents),
                );
                let caps = caps.clone();
                Box::pin(async move {
                    // Core's run machine decides the start; only the call that moves the run
                    // (guarded by the state it was decided on) creates its items.
                    let decided =
                        machine::decide_run(tx, run_id, |_| RunEvent::Start, false).await?;
                    let Some((from, to)) = decided.and_then(|d| match d.decided {
                        Ok(RunMove::To(to)) => Some((d.from, to)),
                        _ => None,
                    }) else {
                        return Ok((decided, None));
                    };
                    let moved = tx
                        .query_opt(
                            START_RUN_SQL,
                            &[&run_id, &caps, &from.as_str(), &to.as_str()],
                        )
                        .await?;
                    if moved.is_none() {
                        return Ok((decided, None));
                    }
                    let created = tx
                        .query_one(
                            START_ITEMS_SQL,
                            &[&run_id, &&*labels, &&*routes, &&*documents, &now],
                        )
                        .await?;
                    Ok((decided, Some(created_count(&created)?)))
                })
            })
            .await?;
        if let Some(n) = created.1 {
            self.after_enqueue(n).await;
        }
        Ok(created)
    }

    async fn after_enqueue(&self, created: u64) {
        if created >= ANALYZE_AFTER_ENQUEUED {
            // Until autovacuum analyzes the table (up to a minute later), the planner would
            // believe there are few ready items and have every claim sort all of them
            // instead of walking `work_items_ready` in plan order up to its limit; claims
            // that take long also keep rows other claimers took locked longer, which delays
            // their settles.
            match self.store.client().await {
                Ok(client) => {
                    if let Err(e) = client.batch_execute("ANALYZE work_items").await {
                        tracing::warn!("failed to analyze work_items after an enqueue: {e}");
                    }
                }
                Err(e) => tracing::warn!("failed to analyze work_items after an enqueue: {e}"),
            }
        }
        self.wake_claimer();
    }

    /// Registers (or re-registers) a worker that opened a session on this replica (which
    /// it marks alive: [`Scheduler::replica`]); returns the session's connection instant,
    /// which [`Scheduler::disconnect_worker`] takes back.
    pub async fn register_worker(
        &self,
        worker_id: &str,
        slots: u32,
        labels: &BTreeMap<String, String>,
        version: &str,
    ) -> Result<chrono::DateTime<chrono::Utc>, SchedulerError> {
        let labels = serde_json::to_value(labels).unwrap_or_default();
        let slots = i32::try_from(slots).unwrap_or(i32::MAX);
        let now = self.now();
        let client = self.store.client().await?;
        let row = client
            .query_one(
                REGISTER_WORKER_SQL,
                &[&worker_id, &slots, &labels, &version, &self.replica, &now],
            )
            .await?;
        Ok(crate::rows::col(&row, "connected_at").map_err(StoreError::from)?)
    }

    /// Marks the worker disconnected after the session that connected at `connected_at`
    /// ended (a newer session of the same worker is left alone).
    pub async fn disconnect_worker(
        &self,
        worker_id: &str,
        connected_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), SchedulerError> {
        let client = self.store.client().await?;
        client
            .execute(DISCONNECT_WORKER_SQL, &[&worker_id, &connected_at])
            .await?;
        Ok(())
    }

    /// Extends every lease in `held` that this worker still holds with that epoch, in one
    /// statement, and returns the ones that are no longer valid: the worker must stop them.
    pub async fn heartbeat(
        &self,
        worker_id: &str,
        held: &[(Uuid, i64)],
        ttl: Duration,
    ) -> Result<Vec<(Uuid, i64)>, SchedulerError> {
        let ids: Vec<Uuid> = held.iter().map(|h| h.0).collect();
        let epochs: Vec<i64> = held.iter().map(|h| h.1).collect();
        let now = self.now();
        let client = self.store.client().await?;
        let rows = client
            .query(
                HEARTBEAT_SQL,
                &[&worker_id, &ids, &epochs, &ttl_ms(ttl), &now],
            )
            .await?;
        let extended: HashSet<Uuid> = rows
            .iter()
            .map(|r| crate::rows::col(r, "attempt_id"))
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)?;
        Ok(held
            .iter()
            .filter(|(id, _)| !extended.contains(id))
            .copied()
            .collect())
    }
}

const START_RUN_SQL: &str = include_str!("../../sql/scheduler/start_run.sql");
const START_ITEMS_SQL: &str = include_str!("../../sql/scheduler/start_items.sql");
const START_UNKNOWN_AGENT_SQL: &str = include_str!("../../sql/scheduler/start_unknown_agent.sql");

fn check_items(items: &[NewWorkItem]) -> Result<(), SchedulerError> {
    let trials: HashSet<Uuid> = items.iter().map(|i| i.trial_id).collect();
    if trials.len() != items.len() {
        return Err(SchedulerError::malformed(
            "the work items",
            "a trial appears more than once",
        ));
    }
    Ok(())
}

/// Inserts `items` of `run_id` in one statement, ready from `now` (the scheduler's clock);
/// returns how many.
async fn insert_items(
    tx: &crate::store::Tx<'_>,
    run_id: Uuid,
    items: &[NewWorkItem],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64, crate::store::StoreError> {
    let trial_ids: Vec<Uuid> = items.iter().map(|i| i.trial_id).collect();
    let ordinals: Vec<i32> = items.iter().map(|i| i.ordinal).collect();
    let budgets: Vec<i32> = items.iter().map(|i| i.retry_budget).collect();
    let agents: Vec<&str> = items.iter().map(|i| i.agent.as_str()).collect();
    let routes: Vec<Option<&str>> = items.iter().map(|i| i.provider_route.as_deref()).collect();
    let kinds: Vec<&str> = items.iter().map(|i| i.kind.as_str()).collect();
    let documents: Vec<Option<&serde_json::Value>> =
        items.iter().map(|i| i.document.as_ref()).collect();
    let created = tx
        .query_one(
            &tx.prepare_cached(ENQUEUE_SQL).await?,
            &[
                &run_id, &trial_ids, &ordinals, &budgets, &agents, &routes, &kinds, &documents,
                &now,
            ],
        )
        .await?;
    created_count(&created)
}

/// The `created` count `start_items.sql` and `enqueue.sql` return.
fn created_count(row: &tokio_postgres::Row) -> Result<u64, crate::store::StoreError> {
    let n: i64 = crate::rows::col(row, "created")?;
    Ok(u64::try_from(n).unwrap_or(0))
}

const KEYED_PLANS_SQL: &str = include_str!("../../sql/scheduler/keyed_plans.sql");

/// Starts a scheduler transaction: its statements are planned as keyed lookups
/// (`keyed_plans.sql`), which makes their prepared, cached plans safe to keep.
async fn keyed_plans(tx: &crate::store::Tx<'_>) -> Result<(), crate::store::StoreError> {
    tx.query_one(&tx.prepare_cached(KEYED_PLANS_SQL).await?, &[])
        .await?;
    Ok(())
}

/// A TTL in whole milliseconds, for SQL.
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}
