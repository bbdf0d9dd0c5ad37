use super::*;
use crate::clock::ManualClock;
use crate::manifest::Concurrency;
use crate::plan::plan;
use crate::plan::PlannedTrial;
use crate::testkit::synthetic_condition;
use chrono::TimeZone;

/// `tasks` x `agents` trials, each with `retries` infrastructure retries.
fn trials(tasks: usize, agents: usize, retries: u32) -> Vec<PlannedTrial> {
    let clock = ManualClock::new(chrono::Utc.with_ymd_and_hms(2026, 3, 4, 0, 0, 0).unwrap());
    let mut c = synthetic_condition(tasks, agents, 1);
    c.execution.infrastructure_retries = retries;
    let spec = crate::spec::ResolvedRunSpec::assemble(c, Default::default(), &clock);
    plan(&spec, &clock).trials
}

/// A dispatch over planned trials, as `sweep --local` makes it.
fn new_dispatch(
    trials: &[PlannedTrial],
    route_of: &BTreeMap<String, String>,
    caps: &Concurrency,
    slots: usize,
    backoff: Backoff,
    now: Instant,
) -> InMemoryDispatch {
    let items = trials
        .iter()
        .map(|t| NewItem {
            agent: t.agent.label.clone(),
            route: route_of.get(&t.agent.label).cloned(),
            retry_budget: t.attempt.infrastructure_retries,
        })
        .collect();
    InMemoryDispatch::new(items, &caps.caps(), slots, backoff, now)
}

fn backoff() -> Backoff {
    Backoff {
        base: Duration::from_secs(2),
        cap: Duration::from_secs(60),
    }
}

/// [`new_dispatch`] with no routes and no caps.
fn plain_dispatch(
    trials: &[PlannedTrial],
    slots: usize,
    backoff: Backoff,
    now: Instant,
) -> InMemoryDispatch {
    new_dispatch(
        trials,
        &BTreeMap::new(),
        &Concurrency::default(),
        slots,
        backoff,
        now,
    )
}

const NOT_PAUSED: &dyn Fn(&str) -> bool = &|_| false;

#[test]
fn items_lease_in_plan_order_within_the_slots_and_finish_the_run() {
    let t = trials(3, 1, 0);
    let now = Instant::now();
    let mut d = plain_dispatch(&t, 2, backoff(), now);
    assert_eq!(d.next(now, NOT_PAUSED), Next::Lease { item: 0, number: 1 });
    assert_eq!(d.next(now, NOT_PAUSED), Next::Lease { item: 1, number: 1 });
    // Two slots: the third waits for an attempt to end.
    assert_eq!(d.next(now, NOT_PAUSED), Next::Wait(None));
    assert_eq!(
        d.ended(0, State::Completed, 0.5, now),
        Settlement::Done(State::Completed)
    );
    assert_eq!(d.next(now, NOT_PAUSED), Next::Lease { item: 2, number: 1 });
    // Nothing ready, two live (either may end in a retry): the slot waits.
    assert_eq!(d.next(now, NOT_PAUSED), Next::Wait(None));
    assert_eq!(d.run_state(), RunState::Running);
    d.ended(1, State::Failed, 0.5, now);
    d.ended(2, State::Timeout, 0.5, now);
    assert_eq!(d.next(now, NOT_PAUSED), Next::Stop);
    assert_eq!(d.run_state(), RunState::Finished);
    assert_eq!(d.item(1), ItemState::Done(State::Failed));
}

#[test]
fn infrastructure_errors_retry_after_the_backoff_within_budget_only() {
    let t = trials(1, 1, 2);
    let now = Instant::now();
    let mut d = plain_dispatch(&t, 4, backoff(), now);
    assert_eq!(d.next(now, NOT_PAUSED), Next::Lease { item: 0, number: 1 });
    // Retry 1: 2 s nominal, jitter 0.5 -> 1.5 s.
    assert_eq!(
        d.ended(0, State::InfrastructureError, 0.5, now),
        Settlement::Retry {
            after: Duration::from_millis(1500)
        }
    );
    let due = now + Duration::from_millis(1500);
    assert_eq!(d.next(now, NOT_PAUSED), Next::Wait(Some(due)));
    assert_eq!(d.next(due, NOT_PAUSED), Next::Lease { item: 0, number: 2 });
    // Retry 2: 4 s nominal, jitter 0 -> 2 s.
    assert_eq!(
        d.ended(0, State::InfrastructureError, 0.0, due),
        Settlement::Retry {
            after: Duration::from_secs(2)
        }
    );
    let due = due + Duration::from_secs(2);
    assert_eq!(d.next(due, NOT_PAUSED), Next::Lease { item: 0, number: 3 });
    // The budget (2 retries) is spent: the third infrastructure error is the outcome.
    assert_eq!(
        d.ended(0, State::InfrastructureError, 0.0, due),
        Settlement::Done(State::InfrastructureError)
    );
    assert_eq!(d.attempts(0), 3);
    assert_eq!(d.run_state(), RunState::Finished);
}

#[test]
fn an_attempt_interrupted_while_the_run_is_not_cancelled_is_an_infrastructure_error() {
    let t = trials(1, 1, 0);
    let now = Instant::now();
    let mut d = plain_dispatch(&t, 1, backoff(), now);
    d.next(now, NOT_PAUSED);
    assert_eq!(
        d.ended(0, State::Cancelled, 0.0, now),
        Settlement::Done(State::InfrastructureError)
    );
}

#[test]
fn a_cancel_cancels_ready_items_and_live_ones_end_cancelled_never_retried() {
    let t = trials(4, 1, 3);
    let now = Instant::now();
    let mut d = plain_dispatch(&t, 2, backoff(), now);
    d.next(now, NOT_PAUSED);
    d.next(now, NOT_PAUSED);
    assert_eq!(d.cancel(), vec![2, 3]);
    assert_eq!(d.item(3), ItemState::Cancelled(CANCEL_REASON));
    assert_eq!(d.run_state(), RunState::Cancelling);
    assert_eq!(d.next(now, NOT_PAUSED), Next::Stop);
    assert_eq!(
        d.ended(0, State::Cancelled, 0.0, now),
        Settlement::Done(State::Cancelled)
    );
    // An infrastructure error while cancelling is not retried.
    assert_eq!(
        d.ended(1, State::InfrastructureError, 0.0, now),
        Settlement::Done(State::InfrastructureError)
    );
    assert_eq!(d.run_state(), RunState::Cancelled);
}

#[test]
fn per_agent_and_route_caps_and_paused_routes_hold_items_back() {
    // Agents agent-00 (route r) and agent-01 (no route); plan order interleaves them.
    let t = trials(3, 2, 0);
    let agent = |i: usize| t[i].agent.label.clone();
    let routes = BTreeMap::from([("agent-00".to_string(), "r".to_string())]);
    let caps = Concurrency {
        per_agent: BTreeMap::from([("agent-01".to_string(), 1)]),
        per_provider_route: BTreeMap::from([("r".to_string(), 1)]),
        ..Concurrency::default()
    };
    let now = Instant::now();
    let mut d = new_dispatch(&t, &routes, &caps, 8, backoff(), now);
    let mut leased = Vec::new();
    while let Next::Lease { item, .. } = d.next(now, NOT_PAUSED) {
        leased.push(agent(item));
    }
    // One per agent: agent-00 by its route's cap, agent-01 by its own.
    leased.sort();
    assert_eq!(leased, ["agent-00", "agent-01"]);
    // A paused route starts nothing even with room under its cap.
    let mut d = new_dispatch(&t, &routes, &Concurrency::default(), 8, backoff(), now);
    let paused: &dyn Fn(&str) -> bool = &|r| r == "r";
    let mut leased = Vec::new();
    while let Next::Lease { item, .. } = d.next(now, paused) {
        leased.push(agent(item));
    }
    assert_eq!(leased, ["agent-01"; 3]);
    assert_eq!(d.next(now, paused), Next::Wait(None));
}

#[test]
fn a_spent_budget_cancels_what_did_not_start() {
    let t = trials(3, 1, 0);
    let now = Instant::now();
    let mut d = plain_dispatch(&t, 1, backoff(), now);
    d.next(now, NOT_PAUSED);
    assert_eq!(d.cancel_ready("budget"), vec![1, 2]);
    assert_eq!(d.next(now, NOT_PAUSED), Next::Wait(None));
    d.ended(0, State::Completed, 0.0, now);
    assert_eq!(d.next(now, NOT_PAUSED), Next::Stop);
    assert_eq!(d.run_state(), RunState::Finished);
    assert_eq!(d.item(2), ItemState::Cancelled("budget"));
}

#[test]
fn waits_are_bounded_by_the_tick() {
    let now = Instant::now();
    let tick = Duration::from_millis(250);
    assert_eq!(InMemoryDispatch::wait_for(None, now, tick), tick);
    assert_eq!(
        InMemoryDispatch::wait_for(Some(now + Duration::from_millis(10)), now, tick),
        Duration::from_millis(10)
    );
    assert_eq!(
        InMemoryDispatch::wait_for(Some(now), now, tick),
        Duration::ZERO
    );
}

/// Core's machine (`dispatch::machine`) holds for the memory store too: each move the local
/// dispatch makes is the one `item_on` / `run_on` decides.
#[test]
fn the_machine_table_holds_in_memory() {
    use crate::dispatch::machine::{item_on, run_on, ItemClass, ItemEvent, ItemMove};
    use crate::dispatch::machine::{ItemState as M, RunEvent, RunMove, Settled};
    let class = |s: ItemState| ItemClass {
        state: match s {
            ItemState::Ready { .. } => M::Ready,
            ItemState::Leased => M::Leased,
            ItemState::Done(_) => M::Done,
            ItemState::Cancelled(_) => M::Cancelled,
        },
        outcome: match s {
            ItemState::Done(o) => Some(o),
            ItemState::Cancelled(_) => Some(State::Cancelled),
            _ => None,
        },
    };
    let moved = |before: ItemState, after: ItemState, event| {
        let want = item_on(class(before), event);
        let got = if class(before) == class(after) {
            ItemMove::Stays
        } else {
            ItemMove::To(class(after))
        };
        assert_eq!(got, want, "{before:?} -> {after:?} on {event:?}");
    };
    let now = Instant::now();
    // Items 0..4: a claim, a retry, a done, then a cancel over ready, leased and done items.
    let t = trials(5, 1, 1);
    let mut d = plain_dispatch(&t, 3, Backoff::NONE, now);
    for i in 0..3 {
        let before = d.item(i);
        assert!(matches!(d.next(now, NOT_PAUSED), Next::Lease { .. }));
        moved(before, d.item(i), ItemEvent::Claim);
    }
    let before = d.item(0);
    d.ended(0, State::InfrastructureError, 0.5, now);
    moved(before, d.item(0), ItemEvent::Settle(Settled::Retry));
    let before = d.item(1);
    d.ended(1, State::Failed, 0.5, now);
    moved(
        before,
        d.item(1),
        ItemEvent::Settle(Settled::Done(State::Failed)),
    );
    let before: Vec<ItemState> = (0..5).map(|i| d.item(i)).collect();
    assert_eq!(
        run_on(d.run_state(), RunEvent::Cancel),
        Ok(RunMove::To(RunState::Cancelling))
    );
    d.cancel();
    for (i, b) in before.into_iter().enumerate() {
        moved(b, d.item(i), ItemEvent::Cancel);
    }
    assert_eq!(d.run_state(), RunState::Cancelling, "item 2 is still live");
    d.ended(2, State::Cancelled, 0.5, now);
    assert_eq!(d.run_state(), RunState::Cancelled, "the idle rule ends it");
    // A budget stop over ready items.
    let mut d = plain_dispatch(&t, 1, Backoff::NONE, now);
    let before: Vec<ItemState> = (0..5).map(|i| d.item(i)).collect();
    d.cancel_ready("budget");
    for (i, b) in before.into_iter().enumerate() {
        moved(b, d.item(i), ItemEvent::BudgetStop);
    }
    // A finished run meets a cancel and stays finished (issue 48), as run_on says.
    let t = trials(1, 1, 0);
    let mut d = plain_dispatch(&t, 1, Backoff::NONE, now);
    assert!(matches!(d.next(now, NOT_PAUSED), Next::Lease { .. }));
    d.ended(0, State::Completed, 0.5, now);
    assert_eq!(d.run_state(), RunState::Finished);
    assert!(matches!(
        run_on(RunState::Finished, RunEvent::Cancel),
        Ok(RunMove::Stays(_))
    ));
    assert!(d.cancel().is_empty());
    assert_eq!(d.run_state(), RunState::Finished);
}

/// Polls a future of the memory store, which is ready at once.
fn ready_now<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the memory store never waits"),
    }
}

#[test]
fn the_table_of_runs_and_items_holds_on_the_memory_store() {
    use crate::dispatch::store::conformance;
    let now = Instant::now();
    let mut d = InMemoryDispatch::new(Vec::new(), &RunCaps::default(), 4, backoff(), now);
    let walked = ready_now(conformance::walk(&mut d)).unwrap_or_else(|e| match e {});
    assert!(
        walked.failures.is_empty(),
        "{} failures:\n{}",
        walked.failures.len(),
        walked.failures.join("\n")
    );
    assert_eq!((walked.run_cases, walked.item_cases), (153, 110));
}
