//! The evidence store on files: the immutable documents of each run.
//!
//! Layout under the store root: one folder per run key holding `spec.json`, then
//! `plan.draft.json`, then `plan.ready.json`, in that order. Each is canonical JSON carrying
//! its own digest, written atomically (temporary file, then a hard link that fails if the
//! name exists) and never rewritten with different content; writing the same content again
//! is a no-op. When a key is already taken by another run (the same manifest planned twice
//! on one day gives the same key), the new run gets `<key>-2`, `<key>-3`, ... Runs are found
//! by key or by UUID. Plans of any size are written and read one trial at a time by
//! [`EvidenceStore::plan_streamed`] and [`EvidenceStore::stream_trials`] (`plan_file`; the
//! trials read back as text by `trial_texts`).

mod plan_file;
mod trial_texts;

pub use plan_file::StoredHead;

use crate::digest::canonical_json;
use crate::output::{Existing, Mode, OutputError};
use crate::plan::{PlanStage, RunPlan};
use crate::spec::ResolvedRunSpec;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// The spec file name.
pub const SPEC_FILE: &str = "spec.json";
/// The draft plan file name.
pub const DRAFT_FILE: &str = "plan.draft.json";
/// The ready plan file name.
pub const READY_FILE: &str = "plan.ready.json";

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// File system trouble.
    #[error("failed to access the evidence store at {}: {message}; fix: check the path and its permissions (--store-root)", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        message: String,
    },
    /// A document exists with other content.
    #[error("failed to write {}: it already holds a different document and evidence is immutable; fix: plan a new run instead of rewriting this one", path.display())]
    Immutable {
        /// The path.
        path: PathBuf,
    },
    /// The documents must be written spec, draft, ready.
    #[error("failed to write {}: {problem}", path.display())]
    OutOfOrder {
        /// The path.
        path: PathBuf,
        /// What is missing.
        problem: String,
    },
    /// No run with that key or UUID.
    #[error("failed to find run `{run}` in {}: no such key or UUID; fix: check it (runs there: {known})", root.display())]
    NotFound {
        /// What was asked.
        run: String,
        /// The store root.
        root: PathBuf,
        /// Keys present (at most 10).
        known: String,
    },
    /// A stored document does not parse or its digest does not match.
    #[error("failed to read {}: {problem}; fix: the evidence was altered or damaged, restore it from a copy", path.display())]
    Corrupt {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// The largest store document read (spec, plan, outcome), in bytes: a plan of
/// [`crate::spec::MAX_PLAN_TRIALS`] trials fits.
pub const MAX_DOC_BYTES: u64 = crate::bounded_read::ReadKind::StoreDocument.cap();

/// Reads a store document: a regular file (a FIFO or device put in a run folder is refused,
/// never read), at most [`MAX_DOC_BYTES`]; `None` when it does not exist.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, EvidenceError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path, e)),
        Ok(_) => {}
    }
    crate::bounded_read::read(path, MAX_DOC_BYTES, crate::bounded_read::Links::Follow)
        .map(Some)
        .map_err(|e| EvidenceError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

fn io(path: &Path, e: std::io::Error) -> EvidenceError {
    EvidenceError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The store.
#[derive(Debug, Clone)]
pub struct EvidenceStore {
    root: PathBuf,
}

/// What the store holds about one run.
#[derive(Debug, Clone)]
pub struct StoredRun {
    /// The run's folder.
    pub dir: PathBuf,
    /// The spec.
    pub spec: ResolvedRunSpec,
    /// The draft plan, when written.
    pub draft: Option<RunPlan>,
    /// The ready plan, when written.
    pub ready: Option<RunPlan>,
    /// The latest outcome of executing the run (`outcome.json`), when it was executed.
    /// Operational, not evidence: rewritten by each execution.
    pub outcome: Option<RunOutcome>,
}

/// What executing a run gave: written by `akbench sweep` beside the evidence, first as
/// [`RunOutcome::running`] when the sweep starts, then with the result when it ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// `running` while a sweep executes it; then `finished`, or `interrupted` when cancelled
    /// before every trial ran. (A sweep killed without a chance to write its end stays
    /// `running`.)
    pub state: String,
    /// Where the records are.
    pub records: String,
    /// Whether the accounting is valid.
    pub valid: bool,
    /// Whether every planned trial has an outcome.
    pub complete: bool,
    /// Counts per bucket.
    pub counts: crate::accounting::BucketCounts,
    /// The rates.
    pub rates: crate::rates::Rates,
    /// When it was written.
    pub at: chrono::DateTime<chrono::Utc>,
}

impl RunOutcome {
    /// The outcome of a run whose sweep just started: nothing counted yet.
    pub fn running(records: String, at: chrono::DateTime<chrono::Utc>) -> RunOutcome {
        let counts = crate::accounting::BucketCounts::default();
        RunOutcome {
            state: "running".into(),
            records,
            valid: false,
            complete: false,
            rates: crate::rates::Rates::from_counts(&counts),
            counts,
            at,
        }
    }
}

/// File of the run's latest execution outcome.
pub const OUTCOME_FILE: &str = "outcome.json";

impl StoredRun {
    /// `resolved`, `draft` or `ready`: how far the documents go; `running` while a sweep
    /// executes it, `finished` or `interrupted` once it was executed.
    pub fn state(&self) -> &str {
        if let Some(o) = &self.outcome {
            o.state.as_str()
        } else if self.ready.is_some() {
            "ready"
        } else if self.draft.is_some() {
            "draft"
        } else {
            "resolved"
        }
    }

    /// The most advanced plan (ready, else draft).
    pub fn plan(&self) -> Option<&RunPlan> {
        self.ready.as_ref().or(self.draft.as_ref())
    }
}

/// Writes `text` to `path` unless it exists; same content is a no-op, other content refused.
fn write_immutable(path: &Path, text: &str) -> Result<(), EvidenceError> {
    match read_bounded(path)? {
        Some(existing) if existing == text.as_bytes() => return Ok(()),
        Some(_) => {
            return Err(EvidenceError::Immutable {
                path: path.to_path_buf(),
            })
        }
        None => {}
    }
    let written = crate::output::write_with(path, Mode::Public, Existing::Refuse, |w| {
        w.write_all(text.as_bytes())
    });
    match written {
        Ok(()) => Ok(()),
        // Someone wrote it meanwhile: accept only the same content.
        Err(OutputError::Exists { .. }) => match read_bounded(path) {
            Ok(Some(existing)) if existing == text.as_bytes() => Ok(()),
            _ => Err(EvidenceError::Immutable {
                path: path.to_path_buf(),
            }),
        },
        Err(e) => Err(EvidenceError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

fn read_doc<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, EvidenceError> {
    let Some(text) = read_bounded(path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| EvidenceError::Corrupt {
            path: path.to_path_buf(),
            problem: e.to_string(),
        })
}

impl EvidenceStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores a new run's spec, first of its documents. Takes the spec's key, or the first
    /// free `<key>-N` when another run holds it, and returns the spec as stored.
    pub fn create_run(&self, spec: ResolvedRunSpec) -> Result<ResolvedRunSpec, EvidenceError> {
        self.create_run_avoiding(spec, &|_| false)
    }

    /// [`EvidenceStore::create_run`], also skipping the keys `taken_elsewhere` names (runs a
    /// coordinator already holds under that key).
    pub fn create_run_avoiding(
        &self,
        spec: ResolvedRunSpec,
        taken_elsewhere: &dyn Fn(&str) -> bool,
    ) -> Result<ResolvedRunSpec, EvidenceError> {
        std::fs::create_dir_all(&self.root).map_err(|e| io(&self.root, e))?;
        let base = spec.identity.run_key.clone();
        for n in 1u32.. {
            let key = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            if taken_elsewhere(&key) {
                continue;
            }
            let dir = self.root.join(&key);
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    let theirs: Option<ResolvedRunSpec> = read_doc(&dir.join(SPEC_FILE))?;
                    if !matches!(theirs, Some(t) if t.identity.run_id == spec.identity.run_id) {
                        continue;
                    }
                }
                Err(e) => return Err(io(&dir, e)),
            }
            let spec = if key == spec.identity.run_key {
                spec
            } else {
                spec.with_run_key(key)
            };
            write_immutable(&dir.join(SPEC_FILE), &canonical_json(&spec))?;
            return Ok(spec);
        }
        unreachable!("u32 keys run out only after four billion runs of one key")
    }

    /// Stores a plan as `plan.draft.json` or `plan.ready.json` after its predecessors.
    pub fn put_plan(&self, plan: &RunPlan) -> Result<PathBuf, EvidenceError> {
        let dir = self.root.join(&plan.run_key);
        let spec: Option<ResolvedRunSpec> = read_doc(&dir.join(SPEC_FILE))?;
        let (file, before) = match plan.stage {
            PlanStage::Draft => (DRAFT_FILE, SPEC_FILE),
            PlanStage::Ready => (READY_FILE, DRAFT_FILE),
        };
        let path = dir.join(file);
        match spec {
            Some(s) if s.identity.run_id == plan.run_id && s.digest == plan.spec_digest => {}
            _ => {
                return Err(EvidenceError::OutOfOrder {
                    path,
                    problem: "the run's spec is missing or is not the one this plan expands".into(),
                })
            }
        }
        if plan.stage == PlanStage::Ready {
            let draft: Option<RunPlan> = read_doc(&dir.join(DRAFT_FILE))?;
            if !matches!(&draft, Some(d) if d.trials == plan.trials) {
                return Err(EvidenceError::OutOfOrder {
                    path,
                    problem: format!("{before} is missing or holds other trials"),
                });
            }
        }
        write_immutable(&path, &canonical_json(plan))?;
        Ok(path)
    }

    /// Records the outcome of executing a run (replaces an earlier one).
    pub fn put_outcome(&self, run_key: &str, outcome: &RunOutcome) -> Result<(), EvidenceError> {
        let dir = self.root.join(run_key);
        let p = dir.join(OUTCOME_FILE);
        let bytes = serde_json::to_vec_pretty(outcome).expect("an outcome serializes");
        crate::output::write(&p, &bytes).map_err(|e| EvidenceError::Io {
            path: p.clone(),
            message: e.to_string(),
        })
    }

    /// Run keys in the store, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            // A spec that is not a regular file still marks a run: reading it names the
            // problem (a FIFO, a device) instead of hiding the run.
            .filter(|e| std::fs::symlink_metadata(e.path().join(SPEC_FILE)).is_ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        keys.sort();
        keys
    }

    /// Finds a run by key or UUID: its folder and its spec, the digest checked.
    fn find_spec(&self, run: &str) -> Result<(PathBuf, ResolvedRunSpec), EvidenceError> {
        let keys = self.keys();
        let key = if keys.iter().any(|k| k == run) {
            Some(run.to_string())
        } else if let Ok(id) = Uuid::parse_str(run) {
            let mut hit = None;
            for k in &keys {
                let s: Option<ResolvedRunSpec> = read_doc(&self.root.join(k).join(SPEC_FILE))?;
                if s.is_some_and(|s| s.identity.run_id == id) {
                    hit = Some(k.clone());
                    break;
                }
            }
            hit
        } else {
            None
        };
        let Some(key) = key else {
            let mut known: Vec<String> = keys.into_iter().take(10).collect();
            if known.is_empty() {
                known.push("none".into());
            }
            return Err(EvidenceError::NotFound {
                run: run.to_string(),
                root: self.root.clone(),
                known: known.join(", "),
            });
        };
        let dir = self.root.join(&key);
        let spec_path = dir.join(SPEC_FILE);
        let spec: ResolvedRunSpec =
            read_doc(&spec_path)?.ok_or_else(|| EvidenceError::Corrupt {
                path: spec_path.clone(),
                problem: "is missing".into(),
            })?;
        if !spec.verify() {
            return Err(EvidenceError::Corrupt {
                path: spec_path,
                problem: "its digest does not match its content".into(),
            });
        }
        Ok((dir, spec))
    }

    /// Finds a run by key or UUID and reads its documents, checking their digests.
    pub fn find(&self, run: &str) -> Result<StoredRun, EvidenceError> {
        let (dir, spec) = self.find_spec(run)?;
        let mut plans = Vec::new();
        for f in [DRAFT_FILE, READY_FILE] {
            let p = dir.join(f);
            let plan: Option<RunPlan> = read_doc(&p)?;
            if let Some(pl) = &plan {
                if !pl.verify() || pl.spec_digest != spec.digest {
                    return Err(EvidenceError::Corrupt {
                        path: p,
                        problem: "its digest does not match its content or its spec".into(),
                    });
                }
                if let Err(why) = crate::plan::check_membership(&spec, &pl.trials) {
                    return Err(EvidenceError::Corrupt {
                        path: p,
                        problem: format!("its trials are not the spec's: {why}"),
                    });
                }
            }
            plans.push(plan);
        }
        let ready = plans.pop().flatten();
        let draft = plans.pop().flatten();
        let outcome = read_bounded(&dir.join(OUTCOME_FILE))
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok());
        Ok(StoredRun {
            dir,
            spec,
            draft,
            ready,
            outcome,
        })
    }
}

#[cfg(test)]
mod tests;
