//! Applies core's run and item machine (`akbench_core::dispatch::machine`) inside a
//! transaction: the run row is locked and read (`run_for_update.sql`), core decides the event,
//! and the move is applied by a statement guarded by the state it was decided on
//! (`move_run.sql`, `start_run.sql`). Statements that move many items take
//! [`MoveColumns::of`] for their event. Nothing here decides a transition.

use akbench_core::dispatch::machine::{run_on, RunEvent, RunMove, RunRefusal};
use akbench_core::dispatch::RunState;
use uuid::Uuid;

use crate::rows::{col, parsed};
use crate::store::{StoreError, Tx};

pub use akbench_core::dispatch::machine::{ItemEvent, MoveColumns};

const RUN_FOR_UPDATE_SQL: &str = include_str!("../../sql/scheduler/run_for_update.sql");
const MOVE_RUN_SQL: &str = include_str!("../../sql/scheduler/move_run.sql");

/// What core decided for one run event, and on what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunDecision {
    /// The run's state the event met (the guard of the move).
    pub from: RunState,
    /// Whether it had an item ready or leased.
    pub has_work: bool,
    /// The decision.
    pub decided: Result<RunMove, RunRefusal>,
}

impl RunDecision {
    /// The state the run is in after the decision was applied.
    pub fn state_after(&self) -> RunState {
        match self.decided {
            Ok(RunMove::To(to)) => to,
            _ => self.from,
        }
    }
}

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
