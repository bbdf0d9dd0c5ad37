//! A plan's sealed digests, computed one trial at a time.
//!
//! A plan's digest is sha256 of the canonical JSON of the plan without its `digest` field.
//! Its keys sort with `trials` last, so that JSON is a *head* (every other field, ending in
//! `"trials":`), then `[`, the trials' own canonical JSON joined by `,`, then `]}`. This
//! module owns [`PlanSealer`], which feeds each trial's text to two hashers, one behind the
//! draft head and one behind the ready head, so neither the plan nor a `serde_json::Value`
//! tree of it (about 1 GiB for 100,000 trials) is ever built; [`sealed_plan_digest`] is the
//! same digest of a plan in memory.

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

/// Hashes a plan's trials, given one at a time as canonical JSON, under both heads.
#[derive(Debug, Clone)]
pub struct PlanSealer {
    draft: Hasher,
    ready: Hasher,
    trials: u64,
}

impl PlanSealer {
    /// A sealer for the plan whose head (every field but `trials` and `digest`) is `plan`'s.
    pub fn new(plan: &RunPlan) -> Self {
        let mut draft = Hasher::default();
        let mut ready = Hasher::default();
        draft.update(sealed_head(plan, PlanStage::Draft).as_bytes());
        ready.update(sealed_head(plan, PlanStage::Ready).as_bytes());
        draft.update(b"[");
        ready.update(b"[");
        Self {
            draft,
            ready,
            trials: 0,
        }
    }

    /// Adds the next trial's canonical JSON.
    pub fn add(&mut self, trial_json: &str) {
        for h in [&mut self.draft, &mut self.ready] {
            if self.trials > 0 {
                h.update(b",");
            }
            h.update(trial_json.as_bytes());
        }
        self.trials += 1;
    }

    /// Both digests.
    pub fn finish(mut self) -> Sealed {
        self.draft.update(b"]}");
        self.ready.update(b"]}");
        Sealed {
            draft_digest: self.draft.finish(),
            ready_digest: self.ready.finish(),
        }
    }
}
