//! Tokens and cost: what a trial spent (summed over all its attempts: a retried attempt's
//! tokens were paid for too) and what a group of trials spent. A count no attempt reported
//! stays `None` ("not reported", rendered `n/a`), never 0; a sum over trials of which only
//! some reported a value is the sum of the reported ones, and `trials_without_cost` says how
//! many did not report a cost.
//!
//! The two definitions every surface uses (`run aggregate`, the report, the viewer, `sweep`):
//! - [`is_without_cost`]: a trial that made at least one attempt and whose attempts reported
//!   no cost. A trial that never started (cancelled before its first attempt, e.g. by a spent
//!   budget: `attempts: 0`) spent nothing and is not "without cost"; `run status` counts the
//!   same (trials with a record that reported no cost).
//! - [`cost_per_solved`]: over the trials that reported a cost, their summed cost divided by
//!   how many of them were solved (what was spent, failures included, per solved trial). A
//!   trial with an unknown cost is in neither: before, the known cost was divided by every
//!   solved trial, those of unknown cost too.

use crate::observe::Observations;
use crate::record::RunRecord;
use serde::{Deserialize, Serialize};

/// Tokens and cost of one trial or of a group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Uncached input tokens.
    pub input_tokens: Option<u64>,
    /// Input tokens served from cache.
    pub cached_input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Cost in US dollars, as the agents reported it.
    pub cost_usd: Option<f64>,
}

fn add_u64(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0).saturating_add(y.unwrap_or(0))),
    }
}

fn add_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
    }
}

impl Spend {
    /// The spend one attempt's observations report.
    pub fn of_observations(o: &Observations) -> Spend {
        Spend {
            input_tokens: o.input_tokens,
            cached_input_tokens: o.cached_input_tokens,
            output_tokens: o.output_tokens,
            cost_usd: o.cost_usd,
        }
    }

    /// A trial's spend: the sum over all its attempts.
    pub fn of_record(r: &RunRecord) -> Spend {
        r.attempts.iter().fold(Spend::default(), |acc, a| {
            acc.plus(&Spend::of_observations(&a.observations))
        })
    }

    /// The sum of two spends (absent only where both are absent).
    pub fn plus(&self, other: &Spend) -> Spend {
        Spend {
            input_tokens: add_u64(self.input_tokens, other.input_tokens),
            cached_input_tokens: add_u64(self.cached_input_tokens, other.cached_input_tokens),
            output_tokens: add_u64(self.output_tokens, other.output_tokens),
            cost_usd: add_f64(self.cost_usd, other.cost_usd),
        }
    }
}

/// True when a trial counts as "without cost": it made at least one attempt (`attempts`)
/// and none of them reported a cost. A trial that never started spent nothing.
pub fn is_without_cost(attempts: u32, trial: &Spend) -> bool {
    attempts > 0 && trial.cost_usd.is_none()
}

/// The cost per solved trial: `known_cost_usd` (the summed cost of the trials that reported
/// one) / `solved_with_cost` (how many of those were solved); `None` when no cost was
/// reported or none of those trials was solved.
pub fn cost_per_solved(known_cost_usd: Option<f64>, solved_with_cost: u64) -> Option<f64> {
    known_cost_usd
        .filter(|_| solved_with_cost > 0)
        .map(|c| c / solved_with_cost as f64)
}

/// What a group of trials spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendTotals {
    /// The sum over the group's trials.
    #[serde(flatten)]
    pub spend: Spend,
    /// Trials without cost ([`is_without_cost`]; not counted in `cost_usd`).
    pub trials_without_cost: u64,
    /// [`cost_per_solved`]; `None` when no solved trial reported a cost.
    pub cost_per_solved_usd: Option<f64>,
    /// Solved trials that reported a cost (kept by [`SpendTotals::add_trial`]).
    #[serde(skip)]
    pub solved_with_cost: u64,
}

impl SpendTotals {
    /// Adds one trial: what it spent, how many attempts it made, whether it was solved.
    pub fn add_trial(&mut self, trial: &Spend, attempts: u32, solved: bool) {
        self.spend = self.spend.plus(trial);
        if is_without_cost(attempts, trial) {
            self.trials_without_cost += 1;
        }
        if solved && trial.cost_usd.is_some() {
            self.solved_with_cost += 1;
        }
    }

    /// Sets the cost per solved trial ([`cost_per_solved`]) from the trials added.
    pub fn finish(mut self) -> SpendTotals {
        self.cost_per_solved_usd = cost_per_solved(self.spend.cost_usd, self.solved_with_cost);
        self
    }

    /// The same from counters that know `solved` trials but not which of them reported a
    /// cost (a coordinator's `run status`): exact when every trial reported one
    /// (`trials_without_cost` 0: every solved trial is one with a cost), else unknown
    /// (`None`), never a number computed another way.
    pub fn finish_from_counts(mut self, solved: u64) -> SpendTotals {
        self.solved_with_cost = if self.trials_without_cost == 0 {
            solved
        } else {
            0
        };
        self.cost_per_solved_usd = if self.trials_without_cost == 0 {
            cost_per_solved(self.spend.cost_usd, solved)
        } else {
            None
        };
        self
    }
}

/// `n/a` or the count.
pub fn fmt_count(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |n| n.to_string())
}

/// `n/a` or `$0.1234`.
pub fn fmt_usd(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |c| format!("${c:.4}"))
}

/// One line of text: `tokens: input N (cached N), output N; cost $0.1234` (`n/a` for a
/// count not reported).
pub fn fmt_spend(s: &Spend) -> String {
    format!(
        "tokens: input {} (cached {}), output {}; cost {}",
        fmt_count(s.input_tokens),
        fmt_count(s.cached_input_tokens),
        fmt_count(s.output_tokens),
        fmt_usd(s.cost_usd)
    )
}

/// A cost for a table cell: cents from $1 up (`$12.35`), four decimals below (`$0.0363`:
/// in cents it would read `$0.04`, and a cheap trial `$0.00`).
pub fn fmt_cost(usd: f64) -> String {
    if usd.abs() >= 1.0 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(i: Option<u64>, c: Option<u64>, o: Option<u64>, usd: Option<f64>) -> Spend {
        Spend {
            input_tokens: i,
            cached_input_tokens: c,
            output_tokens: o,
            cost_usd: usd,
        }
    }

    /// Trials (spend, attempts, solved), the sum, trials without cost, cost per solved.
    type Case<'a> = (&'a [(Spend, u32, bool)], Spend, u64, Option<f64>);

    #[test]
    fn sums_keep_absence_and_count_unreported_cost() {
        let none = s(None, None, None, None);
        let cases: &[Case] = &[
            (&[], Spend::default(), 0, None),
            (
                &[(none, 1, true), (none, 1, false)],
                Spend::default(),
                2,
                None,
            ),
            (
                &[
                    (s(Some(10), Some(2), Some(3), Some(0.5)), 1, true),
                    (s(Some(1), None, None, None), 1, false),
                ],
                s(Some(11), Some(2), Some(3), Some(0.5)),
                1,
                Some(0.5),
            ),
            // Over the trials with a known cost: (0.5 + 0.25 + 1.0) / 2 solved; the solved
            // trial without a cost is in neither (before: 1.75 / 3).
            (
                &[
                    (s(Some(10), Some(0), Some(3), Some(0.5)), 1, true),
                    (s(Some(5), Some(1), Some(1), Some(0.25)), 2, true),
                    (s(None, None, None, Some(1.0)), 1, false),
                    (none, 1, true),
                ],
                s(Some(15), Some(1), Some(4), Some(1.75)),
                1,
                Some(0.875),
            ),
            // Nothing solved: no cost per solved trial, however much was spent.
            (
                &[(s(None, None, None, Some(2.0)), 1, false)],
                s(None, None, None, Some(2.0)),
                0,
                None,
            ),
            // Solved, but no solved trial reported a cost: unknown, not 0 and not the total.
            (
                &[(none, 1, true), (s(None, None, None, Some(2.0)), 1, false)],
                s(None, None, None, Some(2.0)),
                1,
                None,
            ),
            // Never started (cancelled before its first attempt, e.g. by the budget): spent
            // nothing, so not "without cost".
            (
                &[(none, 0, false), (none, 0, false)],
                Spend::default(),
                0,
                None,
            ),
        ];
        for (trials, want, without, per_solved) in cases {
            let mut t = SpendTotals::default();
            for (x, attempts, solved) in trials.iter() {
                t.add_trial(x, *attempts, *solved);
            }
            let t = t.finish();
            assert_eq!(t.spend, *want, "{trials:?}");
            assert_eq!(t.trials_without_cost, *without, "{trials:?}");
            assert_eq!(t.cost_per_solved_usd, *per_solved, "{trials:?}");
        }
    }

    #[test]
    fn without_cost_needs_an_attempt() {
        let none = Spend::default();
        let paid = s(None, None, None, Some(0.1));
        for (attempts, spend, want) in [
            (0, none, false),
            (1, none, true),
            (3, none, true),
            (0, paid, false),
            (1, paid, false),
        ] {
            assert_eq!(
                is_without_cost(attempts, &spend),
                want,
                "{attempts} {spend:?}"
            );
        }
        assert_eq!(cost_per_solved(Some(1.0), 0), None);
        assert_eq!(cost_per_solved(None, 4), None);
        assert_eq!(cost_per_solved(Some(1.0), 4), Some(0.25));
        // From counters: exact when every trial reported a cost, else unknown.
        let mut t = SpendTotals::default();
        t.add_trial(&paid, 1, true);
        t.add_trial(&paid, 1, false);
        assert_eq!(t.finish_from_counts(1).cost_per_solved_usd, Some(0.2));
        assert_eq!(t.finish().cost_per_solved_usd, Some(0.2), "the same number");
        t.add_trial(&none, 1, true);
        assert_eq!(t.finish_from_counts(2).cost_per_solved_usd, None);
        assert_eq!(t.finish().cost_per_solved_usd, Some(0.2));
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_count(None), "n/a");
        assert_eq!(fmt_count(Some(0)), "0");
        assert_eq!(fmt_usd(None), "n/a");
        assert_eq!(fmt_usd(Some(0.000912)), "$0.0009");
        for (usd, want) in [
            (0.0363, "$0.0363"),
            (0.000912, "$0.0009"),
            (0.0, "$0.0000"),
            (0.99994, "$0.9999"),
            (1.0, "$1.00"),
            (12.345, "$12.35"),
        ] {
            assert_eq!(fmt_cost(usd), want, "{usd}");
        }
    }
}
