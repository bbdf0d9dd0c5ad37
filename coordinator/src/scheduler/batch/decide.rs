//! The decision of one report batch, pure: what core's acceptance and lifecycle rules make of
//! each report (transitions, finishes, records) against the batch's snapshot (the locked
//! attempt rows, the stored content of re-sent transitions, the accepted records' digests),
//! as values: one outcome per report, the records to store or quarantine, and the attempts
//! whose finish settles a trial. [`super::apply_batch`] reads the snapshot before and writes
//! what this returns after; nothing here touches the database.

use std::collections::HashMap;

use akbench_core::dispatch::{accept_record, Acceptance};
use akbench_core::lifecycle::State;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    finish_of, stale, transitions_of, AttemptRow, Content, Outcome, Report, ReportAck,
    SchedulerError, Writes,
};

/// What one batch decided.
pub(super) struct Decided {
    /// One outcome per report, by its index in the round.
    pub(super) out: Vec<(usize, Outcome)>,
    /// Records to store and to quarantine.
    pub(super) writes: Writes,
    /// Accepted finishes: (report index, attempt, trial, terminal state).
    pub(super) finishing: Vec<(usize, Uuid, Uuid, State)>,
}

/// Decides `batch` against the snapshot (`rows` are updated with what is accepted, `known`
/// and `accepted` with what this batch adds, so a report later in the batch meets the
/// earlier ones), at `now`.
pub(super) fn decide(
    batch: &[(usize, &Report)],
    rows: &mut HashMap<Uuid, AttemptRow>,
    known: &mut HashMap<(Uuid, u32), Content>,
    accepted: &mut HashMap<Uuid, String>,
    now: DateTime<Utc>,
) -> Decided {
    let mut writes = Writes::default();
    let mut out: Vec<(usize, Outcome)> = Vec::with_capacity(batch.len());
    let mut finishing: Vec<(usize, Uuid, Uuid, State)> = Vec::new();
    for (i, report) in batch {
        let i = *i;
        let id = report.attempt_id();
        let Some(row) = rows.get_mut(&id) else {
            out.push((i, Err(SchedulerError::NotFound(format!("attempt {id}")))));
            continue;
        };
        let outcome = match report {
            Report::Transitions {
                epoch, transitions, ..
            } => transitions_of(id, *epoch, transitions, row, known),
            Report::Finished {
                epoch,
                terminal,
                cause,
                ..
            } => {
                let o = finish_of(id, *epoch, *terminal, cause, row, now);
                if matches!(o, Ok(ReportAck::Finished(Some(_)))) {
                    finishing.push((i, id, row.trial_id, *terminal));
                }
                o
            }
            Report::Record {
                epoch,
                record_json,
                digest,
                ..
            } => {
                let stored = accepted.get(&id).cloned();
                match accept_record(&row.view(), *epoch, stored.as_deref(), digest) {
                    Acceptance::Stale => Err(stale(id, *epoch)),
                    Acceptance::Accept => {
                        accepted.insert(id, digest.clone());
                        writes
                            .submissions
                            .push((id, digest.clone(), record_json.clone()));
                        Ok(ReportAck::Record { stored: true })
                    }
                    Acceptance::Duplicate => Ok(ReportAck::Record { stored: false }),
                    Acceptance::Conflict => {
                        let d = stored.unwrap_or_default();
                        writes.quarantine.push((
                            id,
                            digest.clone(),
                            record_json.clone(),
                            format!("conflicts with the accepted record {d}"),
                        ));
                        Err(SchedulerError::RecordConflict {
                            attempt_id: id,
                            accepted: d,
                            digest: digest.clone(),
                        })
                    }
                }
            }
        };
        out.push((i, outcome));
    }

    Decided {
        out,
        writes,
        finishing,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
