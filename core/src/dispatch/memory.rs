//! `InMemoryDispatch`: the dispatch of `akbench sweep --local`: this module's policy
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

use crate::dispatch::machine::{self, ItemClass, ItemEvent, ItemMove, RunEvent, RunMove};
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
    agent: String,
    route: Option<String>,
    retry_budget: u32,
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
                agent: t.agent,
                route: t.route,
                retry_budget: t.retry_budget,
            })
            .collect();
        InMemoryDispatch {
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
        }
    }

    /// The run's state: a running run whose items are all done is finished, a cancelling
    /// one with nothing live is cancelled (core's idle rule over what is ready and live; the
    /// sweep ends when [`InMemoryDispatch::next`] says so).
    pub fn run_state(&self) -> RunState {
        let idle = self.live == 0
            && !self
                .items
                .iter()
                .any(|i| matches!(i.state, ItemState::Ready { .. }));
        if idle {
            self.run.when_idle(true).unwrap_or(self.run)
        } else {
            self.run
        }
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
                let item = &mut self.items[i];
                item.state = ItemState::Leased;
                item.attempts += 1;
                let number = item.attempts;
                let (agent, route) = (item.agent.clone(), item.route.clone());
                self.live += 1;
                *self.live_agent.entry(agent).or_default() += 1;
                if let Some(r) = route {
                    *self.live_route.entry(r).or_default() += 1;
                }
                Next::Lease { item: i, number }
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

    /// The live attempt of item `i` ended in `terminal` at `now`: settles it by core's
    /// retry rule (`jitter` in `[0, 1)`) and frees its place under the caps.
    pub fn ended(&mut self, i: usize, terminal: State, jitter: f64, now: Instant) -> Settlement {
        let item = &mut self.items[i];
        assert_eq!(
            item.state,
            ItemState::Leased,
            "item {i} ended while not live"
        );
        let settlement = dispatch::settle(
            &Ended {
                terminal,
                attempts_used: item.attempts,
                retry_budget: item.retry_budget,
                run: self.run,
            },
            &self.backoff,
            jitter,
        );
        item.state = match settlement {
            Settlement::Retry { after } => ItemState::Ready {
                not_before: now.checked_add(after).unwrap_or(now),
            },
            Settlement::Done(s) => ItemState::Done(s),
        };
        let (agent, route) = (item.agent.clone(), item.route.clone());
        self.live -= 1;
        if let Some(n) = self.live_agent.get_mut(&agent) {
            *n -= 1;
        }
        if let Some(n) = route.and_then(|r| self.live_route.get_mut(&r)) {
            *n -= 1;
        }
        settlement
    }

    /// Cancels the run (Ctrl-C): it is `cancelling`; every ready item (never started, or
    /// waiting for a retry) is cancelled; live attempts are left to end (the caller stops
    /// them) and are not retried. Returns the items cancelled.
    pub fn cancel(&mut self) -> Vec<usize> {
        // Core's run machine, as the coordinator decides a cancel: an ended run stays.
        self.run = self.run_state();
        match machine::run_on(self.run, RunEvent::Cancel) {
            Ok(RunMove::To(to)) => self.run = to,
            Ok(RunMove::Stays(_)) | Err(_) => {}
        }
        if self.run.is_ended() {
            return Vec::new();
        }
        self.cancel_items(ItemEvent::Cancel, CANCEL_REASON)
    }

    /// The run's budget is spent: no item starts again; every ready item is cancelled with
    /// `reason` (`core::budget::BUDGET_REASON`), as the coordinator's budget stop does.
    /// Returns the items cancelled.
    pub fn cancel_ready(&mut self, reason: &'static str) -> Vec<usize> {
        self.cancel_items(ItemEvent::BudgetStop, reason)
    }

    /// Moves the items core's item machine cancels on `event` (the ready ones) to
    /// cancelled with `reason`. Returns them.
    fn cancel_items(&mut self, event: ItemEvent, reason: &'static str) -> Vec<usize> {
        let mut cancelled = Vec::new();
        for (i, item) in self.items.iter_mut().enumerate() {
            let class = ItemClass {
                state: match item.state {
                    ItemState::Ready { .. } => machine::ItemState::Ready,
                    ItemState::Leased => machine::ItemState::Leased,
                    ItemState::Done(_) => machine::ItemState::Done,
                    ItemState::Cancelled(_) => machine::ItemState::Cancelled,
                },
                outcome: match item.state {
                    ItemState::Done(s) => Some(s),
                    ItemState::Cancelled(_) => Some(State::Cancelled),
                    _ => None,
                },
            };
            if let ItemMove::To(to) = machine::item_on(class, event) {
                if to.state == machine::ItemState::Cancelled {
                    item.state = ItemState::Cancelled(reason);
                    cancelled.push(i);
                }
            }
        }
        cancelled
    }

    /// The time to wait for before anything may start: how long until `until`, at most
    /// `tick` (a paused route resumes without any attempt ending).
    pub fn wait_for(until: Option<Instant>, now: Instant, tick: Duration) -> Duration {
        until.map_or(tick, |u| u.saturating_duration_since(now).min(tick))
    }
}

#[cfg(test)]
mod tests;
