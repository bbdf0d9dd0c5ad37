//! A plan's sealed digests, computed one trial at a time.
//!
//! A plan's digest is sha256 of the canonical JSON of the plan without its `digest` field.
//! Its keys sort with `trials` last, so that JSON is a *head* (every other field, ending in
//! `"trials":`), then `[`, the trials' own canonical JSON joined by `,`, then `]}`. This
//! module owns [`PlanHasher`] (one stage's digest) and [`PlanSealer`], which feeds each
//! trial's text to two of them, one behind the draft head and one behind the ready head, so
//! neither the plan nor a `serde_json::Value` tree of it (about 1 GiB for 100,000 trials) is
//! ever built; [`sealed_plan_digest`] is the same digest of a plan in memory.

use super::{PlanStage, PlanSummary, PlannedTrial, RunPlan};
use crate::digest::{canonical_json, Hasher};
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

/// The end of a head's canonical JSON when it is serialized with no trials.
const EMPTY_TRIALS_END: &str = "\"trials\":[]}";

/// The plan's content without its `digest` field, borrowed.
#[derive(Serialize)]
struct SealedPlan<'a> {
    schema: &'a str,
    run_id: &'a Uuid,
    run_key: &'a str,
    spec_digest: &'a str,
    stage: PlanStage,
    created_at: &'a DateTime<Utc>,
    trials: &'a [PlannedTrial],
    summary: &'a PlanSummary,
}

impl<'a> SealedPlan<'a> {
    fn of(plan: &'a RunPlan, stage: PlanStage, trials: &'a [PlannedTrial]) -> Self {
        Self {
            schema: &plan.schema,
            run_id: &plan.run_id,
            run_key: &plan.run_key,
            spec_digest: &plan.spec_digest,
            stage,
            created_at: &plan.created_at,
            trials,
            summary: &plan.summary,
        }
    }
}

/// `sealed_digest(plan)` with `stage` in place of the plan's own.
pub fn sealed_plan_digest(plan: &RunPlan, stage: PlanStage) -> String {
    let mut s = PlanSealer::new(plan);
    for t in &plan.trials {
        s.add(&canonical_json(t));
    }
    s.finish().digest(stage).to_string()
}

/// The canonical JSON of `plan`'s head (its trials ignored) at `stage`, up to and including
/// `"trials":`.
pub fn sealed_head(plan: &RunPlan, stage: PlanStage) -> String {
    let mut text = canonical_json(&SealedPlan::of(plan, stage, &[]));
    assert!(
        text.ends_with(EMPTY_TRIALS_END),
        "`trials` sorts last among a plan's fields"
    );
    text.truncate(text.len() - "[]}".len());
    text
}

/// Both sealed digests of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The digest of the plan as a draft.
    pub draft_digest: String,
    /// The digest of the plan as ready.
    pub ready_digest: String,
}

impl Sealed {
    /// The digest of the plan at `stage`.
    pub fn digest(&self, stage: PlanStage) -> &str {
        match stage {
            PlanStage::Draft => &self.draft_digest,
            PlanStage::Ready => &self.ready_digest,
        }
    }
}

/// Hashes a plan's trials, given one at a time as canonical JSON, under one stage's head:
/// the digest a reader checks a stored plan file against (`run submit` reads the ready file
/// and needs only its digest).
#[derive(Debug, Clone)]
pub struct PlanHasher {
    hasher: Hasher,
    trials: u64,
}

impl PlanHasher {
    /// A hasher for the plan whose head (every field but `trials` and `digest`) is `plan`'s,
    /// at `stage`.
    pub fn new(plan: &RunPlan, stage: PlanStage) -> Self {
        let mut hasher = Hasher::default();
        hasher.update(sealed_head(plan, stage).as_bytes());
        hasher.update(b"[");
        Self { hasher, trials: 0 }
    }

    /// Adds the next trial's canonical JSON.
    pub fn add(&mut self, trial_json: &[u8]) {
        if self.trials > 0 {
            self.hasher.update(b",");
        }
        self.hasher.update(trial_json);
        self.trials += 1;
    }

    /// The trials added so far.
    pub fn trials(&self) -> u64 {
        self.trials
    }

    /// The digest.
    pub fn finish(mut self) -> String {
        self.hasher.update(b"]}");
        self.hasher.finish()
    }
}

/// Hashes a plan's trials, given one at a time as canonical JSON, under both heads.
#[derive(Debug, Clone)]
pub struct PlanSealer {
    draft: PlanHasher,
    ready: PlanHasher,
}

impl PlanSealer {
    /// A sealer for the plan whose head (every field but `trials` and `digest`) is `plan`'s.
    pub fn new(plan: &RunPlan) -> Self {
        Self {
            draft: PlanHasher::new(plan, PlanStage::Draft),
            ready: PlanHasher::new(plan, PlanStage::Ready),
        }
    }

    /// Adds the next trial's canonical JSON.
    pub fn add(&mut self, trial_json: &str) {
        self.draft.add(trial_json.as_bytes());
        self.ready.add(trial_json.as_bytes());
    }

    /// Both digests.
    pub fn finish(self) -> Sealed {
        Sealed {
            draft_digest: self.draft.finish(),
            ready_digest: self.ready.finish(),
        }
    }
}
