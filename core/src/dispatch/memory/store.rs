//! [`DispatchStore`] over [`InMemoryDispatch`]: its one run (the handle is `()`), each event
//! decided by core's machine and applied as the sweep's own calls apply it, at the latest
//! instant the sweep gave. The futures are ready at once.

use super::{InMemoryDispatch, Item, ItemState, CANCEL_REASON};
use crate::dispatch::machine::{self, ItemClass, ItemEvent, ItemMove, RunEvent};
use crate::dispatch::store::{DispatchStore, ItemAsk, RunAsk, RunDecision, StoreSetup};
use crate::dispatch::RunState;
use crate::lifecycle::State;

/// The draw of the backoff jitter for an attempt ended through the trait (the delay is not
/// what the trait's callers read).
const JITTER: f64 = 0.5;

/// The reason a budget stop through the trait cancels with: `crate::budget::BUDGET_REASON`
/// (named here, not imported: `budget` sits above `dispatch`; `budget`'s tests hold the two
/// equal).
pub const BUDGET_STOP_REASON: &str = "budget";

/// The memory store cannot fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the memory store cannot fail")]
pub enum Never {}

impl DispatchStore for InMemoryDispatch {
    type Run = ();
    type Error = Never;

    async fn run_event(&mut self, _: &(), ask: &RunAsk) -> Result<Option<RunDecision>, Never> {
        Ok(match ask {
            RunAsk::Start => Some(self.decide_run(RunEvent::Start)),
            RunAsk::Cancel => Some(self.cancel_decided().0),
            RunAsk::Idle => {
                self.end_if_idle();
                None
            }
            RunAsk::Resume => {
                let now = self.now;
                for i in 0..self.items.len() {
                    self.apply_item(i, ItemEvent::Resume, now, CANCEL_REASON);
                }
                let has_work = self.has_work();
                Some(self.decide_run(RunEvent::Resume { has_work }))
            }
            RunAsk::Grade { owed } => {
                let d = self.decide_run(RunEvent::Grade {
                    has_work: !owed.is_empty(),
                });
                if d.decided.is_ok() {
                    let now = self.now;
                    for &i in owed {
                        self.apply_item(i, ItemEvent::GradeRequeue, now, CANCEL_REASON);
                    }
                }
                Some(d)
            }
        })
    }

    async fn item_event(&mut self, _: &(), item: usize, ask: ItemAsk) -> Result<ItemMove, Never> {
        let now = self.now;
        let class = self.items[item].state.class();
        Ok(match ask {
            ItemAsk::Claim => self.apply_item(item, ItemEvent::Claim, now, CANCEL_REASON),
            ItemAsk::Ended(terminal) => match self.settle_item(item, terminal, JITTER, now) {
                Some(_) => ItemMove::To(self.items[item].state.class()),
                None => ItemMove::Stays,
            },
            ItemAsk::Revoke => {
                // Every leased item of the run (none of its attempts is known to have started).
                let decided = machine::item_on(class, ItemEvent::Revoke);
                for i in 0..self.items.len() {
                    self.apply_item(i, ItemEvent::Revoke, now, CANCEL_REASON);
                }
                decided
            }
            ItemAsk::Cancel | ItemAsk::BudgetStop => {
                let (event, reason) = match ask {
                    ItemAsk::Cancel => (ItemEvent::Cancel, CANCEL_REASON),
                    _ => (ItemEvent::BudgetStop, BUDGET_STOP_REASON),
                };
                let decided = machine::item_on(class, event);
                self.cancel_items(event, reason);
                decided
            }
            ItemAsk::Resume => {
                let decided = machine::item_on(class, ItemEvent::Resume);
                for i in 0..self.items.len() {
                    self.apply_item(i, ItemEvent::Resume, now, CANCEL_REASON);
                }
                decided
            }
            ItemAsk::GradeRequeue => {
                self.apply_item(item, ItemEvent::GradeRequeue, now, CANCEL_REASON)
            }
        })
    }

    async fn run_state(&mut self, _: &()) -> Result<RunState, Never> {
        Ok(self.run)
    }

    async fn item_class(&mut self, _: &(), item: usize) -> Result<Option<ItemClass>, Never> {
        Ok(self.items.get(item).map(|i| i.state.class()))
    }
}

impl StoreSetup for InMemoryDispatch {
    /// Replaces the dispatch's run and items (agent `a`, no route); a leased item has made
    /// one attempt.
    async fn put(
        &mut self,
        state: RunState,
        items: &[ItemClass],
        retry_budget: u32,
    ) -> Result<(), Never> {
        let now = self.now;
        self.run = state;
        self.live = 0;
        self.live_agent.clear();
        self.live_route.clear();
        self.items = Vec::new();
        for (i, c) in items.iter().enumerate() {
            let st = match (c.state, c.outcome) {
                (machine::ItemState::Ready, _) => ItemState::Ready { not_before: now },
                (machine::ItemState::Leased, _) => ItemState::Leased,
                (machine::ItemState::Done, s) => ItemState::Done(s.unwrap_or(State::Completed)),
                (machine::ItemState::Cancelled, _) => ItemState::Cancelled(CANCEL_REASON),
            };
            let attempts = u32::from(st != ItemState::Ready { not_before: now });
            self.items.push(Item {
                state: st,
                attempts,
                budget_from: 0,
                agent: "a".to_string(),
                route: None,
                retry_budget,
            });
            if st == ItemState::Leased {
                self.count_live(i, 1);
            }
        }
        Ok(())
    }
}
