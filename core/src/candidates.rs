//! Best-of-N candidates: the selection rule, the trial-level outcome of a planned trial's
//! candidates, and the unbiased pass@k estimator.
//!
//! With `execution.candidates: N > 1` the plan holds N entries per planned trial, one per
//! candidate, each with its own UUID and key `<trial key>/c<i>` (its attempts are
//! `<trial key>/c<i>/a<n>`), each naming its planned trial in [`CandidateOf`]. A candidate is
//! scheduled, capped, routed and retried (infrastructure errors only) like any plan entry.
//! This module owns what happens above them: [`select`] turns the candidates' buckets into
//! the planned trial's bucket and selected candidate under a [`Selection`] rule, and
//! [`pass_at_k`] is the estimator of Chen et al. 2021, `1 - C(n-c, k) / C(n, k)`, computed as
//! a product so it never overflows. [`account_entries`] builds the candidate section of a
//! run's accounting (`accounting::candidates_of` feeds it the accounted plan entries).
//! docs/reporting.md documents the estimator and the rules.
//!
//! Layer: above `record`, `buckets`, `rates` and `selection`, below `accounting`: it imports no
//! `accounting` nor `plan` ([`Selection`] and [`CandidateOf`] live in `selection`;
//! `CandidateOf` is re-exported here).

use crate::buckets::{Bucket, BucketCounts};
use crate::rates::Rates;
pub use crate::selection::CandidateOf;
use crate::selection::Selection;
use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// One candidate as [`select`] sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Its number, from 1.
    pub index: u32,
    /// Where it landed.
    pub bucket: Bucket,
    /// Its score, when graded.
    pub score: Option<f64>,
}

/// A candidate that had its chance: graded, or the agent's own failure or timeout. These
/// are the samples of pass@k.
pub fn is_measured(b: Bucket) -> bool {
    matches!(
        b,
        Bucket::Succeeded | Bucket::Failed | Bucket::AgentFailed | Bucket::TimedOut
    )
}

/// A candidate whose result may still change the trial's: not yet observed, conflicting,
/// executed but not graded, or a broken measurement.
fn is_open(b: Bucket) -> bool {
    matches!(
        b,
        Bucket::Missing | Bucket::Quarantined | Bucket::NotGraded | Bucket::EvaluationError
    )
}

/// The trial's bucket and selected candidate (by number).
///
/// A solved candidate decides `first_solved` and `all` at once. Otherwise an open candidate
/// (missing, quarantined, not graded, evaluation error) leaves the trial in that bucket
/// (the first open by priority quarantined, missing, evaluation error, not graded) with no
/// selection: a missing candidate is missing, never a failure. Candidates that ended in an
/// infrastructure error, a cancel or an invalid configuration are not samples and are
/// skipped; when no candidate was measured the trial takes their bucket (invalid, then
/// cancelled, then infrastructure error), so a trial whose candidates all hit
/// infrastructure errors is an infrastructure error. `all` never names a selected candidate.
pub fn select(rule: Selection, candidates: &[Candidate]) -> (Bucket, Option<u32>) {
    let first = |b: Bucket| candidates.iter().find(|c| c.bucket == b);
    let solved = first(Bucket::Succeeded);
    if rule != Selection::BestScore {
        if let Some(c) = solved {
            return (Bucket::Succeeded, named(rule, c.index));
        }
    }
    for b in [
        Bucket::Quarantined,
        Bucket::Missing,
        Bucket::EvaluationError,
        Bucket::NotGraded,
    ] {
        if first(b).is_some() {
            debug_assert!(is_open(b));
            return (b, None);
        }
    }
    let pick = if rule == Selection::BestScore {
        candidates
            .iter()
            .filter(|c| matches!(c.bucket, Bucket::Succeeded | Bucket::Failed))
            .fold(None::<&Candidate>, |best, c| match best {
                // Ties keep the lower number, unless only the later one is solved.
                Some(b)
                    if score(c) > score(b)
                        || (score(c) == score(b)
                            && c.bucket == Bucket::Succeeded
                            && b.bucket != Bucket::Succeeded) =>
                {
                    Some(c)
                }
                Some(b) => Some(b),
                None => Some(c),
            })
    } else {
        first(Bucket::Failed)
    };
    if let Some(c) = pick.or_else(|| candidates.iter().find(|c| is_measured(c.bucket))) {
        return (c.bucket, named(rule, c.index));
    }
    for b in [
        Bucket::Invalid,
        Bucket::Cancelled,
        Bucket::InfrastructureError,
    ] {
        if first(b).is_some() {
            return (b, None);
        }
    }
    (Bucket::Missing, None)
}

fn score(c: &Candidate) -> f64 {
    c.score.unwrap_or(0.0)
}

fn named(rule: Selection, index: u32) -> Option<u32> {
    (rule != Selection::All).then_some(index)
}

/// The unbiased pass@k of Chen et al. 2021 for one problem: `n` samples, `c` correct,
/// `1 - C(n-c, k) / C(n, k)`, computed as `1 - prod_{i=n-c+1..=n} (1 - k/i)` (no factorial
/// overflows). `None` when `k` is 0 or more than `n` (not estimable from `n` samples).
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let kept: f64 = ((n - c + 1)..=n)
        .map(|i| 1.0 - k as f64 / i as f64)
        .product();
    Some(1.0 - kept)
}

/// pass@k over a run: the mean of the trials' pass@k.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PassAtK {
    /// k.
    pub k: u32,
    /// The mean over the trials with at least k measured candidates; `None` when no trial
    /// has, or when no candidate of the run was graded (as the solve rate).
    pub value: Option<f64>,
    /// Trials in the mean.
    pub trials: u64,
    /// Trials with at least one but fewer than k measured candidates, left out of the mean.
    pub short: u64,
}

/// One candidate in a trial's selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateOutcome {
    /// Its number, from 1.
    pub index: u32,
    /// The candidate's UUID (its plan entry); absent for a candidate known only by its
    /// number (records read without their plan, none for that candidate).
    pub id: Option<Uuid>,
    /// Its key, `<trial key>/c<i>`.
    pub key: String,
    /// Where it landed.
    pub bucket: Bucket,
    /// Score, when graded.
    pub score: Option<f64>,
    /// The attempt whose outcome was accepted.
    pub attempt_id: Option<Uuid>,
}

/// A planned trial's candidates and what was selected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateTrial {
    /// The planned trial's UUID.
    pub trial_id: Uuid,
    /// Its key.
    pub key: String,
    /// The trial's bucket under the rule.
    pub bucket: Bucket,
    /// The selected candidate's number; absent under `all` or when nothing was selectable.
    pub selected: Option<u32>,
    /// Candidates that are samples (graded, agent failure, timeout).
    pub measured: u64,
    /// Of those, solved.
    pub solved: u64,
    /// Every candidate, by number.
    pub candidates: Vec<CandidateOutcome>,
}

/// The candidate section of a run's accounting: one entry per planned trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateAccounting {
    /// The rule.
    pub selection: Selection,
    /// Candidates per planned trial.
    pub candidates: u32,
    /// Planned trials (each with `candidates` plan entries).
    pub planned_trials: u64,
    /// Planned trials per bucket, each trial counted once in its selected bucket.
    pub counts: BucketCounts,
    /// Rates over those counts.
    pub rates: Rates,
    /// pass@1 and pass@N.
    pub pass_at: Vec<PassAtK>,
    /// Every planned trial, in plan order.
    pub trials: Vec<CandidateTrial>,
}

impl CandidateAccounting {
    /// pass@k for one k, when reported.
    pub fn pass(&self, k: u32) -> Option<&PassAtK> {
        self.pass_at.iter().find(|p| p.k == k)
    }
}

/// One plan entry (or one record) as [`account_entries`] groups it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its candidate relation; `None` for a plan entry without candidates.
    pub candidate: Option<CandidateOf>,
    /// The entry's UUID (the candidate's).
    pub id: Uuid,
    /// The entry's key.
    pub key: String,
    /// Where it landed.
    pub bucket: Bucket,
    /// Score, when graded.
    pub score: Option<f64>,
    /// The accepted attempt.
    pub attempt_id: Option<Uuid>,
}

impl Entry {
    /// A record as an entry (its outcome, its candidate relation).
    pub fn of_record(r: &crate::record::RunRecord) -> Entry {
        Entry {
            candidate: r.candidate.clone(),
            id: r.trial.id,
            key: r.trial.key.clone(),
            bucket: Bucket::of_state(r.outcome.state, r.outcome.ok),
            score: r.outcome.score,
            attempt_id: r.attempts.last().map(|a| a.attempt.id),
        }
    }
}

/// Groups entries under their planned trials (first seen first, candidates by number) and
/// selects. A candidate number of a trial that no entry holds (records read without their
/// plan) is counted missing. `None` when no entry is a candidate.
pub fn account_entries(entries: impl IntoIterator<Item = Entry>) -> Option<CandidateAccounting> {
    let mut rule: Option<(Selection, u32)> = None;
    let mut trials: Vec<CandidateTrial> = Vec::new();
    let mut at: std::collections::HashMap<Uuid, usize> = std::collections::HashMap::new();
    let mut any_graded = false;
    for e in entries {
        any_graded |= matches!(e.bucket, Bucket::Succeeded | Bucket::Failed);
        let (trial_id, key, index) = match &e.candidate {
            Some(c) => {
                rule.get_or_insert((c.selection, c.of));
                (c.trial_id, c.trial_key.clone(), c.index)
            }
            None => (e.id, e.key.clone(), 1),
        };
        let i = *at.entry(trial_id).or_insert_with(|| {
            trials.push(CandidateTrial {
                trial_id,
                key,
                bucket: Bucket::Missing,
                selected: None,
                measured: 0,
                solved: 0,
                candidates: Vec::new(),
            });
            trials.len() - 1
        });
        trials[i].candidates.push(CandidateOutcome {
            index,
            id: Some(e.id),
            key: e.key,
            bucket: e.bucket,
            score: e.score,
            attempt_id: e.attempt_id,
        });
    }
    let (selection, n) = rule?;
    let mut counts = BucketCounts::default();
    for t in &mut trials {
        t.candidates.sort_by_key(|c| c.index);
        for index in 1..=n {
            if !t.candidates.iter().any(|c| c.index == index) {
                t.candidates.push(CandidateOutcome {
                    index,
                    id: None,
                    key: crate::ids::candidate_key(&t.key, index),
                    bucket: Bucket::Missing,
                    score: None,
                    attempt_id: None,
                });
            }
        }
        t.candidates.sort_by_key(|c| c.index);
        t.measured = t
            .candidates
            .iter()
            .filter(|c| is_measured(c.bucket))
            .count() as u64;
        t.solved = t
            .candidates
            .iter()
            .filter(|c| c.bucket == Bucket::Succeeded)
            .count() as u64;
        let members: Vec<Candidate> = t
            .candidates
            .iter()
            .map(|c| Candidate {
                index: c.index,
                bucket: c.bucket,
                score: c.score,
            })
            .collect();
        let (bucket, selected) = select(selection, &members);
        t.bucket = bucket;
        t.selected = selected;
        counts.add(bucket);
    }
    let mut ks = vec![1];
    if n > 1 {
        ks.push(n);
    }
    let pass_at = ks
        .into_iter()
        .map(|k| mean_pass_at(&trials, k, any_graded))
        .collect();
    Some(CandidateAccounting {
        selection,
        candidates: n,
        planned_trials: trials.len() as u64,
        rates: Rates::from_counts(&counts),
        counts,
        pass_at,
        trials,
    })
}

fn mean_pass_at(trials: &[CandidateTrial], k: u32, graded: bool) -> PassAtK {
    let (mut sum, mut used, mut short) = (0.0, 0u64, 0u64);
    for t in trials {
        match pass_at_k(t.measured, t.solved, u64::from(k)) {
            Some(p) => {
                sum += p;
                used += 1;
            }
            None if t.measured > 0 => short += 1,
            None => {}
        }
    }
    PassAtK {
        k,
        value: (graded && used > 0).then(|| sum / used as f64),
        trials: used,
        short,
    }
}

impl fmt::Display for CandidateAccounting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "candidates: {} per trial, selection {}, {} planned trials",
            self.candidates, self.selection, self.planned_trials
        )?;
        for p in &self.pass_at {
            write!(
                f,
                "; pass@{} {} over {} trials",
                p.k,
                crate::rates::Pct(p.value),
                p.trials
            )?;
            if p.short > 0 {
                write!(
                    f,
                    " ({} with fewer than {} measured left out)",
                    p.short, p.k
                )?;
            }
        }
        write!(f, "\nselected per trial: {}", self.rates)
    }
}

#[cfg(test)]
mod tests;
