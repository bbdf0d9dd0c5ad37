//! Conversions between the wire protocol and the scheduler, and refusals.

use akbench_core::digest::{canonical_json, digest_bytes};
use akbench_proto::v1::{
    coordinator_message::Body as Out, Ack, CoordinatorMessage, Refusal, RefusalCode, Subject,
};
use chrono::DateTime;
use uuid::Uuid;

use crate::scheduler::{Assignment, Report, ReportAck, SchedulerError, TransitionIn, WorkKind};
use crate::store::StoreError;

/// Most transitions accepted in one batch.
pub(super) const MAX_TRANSITIONS_PER_BATCH: usize = 1024;

use akbench_proto::state::state_of;
pub use akbench_proto::state::wire_state;

/// A refusal of a message that could not be understood.
pub(super) fn malformed(
    attempt_id: &str,
    subject: Subject,
    seq: u32,
    message: String,
) -> CoordinatorMessage {
    refusal(attempt_id, subject, seq, RefusalCode::Malformed, message)
}

pub(super) fn refusal(
    attempt_id: &str,
    subject: Subject,
    seq: u32,
    code: RefusalCode,
    message: String,
) -> CoordinatorMessage {
    CoordinatorMessage {
        body: Some(Out::Refusal(Refusal {
            attempt_id: attempt_id.to_string(),
            seq,
            subject: subject as i32,
            code: code as i32,
            message,
        })),
    }
}

/// The refusal code a worker acts on.
pub(super) fn code_of(error: &SchedulerError) -> RefusalCode {
    match error {
        SchedulerError::StaleEpoch { .. } => RefusalCode::StaleEpoch,
        SchedulerError::NotFound(_) => RefusalCode::UnknownAttempt,
        SchedulerError::InvalidTransition { .. } => RefusalCode::InvalidTransition,
        SchedulerError::RecordConflict { .. } => RefusalCode::RecordConflict,
        SchedulerError::DigestMismatch { .. } => RefusalCode::DigestMismatch,
        SchedulerError::Malformed { .. } => RefusalCode::Malformed,
        SchedulerError::Store(StoreError::Invalid(_)) => RefusalCode::Malformed,
        SchedulerError::Store(_) => RefusalCode::Unavailable,
    }
}

/// The answer to a report.
pub(super) fn answer(
    attempt_id: &str,
    subject: Subject,
    outcome: &Result<ReportAck, SchedulerError>,
) -> CoordinatorMessage {
    match outcome {
        Ok(ack) => {
            let seq = match ack {
                ReportAck::Transitions { last_seq } => *last_seq,
                _ => 0,
            };
            CoordinatorMessage {
                body: Some(Out::Ack(Ack {
                    attempt_id: attempt_id.to_string(),
                    seq,
                    subject: subject as i32,
                })),
            }
        }
        Err(e) => refusal(attempt_id, subject, e.seq(), code_of(e), e.to_string()),
    }
}

fn attempt_of(text: &str) -> Result<Uuid, String> {
    Uuid::parse_str(text).map_err(|_| format!("attempt_id {text:?} is not a UUID"))
}

/// A transition batch as a report, or why it is malformed (with the first bad seq).
pub(super) fn transitions_report(
    b: &akbench_proto::v1::TransitionBatch,
) -> Result<Report, (u32, String)> {
    let attempt_id = attempt_of(&b.attempt_id).map_err(|e| (0, e))?;
    if b.transitions.len() > MAX_TRANSITIONS_PER_BATCH {
        return Err((
            0,
            format!("more than {MAX_TRANSITIONS_PER_BATCH} transitions in one batch"),
        ));
    }
    let mut transitions = Vec::with_capacity(b.transitions.len());
    for t in &b.transitions {
        let state = state_of(t.state).ok_or_else(|| {
            (
                t.seq,
                format!("seq {}: state {} is not a lifecycle state", t.seq, t.state),
            )
        })?;
        let at = DateTime::from_timestamp_millis(t.at_unix_ms).ok_or_else(|| {
            (
                t.seq,
                format!("seq {}: at_unix_ms {} is out of range", t.seq, t.at_unix_ms),
            )
        })?;
        transitions.push(TransitionIn {
            seq: t.seq,
            state,
            at,
            note: t.note.clone(),
        });
    }
    Ok(Report::Transitions {
        attempt_id,
        epoch: b.epoch,
        transitions,
    })
}

/// A finish as a report.
pub(super) fn finished_report(f: &akbench_proto::v1::AttemptFinished) -> Result<Report, String> {
    let attempt_id = attempt_of(&f.attempt_id)?;
    let terminal = state_of(f.terminal_state).ok_or_else(|| {
        format!(
            "terminal_state {} is not a lifecycle state",
            f.terminal_state
        )
    })?;
    Ok(Report::Finished {
        attempt_id,
        epoch: f.epoch,
        terminal,
        cause: f.cause.clone(),
    })
}

/// A record upload as a report.
pub(super) fn record_report(r: &akbench_proto::v1::RecordUpload) -> Result<Report, String> {
    Ok(Report::Record {
        attempt_id: attempt_of(&r.attempt_id)?,
        epoch: r.epoch,
        record_json: r.record_json.clone(),
        digest: r.digest.clone(),
    })
}

/// The wire form of an assignment: the planned trial's document as canonical JSON.
pub(super) fn assignment(a: &Assignment, traceparent: String) -> CoordinatorMessage {
    let json = canonical_json(&a.document);
    let digest = digest_bytes(json.as_bytes());
    CoordinatorMessage {
        body: Some(Out::Assignment(akbench_proto::v1::Assignment {
            attempt_id: a.attempt_id.to_string(),
            trial_id: a.trial_id.to_string(),
            epoch: a.epoch,
            attempt_number: u32::try_from(a.number).unwrap_or(0),
            kind: match a.kind {
                WorkKind::Execute => akbench_proto::v1::WorkKind::Execute,
                WorkKind::Grade => akbench_proto::v1::WorkKind::Grade,
            } as i32,
            work_item_json: json,
            traceparent,
            work_item_digest: digest,
        })),
    }
}
