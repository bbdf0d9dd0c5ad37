//! Checks of an uploaded attempt record that need no database.

use akbench_core::digest::{canonical_json, digest_bytes};
use akbench_core::lifecycle::validate_path;
use akbench_core::record::AttemptRecord;
use uuid::Uuid;

use super::SchedulerError;

/// The record must be JSON whose canonical form has `digest`, parse as an
/// [`AttemptRecord`] of `attempt_id`, and carry a valid transition log ending in its state.
pub(super) fn check_record(
    attempt_id: Uuid,
    record_json: &str,
    digest: &str,
) -> Result<(), SchedulerError> {
    let what = || format!("the record of attempt {attempt_id}");
    let value: serde_json::Value = serde_json::from_str(record_json)
        .map_err(|e| SchedulerError::malformed(what(), format!("it is not JSON: {e}")))?;
    let actual = digest_bytes(canonical_json(&value).as_bytes());
    if actual != digest {
        return Err(SchedulerError::DigestMismatch {
            attempt_id,
            claimed: digest.to_string(),
            actual,
        });
    }
    let record: AttemptRecord = serde_json::from_value(value).map_err(|e| {
        SchedulerError::malformed(what(), format!("it is not an attempt record: {e}"))
    })?;
    if record.attempt.id != attempt_id {
        return Err(SchedulerError::malformed(
            what(),
            format!("it is the record of attempt {}", record.attempt.id),
        ));
    }
    let states: Vec<_> = record.transitions.iter().map(|t| t.state).collect();
    validate_path(&states).map_err(|e| SchedulerError::malformed(what(), e))?;
    if states.last() != Some(&record.state) || !record.state.is_terminal() {
        return Err(SchedulerError::malformed(
            what(),
            format!(
                "its state {} is not the end of its transition log",
                record.state
            ),
        ));
    }
    Ok(())
}
