//! The statistics of a comparison, pure and deterministic: Wilson score intervals, the exact
//! McNemar test, and a paired percentile bootstrap driven by [`SplitMix64`] (a fixed seed
//! gives the same interval on every machine). docs/compare.md states each method exactly,
//! so that anyone can recompute the numbers.

use serde::{Deserialize, Serialize};

pub use crate::interval::{Interval, Z95};

/// The bootstrap's default seed.
pub const DEFAULT_SEED: u64 = 20_260_515;
/// The bootstrap's default number of resamples.
pub const DEFAULT_RESAMPLES: u32 = 10_000;

/// The Wilson score interval (95%) of `successes` out of `n`; `None` when `n` is 0
/// ([`crate::interval::wilson`] at [`Z95`]: one implementation for every surface).
pub fn wilson(successes: u64, n: u64) -> Option<Interval> {
    crate::interval::wilson(successes, n, Z95)
}

/// The exact (binomial) two-sided McNemar p-value for `b` and `c` discordant pairs:
/// `min(1, 2 * P[X <= min(b, c)])` with `X ~ Binomial(b + c, 1/2)`; 1 when there are none.
/// Summed in log space, so it stays finite for any count.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut tail = 0.0f64;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_choose + ln_half_n).exp();
    }
    (2.0 * tail).min(1.0)
}

/// SplitMix64 (Steele, Lea and Flood 2014): a tiny, well-mixed 64-bit generator, chosen
/// because it is a few lines in any language.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index in `0..n` (multiply-shift: `(next * n) >> 64`); `n` must be above 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// The result of a paired bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// The 95% percentile interval of the difference.
    pub interval: Interval,
    /// The mean of the resampled differences (a check that the resampling is reproduced).
    pub mean: f64,
    /// Resamples drawn.
    pub resamples: u32,
    /// The generator's seed.
    pub seed: u64,
}

/// The paired percentile bootstrap of mean(right) - mean(left) over `pairs` of
/// (left solved, right solved): `resamples` times, draw `n` pair indices with replacement
/// (`SplitMix64::below(n)`, in order), and record the resample's difference; sort them; the
/// interval is the `k`-th smallest and `k`-th largest, `k = floor(resamples * 25 / 1000)`
/// (0-based: sorted[k] and sorted[resamples - 1 - k]). `None` without pairs or resamples.
pub fn paired_bootstrap(pairs: &[(bool, bool)], resamples: u32, seed: u64) -> Option<Bootstrap> {
    if pairs.is_empty() || resamples == 0 {
        return None;
    }
    let n = pairs.len() as u64;
    let deltas: Vec<i64> = pairs
        .iter()
        .map(|&(l, r)| i64::from(r) - i64::from(l))
        .collect();
    let mut rng = SplitMix64::new(seed);
    let mut sums: Vec<i64> = (0..resamples)
        .map(|_| (0..n).map(|_| deltas[rng.below(n) as usize]).sum())
        .collect();
    let total: i64 = sums.iter().sum();
    sums.sort_unstable();
    let k = (resamples as usize * 25) / 1000;
    let hi = resamples as usize - 1 - k;
    Some(Bootstrap {
        interval: Interval {
            low: sums[k] as f64 / n as f64,
            high: sums[hi] as f64 / n as f64,
        },
        mean: total as f64 / (f64::from(resamples) * n as f64),
        resamples,
        seed,
    })
}
