//! Comparing two runs: trials paired by task release and repetition (and agent), the rates
//! of both sides with Wilson intervals, the paired difference with a bootstrap interval, an
//! exact McNemar test over the discordant pairs, every flip, and every trial that could not
//! be paired (listed, excluded, never counted as a failure).
//!
//! This module owns [`compare`], [`Comparison`] and [`blocking_changes`] (which spec
//! differences make two runs incomparable); the numerical methods live in [`stats`]. It is
//! pure: the CLI turns records or a coordinator's runs into [`CompareTrial`]s.

pub mod stats;

use crate::accounting::{Bucket, BucketCounts};
use crate::rates::Rates;
use crate::spec_diff::{Change, SpecDiff};
use serde::{Deserialize, Serialize};
use stats::{mcnemar_exact, paired_bootstrap, wilson, Bootstrap, Interval};
use std::collections::{BTreeMap, BTreeSet};

/// One trial of one side, as a comparison sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareTrial {
    /// Trial key.
    pub key: String,
    /// Task id.
    pub task: String,
    /// Agent label.
    pub agent: String,
    /// Repetition, from 1.
    pub repetition: u32,
    /// Where the trial landed.
    pub bucket: Bucket,
}

/// Whether a bucket says "solved", "not solved", or nothing about the agent.
///
/// Solved is `succeeded`; not solved is `failed` (graded, wrong), `agent_failed` and
/// `timed_out` (the agent's own doing, as in the solve rate). Every other bucket (missing,
/// infrastructure error, not graded, cancelled, invalid, evaluation error, quarantined) is no
/// measurement of the agent: such a trial cannot be paired.
pub fn solved(bucket: Bucket) -> Option<bool> {
    match bucket {
        Bucket::Succeeded => Some(true),
        Bucket::Failed | Bucket::AgentFailed | Bucket::TimedOut => Some(false),
        _ => None,
    }
}

/// Which agents are compared with which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum AgentPairing {
    /// Pair equal labels (both runs must have the same label set), or the only agent of each
    /// run when each has exactly one.
    Shared,
    /// Only `left`'s trials of the left run against `right`'s of the right run.
    Named {
        /// Label in the left run.
        left: String,
        /// Label in the right run.
        right: String,
    },
}

/// Why two sets of trials cannot be compared (bad input: nothing is computed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// The runs' agent labels differ and no pair was named.
    #[error("failed to compare: the runs have different agents (left: {left}; right: {right}); fix: name the pair to compare with --left-agent LABEL --right-agent LABEL")]
    AgentsDiffer {
        /// Left labels, comma-separated.
        left: String,
        /// Right labels, comma-separated.
        right: String,
    },
    /// A named label is not in its run.
    #[error("failed to compare: the {side} run has no agent `{label}` (it has: {known}); fix: pass one of its labels")]
    UnknownAgent {
        /// `left` or `right`.
        side: &'static str,
        /// The label asked for.
        label: String,
        /// The labels it has.
        known: String,
    },
}

/// Counts, rates and intervals of one side (or one agent of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideRates {
    /// Trials.
    pub trials: u64,
    /// Per bucket.
    pub counts: BucketCounts,
    /// Rates over the counts.
    pub rates: Rates,
    /// Wilson interval of the pass rate (succeeded / graded).
    pub pass_interval: Option<Interval>,
    /// Wilson interval of the solve rate (succeeded / (graded + agent failed + timed out)).
    pub solve_interval: Option<Interval>,
}

impl SideRates {
    /// From bucket counts.
    pub fn from_counts(counts: BucketCounts) -> SideRates {
        let rates = Rates::from_counts(&counts);
        let attempted = rates.graded + counts.agent_failed + counts.timed_out;
        SideRates {
            trials: counts.planned(),
            pass_interval: wilson(counts.succeeded, rates.graded),
            solve_interval: if rates.graded == 0 {
                None
            } else {
                wilson(counts.succeeded, attempted)
            },
            rates,
            counts,
        }
    }

    fn of<'a>(trials: impl Iterator<Item = &'a CompareTrial>) -> SideRates {
        let mut c = BucketCounts::default();
        for t in trials {
            c.add(t.bucket);
        }
        SideRates::from_counts(c)
    }
}

/// One side's summary: in total and per compared agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// Over the compared trials.
    pub total: SideRates,
    /// Per agent label.
    pub by_agent: BTreeMap<String, SideRates>,
}

/// A pair both of whose trials measured the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// Task id.
    pub task: String,
    /// Repetition.
    pub repetition: u32,
    /// Left agent label.
    pub left_agent: String,
    /// Right agent label.
    pub right_agent: String,
    /// Left trial key.
    pub left_key: String,
    /// Right trial key.
    pub right_key: String,
    /// Left solved.
    pub left_solved: bool,
    /// Right solved.
    pub right_solved: bool,
}

/// Which way a pair flipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flip {
    /// Solved on the left, not on the right.
    Lost,
    /// Not solved on the left, solved on the right.
    Gained,
}

/// A discordant pair and which way it flipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flipped {
    /// Lost or gained.
    pub direction: Flip,
    /// The pair.
    #[serde(flatten)]
    pub pair: Pair,
}

/// A trial (or both trials of a pair) left out of the paired statistics, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unpaired {
    /// Task id.
    pub task: String,
    /// Repetition.
    pub repetition: u32,
    /// Left agent label, when there is a left trial.
    pub left_agent: Option<String>,
    /// Right agent label, when there is a right trial.
    pub right_agent: Option<String>,
    /// Left trial key, when there is a left trial.
    pub left_key: Option<String>,
    /// Right trial key, when there is a right trial.
    pub right_key: Option<String>,
    /// Left bucket, when there is a left trial.
    pub left: Option<Bucket>,
    /// Right bucket, when there is a right trial.
    pub right: Option<Bucket>,
    /// `only_left`, `only_right`, `duplicate`, or `excluded` (a side is no measurement).
    pub reason: String,
}

/// The paired statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Usable pairs.
    pub pairs: u64,
    /// Solved on both sides.
    pub both_solved: u64,
    /// Solved on neither side.
    pub neither_solved: u64,
    /// Solved on the left only (McNemar's b).
    pub lost: u64,
    /// Solved on the right only (McNemar's c).
    pub gained: u64,
    /// Solve rate over the pairs, left.
    pub left_rate: Option<f64>,
    /// Solve rate over the pairs, right.
    pub right_rate: Option<f64>,
    /// right_rate - left_rate.
    pub difference: Option<f64>,
    /// The paired bootstrap interval of the difference.
    pub bootstrap: Option<Bootstrap>,
    /// Exact two-sided McNemar p-value over the discordant pairs.
    pub mcnemar_p: f64,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// How agents were paired (after resolving `Shared`).
    pub pairing: Vec<(String, String)>,
    /// The left run's compared trials.
    pub left: Side,
    /// The right run's compared trials.
    pub right: Side,
    /// The paired statistics.
    pub paired: Paired,
    /// Every usable pair, in (task, left agent, repetition) order: the bootstrap's input.
    pub pairs: Vec<Pair>,
    /// Every discordant pair with its direction, in the same order.
    pub flips: Vec<Flipped>,
    /// Everything left out, in the same order.
    pub unpaired: Vec<Unpaired>,
}

/// Options of [`compare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Bootstrap resamples.
    pub resamples: u32,
    /// Bootstrap seed.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            resamples: stats::DEFAULT_RESAMPLES,
            seed: stats::DEFAULT_SEED,
        }
    }
}

fn labels(trials: &[CompareTrial]) -> BTreeSet<&str> {
    trials.iter().map(|t| t.agent.as_str()).collect()
}

fn list(s: &BTreeSet<&str>) -> String {
    s.iter().copied().collect::<Vec<_>>().join(", ")
}

/// The agent pairs to compare, left label -> right label.
pub fn resolve_pairing(
    left: &[CompareTrial],
    right: &[CompareTrial],
    pairing: &AgentPairing,
) -> Result<BTreeMap<String, String>, CompareError> {
    let (l, r) = (labels(left), labels(right));
    match pairing {
        AgentPairing::Named { left: a, right: b } => {
            for (side, label, known) in [("left", a, &l), ("right", b, &r)] {
                if !known.contains(label.as_str()) {
                    return Err(CompareError::UnknownAgent {
                        side,
                        label: label.clone(),
                        known: list(known),
                    });
                }
            }
            Ok(BTreeMap::from([(a.clone(), b.clone())]))
        }
        AgentPairing::Shared if l == r => {
            Ok(l.iter().map(|s| (s.to_string(), s.to_string())).collect())
        }
        AgentPairing::Shared if l.len() == 1 && r.len() == 1 => Ok(BTreeMap::from([(
            l.iter().next().map(|s| s.to_string()).unwrap_or_default(),
            r.iter().next().map(|s| s.to_string()).unwrap_or_default(),
        )])),
        AgentPairing::Shared => Err(CompareError::AgentsDiffer {
            left: list(&l),
            right: list(&r),
        }),
    }
}

/// The pairing key: (task, left agent label, repetition).
type Key = (String, String, u32);

/// Compares two runs' trials.
pub fn compare(
    left: &[CompareTrial],
    right: &[CompareTrial],
    pairing: &AgentPairing,
    options: Options,
) -> Result<Comparison, CompareError> {
    let map = resolve_pairing(left, right, pairing)?;
    let back: BTreeMap<&str, &str> = map.iter().map(|(a, b)| (b.as_str(), a.as_str())).collect();
    let left: Vec<&CompareTrial> = left.iter().filter(|t| map.contains_key(&t.agent)).collect();
    let right: Vec<&CompareTrial> = right
        .iter()
        .filter(|t| back.contains_key(t.agent.as_str()))
        .collect();
    // Group both sides by the pairing key (the right side under its left label).
    let mut slots: BTreeMap<Key, (Vec<&CompareTrial>, Vec<&CompareTrial>)> = BTreeMap::new();
    for t in &left {
        let k = (t.task.clone(), t.agent.clone(), t.repetition);
        slots.entry(k).or_default().0.push(t);
    }
    for t in &right {
        let l = back[t.agent.as_str()].to_string();
        slots
            .entry((t.task.clone(), l, t.repetition))
            .or_default()
            .1
            .push(t);
    }
    let mut pairs = Vec::new();
    let mut unpaired = Vec::new();
    for ((task, _, repetition), (ls, rs)) in slots {
        let (l, r) = (ls.first().copied(), rs.first().copied());
        let mut out = Unpaired {
            task: task.clone(),
            repetition,
            left_agent: l.map(|t| t.agent.clone()),
            right_agent: r.map(|t| t.agent.clone()),
            left_key: l.map(|t| t.key.clone()),
            right_key: r.map(|t| t.key.clone()),
            left: l.map(|t| t.bucket),
            right: r.map(|t| t.bucket),
            reason: String::new(),
        };
        out.reason = if ls.len() > 1 || rs.len() > 1 {
            "duplicate"
        } else if r.is_none() {
            "only_left"
        } else if l.is_none() {
            "only_right"
        } else {
            "excluded"
        }
        .into();
        match (l, r) {
            (Some(l), Some(r)) if out.reason == "excluded" => {
                match (solved(l.bucket), solved(r.bucket)) {
                    (Some(a), Some(b)) => pairs.push(Pair {
                        task,
                        repetition,
                        left_agent: l.agent.clone(),
                        right_agent: r.agent.clone(),
                        left_key: l.key.clone(),
                        right_key: r.key.clone(),
                        left_solved: a,
                        right_solved: b,
                    }),
                    _ => unpaired.push(out),
                }
            }
            _ => unpaired.push(out),
        }
    }
    let flips: Vec<Flipped> = pairs
        .iter()
        .filter(|p| p.left_solved != p.right_solved)
        .map(|p| Flipped {
            direction: if p.left_solved {
                Flip::Lost
            } else {
                Flip::Gained
            },
            pair: p.clone(),
        })
        .collect();
    let paired = paired_stats(&pairs, options);
    let side = |trials: &[&CompareTrial]| {
        let mut by: BTreeMap<String, Vec<&CompareTrial>> = BTreeMap::new();
        for t in trials {
            by.entry(t.agent.clone()).or_default().push(t);
        }
        Side {
            total: SideRates::of(trials.iter().copied()),
            by_agent: by
                .into_iter()
                .map(|(a, ts)| (a, SideRates::of(ts.into_iter())))
                .collect(),
        }
    };
    Ok(Comparison {
        pairing: map.into_iter().collect(),
        left: side(&left),
        right: side(&right),
        paired,
        pairs,
        flips,
        unpaired,
    })
}

fn paired_stats(pairs: &[Pair], options: Options) -> Paired {
    let count = |f: &dyn Fn(&Pair) -> bool| pairs.iter().filter(|p| f(p)).count() as u64;
    let n = pairs.len() as u64;
    let lost = count(&|p| p.left_solved && !p.right_solved);
    let gained = count(&|p| !p.left_solved && p.right_solved);
    let both = count(&|p| p.left_solved && p.right_solved);
    let rate = |k: u64| (n > 0).then(|| k as f64 / n as f64);
    let left_rate = rate(both + lost);
    let right_rate = rate(both + gained);
    let bits: Vec<(bool, bool)> = pairs
        .iter()
        .map(|p| (p.left_solved, p.right_solved))
        .collect();
    Paired {
        pairs: n,
        both_solved: both,
        neither_solved: n - both - lost - gained,
        lost,
        gained,
        left_rate,
        right_rate,
        difference: (n > 0).then(|| (gained as f64 - lost as f64) / n as f64),
        bootstrap: paired_bootstrap(&bits, options.resamples, options.seed),
        mcnemar_p: mcnemar_exact(lost, gained),
    }
}

/// The spec differences that make two runs incomparable: any change to the task releases
/// (`tasks.*`: a task added, removed or changed) or to the evaluation (`evaluation.*`).
/// Agents, compute, repetitions and policies may differ: that is what a comparison is for.
pub fn blocking_changes(d: &SpecDiff) -> Vec<Change> {
    d.changes
        .iter()
        .filter(|c| {
            c.path == "tasks"
                || c.path.starts_with("tasks.")
                || c.path == "evaluation"
                || c.path.starts_with("evaluation.")
        })
        .cloned()
        .collect()
}

/// Compares two flat maps of conditions (dotted path -> value), such as the task releases and
/// evaluation that records state when a run's spec is not at hand.
pub fn diff_flat(
    left: &BTreeMap<String, serde_json::Value>,
    right: &BTreeMap<String, serde_json::Value>,
) -> SpecDiff {
    use crate::spec_diff::ChangeKind;
    let mut changes = Vec::new();
    for (path, l) in left {
        match right.get(path) {
            Some(r) if r == l => {}
            r => changes.push(Change {
                path: path.clone(),
                kind: if r.is_some() {
                    ChangeKind::Changed
                } else {
                    ChangeKind::Removed
                },
                left: Some(l.clone()),
                right: r.cloned(),
            }),
        }
    }
    for (path, r) in right {
        if !left.contains_key(path) {
            changes.push(Change {
                path: path.clone(),
                kind: ChangeKind::Added,
                left: None,
                right: Some(r.clone()),
            });
        }
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    SpecDiff { changes }
}

#[cfg(test)]
mod tests;
