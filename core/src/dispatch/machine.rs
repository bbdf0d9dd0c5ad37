//! The one state machine of runs and work items: every transition of `runs.state` and
//! `work_items.state` is decided here, over an event, and nowhere else.
//!
//! A run moves with [`run_on`]; a work item with [`item_on`]. Both return the new state, that
//! nothing changes (and why, so a command can say so), or a refusal naming what the caller
//! asked for that the state does not allow. The coordinator applies what these decide with
//! statements guarded by the state they were decided on (`move_run.sql`, `end_runs.sql`,
//! `cancel_run.sql`, ...; `coordinator/tests/state_writes.rs` lists each with the decision it
//! applies): a row no longer in that state is left alone. Statements that move
//! many items at once (a cancel, a budget stop, a resume) take the moves of [`item_moves`],
//! one per item class ([`ItemClass`]: state and outcome), so the rule of which classes move
//! lives here too. `sweep --local` and `run single` apply the same functions to their items in
//! memory (`memory::InMemoryDispatch`).
//!
//! What settles an item whose attempt ended (retried or done) is [`super::settle`]; this
//! machine only says which item states such a settle applies to.

use super::RunState;
use crate::lifecycle::State;

/// An event a run meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunEvent {
    /// `run start`: its work items are created.
    Start,
    /// `run cancel` (a user's cancel; a budget stop cancels items, not the run).
    Cancel,
    /// Nothing of it is ready or leased. `all_enqueued` is false while its work items are
    /// still being created.
    Idle {
        /// Every planned trial has its work item.
        all_enqueued: bool,
    },
    /// `run resume`: trials without a final outcome were queued again; `has_work` when any
    /// of its items is now ready or leased.
    Resume {
        /// Something is ready or leased.
        has_work: bool,
    },
    /// `run resume --grade` / `run grade`: trials owed a grade were queued as grade work.
    Grade {
        /// Something is ready or leased.
        has_work: bool,
    },
}

impl RunEvent {
    /// Every event, for table tests.
    pub const ALL: [RunEvent; 8] = [
        Self::Start,
        Self::Cancel,
        Self::Idle { all_enqueued: true },
        Self::Idle {
            all_enqueued: false,
        },
        Self::Resume { has_work: true },
        Self::Resume { has_work: false },
        Self::Grade { has_work: true },
        Self::Grade { has_work: false },
    ];
}

/// Why a run stays in its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unchanged {
    /// The event asks for the state the run is in (a second start, a second cancel).
    Already,
    /// The run has ended: its outcomes stand (a cancel of a finished run).
    Ended,
    /// The event does not move a run in this state (idle while running items are still
    /// created, resumed with nothing to do).
    NoMove,
}

impl Unchanged {
    /// Says why a run in `state` did not move, for a command's answer.
    pub fn explain(self, state: RunState) -> String {
        match self {
            Self::Already => format!("the run is already {state}"),
            Self::Ended => format!("the run has already {state}: its outcomes stand"),
            Self::NoMove => format!("nothing to do for a {state} run"),
        }
    }
}

/// The decision about one run event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunMove {
    /// The run moves to this state.
    To(RunState),
    /// The run stays where it is.
    Stays(Unchanged),
}

/// A run event the run's state does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RunRefusal {
    /// Resuming or grading a run that never started: start it.
    #[error("the run was never started: start it (`akbench run start`)")]
    NotStarted,
    /// Grading a cancelled run (or one being cancelled).
    #[error(
        "the run was cancelled; its trials keep the outcomes they had. Grade executed run \
         directories with `akbench run evaluate`, or plan and start a new run"
    )]
    Cancelled,
}

/// What `event` does to a run in `state`.
pub fn run_on(state: RunState, event: RunEvent) -> Result<RunMove, RunRefusal> {
    use RunMove::{Stays, To};
    use RunState as R;
    use Unchanged::{Already, Ended, NoMove};
    Ok(match (event, state) {
        (RunEvent::Start, R::Planned) => To(R::Running),
        (RunEvent::Start, _) => Stays(Already),

        // A planned run has nothing live: it is cancelled at once.
        (RunEvent::Cancel, R::Planned) => To(R::Cancelled),
        (RunEvent::Cancel, R::Running) => To(R::Cancelling),
        (RunEvent::Cancel, R::Cancelling | R::Cancelled) => Stays(Already),
        // Issue 48: a finished run's outcomes stand; cancelling it changes nothing.
        (RunEvent::Cancel, R::Finished) => Stays(Ended),

        (RunEvent::Idle { all_enqueued }, s) => match s.when_idle(all_enqueued) {
            Some(to) => To(to),
            None => Stays(NoMove),
        },

        (RunEvent::Resume { .. } | RunEvent::Grade { .. }, R::Planned) => {
            return Err(RunRefusal::NotStarted)
        }
        (RunEvent::Grade { .. }, R::Cancelling | R::Cancelled) => {
            return Err(RunRefusal::Cancelled)
        }
        (RunEvent::Resume { .. } | RunEvent::Grade { .. }, R::Running) => Stays(Already),
        (RunEvent::Resume { has_work: true }, R::Finished | R::Cancelling | R::Cancelled)
        | (RunEvent::Grade { has_work: true }, R::Finished) => To(R::Running),
        (RunEvent::Resume { has_work: false }, _) | (RunEvent::Grade { has_work: false }, _) => {
            Stays(NoMove)
        }
    })
}

/// The coarse state of a work item (`work_items.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemState {
    /// Waiting to be claimed (not before its `ready_at`).
    Ready,
    /// An attempt of it is live (a lease exists).
    Leased,
    /// The trial has its outcome (`work_items.outcome`).
    Done,
    /// Cancelled before an attempt ran to an end.
    Cancelled,
}

impl ItemState {
    /// Every state.
    pub const ALL: [ItemState; 4] = [Self::Ready, Self::Leased, Self::Done, Self::Cancelled];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Leased => "leased",
            Self::Done => "done",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.as_str() == s)
    }

    /// Whether its run still has work in it (ready or leased): a run ends when none has.
    pub fn is_live_work(self) -> bool {
        matches!(self, Self::Ready | Self::Leased)
    }
}

impl std::fmt::Display for ItemState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One class of work items: its state and, when done or cancelled, its outcome (a terminal
/// lifecycle state). Statements that move many items move them class by class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemClass {
    /// `work_items.state`.
    pub state: ItemState,
    /// `work_items.outcome` (`None` while ready or leased).
    pub outcome: Option<State>,
}

impl ItemClass {
    /// Every class an item can be in: ready and leased without an outcome, done with each
    /// terminal state, cancelled with `cancelled`.
    pub fn all() -> Vec<ItemClass> {
        let mut all = vec![
            ItemClass {
                state: ItemState::Ready,
                outcome: None,
            },
            ItemClass {
                state: ItemState::Leased,
                outcome: None,
            },
        ];
        all.extend(
            crate::lifecycle::ALL_STATES
                .into_iter()
                .filter(|s| s.is_terminal())
                .map(|s| ItemClass {
                    state: ItemState::Done,
                    outcome: Some(s),
                }),
        );
        all.push(ItemClass {
            state: ItemState::Cancelled,
            outcome: Some(State::Cancelled),
        });
        all
    }
}

/// An event a work item meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ItemEvent {
    /// A worker claims it: a new attempt and its lease.
    Claim,
    /// Its live attempt ended and was settled ([`super::settle`]): retried (ready again,
    /// after the backoff) or done with `outcome`.
    Settle(Settled),
    /// Its lease was taken back before the attempt started: the run's budget is spent
    /// (`budget_spent`) or its provider route paused (queued again, the attempt refunded).
    Revoke,
    /// Its run is cancelled (by its user).
    Cancel,
    /// Its run's budget is spent.
    BudgetStop,
    /// `run resume`: trials without an accepted final outcome are queued again.
    Resume,
    /// `run grade`: a trial owed a grade is queued as grade work.
    GradeRequeue,
}

/// How a settle ended: the item's next state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Settled {
    /// Queued again for another attempt.
    Retry,
    /// Done with this outcome.
    Done(State),
}

impl ItemEvent {
    /// Every event (settles with a representative outcome), for table tests.
    pub const ALL: [ItemEvent; 8] = [
        Self::Claim,
        Self::Settle(Settled::Retry),
        Self::Settle(Settled::Done(State::Completed)),
        Self::Revoke,
        Self::Cancel,
        Self::BudgetStop,
        Self::Resume,
        Self::GradeRequeue,
    ];
}

/// Where an item goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ItemMove {
    /// It moves to this class.
    To(ItemClass),
    /// It stays.
    Stays,
}

/// What `event` does to an item of `class`. Never a refusal: an event that does not apply
/// to an item leaves it alone (a cancel does not touch a done trial).
pub fn item_on(class: ItemClass, event: ItemEvent) -> ItemMove {
    use ItemState as I;
    let to = |state, outcome| ItemMove::To(ItemClass { state, outcome });
    match (event, class.state) {
        (ItemEvent::Claim, I::Ready) => to(I::Leased, None),
        (ItemEvent::Settle(Settled::Retry), I::Leased) => to(I::Ready, None),
        (ItemEvent::Settle(Settled::Done(s)), I::Leased) if s.is_terminal() => to(I::Done, Some(s)),
        // A revoked attempt never ran: the item waits again (a budget stop then cancels it
        // with the other ready items).
        (ItemEvent::Revoke, I::Leased) => to(I::Ready, None),
        // Live attempts are told to stop and settle when they end; only waiting items are
        // cancelled here.
        (ItemEvent::Cancel | ItemEvent::BudgetStop, I::Ready) => {
            to(I::Cancelled, Some(State::Cancelled))
        }
        // Trials without an accepted final outcome: cancelled before they ran, or done
        // with an infrastructure error or cancelled (also when their retry budget was spent).
        (ItemEvent::Resume, I::Cancelled) => to(I::Ready, None),
        (ItemEvent::Resume, I::Done)
            if matches!(
                class.outcome,
                Some(State::InfrastructureError | State::Cancelled)
            ) =>
        {
            to(I::Ready, None)
        }
        // Which done trials owe a grade is `crate::grading::owes_grade`, over their
        // deciding attempt; the item itself only has to be done.
        (ItemEvent::GradeRequeue, I::Done) => to(I::Ready, None),
        _ => ItemMove::Stays,
    }
}

/// The moves `event` makes among every item class: what a statement that moves many items
/// at once applies (each row guarded by the class it was decided on).
pub fn item_moves(event: ItemEvent) -> Vec<(ItemClass, ItemClass)> {
    ItemClass::all()
        .into_iter()
        .filter_map(|from| match item_on(from, event) {
            ItemMove::To(to) => Some((from, to)),
            ItemMove::Stays => None,
        })
        .collect()
}

/// The one move `event` makes of an item without an outcome (ready or leased), as the
/// (from, to) states a statement that moves such items is given: a claim (ready to
/// leased), a revoke (leased to ready). `None` when it makes none, or more than one.
pub fn live_move(event: ItemEvent) -> Option<(&'static str, &'static str)> {
    let mut moves = item_moves(event)
        .into_iter()
        .filter(|(from, to)| from.outcome.is_none() && to.outcome.is_none());
    match (moves.next(), moves.next()) {
        (Some((from, to)), None) => Some((from.state.as_str(), to.state.as_str())),
        _ => None,
    }
}

/// The columns a guarded statement unnests to apply a batch of item moves, one row per
/// class: `from_state`, `from_outcome` (`None`: no outcome), `to_state`, `to_outcome`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveColumns {
    /// The state each row is decided on (its guard).
    pub from_state: Vec<&'static str>,
    /// The outcome each row is decided on (its guard; `None` matches no outcome).
    pub from_outcome: Vec<Option<&'static str>>,
    /// The new state.
    pub to_state: Vec<&'static str>,
    /// The new outcome.
    pub to_outcome: Vec<Option<&'static str>>,
}

impl MoveColumns {
    /// The moves `event` makes among every item class ([`item_moves`]), as columns.
    pub fn of(event: ItemEvent) -> Self {
        let mut c = Self::default();
        for (f, t) in item_moves(event) {
            c.from_state.push(f.state.as_str());
            c.from_outcome.push(f.outcome.map(State::as_str));
            c.to_state.push(t.state.as_str());
            c.to_outcome.push(t.outcome.map(State::as_str));
        }
        c
    }
}

#[cfg(test)]
mod tests;
