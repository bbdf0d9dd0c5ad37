//! Test and benchmark helpers: a minimal spec, planned trials and run, so that work items
//! (which reference them) can be enqueued; a trial ended with a record, as a worker would.

use akbench_core::digest::digest_of;
use akbench_core::lifecycle::State;
use akbench_core::testkit::attempt_record;
use serde_json::json;
use uuid::Uuid;

use super::{Caps, NewWorkItem, SchedulerError, StoredRun, WorkKind};
use crate::store::{Store, StoreError};
use akbench_core::dispatch::machine::{ItemClass, ItemState};
use akbench_core::dispatch::store::{DispatchStore, ItemAsk, StoreSetup};
use akbench_core::dispatch::RunState;

/// A seeded run: its id and its planned trials in plan order.
#[derive(Debug, Clone)]
pub struct SeededRun {
    /// The run.
    pub run_id: Uuid,
    /// Planned trial ids, by ordinal.
    pub trial_ids: Vec<Uuid>,
}

impl SeededRun {
    /// Work items for every trial, all of `agent`, with `retry_budget`.
    pub fn items(&self, agent: &str, retry_budget: i32) -> Vec<NewWorkItem> {
        self.trial_ids
            .iter()
            .enumerate()
            .map(|(i, t)| NewWorkItem {
                trial_id: *t,
                ordinal: i32::try_from(i).unwrap_or(i32::MAX),
                retry_budget,
                agent: agent.to_string(),
                provider_route: None,
                kind: WorkKind::Execute,
                document: None,
            })
            .collect()
    }
}

/// Inserts a spec, `trials` planned trials (agent `agent`) and a `running` run with `caps`.
/// Documents are small valid JSON with correct digests.
pub async fn seed_run(
    store: &Store,
    trials: usize,
    agent: &str,
    caps: &Caps,
) -> Result<SeededRun, SchedulerError> {
    seed_run_with(store, trials, agent, caps, json!({})).await
}

/// [`seed_run`] with `extra` merged into the spec document (e.g. a `condition`).
pub async fn seed_run_with(
    store: &Store,
    trials: usize,
    agent: &str,
    caps: &Caps,
    extra: serde_json::Value,
) -> Result<SeededRun, SchedulerError> {
    let run_id = Uuid::now_v7();
    let key = format!("run-{run_id}");
    let mut spec = json!({"run_id": run_id, "run_key": key, "kind": "test"});
    if let (Some(m), serde_json::Value::Object(e)) = (spec.as_object_mut(), extra) {
        m.extend(e);
    }
    let trial_ids: Vec<Uuid> = (0..trials).map(|_| Uuid::now_v7()).collect();
    let ordinals: Vec<i32> = (0..trials)
        .map(|i| i32::try_from(i).unwrap_or(i32::MAX))
        .collect();
    let keys: Vec<String> = trial_ids.iter().map(|t| format!("trial-{t}")).collect();
    let docs: Vec<serde_json::Value> = trial_ids
        .iter()
        .zip(&ordinals)
        .map(|(t, o)| {
            json!({"trial_id": t, "ordinal": o, "task": "noop", "agent": agent,
                   "attempt": {"infrastructure_retries": 0}})
        })
        .collect();
    let caps = serde_json::to_value(caps).unwrap_or_default();
    let client = store.client().await?;
    client
        .execute(
            "INSERT INTO run_specs (run_id, run_key, digest, document) VALUES ($1, $2, $3, $4)",
            &[&run_id, &key, &digest_of(&spec), &spec],
        )
        .await?;
    client
        .execute(
            "INSERT INTO planned_trials (trial_id, run_id, ordinal, key, task_id, agent, \
             repetition, document) \
             SELECT t, $1, o, k, 'noop', $5, 0, d \
             FROM unnest($2::uuid[], $3::int4[], $4::text[], $6::jsonb[]) AS u (t, o, k, d)",
            &[&run_id, &trial_ids, &ordinals, &keys, &agent, &docs],
        )
        .await?;
    client
        .execute(
            "INSERT INTO runs (run_id, state, started_at, caps) VALUES ($1, 'running', now(), $2)",
            &[&run_id, &caps],
        )
        .await?;
    Ok(SeededRun { run_id, trial_ids })
}

/// Ends trial `trial_id` (key `key`) as a worker would have: attempt `number` finished
/// `terminal`, the work item done, then the attempt's record (`ok`: its grade;
/// `observations` merged into the record's own) stored through the product's statement
/// ([`super::store_records`]), so its bucket and spend are those of a late record. Returns
/// the attempt.
pub async fn finish_trial(
    store: &Store,
    trial_id: Uuid,
    key: &str,
    number: u32,
    terminal: State,
    ok: Option<bool>,
    observations: serde_json::Value,
) -> Result<Uuid, StoreError> {
    let attempt = Uuid::now_v7();
    let number_sql = i32::try_from(number).unwrap_or(i32::MAX);
    let client = store.client().await?;
    client
        .execute(
            "INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch, \
             finished_at, terminal_state) VALUES ($1, $2, $3, 'execute', $4, 1, now(), $4)",
            &[&attempt, &trial_id, &number_sql, &terminal.as_str()],
        )
        .await?;
    if number > 1 {
        // A retry, counted as the claim counts the attempts it creates (migration 0023).
        client
            .execute(
                "INSERT INTO run_counts (run_id, agent, kind, n) \
                 SELECT run_id, agent, 'retries', 1 FROM work_items WHERE trial_id = $1",
                &[&trial_id],
            )
            .await?;
    }
    client
        .execute(
            // Counted as the scheduler counts what it settles (migration 0020); the record
            // stored below gives it its bucket (`late_buckets.sql`, `rebucket.sql`).
            "WITH old AS (SELECT trial_id, state, bucket FROM work_items \
             WHERE trial_id = $1 FOR UPDATE), \
             done AS (UPDATE work_items w SET state = 'done', attempts_used = $2, \
             bucket = NULL, updated_at = now() FROM old o WHERE w.trial_id = o.trial_id \
             RETURNING w.run_id, w.agent, o.state AS state_old, o.bucket AS bucket_old) \
             INSERT INTO run_counts (run_id, agent, kind, state, bucket, n) \
             SELECT run_id, agent, 'items', 'done', NULL, 1 FROM done \
             UNION ALL SELECT run_id, agent, 'items', state_old, bucket_old, -1 FROM done \
             WHERE state_old IN ('done', 'cancelled')",
            &[&trial_id, &number_sql],
        )
        .await?;
    let mut record = serde_json::to_value(attempt_record(attempt, key, number, terminal, ok))
        .unwrap_or_default();
    if let (Some(have), serde_json::Value::Object(add)) =
        (record["observations"].as_object_mut(), observations)
    {
        have.extend(add);
    }
    super::store_records(
        &client,
        &[(attempt, digest_of(&record), record.to_string())],
    )
    .await?;
    Ok(attempt)
}

/// The SQL of [`insert_items_by_hand`]: every planned trial of run $1 gets a ready work item
/// (its agent from the planned trial), counted per agent as `start_items.sql` counts them.
pub const INSERT_ITEMS_BY_HAND_SQL: &str = "WITH created AS (\
     INSERT INTO work_items (trial_id, run_id, ordinal, agent) \
     SELECT trial_id, run_id, ordinal, agent FROM planned_trials WHERE run_id = $1 \
     RETURNING run_id, agent) \
     INSERT INTO run_counts (run_id, agent, kind, state, bucket, n) \
     SELECT run_id, agent, 'items', 'total', NULL, count(*) FROM created GROUP BY run_id, agent";

/// Creates a ready work item for every planned trial of `run_id` by hand (a test's or
/// benchmark's set-up of what the scheduler's start does), writing the run counters as the
/// start does (migration 0023: no trigger does).
pub async fn insert_items_by_hand(
    client: &impl deadpool_postgres::GenericClient,
    run_id: Uuid,
) -> Result<(), StoreError> {
    client.execute(INSERT_ITEMS_BY_HAND_SQL, &[&run_id]).await?;
    Ok(())
}

/// Moves the work items `trials` to `state` by hand (a test's or benchmark's set-up), with
/// `outcome` and `cancel_reason` as given and the bucket cleared, writing the run counters
/// of the move as the scheduler's own statements do (migration 0020: no trigger does).
/// Returns how many items moved.
pub async fn set_item_state(
    client: &impl deadpool_postgres::GenericClient,
    trials: &[Uuid],
    state: &str,
    outcome: Option<&str>,
    cancel_reason: Option<&str>,
) -> Result<u64, StoreError> {
    let row = client
        .query_one(
            "WITH old AS (SELECT trial_id, state, bucket FROM work_items \
             WHERE trial_id = ANY ($1::uuid[]) FOR UPDATE), \
             moved AS (UPDATE work_items w SET state = $2::text::item_state, outcome = $3, \
             cancel_reason = $4, bucket = NULL, updated_at = now() FROM old o \
             WHERE w.trial_id = o.trial_id \
             RETURNING w.run_id, w.agent, o.state::text AS state_old, o.bucket AS bucket_old), \
             counted AS (INSERT INTO run_counts (run_id, agent, kind, state, bucket, n) \
             SELECT run_id, agent, 'items', $2, NULL, count(*) FROM moved \
             WHERE $2 IN ('done', 'cancelled') GROUP BY run_id, agent \
             UNION ALL SELECT run_id, agent, 'items', state_old, bucket_old, -count(*) \
             FROM moved WHERE state_old IN ('done', 'cancelled') \
             GROUP BY run_id, agent, state_old, bucket_old) \
             SELECT count(*)::bigint AS moved FROM moved",
            &[&trials, &state, &outcome, &cancel_reason],
        )
        .await?;
    Ok(crate::rows::count(&row, "moved")?)
}

/// Ends `runs` that have nothing ready or leased, by the product's one rule of idle runs
/// (`machine::finish_runs`: core's run machine over each locked run): what the report path
/// does after it settles a run's last trial, for tests that ended trials by hand
/// ([`finish_trial`]).
pub async fn end_idle_runs(store: &Store, runs: &[Uuid]) -> Result<(), StoreError> {
    let runs = runs.to_vec();
    store
        .tx(|tx| {
            let runs = runs.clone();
            Box::pin(async move { super::machine::finish_runs(tx, &runs).await })
        })
        .await
}

/// The worker that holds the leases of runs put by [`StoreSetup::put`].
pub const STORE_WORKER: &str = "dispatch-store";

impl StoreSetup for super::Scheduler {
    /// A run seeded as [`seed_run`] seeds one (agent `a`), in `state`: its items are
    /// created by hand ([`insert_items_by_hand`]), a leased one claimed through the product's
    /// claim statement for [`STORE_WORKER`], a done or cancelled one set by hand
    /// ([`set_item_state`]); then the run's state is set by hand.
    async fn put(
        &mut self,
        state: RunState,
        items: &[ItemClass],
        retry_budget: u32,
    ) -> Result<StoredRun, SchedulerError> {
        let n = if state == RunState::Planned {
            0
        } else {
            items.len()
        };
        let seeded = seed_run(self.store(), n, "a", &Caps::default()).await?;
        self.register_worker(STORE_WORKER, 1, &Default::default(), "test")
            .await?;
        let client = self.store().client().await?;
        let budget = i32::try_from(retry_budget).unwrap_or(i32::MAX);
        if n > 0 {
            insert_items_by_hand(&client, seeded.run_id).await?;
            client
                .execute(
                    "UPDATE work_items SET retry_budget = $2 WHERE run_id = $1",
                    &[&seeded.run_id, &budget],
                )
                .await
                .map_err(StoreError::from)?;
        }
        let run = StoredRun {
            run_id: seeded.run_id,
            trials: seeded.trial_ids,
            agents: vec![super::RunAgent {
                label: "a".to_string(),
                provider_route: None,
                document: json!({}),
            }],
            worker: STORE_WORKER.to_string(),
        };
        for (i, c) in items.iter().enumerate().take(n) {
            match c.state {
                ItemState::Ready => {}
                ItemState::Leased => {
                    self.item_event(&run, i, ItemAsk::Claim).await?;
                }
                ItemState::Done | ItemState::Cancelled => {
                    let reason = (c.state == ItemState::Cancelled).then_some("cancelled");
                    let outcome = c.outcome.map(State::as_str);
                    set_item_state(&client, &[run.trials[i]], c.state.as_str(), outcome, reason)
                        .await?;
                }
            }
        }
        client
            .execute(
                "UPDATE runs SET state = $2::text::run_state WHERE run_id = $1",
                &[&run.run_id, &state.as_str()],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(run)
    }
}
