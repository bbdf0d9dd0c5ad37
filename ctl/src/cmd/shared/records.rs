//! Run records in a folder: found, read and validated, and the one word each result is
//! shown as.

use akbench_core::lifecycle::State;
use akbench_core::record::{RunRecord, RECORD_FILE};
use std::path::{Path, PathBuf};

/// One word for the result.
pub fn verdict(state: State, ok: Option<bool>) -> &'static str {
    match (state, ok) {
        (State::Completed, Some(true)) => "solved",
        (State::Completed, _) => "not solved",
        (State::NotGraded, _) => "not graded",
        (State::Failed, _) => "agent failed",
        (State::Timeout, _) => "agent timed out",
        (State::Cancelled, _) => "cancelled",
        (State::InfrastructureError, _) => "infrastructure error (not the agent's fault)",
        (State::InvalidConfiguration, _) => "invalid configuration",
        (State::EvaluationError, _) => "evaluation error (not the agent's fault)",
        _ => "unfinished",
    }
}

/// Reads and validates one record (symlinks refused).
pub fn read(f: &Path) -> Result<RunRecord, String> {
    let meta = std::fs::symlink_metadata(f).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file (symlinks are refused)".into());
    }
    let bytes = akbench_core::bounded_read::read(
        f,
        akbench_core::record::MAX_RECORD_BYTES,
        akbench_core::bounded_read::Links::Refuse,
    )
    .map_err(|e| e.to_string())?;
    let r: RunRecord = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    r.validate()?;
    Ok(r)
}

/// Every `run_record.json` under `dir` (kept workspaces are not searched).
pub fn find_records(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            // Kept workspaces hold the agent's files, not records.
            if e.file_name() != "workspace" {
                find_records(&p, out);
            }
        } else if e.file_name() == RECORD_FILE {
            out.push(p);
        }
    }
}
