//! Applies core's run and item machine (`akbench_core::dispatch::machine`) inside a
//! transaction: the run row is locked and read (`run_for_update.sql`), core decides the event,
//! and the move is applied by a statement guarded by the state it was decided on
//! (`move_run.sql`, `start_run.sql`). Statements that move many items take
//! [`MoveColumns::of`] for their event. Nothing here decides a transition.

use akbench_core::dispatch::machine::{run_on, RunEvent, RunMove};
use akbench_core::dispatch::RunState;
use uuid::Uuid;

use crate::rows::{self, col, parsed};
use crate::store::{StoreError, Tx};

pub use akbench_core::dispatch::machine::{ItemEvent, MoveColumns};

/// A statement parameter.
pub type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// The parameters of a statement that applies the item moves `m` after `first`: `first`,
/// then from states, from outcomes, to states, to outcomes (each statement's `unnest`).
pub fn with_moves<'a>(first: &[Param<'a>], m: &'a MoveColumns) -> Vec<Param<'a>> {
    let mut p = first.to_vec();
    p.extend([
        &m.from_state as Param<'a>,
        &m.from_outcome,
        &m.to_state,
        &m.to_outcome,
    ]);
    p
}

const FINISH_RUNS_SQL: &str = include_str!("../../sql/scheduler/finish_runs.sql");
const RUNS_STILL_PENDING_SQL: &str = include_str!("../../sql/scheduler/runs_still_pending.sql");
const LOCK_RUNS_SQL: &str = include_str!("../../sql/scheduler/lock_runs.sql");
const END_RUNS_SQL: &str = include_str!("../../sql/scheduler/end_runs.sql");
const RUN_FOR_UPDATE_SQL: &str = include_str!("../../sql/scheduler/run_for_update.sql");
const MOVE_RUN_SQL: &str = include_str!("../../sql/scheduler/move_run.sql");

pub use akbench_core::dispatch::store::RunDecision;

/// Locks run `run_id`, decides the event `event_of` makes of its state and whether it has
/// work, and applies a move with `move_run.sql` unless `apply` is false (the caller applies
/// it with its own guarded statement, as the start does). `None`: no such run.
pub async fn decide_run(
    tx: &Tx<'_>,
    run_id: Uuid,
    event_of: impl FnOnce(bool) -> RunEvent,
    apply: bool,
) -> Result<Option<RunDecision>, StoreError> {
    let Some(row) = tx
        .query_opt(&tx.prepare_cached(RUN_FOR_UPDATE_SQL).await?, &[&run_id])
        .await?
    else {
        return Ok(None);
    };
    let from = parsed(&row, "state", RunState::parse)?;
    let has_work: bool = col(&row, "has_work")?;
    let decided = run_on(from, event_of(has_work));
    if let (true, Ok(RunMove::To(to))) = (apply, decided) {
        tx.execute(
            &tx.prepare_cached(MOVE_RUN_SQL).await?,
            &[&run_id, &from.as_str(), &to.as_str()],
        )
        .await?;
    }
    Ok(Some(RunDecision {
        from,
        has_work,
        decided,
    }))
}

/// Ends the runs among `runs` that have nothing ready or leased.
///
/// Most calls settle one trial of a run with many left: a run with a ready or leased item
/// that no other transaction is changing stays open, and that item is share-locked until
/// commit (`runs_still_pending.sql`, never waits), so the transaction that later settles it
/// waits for this one's commit and sees its work. For the other runs the run rows are
/// locked (in a fixed order), so two transactions settling a run's last two trials at once
/// serialize here and the second one, taking a fresh snapshot after the lock, sees the
/// first one's work: a run can never stay `running` with all its items done. Whether and
/// how a locked run ends is core's run machine (`dispatch::machine::run_on`, the idle event) over the run's state and
/// whether it is idle (`finish_runs.sql`), applied by one guarded statement (`end_runs.sql`).
pub async fn finish_runs(tx: &Tx<'_>, runs: &[Uuid]) -> Result<(), StoreError> {
    if runs.is_empty() {
        return Ok(());
    }
    let open = tx
        .query(&tx.prepare_cached(RUNS_STILL_PENDING_SQL).await?, &[&runs])
        .await?;
    let open: Vec<Uuid> = rows::all("runs_still_pending.sql", &open, |r| col(r, "run_id"))?;
    let undecided: Vec<Uuid> = runs.iter().filter(|r| !open.contains(r)).copied().collect();
    if undecided.is_empty() {
        return Ok(());
    }
    tx.query(&tx.prepare_cached(LOCK_RUNS_SQL).await?, &[&undecided])
        .await?;
    let rows = tx
        .query(&tx.prepare_cached(FINISH_RUNS_SQL).await?, &[&undecided])
        .await?;
    let (mut ids, mut from, mut to) = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        let run: Uuid = col(row, "run_id")?;
        let state = crate::rows::parsed(row, "state", RunState::parse)?;
        // Core's run machine decides the end of an idle run (running: finished; cancelling:
        // cancelled); every other state stays.
        let ended = match col::<bool>(row, "idle")?
            .then(|| run_on(state, RunEvent::Idle { all_enqueued: true }))
        {
            Some(Ok(RunMove::To(to))) => Some(to),
            _ => None,
        };
        if let Some(end) = ended {
            ids.push(run);
            from.push(state.as_str());
            to.push(end.as_str());
        }
    }
    if !ids.is_empty() {
        tx.execute(&tx.prepare_cached(END_RUNS_SQL).await?, &[&ids, &from, &to])
            .await?;
    }
    Ok(())
}
