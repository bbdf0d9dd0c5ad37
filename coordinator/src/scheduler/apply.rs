//! Decided dispatch effects, applied: the report path, the reaper and the revocation decide
//! with `core::dispatch` over a snapshot they read (the attempts locked, each work item with
//! its run's state) and hand the effects here as values: attempts' new states with the
//! transitions each appends, leases that end, trials whose live attempt ended. [`apply`] decides each
//! ended trial's settlement with [`dispatch::settle`] and its bucket with
//! [`Bucket::settled`], and writes everything in one set-based statement
//! (`apply_effects.sql`) that also counts the items it makes done (migration 0020: no
//! trigger does). A settle is guarded (the item still leased by that attempt, its run still
//! in the state decided on); a trial whose guard failed is read again and decided again.
//! Runs left with nothing to do are then ended ([`super::machine::finish_runs`]).

use std::collections::{HashMap, HashSet};

use akbench_core::accounting::Bucket;
use akbench_core::dispatch::machine::{
    item_on, ItemClass, ItemEvent, ItemMove, ItemState, Settled as Settled_,
};
use akbench_core::dispatch::{self, Ended, RunState, Settlement};
use akbench_core::lifecycle::State;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::RetryPolicy;
use crate::rows::{self, col, parsed, parsed_opt, RowError};
use crate::store::{StoreError, Tx};

const APPLY_EFFECTS_SQL: &str = include_str!("../../sql/scheduler/apply_effects.sql");
const SETTLE_SNAPSHOT_SQL: &str = include_str!("../../sql/scheduler/settle_snapshot.sql");

/// Settle rounds before giving up (each one follows a concurrent change of an item or run
/// between a read and the guarded write; one is the rule, two are rare).
const MAX_ROUNDS: usize = 8;

/// An attempt's new row, with the transitions it appends (migration 0028: they are part of
/// the row, so a transition is stored only with its attempt's write).
pub(super) struct AttemptWrite {
    pub(super) attempt_id: Uuid,
    pub(super) state: State,
    pub(super) last_seq: u32,
    /// The transitions this write appends, in seq order, ending at `last_seq`.
    pub(super) steps: Vec<StepWrite>,
    /// `Some`: the attempt finishes in this state.
    pub(super) terminal: Option<State>,
    pub(super) cause: Option<String>,
    pub(super) fenced: bool,
}

/// A transition to append: seq, state, time, note.
pub(super) type StepWrite = (i32, String, DateTime<Utc>, String);

/// What a decision changes besides settlements.
#[derive(Default)]
pub(super) struct Effects {
    pub(super) attempts: Vec<AttemptWrite>,
    /// Attempts whose leases end.
    pub(super) leases_ended: Vec<Uuid>,
}

impl Effects {
    fn is_empty(&self) -> bool {
        self.attempts.is_empty() && self.leases_ended.is_empty()
    }
}

/// A work item and its run as read for a settle.
#[derive(Debug, Clone)]
pub(super) struct ItemView {
    pub(super) state: ItemState,
    pub(super) attempts_used: i32,
    pub(super) budget_from: i32,
    pub(super) retry_budget: i32,
    pub(super) run: RunState,
}

impl ItemView {
    /// Reads the item columns of `report_snapshot.sql` / `settle_snapshot.sql`.
    pub(super) fn of(r: &tokio_postgres::Row) -> Result<ItemView, RowError> {
        Ok(ItemView {
            state: crate::rows::parsed(r, "item_state", ItemState::parse)?,
            attempts_used: col(r, "attempts_used")?,
            budget_from: col(r, "budget_from")?,
            retry_budget: col(r, "retry_budget")?,
            run: parsed(r, "run_state", RunState::parse)?,
        })
    }
}

/// A trial whose live attempt ended.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ending {
    pub(super) trial_id: Uuid,
    /// The attempt's number (the item's `attempts_used` while it is the live one).
    pub(super) number: i32,
    /// The attempt's terminal state.
    pub(super) terminal: State,
    /// The `ok` of the attempt's accepted record, if any.
    pub(super) ok: Option<bool>,
}

/// A trial [`apply`] settled: its outcome (`None`: re-queued) and its provider route.
pub(super) struct Settled {
    pub(super) outcome: Option<State>,
    pub(super) route: Option<String>,
}

/// A decided settle, with its guard.
struct SettleWrite {
    trial_id: Uuid,
    attempts_used: i32,
    run: RunState,
    /// The item's state the settle was decided on (its guard).
    from: ItemState,
    state: ItemState,
    outcome: Option<State>,
    bucket: Option<Bucket>,
    ready_at: DateTime<Utc>,
}

/// What becomes of `end`'s trial given its item as read: `None` when the item is not
/// leased by that attempt any more (someone else decided it). Core's retry rule counts the
/// attempts since the budget was last renewed; a re-queued trial is ready its backoff after
/// `now` (the scheduler's clock) with the draw `jitter`.
fn decide(
    end: &Ending,
    item: &ItemView,
    retry: &RetryPolicy,
    jitter: f64,
    now: DateTime<Utc>,
) -> Option<SettleWrite> {
    if item.attempts_used != end.number {
        return None;
    }
    let ended = Ended {
        terminal: end.terminal,
        attempts_used: u32::try_from(item.attempts_used - item.budget_from).unwrap_or(0),
        retry_budget: u32::try_from(item.retry_budget).unwrap_or(0),
        run: item.run,
    };
    let settlement = dispatch::settle(&ended, &retry.backoff, jitter);
    let event = ItemEvent::Settle(match settlement {
        Settlement::Retry { .. } => Settled_::Retry,
        Settlement::Done(outcome) => Settled_::Done(outcome),
    });
    // Core's item machine: only a leased item settles (anything else was decided by
    // someone else), into the class it names.
    let from = ItemClass {
        state: item.state,
        outcome: None,
    };
    let ItemMove::To(to) = item_on(from, event) else {
        return None;
    };
    Some(SettleWrite {
        trial_id: end.trial_id,
        attempts_used: item.attempts_used,
        run: item.run,
        from: item.state,
        state: to.state,
        outcome: to.outcome,
        // The bucket of the attempt as it ended (an interrupted `cancelled` stays
        // `cancelled` there), as migration 0005 counts it.
        bucket: match settlement {
            Settlement::Retry { .. } => None,
            Settlement::Done(_) => Bucket::settled(end.terminal, end.ok),
        },
        ready_at: match settlement {
            Settlement::Retry { after } => {
                now + chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX)
            }
            Settlement::Done(_) => now,
        },
    })
}

/// Applies `effects` and settles the trials of `endings` (read beforehand in `items`, by
/// trial; a trial missing there is read here), at `now` by the scheduler's clock; then ends
/// the runs of the settled trials that have nothing left to do. Returns what was decided per
/// settled trial (trials whose item was not leased by their attempt are left out).
pub(super) async fn apply(
    tx: &Tx<'_>,
    effects: Effects,
    endings: &[Ending],
    mut items: HashMap<Uuid, ItemView>,
    retry: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<HashMap<Uuid, Settled>, StoreError> {
    let mut settled: HashMap<Uuid, Settled> = HashMap::new();
    let mut runs: HashSet<Uuid> = HashSet::new();
    let mut pending: Vec<Ending> = endings.to_vec();
    let mut effects = Some(effects);
    for round in 0..MAX_ROUNDS {
        let unread: Vec<Uuid> = pending
            .iter()
            .filter(|e| round > 0 || !items.contains_key(&e.trial_id))
            .map(|e| e.trial_id)
            .collect();
        if !unread.is_empty() {
            items.extend(read_items(tx, &unread).await?);
        }
        let writes: Vec<SettleWrite> = pending
            .iter()
            .filter_map(|e| {
                let item = items.get(&e.trial_id)?;
                decide(e, item, retry, (retry.jitter)(), now)
            })
            .collect();
        #[cfg(any(test, feature = "test-support"))]
        hook::before_settle_write(round, &writes).await;
        let e = effects.take().unwrap_or_default();
        if !(e.is_empty() && writes.is_empty()) {
            for (trial, run, s) in execute(tx, &e, &writes).await? {
                runs.insert(run);
                settled.insert(trial, s);
            }
        }
        let decided: HashSet<Uuid> = writes.iter().map(|w| w.trial_id).collect();
        pending.retain(|e| decided.contains(&e.trial_id) && !settled.contains_key(&e.trial_id));
        if pending.is_empty() {
            let mut runs: Vec<Uuid> = runs.into_iter().collect();
            runs.sort();
            super::machine::finish_runs(tx, &runs).await?;
            return Ok(settled);
        }
    }
    Err(StoreError::Retryable(format!(
        "failed to settle {} trials: their work items or runs kept changing during {MAX_ROUNDS} \
         reads",
        pending.len()
    )))
}

/// Test-only: a function awaited in every settle round of [`apply`] after the trials were
/// decided and before the guarded write, inside the transaction, so that a test can commit
/// a concurrent change there (a run cancelled between the snapshot a batch was decided on
/// and its write) and drive the guard-retry path deterministically.
#[cfg(any(test, feature = "test-support"))]
pub mod hook {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use uuid::Uuid;

    /// Called with the round (0: decided on the caller's snapshot; later: on a fresh read
    /// after a guard failed) and the trials about to be written; a test acts only on its own
    /// trials (the function is the process's, shared by the tests of one binary).
    pub type BeforeSettleWrite =
        Arc<dyn Fn(usize, &[Uuid]) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

    static HOOK: Mutex<Option<BeforeSettleWrite>> = Mutex::new(None);

    /// Installs `f` (`None` removes it).
    pub fn set_before_settle_write(f: Option<BeforeSettleWrite>) {
        *HOOK.lock().unwrap_or_else(|e| e.into_inner()) = f;
    }

    pub(super) async fn before_settle_write(round: usize, writes: &[super::SettleWrite]) {
        let f = HOOK.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(f) = f {
            let trials: Vec<Uuid> = writes.iter().map(|w| w.trial_id).collect();
            f(round, &trials).await;
        }
    }
}

/// Reads the items of `trials` with their runs' states.
async fn read_items(tx: &Tx<'_>, trials: &[Uuid]) -> Result<HashMap<Uuid, ItemView>, StoreError> {
    let rows = tx
        .query(&tx.prepare_cached(SETTLE_SNAPSHOT_SQL).await?, &[&trials])
        .await?;
    Ok(rows::all("settle_snapshot.sql", &rows, |r| {
        Ok((col(r, "trial_id")?, ItemView::of(r)?))
    })?
    .into_iter()
    .collect())
}

/// Runs `apply_effects.sql`; returns the settled items (trial, run, decision).
async fn execute(
    tx: &Tx<'_>,
    e: &Effects,
    settles: &[SettleWrite],
) -> Result<Vec<(Uuid, Uuid, Settled)>, StoreError> {
    let a = &e.attempts;
    let t: Vec<(Uuid, &StepWrite)> = a
        .iter()
        .flat_map(|w| w.steps.iter().map(move |step| (w.attempt_id, step)))
        .collect();
    let t_ids: Vec<Uuid> = t.iter().map(|r| r.0).collect();
    let t_seqs: Vec<i32> = t.iter().map(|r| r.1 .0).collect();
    let t_states: Vec<&str> = t.iter().map(|r| r.1 .1.as_str()).collect();
    let t_ats: Vec<DateTime<Utc>> = t.iter().map(|r| r.1 .2).collect();
    let t_notes: Vec<&str> = t.iter().map(|r| r.1 .3.as_str()).collect();
    let a_ids: Vec<Uuid> = a.iter().map(|r| r.attempt_id).collect();
    let a_states: Vec<&str> = a.iter().map(|r| r.state.as_str()).collect();
    let a_seqs: Vec<i32> = a
        .iter()
        .map(|r| i32::try_from(r.last_seq).unwrap_or(i32::MAX))
        .collect();
    let a_terminals: Vec<Option<&str>> = a.iter().map(|r| r.terminal.map(State::as_str)).collect();
    let a_causes: Vec<Option<&str>> = a.iter().map(|r| r.cause.as_deref()).collect();
    let a_fenced: Vec<bool> = a.iter().map(|r| r.fenced).collect();
    let s_ids: Vec<Uuid> = settles.iter().map(|s| s.trial_id).collect();
    let s_used: Vec<i32> = settles.iter().map(|s| s.attempts_used).collect();
    let s_runs: Vec<&str> = settles.iter().map(|s| s.run.as_str()).collect();
    let s_from: Vec<&str> = settles.iter().map(|s| s.from.as_str()).collect();
    let s_states: Vec<&str> = settles.iter().map(|s| s.state.as_str()).collect();
    let s_outcomes: Vec<Option<&str>> = settles
        .iter()
        .map(|s| s.outcome.map(State::as_str))
        .collect();
    let s_buckets: Vec<Option<&str>> = settles
        .iter()
        .map(|s| s.bucket.map(Bucket::as_str))
        .collect();
    let s_ready: Vec<DateTime<Utc>> = settles.iter().map(|s| s.ready_at).collect();
    let rows = tx
        .query(
            &tx.prepare_cached(APPLY_EFFECTS_SQL).await?,
            &[
                &t_ids,
                &t_seqs,
                &t_states,
                &t_ats,
                &t_notes,
                &a_ids,
                &a_states,
                &a_seqs,
                &a_terminals,
                &a_causes,
                &a_fenced,
                &e.leases_ended,
                &s_ids,
                &s_used,
                &s_runs,
                &s_states,
                &s_outcomes,
                &s_buckets,
                &s_ready,
                &s_from,
            ],
        )
        .await?;
    Ok(rows::all("apply_effects.sql", &rows, |r| {
        let settled = Settled {
            outcome: parsed_opt(r, "outcome", State::parse)?,
            route: col(r, "provider_route")?,
        };
        Ok((col(r, "trial_id")?, col(r, "run_id")?, settled))
    })?)
}
