//! `DispatchStore`: what a store of runs and work items does with the events of core's
//! machine ([`super::machine`]), so that one table runs against every store.
//!
//! Two stores implement it: [`super::memory::InMemoryDispatch`] (`sweep --local`) and the
//! coordinator's scheduler over PostgreSQL. A store reads the facts an event is decided on
//! (the run's state, whether it has work, an item's class), decides with [`run_on`] /
//! [`item_on`] (through [`super::settle`] for an ended attempt) and applies only what was
//! decided, guarded by the state it was decided on: a row that moved meanwhile is left
//! alone. [`StoreSetup`] puts a run and its items into given states, for the shared table
//! ([`conformance`]).
//!
//! The methods return futures: PostgreSQL answers later; the memory store's futures are
//! ready at once.
//!
//! [`run_on`]: super::machine::run_on
//! [`item_on`]: super::machine::item_on

use std::future::Future;

use super::machine::{ItemClass, ItemMove, RunMove, RunRefusal};
use super::RunState;
use crate::lifecycle::State;

pub mod conformance;

/// A run event as a command or the dispatch asks it; the store reads what core's machine
/// decides it on (whether the run has work) itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunAsk {
    /// `run start`: the run's work items are created (one per planned trial).
    Start,
    /// `run cancel`: the run is decided; when it cancels (or was cancelling), its waiting
    /// items are cancelled, and it ends at once when nothing is live (the idle rule).
    Cancel,
    /// The run's end: when nothing of it is ready or leased, the idle event (every item of
    /// a started run exists: both stores create them with the start).
    Idle,
    /// `run resume`: the items a resume moves are queued again, then the run is decided on
    /// whether it has work.
    Resume,
    /// `run grade`: the items (plan indexes) owed a grade (which ones is
    /// `crate::grading::owes_grade`, outside the store) are queued as grade work when the run
    /// takes it.
    Grade {
        /// The items owed a grade; none: nothing is queued.
        owed: Vec<usize>,
    },
}

/// An item event as the dispatch meets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemAsk {
    /// A worker (a local slot) takes the item: a new attempt.
    Claim,
    /// The item's live attempt ended in `terminal` (reported, or reaped): the store settles
    /// it with [`super::settle`] (retried or done) over the item's attempts and budget.
    Ended(State),
    /// The run's budget is spent: the leases of its items whose attempts have not started
    /// are taken back, the attempts refunded (every such item of the run).
    Revoke,
    /// The run's cancel, on its items (every item of the run the machine moves).
    Cancel,
    /// The run's budget stop, on its items (every item of the run the machine moves).
    BudgetStop,
    /// The run's resume, on its items (every item of the run the machine moves).
    Resume,
    /// This item is queued as grade work.
    GradeRequeue,
}

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

/// A store of runs and work items that applies core's machine.
pub trait DispatchStore {
    /// A run in this store.
    type Run: Clone + std::fmt::Debug;
    /// What went wrong reaching the store (never a refusal: those are decisions).
    type Error: std::fmt::Display;

    /// Applies `ask` to `run`. Returns the decision of the run event (`None` for
    /// [`RunAsk::Idle`], which answers no one, and for an unknown run).
    fn run_event(
        &mut self,
        run: &Self::Run,
        ask: &RunAsk,
    ) -> impl Future<Output = Result<Option<RunDecision>, Self::Error>>;

    /// Applies `ask` to item `item` (its plan index) of `run`. Returns what core decided
    /// for it, as read before the event (a run-wide ask moves the run's other items too).
    fn item_event(
        &mut self,
        run: &Self::Run,
        item: usize,
        ask: ItemAsk,
    ) -> impl Future<Output = Result<ItemMove, Self::Error>>;

    /// The run's state.
    fn run_state(&mut self, run: &Self::Run)
        -> impl Future<Output = Result<RunState, Self::Error>>;

    /// Item `item`'s class (`None`: the run has no such item).
    fn item_class(
        &mut self,
        run: &Self::Run,
        item: usize,
    ) -> impl Future<Output = Result<Option<ItemClass>, Self::Error>>;
}

/// Test set-up: a run and its items put straight into given states.
pub trait StoreSetup: DispatchStore {
    /// A new run in `state` with one item per class of `items` (plan order), each allowed
    /// `retry_budget` infrastructure retries; a leased item has one live attempt. A planned
    /// run has no items (they are created by its start).
    fn put(
        &mut self,
        state: RunState,
        items: &[ItemClass],
        retry_budget: u32,
    ) -> impl Future<Output = Result<Self::Run, Self::Error>>;
}
