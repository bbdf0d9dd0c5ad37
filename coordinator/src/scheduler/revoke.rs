//! Stops that hold for prefetched work: when a run's budget is spent or a provider route
//! pauses, the leases of its attempts that have not started (no transition stored: a
//! worker's prefetched assignment waiting for a slot, or one just assigned) are taken back in
//! the same transaction, as core's [`Hold`] says: each attempt ends `cancelled` (the
//! coordinator's doing, cause [`Hold::cause`]) and is fenced, its lease deleted, its work item
//! back to `ready` with the attempt given back to its retry budget (a budget stop then cancels
//! it with the run's other ready items; a paused route's waits for the pause to end). The
//! worker is sent `Cancel` after commit ([`super::Scheduler::on_revoked`]), so it never
//! starts the attempt; had it started meanwhile, its reports are refused as stale.

use akbench_core::dispatch::Hold;
use akbench_core::lifecycle::State;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::apply::{self, AttemptWrite, Effects};
use crate::rows::col;
use crate::store::{StoreError, Tx};

const REVOKE_UNSTARTED_SQL: &str = include_str!("../../sql/scheduler/revoke_unstarted.sql");
const REQUEUE_REVOKED_SQL: &str = include_str!("../../sql/scheduler/requeue_revoked.sql");

/// The item move of a revoke (core's item machine), read once.
static REVOKE: std::sync::LazyLock<(&str, &str)> = std::sync::LazyLock::new(|| {
    use akbench_core::dispatch::machine::{live_move, ItemEvent};
    // Core's table test `claims_and_revokes_move_one_live_class` holds this.
    live_move(ItemEvent::Revoke).expect("core's item machine moves one class on a revoke")
});

/// A lease taken back before its attempt started: the worker to send `Cancel` to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoked {
    /// The attempt.
    pub attempt_id: Uuid,
    /// The worker that holds it.
    pub worker_id: String,
    /// Why (the attempt's cause).
    pub reason: String,
}

/// Takes back, in `tx`, the unstarted leases of `spent_runs` (budget spent) and of the
/// `paused_routes` at `now` (the scheduler's clock); returns them for the `Cancel`s to send
/// after commit.
pub(super) async fn revoke_unstarted(
    tx: &Tx<'_>,
    spent_runs: &[Uuid],
    paused_routes: &[String],
    now: DateTime<Utc>,
) -> Result<Vec<Revoked>, StoreError> {
    if spent_runs.is_empty() && paused_routes.is_empty() {
        return Ok(Vec::new());
    }
    let rows = tx
        .query(
            &tx.prepare_cached(REVOKE_UNSTARTED_SQL).await?,
            &[&spent_runs, &paused_routes],
        )
        .await?;
    let leases = crate::rows::all("revoke_unstarted.sql", &rows, |r| {
        Ok((
            col::<Uuid>(r, "attempt_id")?,
            col::<Uuid>(r, "trial_id")?,
            col::<String>(r, "worker_id")?,
            col::<Uuid>(r, "run_id")?,
            col::<Option<String>>(r, "provider_route")?,
        ))
    })?;
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let mut revoked = Vec::new();
    let (mut ids, mut trials, mut causes) = (Vec::new(), Vec::new(), Vec::new());
    for (attempt, trial, worker, run, route) in leases {
        let hold = match route {
            Some(route) if !spent_runs.contains(&run) => Hold::RoutePaused(route),
            _ => Hold::BudgetSpent,
        };
        let cause = hold.cause();
        ids.push(attempt);
        trials.push(trial);
        causes.push(cause.clone());
        revoked.push(Revoked {
            attempt_id: attempt,
            worker_id: worker,
            reason: cause,
        });
    }
    // Its one transition: from the implicit start to `cancelled` (a step the lifecycle allows).
    let mut effects = Effects::default();
    for (id, cause) in ids.iter().zip(&causes) {
        effects.attempts.push(AttemptWrite {
            attempt_id: *id,
            state: State::Cancelled,
            last_seq: 1,
            steps: vec![(1, State::Cancelled.as_str().to_string(), now, cause.clone())],
            terminal: Some(State::Cancelled),
            cause: Some(cause.clone()),
            fenced: true,
        });
    }
    effects.leases_ended = ids.clone();
    apply::apply(
        tx,
        effects,
        &[],
        Default::default(),
        &Default::default(),
        now,
    )
    .await?;
    tx.execute(
        &tx.prepare_cached(REQUEUE_REVOKED_SQL).await?,
        &[&trials, &now, &REVOKE.0, &REVOKE.1],
    )
    .await?;
    Ok(revoked)
}
