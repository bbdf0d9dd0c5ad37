//! The one table of runs and work items, walked against any [`DispatchStore`]: every run
//! state meets every run event over a set of item set-ups, every item class meets every item
//! event, and the store must end where core's machine says (or refuse and stay). Core's
//! tests walk it over the memory store; the coordinator's tests over PostgreSQL
//! (`coordinator/tests/dispatch_store.rs`).
//!
//! What the store should end in is computed here from core's functions only ([`expect_run`],
//! [`expect_item`]); a mismatch is reported with its case, not panicked on, so a caller
//! sees every failing case at once.

use std::collections::BTreeSet;

use super::{ItemAsk, RunAsk, RunDecision, StoreSetup};
use crate::dispatch::machine::{
    item_on, run_on, ItemClass, ItemEvent, ItemMove, ItemState, RunEvent, RunMove, Settled,
};
use crate::dispatch::{settle, Backoff, Ended, RunState, Settlement};
use crate::lifecycle::State;

/// The infrastructure retries every item of the walk is allowed (one: an infrastructure
/// error of a first attempt is retried).
pub const RETRY_BUDGET: u32 = 1;

/// What a run event should leave: the decision (when the event answers one), the run's
/// state and its items' classes, and the event core decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunExpected {
    /// The decision the store should return.
    pub decision: Option<RunDecision>,
    /// The event decided (`None`: no event happened, an idle ask of a run with work).
    pub event: Option<RunEvent>,
    /// The run's state after.
    pub run: RunState,
    /// The items' classes after.
    pub items: Vec<ItemClass>,
}

fn live(items: &[ItemClass]) -> bool {
    items.iter().any(|c| c.state.is_live_work())
}

fn move_all(items: &mut [ItemClass], event: ItemEvent) {
    for c in items {
        if let ItemMove::To(to) = item_on(*c, event) {
            *c = to;
        }
    }
}

/// Ends `run` when nothing of it is ready or leased (the idle event).
fn end_if_idle(run: &mut RunState, items: &[ItemClass]) {
    if !live(items) {
        if let Ok(RunMove::To(to)) = run_on(*run, RunEvent::Idle { all_enqueued: true }) {
            *run = to;
        }
    }
}

/// What `ask` does to a run in `from` with `items`, by core's machine, in the order both
/// stores apply it.
pub fn expect_run(from: RunState, items: &[ItemClass], ask: &RunAsk) -> RunExpected {
    let mut items = items.to_vec();
    let mut run = from;
    let decide = |event: RunEvent, has_work: bool| RunDecision {
        from,
        has_work,
        decided: run_on(from, event),
    };
    let (decision, event) = match ask {
        RunAsk::Start => {
            let d = decide(RunEvent::Start, live(&items));
            run = d.state_after();
            (Some(d), Some(RunEvent::Start))
        }
        RunAsk::Cancel => {
            let d = decide(RunEvent::Cancel, live(&items));
            run = d.state_after();
            if matches!(d.decided, Ok(RunMove::To(_))) || from == RunState::Cancelling {
                move_all(&mut items, ItemEvent::Cancel);
                end_if_idle(&mut run, &items);
            }
            (Some(d), Some(RunEvent::Cancel))
        }
        RunAsk::Idle => {
            if live(&items) {
                (None, None)
            } else {
                end_if_idle(&mut run, &items);
                (None, Some(RunEvent::Idle { all_enqueued: true }))
            }
        }
        RunAsk::Resume => {
            move_all(&mut items, ItemEvent::Resume);
            let has_work = live(&items);
            let event = RunEvent::Resume { has_work };
            let d = decide(event, has_work);
            run = d.state_after();
            (Some(d), Some(event))
        }
        RunAsk::Grade { owed } => {
            let event = RunEvent::Grade {
                has_work: !owed.is_empty(),
            };
            let d = decide(event, live(&items));
            run = d.state_after();
            if d.decided.is_ok() {
                for &i in owed {
                    if let ItemMove::To(to) = item_on(items[i], ItemEvent::GradeRequeue) {
                        items[i] = to;
                    }
                }
            }
            (Some(d), Some(event))
        }
    };
    RunExpected {
        decision,
        event,
        run,
        items,
    }
}

/// The item event `ask` is for an item of `class` (an ended attempt: core's settle of a
/// first attempt with [`RETRY_BUDGET`] in a running run), and what it does.
pub fn expect_item(class: ItemClass, ask: ItemAsk) -> (ItemEvent, ItemMove) {
    let event = match ask {
        ItemAsk::Claim => ItemEvent::Claim,
        ItemAsk::Ended(terminal) => {
            let ended = Ended {
                terminal,
                attempts_used: 1,
                retry_budget: RETRY_BUDGET,
                run: RunState::Running,
            };
            ItemEvent::Settle(match settle(&ended, &Backoff::default(), 0.5) {
                Settlement::Retry { .. } => Settled::Retry,
                Settlement::Done(s) => Settled::Done(s),
            })
        }
        ItemAsk::Revoke => ItemEvent::Revoke,
        ItemAsk::Cancel => ItemEvent::Cancel,
        ItemAsk::BudgetStop => ItemEvent::BudgetStop,
        ItemAsk::Resume => ItemEvent::Resume,
        ItemAsk::GradeRequeue => ItemEvent::GradeRequeue,
    };
    (event, item_on(class, event))
}

/// The outcome of a walk.
#[derive(Debug, Clone, Default)]
pub struct Walked {
    /// Run cases driven.
    pub run_cases: usize,
    /// Item cases driven.
    pub item_cases: usize,
    /// The (run state, run event) pairs decided.
    pub run_pairs: BTreeSet<(RunStateKey, String)>,
    /// The (item class, item event) pairs decided.
    pub item_pairs: BTreeSet<(ItemClass, String)>,
    /// Every case whose store did not end as core's table says.
    pub failures: Vec<String>,
}

/// A run state, ordered (for the pair sets).
pub type RunStateKey = &'static str;

fn class(state: ItemState, outcome: Option<State>) -> ItemClass {
    ItemClass { state, outcome }
}

/// The item set-ups each started run state meets every run event with: none, one of each
/// live state, done with an accepted and with a resumable outcome, cancelled, and a live
/// item beside a cancelled one. A planned run has no items.
pub fn run_setups(state: RunState) -> Vec<Vec<ItemClass>> {
    if state == RunState::Planned {
        return vec![Vec::new()];
    }
    let ready = class(ItemState::Ready, None);
    let leased = class(ItemState::Leased, None);
    let cancelled = class(ItemState::Cancelled, Some(State::Cancelled));
    vec![
        Vec::new(),
        vec![ready],
        vec![leased],
        vec![class(ItemState::Done, Some(State::Completed))],
        vec![class(ItemState::Done, Some(State::InfrastructureError))],
        vec![cancelled],
        vec![leased, cancelled],
    ]
}

/// The run asks of the walk over `items`: every ask, grade with the done items owed (when
/// there are) and with none.
pub fn run_asks(items: &[ItemClass]) -> Vec<RunAsk> {
    let owed: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].state == ItemState::Done)
        .collect();
    let mut asks = vec![RunAsk::Start, RunAsk::Cancel, RunAsk::Idle, RunAsk::Resume];
    if !owed.is_empty() {
        asks.push(RunAsk::Grade { owed });
    }
    asks.push(RunAsk::Grade { owed: Vec::new() });
    asks
}

/// The item asks of the walk: every ask, an attempt ending in an infrastructure error
/// (retried), completed, failed and cancelled.
pub fn item_asks() -> Vec<ItemAsk> {
    vec![
        ItemAsk::Claim,
        ItemAsk::Ended(State::InfrastructureError),
        ItemAsk::Ended(State::Completed),
        ItemAsk::Ended(State::Failed),
        ItemAsk::Ended(State::Cancelled),
        ItemAsk::Revoke,
        ItemAsk::Cancel,
        ItemAsk::BudgetStop,
        ItemAsk::Resume,
        ItemAsk::GradeRequeue,
    ]
}

/// The (run state, event) pairs of core's table no store reaches through the walk, with
/// why: both stores create every item of a run with its start (`all_enqueued` is never
/// false when a run is idle), and a planned run has no item to resume or grade.
pub fn run_pairs_not_reached() -> BTreeSet<(RunStateKey, String)> {
    let mut out = BTreeSet::new();
    for s in RunState::ALL {
        out.insert((
            s.as_str(),
            format!(
                "{:?}",
                RunEvent::Idle {
                    all_enqueued: false
                }
            ),
        ));
    }
    out.insert((
        RunState::Planned.as_str(),
        format!("{:?}", RunEvent::Resume { has_work: true }),
    ));
    out.insert((
        RunState::Planned.as_str(),
        format!("{:?}", RunEvent::Grade { has_work: true }),
    ));
    out
}

/// Walks every run case against `store`.
pub async fn walk_runs<S: StoreSetup>(store: &mut S, out: &mut Walked) -> Result<(), S::Error> {
    for from in RunState::ALL {
        for items in run_setups(from) {
            for ask in run_asks(&items) {
                out.run_cases += 1;
                let case = format!("run {from} with items {items:?}, {ask:?}");
                let want = expect_run(from, &items, &ask);
                let run = store.put(from, &items, RETRY_BUDGET).await?;
                let set = store.run_state(&run).await?;
                if set != from {
                    out.failures.push(format!("{case}: set up as {set}"));
                    continue;
                }
                let got = store.run_event(&run, &ask).await?;
                if let Some(e) = want.event {
                    out.run_pairs.insert((from.as_str(), format!("{e:?}")));
                }
                if got != want.decision {
                    out.failures.push(format!(
                        "{case}: decided {got:?}, the table says {:?}",
                        want.decision
                    ));
                }
                let after = store.run_state(&run).await?;
                if after != want.run {
                    out.failures.push(format!(
                        "{case}: run ended {after}, the table says {}",
                        want.run
                    ));
                }
                for (i, want_class) in want.items.iter().enumerate() {
                    let got = store.item_class(&run, i).await?;
                    if got != Some(*want_class) {
                        out.failures.push(format!(
                            "{case}: item {i} ended {got:?}, the table says {want_class:?}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Walks every item case against `store`: a running run with one item of each class meets
/// each item ask.
pub async fn walk_items<S: StoreSetup>(store: &mut S, out: &mut Walked) -> Result<(), S::Error> {
    for from in ItemClass::all() {
        for ask in item_asks() {
            out.item_cases += 1;
            let case = format!("item {from:?}, {ask:?}");
            let (event, want) = expect_item(from, ask);
            out.item_pairs.insert((from, format!("{event:?}")));
            let run = store.put(RunState::Running, &[from], RETRY_BUDGET).await?;
            let set = store.item_class(&run, 0).await?;
            if set != Some(from) {
                out.failures.push(format!("{case}: set up as {set:?}"));
                continue;
            }
            let got = store.item_event(&run, 0, ask).await?;
            if got != want {
                out.failures
                    .push(format!("{case}: decided {got:?}, the table says {want:?}"));
            }
            let want_class = match want {
                ItemMove::To(to) => to,
                ItemMove::Stays => from,
            };
            let after = store.item_class(&run, 0).await?;
            if after != Some(want_class) {
                out.failures.push(format!(
                    "{case}: ended {after:?}, the table says {want_class:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Walks both tables against `store`; checks that every pair of core's tables was met
/// (runs: all but [`run_pairs_not_reached`]; items: every class with every event of
/// [`ItemEvent::ALL`]) and reports what did not hold.
pub async fn walk<S: StoreSetup>(store: &mut S) -> Result<Walked, S::Error> {
    let mut out = Walked::default();
    walk_runs(store, &mut out).await?;
    walk_items(store, &mut out).await?;
    let skipped = run_pairs_not_reached();
    for s in RunState::ALL {
        for e in RunEvent::ALL {
            let pair = (s.as_str(), format!("{e:?}"));
            if !out.run_pairs.contains(&pair) && !skipped.contains(&pair) {
                out.failures
                    .push(format!("run pair {pair:?} was never met"));
            }
        }
    }
    for c in ItemClass::all() {
        for e in ItemEvent::ALL {
            if !out.item_pairs.contains(&(c, format!("{e:?}"))) {
                out.failures
                    .push(format!("item pair {c:?} {e:?} was never met"));
            }
        }
    }
    Ok(out)
}
