//! Rates computed from bucket counts; every surface prints rates through [`Rates`].
//!
//! The pass rate is succeeded / graded, where graded = succeeded + failed (trials that reached
//! a verdict). The solve rate also counts the agent's own failures and timeouts as unsolved:
//! succeeded / (graded + agent_failed + timed_out); it too is absent when nothing was graded,
//! so an execute-only sweep in which one agent crashed does not publish a measured-looking 0%.
//! A rate over nothing is `None`, rendered `n/a`, never 0.0: "not measured" and "measured
//! zero" must never look alike.

use crate::buckets::{BucketCounts, Coverage};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Rates over one accounting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Trials with a verdict: succeeded + failed.
    pub graded: u64,
    /// succeeded / graded; `None` when nothing was graded.
    pub pass_rate: Option<f64>,
    /// succeeded / (graded + agent failures + timeouts); `None` when nothing was graded.
    pub solve_rate: Option<f64>,
    /// Trials that ran to an accepted outcome other than `cancelled` / planned trials
    /// ([`Coverage`], the one definition); `None` for an empty plan.
    pub coverage: Option<f64>,
    /// infrastructure errors / trials with an accepted outcome; `None` when none has one.
    pub infrastructure_error_rate: Option<f64>,
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

impl Rates {
    /// Computes the rates from bucket counts.
    pub fn from_counts(c: &BucketCounts) -> Rates {
        let graded = c.succeeded + c.failed;
        let coverage = Coverage::of(c);
        Rates {
            graded,
            pass_rate: ratio(c.succeeded, graded),
            solve_rate: if graded == 0 {
                None
            } else {
                ratio(c.succeeded, graded + c.agent_failed + c.timed_out)
            },
            coverage: coverage.ratio(),
            infrastructure_error_rate: ratio(c.infrastructure_error, coverage.with_outcome),
        }
    }
}

/// Renders a rate as a percentage with one decimal, or `n/a`.
pub struct Pct(pub Option<f64>);

impl fmt::Display for Pct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(r) => write!(f, "{:.1}%", r * 100.0),
            None => f.write_str("n/a"),
        }
    }
}

impl fmt::Debug for Pct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Rates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pass rate {} ({} graded), solve rate {}, coverage {}, infrastructure errors {}",
            Pct(self.pass_rate),
            self.graded,
            Pct(self.solve_rate),
            Pct(self.coverage),
            Pct(self.infrastructure_error_rate)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_graded_is_not_measured() {
        let c = BucketCounts {
            not_graded: 4,
            ..BucketCounts::default()
        };
        let r = Rates::from_counts(&c);
        assert_eq!(r.pass_rate, None);
        assert_eq!(r.solve_rate, None);
        assert_eq!(Pct(r.pass_rate).to_string(), "n/a");
        assert_eq!(r.coverage, Some(1.0));
    }

    #[test]
    fn pass_rate_divides_by_graded_only() {
        let c = BucketCounts {
            succeeded: 1,
            failed: 3,
            infrastructure_error: 4,
            missing: 2,
            ..BucketCounts::default()
        };
        let r = Rates::from_counts(&c);
        assert_eq!(r.pass_rate, Some(0.25));
        assert_eq!(r.solve_rate, Some(0.25));
        assert_eq!(Pct(r.pass_rate).to_string(), "25.0%");
        assert_eq!(r.infrastructure_error_rate, Some(0.5));
        assert_eq!(Rates::from_counts(&BucketCounts::default()).coverage, None);
    }

    #[test]
    fn agent_failures_without_any_verdict_are_not_a_measured_zero() {
        // An execute-only sweep: 9 not graded, 1 agent crash, 1 timeout.
        let c = BucketCounts {
            not_graded: 9,
            agent_failed: 1,
            timed_out: 1,
            ..BucketCounts::default()
        };
        let r = Rates::from_counts(&c);
        assert_eq!((r.pass_rate, r.solve_rate), (None, None));
        // Once something is graded, the agent's own failures count against its solve rate.
        let c = BucketCounts {
            succeeded: 2,
            failed: 2,
            agent_failed: 3,
            timed_out: 1,
            ..BucketCounts::default()
        };
        let r = Rates::from_counts(&c);
        assert_eq!(r.pass_rate, Some(0.5));
        assert_eq!(r.solve_rate, Some(0.25));
    }
}
