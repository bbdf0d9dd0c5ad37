//! `InMemoryDispatch`: the dispatch of `akbench sweep --local` and of a trial run on its own
//! (`run single`, through the worker's `Orchestrator::run_trial`): this module's policy
//! (`crate::dispatch`) over an in-memory store instead of the coordinator's PostgreSQL.
//!
//! It owns the work items of one run and what is live: which ready item a free slot takes
//! next (plan order, not before its retry backoff, its route not paused, within the caps
//! by `dispatch::within_caps`), how an ended attempt settles (`dispatch::settle`: retried
//! after a bounded jittered backoff, or done with `dispatch::trial_terminal`), what a cancel
//! does (core's run and item machine, `dispatch::machine`, as the coordinator decides it: the
//! run is `cancelling`, every ready item is cancelled; live attempts end and are not retried;
//! an ended run stays as it is) and when the run ends (`RunState::when_idle`). Time and jitter come in as
//! arguments: nothing here reads a clock or runs anything; `sweep::local` drives it.

use crate::dispatch::machine::{self, ItemClass, ItemEvent, ItemMove, RunEvent, RunMove, Settled};
use crate::dispatch::store::RunDecision;
use crate::dispatch::{self, Backoff, CapView, Ended, Live, RunCaps, RunState, Settlement};
use crate::lifecycle::State;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Why a trial was cancelled without running to an end.
pub const CANCEL_REASON: &str = "cancelled";

/// Where one work item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemState {
    /// Waiting for a slot, not before `not_before`.
    Ready {
        /// Its retry backoff ends then (the start of the sweep for a first attempt).
        not_before: Instant,
    },
    /// An attempt is live.
    Leased,
    /// Done with this trial outcome.
    Done(State),
    /// Cancelled before an attempt ran to an end (reason: [`CANCEL_REASON`] or
    /// [`crate::budget::BUDGET_REASON`]).
    Cancelled(&'static str),
}

/// A work item to dispatch: one planned trial's agent label, provider route and retry budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    /// The agent label (the caps per agent count by it).
    pub agent: String,
    /// The provider route of its agent, when it has one.
    pub route: Option<String>,
    /// Infrastructure retries allowed.
    pub retry_budget: u32,
}

/// One planned trial's work item.
#[derive(Debug, Clone)]
struct Item {
    state: ItemState,
    /// Attempts made.
    attempts: u32,
    /// Attempts made when its retry budget was last renewed (a resume renews it; a revoked
    /// attempt is given back), as the coordinator's `work_items.budget_from`.
    budget_from: u32,
    agent: String,
    route: Option<String>,
    retry_budget: u32,
}

impl ItemState {
    /// Its class in core's item machine.
    pub fn class(self) -> ItemClass {
        let (state, outcome) = match self {
            ItemState::Ready { .. } => (machine::ItemState::Ready, None),
            ItemState::Leased => (machine::ItemState::Leased, None),
            ItemState::Done(s) => (machine::ItemState::Done, Some(s)),
            ItemState::Cancelled(_) => (machine::ItemState::Cancelled, Some(State::Cancelled)),
        };
        ItemClass { state, outcome }
    }
}

/// What a free slot does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Run attempt `number` of item `item` (its plan index).
    Lease {
        /// The item.
        item: usize,
        /// The attempt's number (1 for the first).
        number: u32,
    },
    /// Nothing can start now: wait for an attempt to end, a route to resume, or until
    /// `Some(instant)` (a retry's backoff ends).
    Wait(Option<Instant>),
    /// Nothing will ever start again (the run is cancelling, or nothing is ready or live):
    /// the slot stops.
    Stop,
}

/// The dispatch state of one local run.
#[derive(Debug)]
pub struct InMemoryDispatch {
    run: RunState,
    items: Vec<Item>,
    /// The run's caps, core's type (the coordinator stores the same in `runs.caps`), with
    /// `max_trials` bounded by the slots.
    limits: RunCaps,
    live: i64,
    live_agent: BTreeMap<String, i64>,
    live_route: BTreeMap<String, i64>,
    backoff: Backoff,
    /// The latest instant the sweep gave (events of the store trait happen then).
    now: Instant,
}

impl InMemoryDispatch {
    /// A running run with one ready item per planned trial (ready from `now`); `slots`
    /// bounds live attempts as the run's `max_trials` does.
    pub fn new(
        items: Vec<NewItem>,
        caps: &RunCaps,
        slots: usize,
        backoff: Backoff,
        now: Instant,
    ) -> Self {
        let slots = i64::try_from(slots).unwrap_or(i64::MAX);
        let items = items
            .into_iter()
            .map(|t| Item {
                state: ItemState::Ready { not_before: now },
                attempts: 0,
                budget_from: 0,
                agent: t.agent,
                route: t.route,
                retry_budget: t.retry_budget,
            })
            .collect();
        let mut d = InMemoryDispatch {
            run: RunState::Running,
            items,
            limits: RunCaps {
                max_trials: Some(caps.max_trials.map_or(slots, |m| m.min(slots))),
                ..caps.clone()
            },
            live: 0,
            live_agent: BTreeMap::new(),
            live_route: BTreeMap::new(),
            backoff,
            now,
        };
        d.end_if_idle();
        d
    }

    /// The run's state: a running run whose items are all done is finished, a cancelling
    /// one with nothing live is cancelled (core's idle rule, applied as soon as the last
    /// item settles or is cancelled; the sweep ends when [`InMemoryDispatch::next`] says so).
    pub fn run_state(&self) -> RunState {
        self.run
    }

    /// Item `i`'s state.
    pub fn item(&self, i: usize) -> ItemState {
        self.items[i].state
    }

    /// Attempts made for item `i` (the tests' view).
    #[cfg(test)]
    pub fn attempts(&self, i: usize) -> u32 {
        self.items[i].attempts
    }

    /// What a free slot does at `now`: the first ready item in plan order whose backoff
    /// is over, whose route `paused` does not hold, and that fits the caps.
    pub fn next(&mut self, now: Instant, paused: &dyn Fn(&str) -> bool) -> Next {
        self.now = self.now.max(now);
        if self.run.is_cancelling() {
            return Next::Stop;
        }
        let mut soonest: Option<Instant> = None;
        let mut any_ready = false;
        let mut pick = None;
        for (i, item) in self.items.iter().enumerate() {
            let ItemState::Ready { not_before } = item.state else {
                continue;
            };
            any_ready = true;
            if not_before > now {
                soonest = Some(soonest.map_or(not_before, |s| s.min(not_before)));
                continue;
            }
            if item.route.as_deref().is_some_and(paused) {
                continue;
            }
            if dispatch::within_caps(&self.cap_view(item)).is_err() {
                continue;
            }
            pick = Some(i);
            break;
        }
        match pick {
            Some(i) => {
                // Core's item machine moves a ready item on a claim.
                self.apply_item(i, ItemEvent::Claim, now, CANCEL_REASON);
                Next::Lease {
                    item: i,
                    number: self.items[i].attempts,
                }
            }
            // Nothing ready and nothing live: nothing can ever become ready again.
            None if !any_ready && self.live == 0 => Next::Stop,
            // A live attempt may end in a retry: the slot stays.
            None => Next::Wait(soonest),
        }
    }

    fn cap_view(&self, item: &Item) -> CapView {
        let live = Live {
            run: self.live,
            agent: self.live_agent.get(&item.agent).copied().unwrap_or(0),
            route: item
                .route
                .as_ref()
                .and_then(|r| self.live_route.get(r).copied())
                .unwrap_or(0),
        };
        self.limits.view(&item.agent, item.route.as_deref(), live)
    }

    /// Counts item `i` live (`by` 1) or no longer live (`by` -1) under the caps.
    fn count_live(&mut self, i: usize, by: i64) {
        let (agent, route) = (self.items[i].agent.clone(), self.items[i].route.clone());
        self.live += by;
        *self.live_agent.entry(agent).or_default() += by;
        if let Some(r) = route {
            *self.live_route.entry(r).or_default() += by;
        }
    }

    /// Applies what core's item machine decides for `event` on item `i` (guarded by the
    /// class it is in): a ready item becomes ready from `at`, a cancelled one cancelled with
    /// `reason`. Returns the decision.
    fn apply_item(
        &mut self,
        i: usize,
        event: ItemEvent,
        at: Instant,
        reason: &'static str,
    ) -> ItemMove {
        let from = self.items[i].state;
        let decided = machine::item_on(from.class(), event);
        let ItemMove::To(to) = decided else {
            return decided;
        };
        if from == ItemState::Leased {
            self.count_live(i, -1);
        }
        let item = &mut self.items[i];
        item.state = match (to.state, to.outcome) {
            (machine::ItemState::Ready, _) => ItemState::Ready { not_before: at },
            (machine::ItemState::Leased, _) => ItemState::Leased,
            (machine::ItemState::Done, Some(s)) => ItemState::Done(s),
            (machine::ItemState::Done, None) => unreachable!("core's machine: done has an outcome"),
            (machine::ItemState::Cancelled, _) => ItemState::Cancelled(reason),
        };
        match event {
            ItemEvent::Claim => item.attempts += 1,
            // The revoked attempt never ran: it is given back.
            ItemEvent::Revoke => item.budget_from += 1,
            // A resumed trial's budget starts again.
            ItemEvent::Resume => item.budget_from = item.attempts,
            _ => {}
        }
        if to.state == machine::ItemState::Leased {
            self.count_live(i, 1);
        }
        decided
    }

    /// Settles item `i`'s live attempt that ended in `terminal` at `now` by core's retry
    /// rule (`jitter` in `[0, 1)`); `None` (and nothing changes) when the item is not leased.
    fn settle_item(
        &mut self,
        i: usize,
        terminal: State,
        jitter: f64,
        now: Instant,
    ) -> Option<Settlement> {
        self.now = self.now.max(now);
        let item = &self.items[i];
        let settlement = dispatch::settle(
            &Ended {
                terminal,
                attempts_used: item.attempts.saturating_sub(item.budget_from),
                retry_budget: item.retry_budget,
                run: self.run,
            },
            &self.backoff,
            jitter,
        );
        let (event, at) = match settlement {
            Settlement::Retry { after } => (
                ItemEvent::Settle(Settled::Retry),
                now.checked_add(after).unwrap_or(now),
            ),
            Settlement::Done(s) => (ItemEvent::Settle(Settled::Done(s)), now),
        };
        match self.apply_item(i, event, at, CANCEL_REASON) {
            ItemMove::To(_) => {
                self.end_if_idle();
                Some(settlement)
            }
            ItemMove::Stays => None,
        }
    }

    /// The live attempt of item `i` ended in `terminal` at `now`: settles it by core's
    /// retry rule (`jitter` in `[0, 1)`) and frees its place under the caps.
    pub fn ended(&mut self, i: usize, terminal: State, jitter: f64, now: Instant) -> Settlement {
        self.settle_item(i, terminal, jitter, now)
            .unwrap_or_else(|| panic!("item {i} ended while not live"))
    }

    /// Whether an item is ready or leased.
    fn has_work(&self) -> bool {
        self.items
            .iter()
            .any(|i| i.state.class().state.is_live_work())
    }

    /// Core's idle rule: a run with nothing ready or leased ends (running: finished;
    /// cancelling: cancelled).
    fn end_if_idle(&mut self) {
        if !self.has_work() {
            if let Ok(RunMove::To(to)) =
                machine::run_on(self.run, RunEvent::Idle { all_enqueued: true })
            {
                self.run = to;
            }
        }
    }

    /// Decides a run event over the run's state and work, and applies the move.
    fn decide_run(&mut self, event: RunEvent) -> RunDecision {
        let d = RunDecision {
            from: self.run,
            has_work: self.has_work(),
            decided: machine::run_on(self.run, event),
        };
        self.run = d.state_after();
        d
    }

    /// A cancel, as the coordinator applies it: the run is decided; when it cancels (or was
    /// cancelling), its ready items are cancelled and it ends when nothing is live.
    fn cancel_decided(&mut self) -> (RunDecision, Vec<usize>) {
        let d = self.decide_run(RunEvent::Cancel);
        let cancels = matches!(d.decided, Ok(RunMove::To(_))) || d.from == RunState::Cancelling;
        if !cancels {
            return (d, Vec::new());
        }
        let cancelled = self.cancel_items(ItemEvent::Cancel, CANCEL_REASON);
        (d, cancelled)
    }

    /// Cancels the run (Ctrl-C): it is `cancelling`; every ready item (never started, or
    /// waiting for a retry) is cancelled; live attempts are left to end (the caller stops
    /// them) and are not retried. An ended run stays as it is. Returns the items cancelled.
    pub fn cancel(&mut self) -> Vec<usize> {
        self.cancel_decided().1
    }

    /// The run's budget is spent: no item starts again; every ready item is cancelled with
    /// `reason` (`core::budget::BUDGET_REASON`), as the coordinator's budget stop does.
    /// Returns the items cancelled.
    pub fn cancel_ready(&mut self, reason: &'static str) -> Vec<usize> {
        self.cancel_items(ItemEvent::BudgetStop, reason)
    }

    /// Moves the items core's item machine cancels on `event` (the ready ones) to
    /// cancelled with `reason`, then applies the idle rule. Returns them.
    fn cancel_items(&mut self, event: ItemEvent, reason: &'static str) -> Vec<usize> {
        let now = self.now;
        let cancelled = (0..self.items.len())
            .filter(|&i| matches!(self.apply_item(i, event, now, reason), ItemMove::To(_)))
            .collect();
        self.end_if_idle();
        cancelled
    }

    /// The time to wait for before anything may start: how long until `until`, at most
    /// `tick` (a paused route resumes without any attempt ending).
    pub fn wait_for(until: Option<Instant>, now: Instant, tick: Duration) -> Duration {
        until.map_or(tick, |u| u.saturating_duration_since(now).min(tick))
    }
}

mod store;
pub use store::{Never, BUDGET_STOP_REASON};

#[cfg(test)]
mod tests;
