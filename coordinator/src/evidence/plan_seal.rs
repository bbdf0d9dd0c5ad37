//! A submitted plan's draft and ready digests from one serialization of its trials.
//!
//! A plan's sealed digest is sha256 of the canonical JSON of the plan without its `digest`
//! field ([`sealed_plan_digest`]). Its keys sort with `trials` last, so that JSON is a
//! header (every other field, ending in `"trials":`), then `[`, the trials' own canonical
//! JSON joined by `,`, then `]}`. [`seal`] serializes each trial once and feeds it to two
//! hashers, one behind the draft header and one behind the ready header. Submitting used
//! to serialize a 100,000-trial plan three times for its digests (the sent stage, the ready
//! stage, the draft stage).

use akbench_core::digest::{canonical_json, digest_bytes, Hasher};
use akbench_core::plan::{PlanStage, PlannedTrial, RunPlan};
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

/// The end of a header's canonical JSON when it is serialized with no trials.
const EMPTY_TRIALS_END: &str = "\"trials\":[]}";

/// The plan's content without its `digest` field, borrowed: its canonical JSON is what
/// `sealed_digest` hashes, computed without building a `serde_json::Value` tree (a
/// 100,000-trial plan would need about 1 GiB for it).
#[derive(Serialize)]
struct SealedPlan<'a> {
    schema: &'a str,
    run_id: &'a Uuid,
    run_key: &'a str,
    spec_digest: &'a str,
    stage: PlanStage,
    created_at: &'a DateTime<Utc>,
    trials: &'a [PlannedTrial],
    summary: &'a akbench_core::plan::PlanSummary,
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

/// `sealed_digest(plan)` with `stage` in place of the plan's own, streaming.
pub(super) fn sealed_plan_digest(plan: &RunPlan, stage: PlanStage) -> String {
    digest_bytes(canonical_json(&SealedPlan::of(plan, stage, &plan.trials)).as_bytes())
}

/// Both sealed digests of a plan.
pub(super) struct Sealed {
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

/// Serializes the trials once, hashing each text under both headers.
pub(super) fn seal(plan: &RunPlan) -> Sealed {
    let (Some(draft_head), Some(ready_head)) = (
        header(plan, PlanStage::Draft),
        header(plan, PlanStage::Ready),
    ) else {
        // Not reached while `trials` sorts last; the full serialization stays correct.
        return Sealed {
            draft_digest: sealed_plan_digest(plan, PlanStage::Draft),
            ready_digest: sealed_plan_digest(plan, PlanStage::Ready),
        };
    };
    let mut draft = Hasher::default();
    let mut ready = Hasher::default();
    for (hasher, head) in [(&mut draft, &draft_head), (&mut ready, &ready_head)] {
        hasher.update(head.as_bytes());
        hasher.update(b"[");
    }
    for (i, trial) in plan.trials.iter().enumerate() {
        let text = canonical_json(trial);
        for hasher in [&mut draft, &mut ready] {
            if i > 0 {
                hasher.update(b",");
            }
            hasher.update(text.as_bytes());
        }
    }
    for hasher in [&mut draft, &mut ready] {
        hasher.update(b"]}");
    }
    Sealed {
        draft_digest: draft.finish(),
        ready_digest: ready.finish(),
    }
}

/// The canonical JSON of the plan at `stage` up to and including `"trials":`.
fn header(plan: &RunPlan, stage: PlanStage) -> Option<String> {
    let mut text = canonical_json(&SealedPlan::of(plan, stage, &[]));
    let cut = text.len().checked_sub("[]}".len())?;
    text.ends_with(EMPTY_TRIALS_END).then(|| {
        text.truncate(cut);
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::clock::SystemClock;
    use akbench_core::testkit::synthetic_spec;

    #[test]
    fn streaming_plan_digest_equals_core_sealed_digest() {
        let spec = synthetic_spec(3, 2, 2, &SystemClock);
        let draft = akbench_core::plan::plan(&spec, &SystemClock);
        let ready = draft.ready();
        assert_eq!(sealed_plan_digest(&draft, PlanStage::Draft), draft.digest);
        assert_eq!(sealed_plan_digest(&draft, PlanStage::Ready), ready.digest);
        assert_eq!(
            sealed_plan_digest(&ready, PlanStage::Ready),
            akbench_core::digest::sealed_digest(&ready)
        );
    }

    #[test]
    fn seal_gives_both_digests() {
        for (tasks, agents, reps) in [(3, 2, 2), (1, 1, 1), (5, 3, 3)] {
            let spec = synthetic_spec(tasks, agents, reps, &SystemClock);
            let draft = akbench_core::plan::plan(&spec, &SystemClock);
            let ready = draft.ready();
            for plan in [&draft, &ready] {
                let sealed = seal(plan);
                assert_eq!(sealed.draft_digest, draft.digest);
                assert_eq!(sealed.ready_digest, ready.digest);
                assert_eq!(sealed.digest(plan.stage), plan.digest);
            }
        }
        // No trials: the header alone, with `"trials":[]`.
        let spec = synthetic_spec(1, 1, 1, &SystemClock);
        let mut empty = akbench_core::plan::plan(&spec, &SystemClock);
        empty.trials.clear();
        let sealed = seal(&empty);
        assert_eq!(
            sealed.draft_digest,
            sealed_plan_digest(&empty, PlanStage::Draft)
        );
        assert_eq!(
            sealed.ready_digest,
            sealed_plan_digest(&empty, PlanStage::Ready)
        );
    }
}
