//! Provider route pauses for `akbench sweep --local`: the same policy as the coordinator's
//! (`akbench_core::route_pause`), kept in memory. An attempt that ends with a provider
//! failure pauses its route; no trial of a paused route starts and no retry of one begins
//! until the pause is over; an attempt that ran against the provider resumes the route.

use akbench_core::lifecycle::State;
use akbench_core::record::{Identity, Transition};
use akbench_core::route_pause::{self, RoutePolicy, RouteState};
use akbench_worker::orchestrator::Observer;
use akbench_worker::process::CancelToken;
use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How often a wait re-checks the cancel token.
const TICK: Duration = Duration::from_millis(250);

/// The routes of one local sweep.
#[derive(Debug, Default)]
pub struct LocalRoutes {
    policy: RoutePolicy,
    state: Mutex<BTreeMap<String, RouteState>>,
    changed: Condvar,
}

impl LocalRoutes {
    /// True when `route` gets no new work now.
    pub fn paused(&self, route: &str) -> bool {
        let now = chrono::Utc::now();
        self.state
            .lock()
            .expect("routes lock")
            .get(route)
            .is_some_and(|s| s.paused_at(now))
    }

    /// An attempt on `route` ended in `terminal` with `cause`.
    pub fn note(&self, route: &str, terminal: State, cause: &str) {
        let outcome = route_pause::outcome_of(terminal, cause);
        let mut st = self.state.lock().expect("routes lock");
        let s = st.entry(route.to_string()).or_default();
        *s = route_pause::next(s, &outcome, chrono::Utc::now(), &self.policy);
        self.changed.notify_all();
    }

    /// Blocks while `route` is paused, or until `cancel` is set.
    pub fn wait_unpaused(&self, route: &str, cancel: &CancelToken) {
        let mut st = self.state.lock().expect("routes lock");
        while !cancel.is_cancelled()
            && st
                .get(route)
                .is_some_and(|s| s.paused_at(chrono::Utc::now()))
        {
            st = self.changed.wait_timeout(st, TICK).expect("routes lock").0;
        }
    }

    /// The paused routes with their state (the tests' view).
    #[cfg(test)]
    pub fn snapshot(&self) -> BTreeMap<String, RouteState> {
        self.state.lock().expect("routes lock").clone()
    }
}

/// Feeds one trial's attempts to its route and holds its retries while the route is paused.
#[derive(Debug)]
pub struct RouteObserver<'a> {
    /// The sweep's routes.
    pub routes: &'a LocalRoutes,
    /// The trial's route, when its agent has one.
    pub route: Option<&'a str>,
}

impl Observer for RouteObserver<'_> {
    fn transition(&self, _attempt: &Identity, _number: u32, t: &Transition) {
        if let Some(route) = self.route {
            if t.state.is_terminal() {
                self.routes
                    .note(route, t.state, t.note.as_deref().unwrap_or(""));
            }
        }
    }

    fn before_retry(&self, _number: u32, cancel: &CancelToken) {
        if let Some(route) = self.route {
            self.routes.wait_unpaused(route, cancel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_failure_pauses_and_a_run_resumes() {
        let r = LocalRoutes::default();
        assert!(!r.paused("a"));
        r.note("a", State::InfrastructureError, "provider: unreachable");
        assert!(r.paused("a"));
        assert!(!r.paused("b"));
        assert_eq!(r.snapshot()["a"].consecutive_failures, 1);
        // A cancelled wait returns at once.
        let cancel = CancelToken::new();
        cancel.cancel();
        r.wait_unpaused("a", &cancel);
        r.note("a", State::Completed, "");
        assert!(!r.paused("a"));
        r.wait_unpaused("a", &CancelToken::new());
    }
}
