//! The accounting computed as the planned trials stream past, in plan order, holding only
//! what the report keeps besides its per-trial list: the counts, the duplicates and the
//! quarantined observations. [`Accountant`] takes each planned trial with the observations
//! naming it and hands back its [`AccountedTrial`] (for the caller to write out or keep);
//! [`Accountant::finish`] gives the [`RunAccounting`] with an empty `trials` list.
//! [`ObservationIndex`] finds each trial's observations in a file of them (held whole: the
//! file is the caller's input) and the unexpected ones at the end. [`super::reconcile`] is
//! this over a whole plan in memory; the coordinator runs it over its stored rows.

use super::{
    AccountedTrial, Bucket, BucketCounts, Duplicate, Observation, Quarantined, RunAccounting,
};
use crate::rates::Rates;
use std::collections::HashMap;
use uuid::Uuid;

/// The accounting of the trials seen so far.
#[derive(Debug, Clone)]
pub struct Accountant {
    run_id: Uuid,
    run_key: String,
    plan_digest: String,
    planned: u64,
    counts: BucketCounts,
    duplicates: Vec<Duplicate>,
    quarantined: Vec<Quarantined>,
}

impl Accountant {
    /// An accounting of the run `run_id` / `run_key` against the plan `plan_digest`.
    pub fn new(run_id: Uuid, run_key: String, plan_digest: String) -> Accountant {
        Accountant {
            run_id,
            run_key,
            plan_digest,
            planned: 0,
            counts: BucketCounts::default(),
            duplicates: Vec::new(),
            quarantined: Vec::new(),
        }
    }

    /// Accounts the next planned trial (in plan order) given every observation naming it,
    /// in input order: none is missing, one is accepted, identical ones count once,
    /// differing ones are quarantined.
    pub fn trial(
        &mut self,
        ordinal: u64,
        trial_id: Uuid,
        key: String,
        observations: &[&Observation],
    ) -> AccountedTrial {
        let (bucket, outcome) = match observations {
            [] => (Bucket::Missing, None),
            [o] => (Bucket::of(o), Some((*o).clone())),
            [first, rest @ ..] => {
                let identical = rest.iter().all(|o| *o == *first);
                self.duplicates.push(Duplicate {
                    trial_id,
                    count: observations.len(),
                    identical,
                });
                if identical {
                    (Bucket::of(first), Some((*first).clone()))
                } else {
                    self.quarantined.push(Quarantined {
                        trial_id,
                        reason: "conflicting_duplicate".into(),
                        observations: observations.iter().map(|o| (*o).clone()).collect(),
                    });
                    (Bucket::Quarantined, None)
                }
            }
        };
        self.counts.add(bucket);
        self.planned += 1;
        AccountedTrial {
            ordinal,
            trial_id,
            key,
            bucket,
            outcome,
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> &BucketCounts {
        &self.counts
    }

    /// The accounting once every planned trial was given: `observations` read in all,
    /// `unexpected` those naming no planned trial (each identity once, in input order, with
    /// its observations). Its `trials` list is empty and `candidates` and `flagged` absent:
    /// the caller adds what it has.
    pub fn finish(
        self,
        observations: u64,
        unexpected: Vec<(Uuid, Vec<Observation>)>,
    ) -> RunAccounting {
        let Accountant {
            run_id,
            run_key,
            plan_digest,
            planned,
            counts,
            duplicates,
            mut quarantined,
        } = self;
        let unexpected_ids: Vec<Uuid> = unexpected.iter().map(|(id, _)| *id).collect();
        for (trial_id, observations) in unexpected {
            quarantined.push(Quarantined {
                trial_id,
                reason: "unexpected_identity".into(),
                observations,
            });
        }
        RunAccounting {
            run_id,
            run_key,
            plan_digest,
            planned,
            observations,
            rates: Rates::from_counts(&counts),
            valid: counts.quarantined == 0 && unexpected_ids.is_empty(),
            complete: counts.missing == 0 && counts.quarantined == 0,
            counts,
            trials: Vec::new(),
            duplicates,
            unexpected: unexpected_ids,
            quarantined,
            candidates: None,
            flagged: None,
        }
    }
}

/// A file's observations by trial, each handed out once.
#[derive(Debug)]
pub struct ObservationIndex<'a> {
    observations: &'a [Observation],
    /// Per trial, the indices of its observations in input order.
    by_trial: HashMap<Uuid, Vec<usize>>,
}

impl<'a> ObservationIndex<'a> {
    /// The index of `observations`.
    pub fn new(observations: &'a [Observation]) -> ObservationIndex<'a> {
        let mut by_trial: HashMap<Uuid, Vec<usize>> = HashMap::new();
        for (j, o) in observations.iter().enumerate() {
            by_trial.entry(o.trial_id).or_default().push(j);
        }
        ObservationIndex {
            observations,
            by_trial,
        }
    }

    /// The observations naming `trial_id`, in input order; a planned trial's are taken once.
    pub fn take(&mut self, trial_id: Uuid) -> Vec<&'a Observation> {
        let all = self.observations;
        self.by_trial
            .remove(&trial_id)
            .unwrap_or_default()
            .into_iter()
            .map(|j| &all[j])
            .collect()
    }

    /// The observations not taken: identities outside the plan, in input order of their
    /// first observation, each with its observations.
    pub fn unexpected(mut self) -> Vec<(Uuid, Vec<Observation>)> {
        let mut out = Vec::new();
        for o in self.observations {
            if let Some(js) = self.by_trial.remove(&o.trial_id) {
                let found = js.into_iter().map(|j| self.observations[j].clone());
                out.push((o.trial_id, found.collect()));
            }
        }
        out
    }
}
