//! The invariants of a plan from elsewhere, checked one trial at a time.
//!
//! This module owns [`PlanChecker`]: [`super::RunPlan::check`] runs it over a plan in memory,
//! and the coordinator runs it over a plan streamed to it in chunks. The checks: ordinals
//! contiguous from 0, UUIDv7 ids, the run id on every trial, unique ids and keys, the summary
//! matching the trials, and best-of-N candidates in whole groups (entries 1..=N of one planned
//! trial in a row, each keyed `<trial key>/c<i>`, all with the same trial, count and rule;
//! either every entry is a candidate or none is).
//!
//! Memory: the checker remembers each trial's id (16 bytes) and a 16-byte digest of its key
//! (sha256, truncated), not the key itself: about 70 MB at 1,000,000 trials instead of
//! about 190 MB with the keys as strings. Two different keys share a truncated digest with
//! probability about n^2 / 2^129 (~10^-27 at 10^6 trials); that would refuse a valid plan as
//! holding a key twice, never accept a plan holding one twice.

use super::summary::SummaryCounter;
use super::{PlanSummary, PlannedTrial};
use crate::ids::candidate_key;
use crate::selection::CandidateOf;
use sha2::{Digest as _, Sha256};
use std::collections::HashSet;
use uuid::Uuid;

/// Room reserved up front for at most this many trials ([`PlanChecker::with_capacity`]): a
/// claimed count beyond it grows the sets as trials arrive instead.
const MAX_RESERVED: u64 = 4_000_000;

/// The first 16 bytes of the sha256 of a trial key.
fn key_digest(key: &str) -> [u8; 16] {
    let d = Sha256::digest(key.as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// Checks trials as they come; [`PlanChecker::finish`] checks the summary and the last group.
#[derive(Debug)]
pub struct PlanChecker {
    run_id: Uuid,
    next: u64,
    ids: HashSet<Uuid>,
    /// Digests of the keys seen ([`key_digest`]).
    keys: HashSet<[u8; 16]>,
    counter: SummaryCounter,
    /// The first entry's key when it is not a candidate (then no entry may be one).
    plain: Option<String>,
    /// The candidate the next entry continues, when a group is open.
    expect: Option<CandidateOf>,
}

impl PlanChecker {
    /// A checker for the trials of run `run_id`.
    pub fn new(run_id: Uuid) -> Self {
        Self::with_capacity(run_id, 0)
    }

    /// A checker with room for `trials` trials reserved (at most [`MAX_RESERVED`]), so its
    /// sets never reallocate (and briefly hold both tables) while a plan of that size passes.
    pub fn with_capacity(run_id: Uuid, trials: u64) -> Self {
        let room = usize::try_from(trials.min(MAX_RESERVED)).unwrap_or(0);
        Self {
            run_id,
            next: 0,
            ids: HashSet::with_capacity(room),
            keys: HashSet::with_capacity(room),
            counter: SummaryCounter::default(),
            plain: None,
            expect: None,
        }
    }

    /// Checks the next trial in plan order.
    pub fn push(&mut self, t: &PlannedTrial) -> Result<(), String> {
        let i = self.next;
        if t.ordinal != i {
            return Err(format!(
                "trial {} has ordinal {}, expected {i}",
                t.key, t.ordinal
            ));
        }
        if !crate::ids::is_uuid_v7(&t.trial_id) {
            return Err(format!("trial {} has a non-v7 id {}", t.key, t.trial_id));
        }
        if t.run_id != self.run_id {
            return Err(format!("trial {} belongs to run {}", t.key, t.run_id));
        }
        if !self.ids.insert(t.trial_id) {
            return Err(format!("trial id {} appears twice", t.trial_id));
        }
        if !self.keys.insert(key_digest(&t.key)) {
            return Err(format!("trial key {} appears twice", t.key));
        }
        self.counter.add(t);
        self.next += 1;
        self.candidate(i, t)
    }

    fn candidate(&mut self, i: u64, t: &PlannedTrial) -> Result<(), String> {
        let Some(c) = &t.candidate else {
            if i == 0 {
                self.plain = Some(t.key.clone());
                return Ok(());
            }
            if self.plain.is_some() {
                return Ok(());
            }
            return Err(format!("trial {} is not a candidate, others are", t.key));
        };
        if let Some(first) = &self.plain {
            return Err(format!("trial {first} is not a candidate, others are"));
        }
        let fits = match &self.expect {
            Some(e) => {
                c.index == e.index + 1
                    && (c.trial_id, &c.trial_key, c.of, c.selection)
                        == (e.trial_id, &e.trial_key, e.of, e.selection)
            }
            None => c.index == 1 && c.of >= 2,
        };
        if !fits || t.key != candidate_key(&c.trial_key, c.index) {
            return Err(format!(
                "entry {} is not candidate {} of a whole group under its planned trial",
                t.key, c.index
            ));
        }
        self.expect = (c.index < c.of).then(|| c.clone());
        Ok(())
    }

    /// The trials checked so far.
    pub fn trials(&self) -> u64 {
        self.next
    }

    /// After the last trial: the summary matches the trials and no group is left open.
    /// Returns the summary counted.
    pub fn finish(self, summary: &PlanSummary) -> Result<PlanSummary, String> {
        let counted = self.counter.finish();
        if *summary != counted {
            return Err("the summary does not match the trials".into());
        }
        match self.expect {
            Some(e) => Err(format!(
                "trial {} has candidate {} of {} only",
                e.trial_key, e.index, e.of
            )),
            None => Ok(counted),
        }
    }
}
