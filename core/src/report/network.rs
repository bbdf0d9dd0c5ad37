//! What reports count of a trial's networks and grading place (issue 45): verdicts graded in
//! the agent's environment (`grade.environment = "shared"`) against a clean room, trials
//! whose agent reached for hosts the task did not declare (and which hosts:
//! `core::egress::declared`), and attempts ended `infrastructure_error` by a grading fetch
//! that failed (`core::egress::vouch`). One definition ([`TrialNetwork::of_attempts`]) that
//! `run aggregate`, the sweep's results, `run report` and `run compare` apply; the
//! coordinator's status counts the same from its stored records.

use crate::egress::declared::undeclared_hosts;
use crate::egress::vouch::FETCH_FAILED_CAUSE;
use crate::lifecycle::State;
use crate::record::{AttemptRecord, Grade};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Where a verdict was graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GradedIn {
    /// In the environment the agent left (`environment_mode = "shared"`, Harbor's default).
    Shared,
    /// In a fresh grading sandbox with the agent's diff (akbench's clean room).
    CleanRoom,
}

impl GradedIn {
    /// Where `g` was graded (`grade.environment`).
    pub fn of_grade(g: &Grade) -> GradedIn {
        match g.environment.as_deref() {
            Some("shared") => GradedIn::Shared,
            _ => GradedIn::CleanRoom,
        }
    }
}

/// One trial's network facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialNetwork {
    /// Where its deciding grade (the last attempt's) was made; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graded_in: Option<GradedIn>,
    /// Distinct hosts its agent reached for, in any attempt, that the task did not declare.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undeclared_hosts: Vec<String>,
    /// Its attempts ended `infrastructure_error` by a grading fetch that failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fetch_failed_attempts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Whether an attempt ended `infrastructure_error` because a vouched grading fetch failed.
pub fn ended_by_fetch(a: &AttemptRecord) -> bool {
    a.state == State::InfrastructureError
        && a.cause
            .as_deref()
            .is_some_and(|c| c.starts_with(FETCH_FAILED_CAUSE))
}

impl TrialNetwork {
    /// The facts of a trial's record.
    pub fn of_record(r: &crate::record::RunRecord) -> TrialNetwork {
        TrialNetwork::of_attempts(&r.attempts)
    }

    /// The facts of a trial's attempts.
    pub fn of_attempts(attempts: &[AttemptRecord]) -> TrialNetwork {
        let graded_in = attempts
            .last()
            .and_then(|a| a.grade.as_ref())
            .map(GradedIn::of_grade);
        let mut hosts: BTreeSet<String> = BTreeSet::new();
        for a in attempts {
            if let Some(rt) = a.agent_process.as_ref().and_then(|p| p.runtime.as_ref()) {
                hosts.extend(undeclared_hosts(&rt.egress));
            }
        }
        TrialNetwork {
            graded_in,
            undeclared_hosts: hosts.into_iter().collect(),
            fetch_failed_attempts: u32::try_from(
                attempts.iter().filter(|a| ended_by_fetch(a)).count(),
            )
            .unwrap_or(u32::MAX),
        }
    }
}

/// Per-agent (or total) counts of [`TrialNetwork`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkCounts {
    /// Verdicts graded in the agent's environment.
    #[serde(default)]
    pub graded_shared: u64,
    /// Verdicts graded in a clean room.
    #[serde(default)]
    pub graded_clean_room: u64,
    /// Trials whose agent reached for a host the task did not declare.
    #[serde(default)]
    pub undeclared_trials: u64,
    /// Distinct such hosts over those trials.
    #[serde(default)]
    pub undeclared_hosts: u64,
    /// Attempts ended `infrastructure_error` by a grading fetch that failed.
    #[serde(default)]
    pub fetch_failed_attempts: u64,
}

/// Sums [`TrialNetwork`]s into [`NetworkCounts`] (distinct hosts over all trials).
#[derive(Debug, Clone, Default)]
pub struct NetworkAcc {
    counts: NetworkCounts,
    hosts: BTreeSet<String>,
}

impl NetworkAcc {
    /// Counts one trial.
    pub fn add(&mut self, t: &TrialNetwork) {
        let c = &mut self.counts;
        match t.graded_in {
            Some(GradedIn::Shared) => c.graded_shared += 1,
            Some(GradedIn::CleanRoom) => c.graded_clean_room += 1,
            None => {}
        }
        if !t.undeclared_hosts.is_empty() {
            c.undeclared_trials += 1;
            self.hosts.extend(t.undeclared_hosts.iter().cloned());
        }
        c.fetch_failed_attempts += u64::from(t.fetch_failed_attempts);
    }

    /// The counts.
    pub fn finish(mut self) -> NetworkCounts {
        self.counts.undeclared_hosts = self.hosts.len() as u64;
        self.counts
    }
}

impl NetworkCounts {
    /// One line for a text report: `graded shared 3, clean room 5; undeclared hosts: 2
    /// trial(s), 4 host(s); grading fetch failures: 1 attempt(s)`.
    pub fn describe(&self) -> String {
        format!(
            "graded in the agent's environment {}, clean room {}; agent reached undeclared hosts: {} trial(s), {} host(s); infrastructure by a grading fetch: {} attempt(s)",
            self.graded_shared,
            self.graded_clean_room,
            self.undeclared_trials,
            self.undeclared_hosts,
            self.fetch_failed_attempts
        )
    }
}

#[cfg(test)]
mod tests;
