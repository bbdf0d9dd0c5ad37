//! How runs share the workers (issue 30): a run declares a `priority` (higher first, default
//! 0) and a `weight` (default 1) in its spec (`execution.priority`, `execution.weight`), and
//! each claim divides its free slots among the runs with ready work by [`divide`]:
//!
//! - strictly by priority: a run of higher priority takes every slot it can fill before a
//!   run of lower priority gets one;
//! - among runs of the same priority, by weighted fair share of the live leases: each slot
//!   goes to the run whose live leases, counting that slot, divided by its weight are the
//!   fewest (the "virtual finish time" of its next slot; ties to the run listed first).
//!
//! Why live leases and not a history of assignments (a deficit): the resource shared is the
//! workers' slots, and the live leases are exactly what each run holds of them now. The rule
//! needs no state beyond the rows the claim already counts, so coordinator restarts and
//! concurrent claimers (each sees the others' committed leases) need nothing else, and a run
//! that just started holds no lease: its next slot is the cheapest of all, so it gets slots
//! on the very next claim, until its live leases per weight reach the others'. A run whose
//! attempts are long does not earn credit for the time it waited: max-min fairness of what is
//! held, which is what a 200-trial run behind a 1,000,000-trial one needs.
//!
//! [`divide`] assumes every run can use all the slots it is given. The claim asks the
//! database for that many ready items per run; a run that yields fewer (its ready items are
//! exhausted, in backoff, held by caps or paused routes) leaves the claim's next round, which
//! divides what is still free among the others (`coordinator/src/scheduler/claim.rs`). The
//! per-run caps ([`super::RunCaps`]) still admit each item. [`TABLE`] is run here and against
//! the PostgreSQL claim (`coordinator/tests/fair_share.rs`).

use serde::{Deserialize, Serialize};

/// The lowest `execution.priority`.
pub const MIN_PRIORITY: i64 = -1000;
/// The highest `execution.priority`.
pub const MAX_PRIORITY: i64 = 1000;
/// The largest `execution.weight`.
pub const MAX_WEIGHT: i64 = 1000;

/// A run's claim on the workers: its priority and its weight within its priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// Higher first; default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// Slots in proportion to it among runs of the same priority; default 1, never 0.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub weight: u32,
}

fn is_zero(p: &i32) -> bool {
    *p == 0
}

fn one() -> u32 {
    1
}

fn is_one(w: &u32) -> bool {
    *w == 1
}

impl Default for Share {
    fn default() -> Self {
        Self {
            priority: 0,
            weight: 1,
        }
    }
}

impl Share {
    /// Whether this is the default share (priority 0, weight 1).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Checks a requested `execution.priority`: [`MIN_PRIORITY`]..=[`MAX_PRIORITY`].
pub fn check_priority(v: i64) -> Result<i32, String> {
    if (MIN_PRIORITY..=MAX_PRIORITY).contains(&v) {
        Ok(v as i32)
    } else {
        Err(format!(
            "{v} is outside {MIN_PRIORITY} to {MAX_PRIORITY} (higher runs first)"
        ))
    }
}

/// Checks a requested `execution.weight`: 1..=[`MAX_WEIGHT`] (0 would never get a slot).
pub fn check_weight(v: i64) -> Result<u32, String> {
    if (1..=MAX_WEIGHT).contains(&v) {
        Ok(v as u32)
    } else {
        Err(format!(
            "{v} is outside 1 to {MAX_WEIGHT} (0 would never get a slot)"
        ))
    }
}

/// A run with ready work at one claim: its share and its live leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contender {
    /// Priority and weight.
    pub share: Share,
    /// Leases it holds now (ready -> leased, not yet done).
    pub live: u64,
}

/// Whether `a`'s next slot comes before `b`'s among runs of one priority: fewer live leases
/// per weight once the slot is counted ((live + 1) / weight, compared exactly).
fn sooner(a: &Contender, b: &Contender) -> bool {
    let cost = |c: &Contender, other: &Contender| {
        u128::from(c.live + 1) * u128::from(other.share.weight.max(1))
    };
    cost(a, b) < cost(b, a)
}

/// How many of `slots` each contender gets (same order as `contenders`): all to the highest
/// priority; within it, one slot at a time to the run whose (live + 1) / weight is least
/// (ties to the one listed first). Lower priorities get nothing while a higher one contends:
/// the caller divides again among the rest when a run cannot fill what it was given.
pub fn divide(contenders: &[Contender], slots: u64) -> Vec<u64> {
    let mut given = vec![0u64; contenders.len()];
    let Some(top) = contenders.iter().map(|c| c.share.priority).max() else {
        return given;
    };
    let mut now: Vec<Contender> = contenders.to_vec();
    for _ in 0..slots {
        let mut best: Option<usize> = None;
        for (i, c) in now.iter().enumerate() {
            if c.share.priority != top {
                continue;
            }
            if best.is_none_or(|b| sooner(c, &now[b])) {
                best = Some(i);
            }
        }
        let Some(b) = best else { break };
        given[b] += 1;
        now[b].live += 1;
    }
    given
}

/// Whether the live leases can change what [`divide`] gives `shares` (the contenders' shares,
/// in order): only when two or more runs share the highest priority. A run alone at the top
/// takes every slot whatever it holds, so a claim with one such run need not count leases.
pub fn live_decides(shares: &[Share]) -> bool {
    let Some(top) = shares.iter().map(|s| s.priority).max() else {
        return false;
    };
    shares.iter().filter(|s| s.priority == top).count() > 1
}

/// What `run status` says of a run's share: its live leases, the fraction of all live leases
/// that is, and the fraction its weight entitles it to among the runs of its priority that
/// want work (0 while a run of higher priority wants work).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// Its live leases.
    pub live: u64,
    /// Its live leases over all live leases (0 when none is live).
    pub of_live: f64,
    /// Its weight over the weights of the runs that want work at its priority, when that is
    /// the highest priority wanting work; else 0. `None` when it wants no work itself.
    pub entitled: Option<f64>,
}

/// A run as status sees it: its share, its live leases, whether it has ready or live work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Active {
    /// Priority and weight.
    pub share: Share,
    /// Live leases.
    pub live: u64,
    /// Ready or live work: it wants slots.
    pub wants: bool,
}

/// The [`Standing`] of `runs[i]` among `runs` (every run with work on the coordinator).
pub fn standing(runs: &[Active], i: usize) -> Standing {
    let me = runs[i];
    let all_live: u64 = runs.iter().map(|r| r.live).sum();
    let of_live = if all_live == 0 {
        0.0
    } else {
        me.live as f64 / all_live as f64
    };
    let top = runs
        .iter()
        .filter(|r| r.wants)
        .map(|r| r.share.priority)
        .max();
    let entitled = me.wants.then(|| {
        if top != Some(me.share.priority) {
            return 0.0;
        }
        let weights: u64 = runs
            .iter()
            .filter(|r| r.wants && r.share.priority == me.share.priority)
            .map(|r| u64::from(r.share.weight))
            .sum();
        f64::from(me.share.weight) / weights.max(1) as f64
    });
    Standing {
        live: me.live,
        of_live,
        entitled,
    }
}

/// One row of [`TABLE`]: the contenders as (priority, weight, live leases), the slots of the
/// claim, and how many each contender gets.
pub type Case = (&'static [(i32, u32, u64)], u64, &'static [u64]);

/// The division table: run against [`divide`] here and against the PostgreSQL claim (runs
/// with these shares and live leases, enough ready work each, one claim of these slots) in
/// the coordinator's tests.
pub const TABLE: &[Case] = &[
    // One run takes every slot.
    (&[(0, 1, 0)], 4, &[4]),
    (&[(0, 1, 50)], 3, &[3]),
    // Equal runs alternate; an odd slot goes to the one listed first.
    (&[(0, 1, 0), (0, 1, 0)], 4, &[2, 2]),
    (&[(0, 1, 0), (0, 1, 0)], 3, &[2, 1]),
    // A run that just started behind one holding many leases gets the claim's slots.
    (&[(0, 1, 64), (0, 1, 0)], 8, &[0, 8]),
    // ... until its live leases reach the other's, then they alternate.
    (&[(0, 1, 6), (0, 1, 2)], 6, &[1, 5]),
    (&[(0, 1, 10), (0, 1, 0), (0, 1, 0)], 6, &[0, 3, 3]),
    // Weights: 2:1 from nothing, and against live leases.
    (&[(0, 2, 0), (0, 1, 0)], 3, &[2, 1]),
    (&[(0, 1, 0), (0, 3, 0)], 4, &[1, 3]),
    (&[(0, 3, 3), (0, 1, 0)], 2, &[1, 1]),
    (&[(0, 1, 4), (0, 4, 4)], 5, &[0, 5]),
    (&[(0, 1, 2), (0, 4, 9)], 6, &[1, 5]),
    // Priority is strict: the higher takes every slot, whatever it holds and weighs.
    (&[(0, 1, 0), (1, 1, 100)], 4, &[0, 4]),
    (&[(0, 10, 0), (5, 1, 9), (-3, 1, 0)], 3, &[0, 3, 0]),
    // Within the top priority, the fair share; lower priorities wait.
    (&[(2, 1, 4), (2, 1, 0), (1, 1, 0)], 6, &[1, 5, 0]),
    (&[(-1, 1, 0), (-2, 1, 0)], 2, &[2, 0]),
    // Nothing to divide.
    (&[(0, 1, 0), (0, 1, 0)], 0, &[0, 0]),
    (&[], 5, &[]),
];

/// The contenders of a [`TABLE`] row.
pub fn contenders(row: &[(i32, u32, u64)]) -> Vec<Contender> {
    row.iter()
        .map(|&(priority, weight, live)| Contender {
            share: Share { priority, weight },
            live,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds() {
        for (i, (row, slots, want)) in TABLE.iter().enumerate() {
            assert_eq!(
                divide(&contenders(row), *slots),
                want.to_vec(),
                "row {i}: {row:?} dividing {slots}"
            );
        }
    }

    /// Every division of small cases is max-min fair by weight within the top priority: no
    /// run's next slot would come before the last slot given to another (exactly), lower
    /// priorities get nothing, and every slot is given.
    #[test]
    fn every_small_division_is_weighted_max_min_fair() {
        let mut cases = 0;
        for pa in [0, 1] {
            for wa in 1..=3u32 {
                for la in 0..=5u64 {
                    for wb in 1..=3u32 {
                        for lb in 0..=5u64 {
                            for slots in 0..=7u64 {
                                let row = [(pa, wa, la), (0, wb, lb)];
                                let cs = contenders(&row);
                                let got = divide(&cs, slots);
                                assert_eq!(got.iter().sum::<u64>(), slots, "{row:?} {slots}");
                                if pa == 1 {
                                    assert_eq!(got, vec![slots, 0], "{row:?}");
                                    continue;
                                }
                                for (i, j) in [(0, 1), (1, 0)] {
                                    if got[j] == 0 {
                                        continue;
                                    }
                                    // j's last slot: (l_j + g_j) / w_j; i's next: (l_i + g_i + 1) / w_i.
                                    let last_j = u128::from(cs[j].live + got[j])
                                        * u128::from(cs[i].share.weight);
                                    let next_i = u128::from(cs[i].live + got[i] + 1)
                                        * u128::from(cs[j].share.weight);
                                    assert!(
                                        last_j <= next_i,
                                        "{row:?} {slots}: {got:?} gave run {j} a slot run {i} should have had"
                                    );
                                }
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(cases > 1000);
    }

    /// Where [`live_decides`] says no, every division is the same whatever the live leases
    /// (so the claim may skip counting them); where it says yes, some live leases change it.
    #[test]
    fn live_leases_decide_a_division_only_where_live_decides_says_so() {
        let shares = |row: &[(i32, u32)]| -> Vec<Share> {
            row.iter()
                .map(|&(priority, weight)| Share { priority, weight })
                .collect()
        };
        let table: &[(&[(i32, u32)], bool)] = &[
            (&[], false),
            (&[(0, 1)], false),
            (&[(0, 5)], false),
            (&[(1, 1), (0, 1)], false),
            (&[(0, 1), (3, 2), (-2, 1)], false),
            (&[(0, 1), (0, 1)], true),
            (&[(2, 1), (0, 1), (2, 3)], true),
            (&[(-1, 1), (-1, 1)], true),
        ];
        for (row, want) in table {
            assert_eq!(live_decides(&shares(row)), *want, "{row:?}");
        }
        for (row, decides) in table {
            let ss = shares(row);
            let mut differs = false;
            for lives in 0..=(4u64.pow(ss.len() as u32)) {
                let cs: Vec<Contender> = ss
                    .iter()
                    .enumerate()
                    .map(|(i, &share)| Contender {
                        share,
                        live: (lives / 4u64.pow(i as u32)) % 4,
                    })
                    .collect();
                let idle: Vec<Contender> = ss
                    .iter()
                    .map(|&share| Contender { share, live: 0 })
                    .collect();
                for slots in 0..=5 {
                    differs |= divide(&cs, slots) != divide(&idle, slots);
                }
            }
            assert_eq!(differs, *decides, "{row:?}");
        }
    }

    #[test]
    fn bad_priorities_and_weights_are_refused_with_their_range() {
        assert_eq!(check_priority(0), Ok(0));
        assert_eq!(check_priority(-1000), Ok(-1000));
        assert_eq!(check_priority(1000), Ok(1000));
        assert!(check_priority(1001).unwrap_err().contains("-1000 to 1000"));
        assert!(check_priority(i64::MIN).is_err());
        assert_eq!(check_weight(1), Ok(1));
        assert_eq!(check_weight(1000), Ok(1000));
        assert!(check_weight(0).unwrap_err().contains("never get a slot"));
        assert!(check_weight(-2).unwrap_err().contains("1 to 1000"));
        assert!(check_weight(1001).is_err());
    }

    #[test]
    fn the_default_share_is_left_out_of_the_json() {
        assert_eq!(
            serde_json::to_value(Share::default()).unwrap(),
            serde_json::json!({})
        );
        let s: Share = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(s, Share::default());
        let s: Share =
            serde_json::from_value(serde_json::json!({"priority": -2, "weight": 3})).unwrap();
        assert_eq!(
            s,
            Share {
                priority: -2,
                weight: 3
            }
        );
    }

    #[test]
    fn standing_says_the_share_held_and_the_share_entitled() {
        let a = |priority, weight, live, wants| Active {
            share: Share { priority, weight },
            live,
            wants,
        };
        let runs = [
            a(0, 1, 30, true),
            a(0, 3, 10, true),
            a(-1, 1, 0, true),
            a(0, 1, 0, false),
        ];
        let s = standing(&runs, 0);
        assert_eq!(s.live, 30);
        assert!((s.of_live - 0.75).abs() < 1e-9);
        assert_eq!(s.entitled, Some(0.25));
        assert_eq!(standing(&runs, 1).entitled, Some(0.75));
        assert_eq!(
            standing(&runs, 2).entitled,
            Some(0.0),
            "a lower priority waits"
        );
        assert_eq!(standing(&runs, 3).entitled, None, "no work, no claim");
        let idle = [a(0, 1, 0, true)];
        assert_eq!(standing(&idle, 0).of_live, 0.0);
        assert_eq!(standing(&idle, 0).entitled, Some(1.0));
    }
}
