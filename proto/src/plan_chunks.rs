//! A plan on the wire: how a run's spec and ready plan are cut into `SubmitPlanStream`
//! messages. The first message carries the spec and the plan's head (its `trials` empty);
//! the trials' canonical JSON follows, a message holding them until they reach
//! [`PLAN_CHUNK_BYTES`], so no message nears the coordinator's request cap whatever the plan's
//! size. The one cutter used by `akbench run submit` (streaming the plan file), the embedded
//! sweep (a plan in memory) and the tests and benches that submit a plan.

use crate::v1::SubmitPlanChunk;
use akbench_core::digest::canonical_json;
use akbench_core::plan::RunPlan;
use akbench_core::spec::ResolvedRunSpec;

/// A message is handed over once its trials reach this many bytes of JSON. With 1 MiB
/// messages and 4 in flight, the client's peak RSS still grew from 30 to 34 MiB between
/// 10,000 and 100,000 trials (debug build); with 256 KiB and 2 it is 29 and 30 MiB (release:
/// 16 and 17 MiB; docs/PERFORMANCE.md).
pub const PLAN_CHUNK_BYTES: usize = 256 << 10;

/// Cuts a plan's trials into messages, the spec and the plan's head in the first.
#[derive(Debug)]
pub struct PlanChunker {
    chunk: SubmitPlanChunk,
    bytes: usize,
}

impl PlanChunker {
    /// Starts with the head message of `spec` and `ready` (whose own `trials` are not sent
    /// by this: push them one by one).
    pub fn new(spec: &ResolvedRunSpec, ready: &RunPlan) -> Self {
        Self {
            chunk: SubmitPlanChunk {
                spec_json: canonical_json(spec),
                spec_digest: spec.digest.clone(),
                plan_head_json: canonical_json(&ready.head()),
                plan_digest: ready.digest.clone(),
                trials_json: Vec::new(),
            },
            bytes: 0,
        }
    }

    /// Adds one trial's canonical JSON; returns the message to send when this filled it.
    pub fn push(&mut self, trial_json: String) -> Option<SubmitPlanChunk> {
        self.bytes += trial_json.len();
        self.chunk.trials_json.push(trial_json);
        if self.bytes < PLAN_CHUNK_BYTES {
            return None;
        }
        self.bytes = 0;
        Some(std::mem::take(&mut self.chunk))
    }

    /// The last message: the trials not yet handed over, or the head alone for a plan with
    /// no trial; none when the last push handed everything over.
    pub fn finish(self) -> Option<SubmitPlanChunk> {
        (self.chunk != SubmitPlanChunk::default()).then_some(self.chunk)
    }

    /// A plan held in memory as its whole stream of messages.
    pub fn all(spec: &ResolvedRunSpec, ready: &RunPlan) -> Vec<SubmitPlanChunk> {
        let mut cutter = Self::new(spec, ready);
        let mut out: Vec<SubmitPlanChunk> = ready
            .trials
            .iter()
            .filter_map(|t| cutter.push(canonical_json(t)))
            .collect();
        out.extend(cutter.finish());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::clock::ManualClock;
    use akbench_core::plan::plan;
    use akbench_core::testkit::synthetic_spec;

    fn docs(tasks: usize, reps: u32) -> (ResolvedRunSpec, RunPlan) {
        let c = ManualClock::new(chrono::DateTime::UNIX_EPOCH);
        let spec = synthetic_spec(tasks, 2, reps, &c);
        let ready = plan(&spec, &c).ready();
        (spec, ready)
    }

    #[test]
    fn a_plan_without_trials_is_its_head_alone() {
        let (spec, mut ready) = docs(1, 1);
        ready.trials.clear();
        let all = PlanChunker::all(&spec, &ready);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].spec_digest, spec.digest);
        assert_eq!(all[0].plan_digest, ready.digest);
        assert!(all[0].trials_json.is_empty());
    }

    #[test]
    fn every_trial_is_sent_once_in_order_and_no_message_passes_the_cap_by_more_than_one() {
        let (spec, ready) = docs(100, 10);
        let all = PlanChunker::all(&spec, &ready);
        assert!(all.len() > 2, "several messages: {}", all.len());
        let sent: Vec<&String> = all.iter().flat_map(|c| &c.trials_json).collect();
        let want: Vec<String> = ready.trials.iter().map(canonical_json).collect();
        assert_eq!(sent.len(), want.len());
        assert!(sent.iter().zip(&want).all(|(a, b)| *a == b));
        assert!(all[1..]
            .iter()
            .all(|c| c.spec_json.is_empty() && c.plan_digest.is_empty()));
        for c in &all {
            let bytes: usize = c.trials_json.iter().map(String::len).sum();
            let last = c.trials_json.last().map_or(0, String::len);
            assert!(bytes - last < PLAN_CHUNK_BYTES, "cut once full: {bytes}");
            assert!(!c.trials_json.is_empty());
        }
    }
}
