//! Provider routes: consecutive provider failures on a route pause new work for it, with a
//! growing backoff, instead of burning the queue through a dead endpoint (DESIGN.md section
//! 6). Failures that overlap in time (reported while the route is paused) are one outage.
//! An operator lifts a pause by hand with [`lifted`]. Pure: the coordinator persists [`RouteState`] in `route_pauses` and the local sweep
//! keeps it in memory; both call [`next`] when an attempt on a route ends and check
//! [`RouteState::paused_at`] before starting one.

use crate::lifecycle::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The prefix of the cause of an attempt that ended because its model provider failed
/// (written by the worker's orchestrator).
pub const PROVIDER_CAUSE_PREFIX: &str = "provider: ";

/// When and how long a route is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutePolicy {
    /// Consecutive provider failures before the route is paused.
    pub threshold: u32,
    /// The first pause.
    pub base: Duration,
    /// The longest pause (each further failure doubles it up to this).
    pub max: Duration,
}

impl Default for RoutePolicy {
    fn default() -> Self {
        RoutePolicy {
            threshold: 1,
            base: Duration::from_secs(15),
            max: Duration::from_secs(300),
        }
    }
}

impl RoutePolicy {
    /// The pause after `failures` consecutive failures: none below the threshold, then
    /// `base`, `2 base`, `4 base`, ... up to `max`.
    pub fn pause_for(&self, failures: u32) -> Option<Duration> {
        if failures < self.threshold.max(1) {
            return None;
        }
        let doublings = (failures - self.threshold.max(1)).min(30);
        Some(self.base.saturating_mul(1u32 << doublings).min(self.max))
    }
}

/// What an ended attempt says about its route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteOutcome {
    /// The provider failed (outage, 5xx, 429): the cause, for status.
    Failed(String),
    /// The agent ran against the provider (any verdict of the agent's own).
    Worked,
    /// Says nothing about the provider (cancelled, another infrastructure error, a
    /// configuration rejected before the agent ran).
    Silent,
}

/// Reads an attempt's terminal state and cause.
pub fn outcome_of(terminal: State, cause: &str) -> RouteOutcome {
    match terminal {
        State::InfrastructureError if cause.starts_with(PROVIDER_CAUSE_PREFIX) => {
            RouteOutcome::Failed(cause.to_string())
        }
        State::Completed | State::NotGraded | State::Failed | State::Timeout => {
            RouteOutcome::Worked
        }
        _ => RouteOutcome::Silent,
    }
}

/// A route's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteState {
    /// Provider failures in a row.
    pub consecutive_failures: u32,
    /// No new work for the route before this instant.
    pub paused_until: Option<DateTime<Utc>>,
    /// The last failure's cause.
    pub last_error: Option<String>,
}

impl RouteState {
    /// True when no new work may start on the route at `now`.
    pub fn paused_at(&self, now: DateTime<Utc>) -> bool {
        self.paused_until.is_some_and(|t| t > now)
    }
}

/// The route's state after an attempt on it ended at `now`.
pub fn next(
    state: &RouteState,
    outcome: &RouteOutcome,
    now: DateTime<Utc>,
    policy: &RoutePolicy,
) -> RouteState {
    match outcome {
        RouteOutcome::Silent => state.clone(),
        RouteOutcome::Worked => RouteState {
            consecutive_failures: 0,
            paused_until: None,
            last_error: state.last_error.clone(),
        },
        // Failures that overlap in time are one outage (issue 48: five attempts failing
        // within 3 s of one 25 s outage pushed the pause to 240 s): a failure reported while
        // the route is paused came from an attempt started before the pause, so it neither
        // counts again nor lengthens the pause. The first failure after the pause (the
        // attempt that probed the provider again) does.
        RouteOutcome::Failed(cause) if state.paused_at(now) => RouteState {
            last_error: Some(cause.clone()),
            ..state.clone()
        },
        RouteOutcome::Failed(cause) => {
            let failures = state.consecutive_failures.saturating_add(1);
            let pause = policy.pause_for(failures).and_then(|d| {
                chrono::Duration::from_std(d)
                    .ok()
                    .and_then(|d| now.checked_add_signed(d))
            });
            RouteState {
                consecutive_failures: failures,
                // Never shortens a pause already running.
                paused_until: pause.max(state.paused_until),
                last_error: Some(cause.clone()),
            }
        }
    }
}

/// What lifting a route's pause by hand found: the state before, and whether it was paused
/// at the scheduler's instant ([`RouteState::paused_at`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lift {
    /// The route's state before the pause was lifted.
    pub before: RouteState,
    /// Whether the route was paused then.
    pub was_paused: bool,
}

/// The route's state after an operator lifted its pause by hand (`akbench run routes
/// resume`): not paused, its failures forgotten (the next failure pauses from the policy's
/// first step), its last error kept for status.
pub fn lifted(state: &RouteState) -> RouteState {
    RouteState {
        consecutive_failures: 0,
        paused_until: None,
        last_error: state.last_error.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn pause_grows_and_is_capped() {
        let p = RoutePolicy {
            threshold: 2,
            base: Duration::from_secs(10),
            max: Duration::from_secs(60),
        };
        let secs: Vec<Option<u64>> = (0..7)
            .map(|n| p.pause_for(n).map(|d| d.as_secs()))
            .collect();
        assert_eq!(
            secs,
            [None, None, Some(10), Some(20), Some(40), Some(60), Some(60)]
        );
        assert_eq!(p.pause_for(u32::MAX), Some(Duration::from_secs(60)));
    }

    #[test]
    fn outcomes_of_terminal_states() {
        let cases = [
            (
                State::InfrastructureError,
                "provider: rate limited (HTTP 429) ...",
                true,
            ),
            (
                State::InfrastructureError,
                "failed to create the worktree",
                false,
            ),
            (
                State::InvalidConfiguration,
                "provider: the model provider refused",
                false,
            ),
            (State::Cancelled, "cancelled", false),
        ];
        for (s, cause, failed) in cases {
            assert_eq!(
                matches!(outcome_of(s, cause), RouteOutcome::Failed(_)),
                failed,
                "{s} {cause}"
            );
        }
        assert_eq!(outcome_of(State::Completed, ""), RouteOutcome::Worked);
        assert_eq!(outcome_of(State::Timeout, "x"), RouteOutcome::Worked);
        assert_eq!(outcome_of(State::Cancelled, "x"), RouteOutcome::Silent);
    }

    #[test]
    fn failures_pause_a_success_resumes() {
        let p = RoutePolicy::default();
        let fail = RouteOutcome::Failed("provider: down".into());
        let s1 = next(&RouteState::default(), &fail, at(0), &p);
        assert_eq!(s1.consecutive_failures, 1);
        assert_eq!(s1.paused_until, Some(at(15)));
        assert!(s1.paused_at(at(14)) && !s1.paused_at(at(15)));
        // The first failure after the pause ended doubles it.
        let s2 = next(
            &s1,
            &RouteOutcome::Failed("provider: 503".into()),
            at(16),
            &p,
        );
        assert_eq!(s2.consecutive_failures, 2);
        assert_eq!(
            s2.paused_until,
            Some(at(46)),
            "doubled from the second outage"
        );
        assert_eq!(s2.last_error.as_deref(), Some("provider: 503"));
        let silent = next(&s2, &RouteOutcome::Silent, at(17), &p);
        assert_eq!(silent, s2);
        let ok = next(&s2, &RouteOutcome::Worked, at(17), &p);
        assert_eq!(ok.consecutive_failures, 0);
        assert!(!ok.paused_at(at(17)));
    }

    /// Issue 48's case: one 25 s outage seen by five concurrent attempts failing within 3 s
    /// is one failure; the pause stays 15 s (it was 15 -> 30 -> 60 -> 120 -> 240 s).
    #[test]
    fn failures_that_overlap_in_time_are_one_outage() {
        let p = RoutePolicy::default();
        let mut s = RouteState::default();
        for (i, t) in [0, 1, 1, 2, 3].into_iter().enumerate() {
            s = next(
                &s,
                &RouteOutcome::Failed(format!("provider: down {i}")),
                at(t),
                &p,
            );
        }
        assert_eq!(s.consecutive_failures, 1);
        assert_eq!(s.paused_until, Some(at(15)));
        assert_eq!(
            s.last_error.as_deref(),
            Some("provider: down 4"),
            "the latest cause"
        );
        // With a threshold, failures before the first pause each count.
        let p3 = RoutePolicy { threshold: 3, ..p };
        let mut s = RouteState::default();
        let table = [
            (0, 1, None),
            (1, 2, None),
            (2, 3, Some(17)),
            (3, 3, Some(17)),
        ];
        for (t, failures, until) in table {
            s = next(&s, &RouteOutcome::Failed("provider: x".into()), at(t), &p3);
            assert_eq!(s.consecutive_failures, failures, "at {t}");
            assert_eq!(s.paused_until, until.map(at), "at {t}");
        }
    }

    #[test]
    fn lifting_a_pause_clears_it_and_its_count_and_keeps_the_last_error() {
        let p = RoutePolicy::default();
        let fail = RouteOutcome::Failed("provider: down".into());
        let s = next(&RouteState::default(), &fail, at(0), &p);
        let l = lifted(&s);
        assert!(!l.paused_at(at(1)));
        assert_eq!(l.consecutive_failures, 0);
        assert_eq!(l.last_error.as_deref(), Some("provider: down"));
        // The next failure pauses from the start of the policy again.
        assert_eq!(next(&l, &fail, at(2), &p).paused_until, Some(at(17)));
    }
}
