//! [`Scheduler::report`]: transitions, finishes and records from workers, many per
//! transaction, each checked (epoch, lifecycle, digest) and accepted or refused on its own.
//! A refused report changes nothing. Reports are grouped into rounds (`rounds`: group
//! commit) and each batch is applied by `batch`.

use std::sync::Arc;

use akbench_core::lifecycle::State;
use uuid::Uuid;

use super::batch::{frees, Outcome};
use super::record::check_record;
use super::rounds::Round;
use super::{
    Assignment, ClaimAfter, Disposition, Report, ReportAck, Scheduler, SchedulerError, TransitionIn,
};
use crate::store::StoreError;

impl Scheduler {
    /// Stores `reports` (as few transactions as their order allows, usually one) and returns
    /// one outcome per report, in order. Each report is accepted or refused on its own; a
    /// refused one changes nothing. A database failure refuses the reports of its
    /// transaction with [`SchedulerError::Store`].
    pub async fn report(&self, reports: &[Report]) -> Vec<Outcome> {
        self.report_and_claim(reports, None).await.0
    }

    /// [`Scheduler::report`], then, in the same (last) transaction, a claim for the
    /// session described by `claim`: up to its free slots plus those freed by these reports
    /// (finished or stale attempts it held). Saves a commit per dispatch round.
    pub async fn report_and_claim(
        &self,
        reports: &[Report],
        claim: Option<ClaimAfter>,
    ) -> (Vec<Outcome>, Vec<Assignment>) {
        let claim = claim.map(Arc::new);
        let mut assigned = Vec::new();
        let mut outcomes: Vec<Option<Outcome>> =
            reports.iter().map(|r| precheck(r).err().map(Err)).collect();
        // Chunks: a transition batch that follows a finish of the same attempt in the
        // current chunk starts a new one, so each chunk can be applied phase by phase.
        let mut chunks: Vec<Vec<usize>> = vec![Vec::new()];
        let mut finished_in_chunk: Vec<Uuid> = Vec::new();
        for (i, r) in reports.iter().enumerate() {
            if outcomes[i].is_some() {
                continue;
            }
            match r {
                Report::Transitions { attempt_id, .. }
                    if finished_in_chunk.contains(attempt_id) =>
                {
                    chunks.push(Vec::new());
                    finished_in_chunk.clear();
                }
                Report::Finished { attempt_id, .. } => finished_in_chunk.push(*attempt_id),
                _ => {}
            }
            if let Some(chunk) = chunks.last_mut() {
                chunk.push(i);
            }
        }
        chunks.retain(|c| !c.is_empty());
        let n_chunks = chunks.len();
        for (k, chunk) in chunks.iter().enumerate() {
            let claim = if k + 1 == n_chunks {
                claim.clone()
            } else {
                None
            };
            let earlier_freed = claim.as_ref().map_or(0, |c| freed(c, reports, &outcomes));
            let result = self
                .write_round(Round {
                    batch: chunk.iter().map(|&i| (i, reports[i].clone())).collect(),
                    claim,
                    earlier_freed,
                })
                .await;
            match result {
                Ok((results, got)) => {
                    assigned = got;
                    let requeued = results.iter().any(|(_, o)| {
                        matches!(o, Ok(ReportAck::Finished(Some(Disposition::Requeued))))
                    });
                    for (i, o) in results {
                        outcomes[i] = Some(o);
                    }
                    if requeued {
                        self.wake_claimer();
                    }
                }
                Err(error) => {
                    let text = error.to_string();
                    let mut first = Some(error);
                    for &i in chunk {
                        let e = first
                            .take()
                            .unwrap_or_else(|| StoreError::Unavailable(text.clone()));
                        outcomes[i] = Some(Err(SchedulerError::Store(e)));
                    }
                }
            }
        }
        let outcomes = outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Err(SchedulerError::malformed("a report", "not processed")))
            })
            .collect();
        (outcomes, assigned)
    }

    /// Stores transitions of one attempt; returns the highest seq now stored. See
    /// [`Scheduler::report`].
    pub async fn record_transitions(
        &self,
        attempt_id: Uuid,
        epoch: i64,
        transitions: &[TransitionIn],
    ) -> Result<u32, SchedulerError> {
        let report = Report::Transitions {
            attempt_id,
            epoch,
            transitions: transitions.to_vec(),
        };
        match self.report_one(report).await? {
            ReportAck::Transitions { last_seq } => Ok(last_seq),
            other => Err(unexpected(other)),
        }
    }

    /// Finishes an attempt in `terminal` and decides its trial: an infrastructure error with
    /// budget left is re-queued, anything else is done. `None` when the attempt had already
    /// finished identically.
    pub async fn finish(
        &self,
        attempt_id: Uuid,
        epoch: i64,
        terminal: State,
        cause: &str,
    ) -> Result<Option<Disposition>, SchedulerError> {
        let report = Report::Finished {
            attempt_id,
            epoch,
            terminal,
            cause: cause.to_string(),
        };
        match self.report_one(report).await? {
            ReportAck::Finished(d) => Ok(d),
            other => Err(unexpected(other)),
        }
    }

    /// Stores an attempt's record; `true` for the first upload, `false` for an identical
    /// re-upload. A different record is quarantined and refused.
    pub async fn upload_record(
        &self,
        attempt_id: Uuid,
        epoch: i64,
        record_json: &str,
        digest: &str,
    ) -> Result<bool, SchedulerError> {
        let report = Report::Record {
            attempt_id,
            epoch,
            record_json: record_json.to_string(),
            digest: digest.to_string(),
        };
        match self.report_one(report).await? {
            ReportAck::Record { stored } => Ok(stored),
            other => Err(unexpected(other)),
        }
    }

    async fn report_one(&self, report: Report) -> Outcome {
        self.report(std::slice::from_ref(&report))
            .await
            .pop()
            .unwrap_or_else(|| Err(SchedulerError::malformed("a report", "not processed")))
    }
}

/// Slots freed by the outcomes decided so far.
fn freed(c: &ClaimAfter, reports: &[Report], outcomes: &[Option<Outcome>]) -> usize {
    reports
        .iter()
        .zip(outcomes)
        .filter(|(r, o)| c.held.contains(&r.attempt_id()) && o.as_ref().is_some_and(frees))
        .count()
}

fn unexpected(ack: ReportAck) -> SchedulerError {
    SchedulerError::malformed("a report", format!("unexpected acknowledgement {ack:?}"))
}

/// Checks that need no database.
fn precheck(report: &Report) -> Result<(), SchedulerError> {
    match report {
        Report::Transitions { transitions, .. } => {
            let Some(first) = transitions.first() else {
                return Err(SchedulerError::malformed(
                    "a transition batch",
                    "it is empty",
                ));
            };
            if first.seq == 0 {
                return Err(SchedulerError::Malformed {
                    what: "a transition batch".into(),
                    reason: "seqs start at 1".into(),
                    seq: 0,
                });
            }
            for pair in transitions.windows(2) {
                if pair[1].seq != pair[0].seq.saturating_add(1) {
                    return Err(SchedulerError::Malformed {
                        what: "a transition batch".into(),
                        reason: format!(
                            "seq {} follows seq {}: seqs must be contiguous and increasing",
                            pair[1].seq, pair[0].seq
                        ),
                        seq: pair[1].seq,
                    });
                }
            }
            Ok(())
        }
        Report::Finished {
            attempt_id,
            terminal,
            ..
        } if !terminal.is_terminal() => Err(SchedulerError::InvalidTransition {
            attempt_id: *attempt_id,
            seq: 0,
            reason: format!("{terminal} is not a terminal state"),
        }),
        Report::Finished { .. } => Ok(()),
        Report::Record {
            attempt_id,
            record_json,
            digest,
            ..
        } => check_record(*attempt_id, record_json, digest),
    }
}
