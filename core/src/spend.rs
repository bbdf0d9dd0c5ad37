//! Tokens and cost: what a trial spent (summed over all its attempts: a retried attempt's
//! tokens were paid for too) and what a group of trials spent. A count no attempt reported
//! stays `None` ("not reported", rendered `n/a`), never 0; a sum over trials of which only
//! some reported a value is the sum of the reported ones, and `trials_without_cost` says how
//! many did not report a cost.

use crate::record::{Observations, RunRecord};
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

/// What a group of trials spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendTotals {
    /// The sum over the group's trials.
    #[serde(flatten)]
    pub spend: Spend,
    /// Trials that reported no cost (not counted in `cost_usd`).
    pub trials_without_cost: u64,
    /// `cost_usd` / solved trials; `None` when nothing was solved or no cost was reported.
    pub cost_per_solved_usd: Option<f64>,
}

impl SpendTotals {
    /// Adds one trial.
    pub fn add(&mut self, trial: &Spend) {
        self.spend = self.spend.plus(trial);
        if trial.cost_usd.is_none() {
            self.trials_without_cost += 1;
        }
    }

    /// Sets the cost per solved trial from the number solved.
    pub fn finish(mut self, solved: u64) -> SpendTotals {
        self.cost_per_solved_usd = match (self.spend.cost_usd, solved) {
            (Some(c), n) if n > 0 => Some(c / n as f64),
            _ => None,
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

    /// Trials, solved, the sum, trials without cost, cost per solved.
    type Case<'a> = (&'a [Spend], u64, Spend, u64, Option<f64>);

    #[test]
    fn sums_keep_absence_and_count_unreported_cost() {
        let cases: &[Case] = &[
            (&[], 0, Spend::default(), 0, None),
            (
                &[s(None, None, None, None), s(None, None, None, None)],
                1,
                Spend::default(),
                2,
                None,
            ),
            (
                &[
                    s(Some(10), Some(2), Some(3), Some(0.5)),
                    s(Some(1), None, None, None),
                ],
                1,
                s(Some(11), Some(2), Some(3), Some(0.5)),
                1,
                Some(0.5),
            ),
            (
                &[
                    s(Some(10), Some(0), Some(3), Some(0.5)),
                    s(Some(5), Some(1), Some(1), Some(0.25)),
                ],
                3,
                s(Some(15), Some(1), Some(4), Some(0.75)),
                0,
                Some(0.25),
            ),
            // Nothing solved: no cost per solved trial, however much was spent.
            (
                &[s(None, None, None, Some(2.0))],
                0,
                s(None, None, None, Some(2.0)),
                0,
                None,
            ),
        ];
        for (trials, solved, want, without, per_solved) in cases {
            let mut t = SpendTotals::default();
            for x in trials.iter() {
                t.add(x);
            }
            let t = t.finish(*solved);
            assert_eq!(t.spend, *want, "{trials:?}");
            assert_eq!(t.trials_without_cost, *without, "{trials:?}");
            assert_eq!(t.cost_per_solved_usd, *per_solved, "{trials:?}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_count(None), "n/a");
        assert_eq!(fmt_count(Some(0)), "0");
        assert_eq!(fmt_usd(None), "n/a");
        assert_eq!(fmt_usd(Some(0.000912)), "$0.0009");
    }
}
