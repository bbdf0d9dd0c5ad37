//! Counting a plan's summary one trial at a time.
//!
//! This module owns [`SummaryCounter`]: [`super::PlanSummary::of`] over a slice and the
//! streaming plan writer and submit paths over trials that are never all in memory give the
//! same [`super::PlanSummary`].

use super::{PlanSummary, PlannedTrial};
use std::collections::BTreeMap;

/// Counts trials into a [`PlanSummary`].
#[derive(Debug, Default, Clone)]
pub struct SummaryCounter {
    summary: PlanSummary,
}

fn bump(m: &mut BTreeMap<String, u64>, k: &str) {
    match m.get_mut(k) {
        Some(v) => *v += 1,
        None => {
            m.insert(k.to_string(), 1);
        }
    }
}

impl SummaryCounter {
    /// Counts one trial.
    pub fn add(&mut self, t: &PlannedTrial) {
        let s = &mut self.summary;
        s.trials += 1;
        bump(&mut s.by_task, &t.task.id);
        bump(&mut s.by_agent, &t.agent.label);
        *s.by_repetition.entry(t.repetition).or_insert(0) += 1;
        bump(&mut s.by_family, t.family.as_str());
        bump(&mut s.by_backend, t.compute.runtime.as_str());
        bump(&mut s.by_visibility, t.visibility.as_str());
    }

    /// The trials counted so far.
    pub fn trials(&self) -> u64 {
        self.summary.trials
    }

    /// The summary of the trials counted.
    pub fn finish(self) -> PlanSummary {
        let mut s = self.summary;
        if s.trials > 0 {
            s.by_lifecycle.insert(
                crate::lifecycle::State::Pending.as_str().to_string(),
                s.trials,
            );
        }
        s
    }
}
