//! Confidence intervals for rates: the Wilson score interval of a binomial proportion.
//!
//! Surfaces that show a rate with an interval (the viewer's per-agent table) take it from
//! [`wilson`] over the same numerator and denominator that [`crate::rates::Rates`] uses. An
//! interval over nothing is `None` (not measured), never `[0, 1]` or `[0, 0]`.

use serde::{Deserialize, Serialize};

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// A closed interval within [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

/// The Wilson score interval of `successes` out of `n` at `z`; `None` when `n` is 0 or
/// `successes > n`.
pub fn wilson(successes: u64, n: u64, z: f64) -> Option<Interval> {
    if n == 0 || successes > n {
        return None;
    }
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    Some(Interval {
        low: (centre - half).max(0.0),
        high: (centre + half).min(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_reference_values() {
        // (successes, n, low, high): computed independently (Python, same closed form), 95%.
        let cases: &[(u64, u64, f64, f64)] = &[
            (0, 10, 0.0, 0.277_532),
            (10, 10, 0.722_467, 1.0),
            (5, 10, 0.236_593, 0.763_406),
            (1, 2, 0.094_531, 0.905_468),
            (81, 263, 0.255_289, 0.366_210),
            (50, 100, 0.403_831, 0.596_168),
        ];
        for &(k, n, lo, hi) in cases {
            let i = wilson(k, n, Z95).unwrap();
            assert!(
                (i.low - lo).abs() < 1e-5,
                "{k}/{n}: low {} want {lo}",
                i.low
            );
            assert!(
                (i.high - hi).abs() < 1e-5,
                "{k}/{n}: high {} want {hi}",
                i.high
            );
        }
    }

    #[test]
    fn wilson_over_nothing_is_not_measured() {
        assert_eq!(wilson(0, 0, Z95), None);
        assert_eq!(wilson(3, 2, Z95), None);
    }
}
