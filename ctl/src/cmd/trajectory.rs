//! `akbench run trajectory <trial>`: prints an attempt's agent trajectory (ATIF JSON). The
//! worker stores it as `trajectory.json` beside the agent's logs; for runs recorded before
//! it did, the trajectory is converted on the fly from the stored agent stdout (without the
//! instruction, which the record does not hold).

use crate::cli::TrajectoryArgs;
use crate::exit::InputError;
use akbench_core::bounded_read::{Links, ReadKind};
use akbench_core::record::{resolve_inside, AttemptRecord, RunRecord, RECORD_FILE};
use akbench_core::trajectory;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where a trajectory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The attempt's stored `trajectory.json`.
    Stored,
    /// Converted now from the agent's stored stdout.
    Converted,
}

/// Prints the trajectory of the chosen attempt.
pub fn run(args: TrajectoryArgs) -> anyhow::Result<i32> {
    let (dir, record) = read_trial(&args.trial)?;
    let attempt = pick_attempt(&record, args.attempt).map_err(InputError)?;
    let (t, origin) = load(&dir, &record, attempt).map_err(InputError)?;
    if origin == Origin::Converted {
        eprintln!(
            "note: attempt {} has no {}; converted from the agent's stored stdout",
            attempt.number,
            trajectory::FILE_NAME
        );
    }
    if args.pretty {
        outln!("{}", serde_json::to_string_pretty(&t)?);
    } else {
        outln!("{}", serde_json::to_string(&t)?);
    }
    Ok(crate::exit::OK)
}

/// The trial folder and its record, from the folder or the record file's path.
pub fn read_trial(path: &Path) -> Result<(PathBuf, RunRecord), InputError> {
    let (dir, file) = if path.is_dir() {
        (path.to_path_buf(), path.join(RECORD_FILE))
    } else {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        (dir, path.to_path_buf())
    };
    let bytes = ReadKind::Record.read(&file, Links::Follow).map_err(|e| {
        InputError(format!(
            "failed to read the run record {}: it {e}; fix: pass a trial folder holding {RECORD_FILE} (a sweep's out/<run>/<trial>/) or the record itself",
            file.display()
        ))
    })?;
    let record: RunRecord = serde_json::from_slice(&bytes).map_err(|e| {
        InputError(format!(
            "failed to read the run record {}: {e}; fix: pass a record written by akbench",
            file.display()
        ))
    })?;
    Ok((dir, record))
}

/// The attempt numbered `number`, or the last one whose agent ran (else the last one).
pub fn pick_attempt(record: &RunRecord, number: Option<u32>) -> Result<&AttemptRecord, String> {
    match number {
        Some(n) => record.attempts.iter().find(|a| a.number == n).ok_or_else(|| {
            let have: Vec<String> = record.attempts.iter().map(|a| a.number.to_string()).collect();
            format!(
                "failed to find attempt {n} of trial {}; fix: pass one of: {}",
                record.trial.key,
                if have.is_empty() { "(none)".into() } else { have.join(", ") }
            )
        }),
        None => record
            .attempts
            .iter()
            .rev()
            .find(|a| a.agent_process.is_some())
            .or(record.attempts.last())
            .ok_or_else(|| {
                format!(
                    "failed to show a trajectory of trial {}: it has no attempt (the trial never ran)",
                    record.trial.key
                )
            }),
    }
}

/// The attempt's trajectory as JSON: the stored file (checked against ATIF), else converted
/// from the stored stdout. Paths are read only inside the trial folder.
pub fn load(dir: &Path, record: &RunRecord, a: &AttemptRecord) -> Result<(Value, Origin), String> {
    let stored_rel = format!("{}/{}", a.artifacts_dir, trajectory::FILE_NAME);
    if let Ok(path) = resolve_inside(dir, &stored_rel) {
        let text = ReadKind::Trajectory
            .load_text(&path, Links::Refuse)
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "failed to read {}: {e}; fix: delete it to convert the agent's stdout instead",
                path.display()
            )
        })?;
        trajectory::validate(&v).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok((v, Origin::Stored));
    }
    let Some(rel) = a
        .agent_process
        .as_ref()
        .and_then(|p| p.stdout_path.as_deref())
    else {
        return Err(format!(
            "failed to show the trajectory of attempt {} of trial {}: its agent never ran (no stdout recorded)",
            a.number, record.trial.key
        ));
    };
    let path = resolve_inside(dir, rel).map_err(|e| {
        format!(
            "failed to read the agent's stdout of attempt {}: {e}; fix: pass the trial folder the record was written in",
            a.number
        )
    })?;
    let bytes = ReadKind::Log
        .load(&path, Links::Refuse)
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&bytes);
    let version = a
        .provenance
        .as_ref()
        .and_then(|p| p.agent_cli_version.as_deref());
    let t = trajectory::convert(&record.agent.adapter, &stdout, None, version);
    let v = serde_json::to_value(&t).map_err(|e| format!("failed to write the trajectory: {e}"))?;
    Ok((v, Origin::Converted))
}
