//! Plan files written and read one trial at a time, in memory that does not grow with the
//! plan.
//!
//! This module owns [`EvidenceStore::plan_streamed`] (expand a spec straight into
//! `plan.draft.json` and `plan.ready.json`), [`EvidenceStore::write_plans`] (the same from
//! any trials), [`EvidenceStore::find_head`] (a run's spec and ready plan head, the trials
//! skipped) and [`EvidenceStore::stream_trials`] (a stored plan's trials one by one, its
//! digest checked as they pass). The files are byte-identical to what
//! [`EvidenceStore::put_plan`] writes for the same plan: canonical JSON whose keys sort
//! `digest` second and `trials` last. The writer puts a placeholder of the digest's fixed
//! length in the head, streams the trials into both files while [`PlanSealer`] hashes them,
//! then writes the digest over the placeholder.

use super::trial_texts::{for_each_text, ScanError};
use super::{io, read_doc, EvidenceError, EvidenceStore, DRAFT_FILE, READY_FILE, SPEC_FILE};
use crate::digest::canonical_json;
use crate::plan::{Expansion, PlanHasher, PlanSealer, PlanStage, PlannedTrial, RunPlan};
use crate::plan::{PlanSummary, SummaryCounter, PLAN_SCHEMA};
use crate::spec::ResolvedRunSpec;
use chrono::{DateTime, Utc};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// Stands in for the digest while the trials are written: same length as a real one.
const PLACEHOLDER: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// What [`EvidenceStore::find_head`] reads: a run's spec and its ready plan without trials.
#[derive(Debug, Clone)]
pub struct StoredHead {
    /// The run's folder.
    pub dir: PathBuf,
    /// The spec (its digest checked).
    pub spec: ResolvedRunSpec,
    /// The ready plan's head (`trials` empty), when written; its trials are not yet checked
    /// against its digest ([`EvidenceStore::stream_trials`] does that).
    pub ready: Option<RunPlan>,
}

impl StoredHead {
    /// The ready plan file.
    pub fn ready_path(&self) -> PathBuf {
        self.dir.join(READY_FILE)
    }
}

/// One plan file being written: its temporary file, the offset of the digest placeholder.
struct PlanFile {
    tmp: PathBuf,
    out: BufWriter<File>,
    digest_at: u64,
}

impl PlanFile {
    fn create(
        dir: &Path,
        name: &str,
        head: &RunPlan,
        stage: PlanStage,
    ) -> Result<Self, EvidenceError> {
        let tmp = dir.join(format!("{name}.tmp.{}", std::process::id()));
        let mut h = head.head();
        h.stage = stage;
        h.digest = PLACEHOLDER.to_string();
        let mut text = canonical_json(&h);
        // `trials` sorts last: the head ends `"trials":[]}`; the trials go between.
        text.truncate(text.len() - "]}".len());
        let marker = format!("\"digest\":\"{PLACEHOLDER}\"");
        let digest_at = text
            .find(&marker)
            .map(|i| (i + "\"digest\":\"".len()) as u64)
            .expect("a plan head holds its digest field");
        // Exclusively: a stale temporary file (or a FIFO put there) is removed, never opened.
        let _ = std::fs::remove_file(&tmp);
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io(&tmp, e))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        out.write_all(text.as_bytes()).map_err(|e| io(&tmp, e))?;
        Ok(Self {
            tmp,
            out,
            digest_at,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), EvidenceError> {
        self.out.write_all(bytes).map_err(|e| io(&self.tmp, e))
    }

    /// Ends the document and writes `digest` over the placeholder.
    fn seal(mut self, digest: &str) -> Result<PathBuf, EvidenceError> {
        debug_assert_eq!(digest.len(), PLACEHOLDER.len());
        let tmp = self.tmp.clone();
        let e = |err| io(&tmp, err);
        self.out.write_all(b"]}").map_err(e)?;
        let mut file = self.out.into_inner().map_err(|err| e(err.into_error()))?;
        file.seek(SeekFrom::Start(self.digest_at)).map_err(e)?;
        file.write_all(digest.as_bytes()).map_err(e)?;
        Ok(self.tmp)
    }
}

/// Links `tmp` to `path` unless it exists; the same content is a no-op, other content is
/// refused. `tmp` is removed either way.
fn link_immutable(tmp: &Path, path: &Path) -> Result<(), EvidenceError> {
    let linked = std::fs::hard_link(tmp, path);
    let outcome = match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => match same_content(tmp, path) {
            Ok(true) => Ok(()),
            Ok(false) => Err(EvidenceError::Immutable {
                path: path.to_path_buf(),
            }),
            Err(e) => Err(io(path, e)),
        },
        Err(e) => Err(io(path, e)),
    };
    let _ = std::fs::remove_file(tmp);
    outcome
}

/// Opens a plan file for a streaming read: a regular file only (a FIFO or device in a run
/// folder is refused, never waited on), read at most [`super::MAX_DOC_BYTES`].
fn open_regular(path: &Path) -> std::io::Result<std::io::Take<File>> {
    // A missing file keeps its NotFound kind (callers tell it from a damaged one).
    std::fs::symlink_metadata(path)?;
    crate::bounded_read::open(path, crate::bounded_read::Links::Follow)
        .map(|(f, _)| f.take(super::MAX_DOC_BYTES))
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// True when two files hold the same bytes (read a block at a time).
fn same_content(a: &Path, b: &Path) -> std::io::Result<bool> {
    if std::fs::metadata(a)?.len() != std::fs::metadata(b)?.len() {
        return Ok(false);
    }
    let (mut a, mut b) = (
        BufReader::new(open_regular(a)?),
        BufReader::new(open_regular(b)?),
    );
    let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = a.read(&mut x)?;
        if n == 0 {
            return Ok(true);
        }
        b.read_exact(&mut y[..n])?;
        if x[..n] != y[..n] {
            return Ok(false);
        }
    }
}

impl EvidenceStore {
    /// Expands `spec` (stored with [`EvidenceStore::create_run`]) planned at `now` straight
    /// into its draft and ready plan files, one trial at a time; returns the ready plan's
    /// head (`trials` empty). Two passes over the lazy expansion: the first counts the
    /// summary (which precedes the trials in the document), the second writes.
    pub fn plan_streamed(
        &self,
        spec: &ResolvedRunSpec,
        now: DateTime<Utc>,
    ) -> Result<RunPlan, EvidenceError> {
        let mut counter = SummaryCounter::default();
        for t in Expansion::new(spec, now) {
            counter.add(&t);
        }
        let head = RunPlan {
            schema: PLAN_SCHEMA.to_string(),
            run_id: spec.identity.run_id,
            run_key: spec.identity.run_key.clone(),
            spec_digest: spec.digest.clone(),
            stage: PlanStage::Draft,
            created_at: now,
            trials: Vec::new(),
            summary: counter.finish(),
            digest: String::new(),
        };
        self.write_plans(&head, Expansion::new(spec, now))
    }

    /// Writes `plan.draft.json` then `plan.ready.json` of the plan whose head (every field
    /// but `trials`, `stage` and `digest`) is `head` and whose trials are `trials`, in order;
    /// returns the ready plan's head with its digest. The files and digests are those
    /// [`EvidenceStore::put_plan`] writes for the draft and [`RunPlan::ready`].
    pub fn write_plans(
        &self,
        head: &RunPlan,
        trials: impl Iterator<Item = PlannedTrial>,
    ) -> Result<RunPlan, EvidenceError> {
        let dir = self.root.join(&head.run_key);
        let spec: Option<ResolvedRunSpec> = read_doc(&dir.join(SPEC_FILE))?;
        match spec {
            Some(s) if s.identity.run_id == head.run_id && s.digest == head.spec_digest => {}
            _ => {
                return Err(EvidenceError::OutOfOrder {
                    path: dir.join(DRAFT_FILE),
                    problem: "the run's spec is missing or is not the one this plan expands".into(),
                })
            }
        }
        let mut draft = PlanFile::create(&dir, DRAFT_FILE, head, PlanStage::Draft)?;
        let mut ready = match PlanFile::create(&dir, READY_FILE, head, PlanStage::Ready) {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_file(&draft.tmp);
                return Err(e);
            }
        };
        let (draft_tmp, ready_tmp) = (draft.tmp.clone(), ready.tmp.clone());
        let written = (|| {
            let mut sealer = PlanSealer::new(head);
            let mut text = String::new();
            let mut first = true;
            for t in trials {
                text.clear();
                text.push_str(&canonical_json(&t));
                sealer.add(&text);
                for f in [&mut draft, &mut ready] {
                    if !first {
                        f.write(b",")?;
                    }
                    f.write(text.as_bytes())?;
                }
                first = false;
            }
            let sealed = sealer.finish();
            draft.seal(&sealed.draft_digest)?;
            ready.seal(&sealed.ready_digest)?;
            Ok(sealed)
        })();
        let sealed = match written {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_file(&draft_tmp);
                let _ = std::fs::remove_file(&ready_tmp);
                return Err(e);
            }
        };
        if let Err(e) = link_immutable(&draft_tmp, &dir.join(DRAFT_FILE)) {
            let _ = std::fs::remove_file(&ready_tmp);
            return Err(e);
        }
        link_immutable(&ready_tmp, &dir.join(READY_FILE))?;
        let mut out = head.head();
        out.stage = PlanStage::Ready;
        out.digest = sealed.ready_digest;
        Ok(out)
    }

    /// Finds a run by key or UUID and reads its spec (digest checked) and its ready plan's
    /// head, up to its trials: their count and the digest are checked as
    /// [`EvidenceStore::stream_trials`] reads them.
    pub fn find_head(&self, run: &str) -> Result<StoredHead, EvidenceError> {
        let (dir, spec) = self.find_spec(run)?;
        let path = dir.join(READY_FILE);
        let ready = read_head(&path)?;
        if let Some(h) = &ready {
            if h.spec_digest != spec.digest {
                return Err(EvidenceError::Corrupt {
                    path,
                    problem: "its digest does not match its content or its spec".into(),
                });
            }
        }
        Ok(StoredHead { dir, spec, ready })
    }

    /// Reads the trials of the plan file `path` whose head is `head`, in order, giving the
    /// text of each (canonical JSON, as written) to `each`; checks the plan's digest over
    /// the texts as they pass, so a text that passed is the one the plan was sealed with
    /// (`trial_texts`: the trials are split, not parsed). A mismatch is
    /// [`EvidenceError::Corrupt`] after the last trial (`each` saw them all: check first
    /// with a no-op `each` when that matters). An error of `each` stops the read.
    pub fn stream_trials<E>(
        &self,
        path: &Path,
        head: &RunPlan,
        mut each: impl FnMut(&str) -> Result<(), E>,
    ) -> Result<Result<(), E>, EvidenceError> {
        let mut hasher = PlanHasher::new(head, head.stage);
        let mut failed: Option<Result<E, EvidenceError>> = None;
        let file = open_regular(path).map_err(|e| io(path, e))?;
        let mut input = BufReader::with_capacity(1 << 20, file);
        let read = for_each_text(&mut input, &mut |bytes| {
            let text = match std::str::from_utf8(bytes) {
                Ok(t) => t,
                Err(e) => {
                    let n = hasher.trials();
                    failed = Some(Err(corrupt(path, format!("trial {n} is not UTF-8: {e}"))));
                    return false;
                }
            };
            hasher.add(bytes);
            match each(text) {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(Ok(e));
                    false
                }
            }
        });
        match failed {
            Some(Ok(e)) => return Ok(Err(e)),
            Some(Err(e)) => return Err(e),
            None => {}
        }
        match read {
            Ok(_) => {}
            Err(ScanError::Io(e)) => return Err(io(path, e)),
            Err(ScanError::Shape(problem)) => return Err(corrupt(path, problem)),
        }
        if hasher.trials() != head.summary.trials || hasher.finish() != head.digest {
            return Err(EvidenceError::Corrupt {
                path: path.to_path_buf(),
                problem: "its digest does not match its content or its spec".into(),
            });
        }
        Ok(Ok(()))
    }
}

/// A plan document's fields but its trials. `trials` sorts last in a plan file, so the head
/// is read up to that key and the trials are not scanned: [`EvidenceStore::stream_trials`]
/// counts them and checks the digest (a scan of an 850 MB plan only to count its trials was
/// seconds of `run submit` at 1,000,000 trials).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadDoc {
    schema: String,
    run_id: Uuid,
    run_key: String,
    spec_digest: String,
    stage: PlanStage,
    created_at: DateTime<Utc>,
    summary: PlanSummary,
    digest: String,
}

/// The error that ends a head's read at `trials`.
const AT_TRIALS: &str = "the head ends at its trials";

/// Collects a plan document's members up to its `trials` into `out`, then stops the read.
struct UntilTrials<'o> {
    out: &'o mut Option<serde_json::Map<String, serde_json::Value>>,
}

impl<'de> Visitor<'de> for UntilTrials<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a plan document")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut fields = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "trials" {
                *self.out = Some(fields);
                return Err(serde::de::Error::custom(AT_TRIALS));
            }
            if fields.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate field `{key}`")));
            }
            let value = map.next_value()?;
            fields.insert(key, value);
        }
        Err(serde::de::Error::missing_field("trials"))
    }
}

fn corrupt(path: &Path, e: impl std::fmt::Display) -> EvidenceError {
    EvidenceError::Corrupt {
        path: path.to_path_buf(),
        problem: e.to_string(),
    }
}

/// The head of the plan file `path` (its trials neither read nor counted); `None` when it does
/// not exist.
fn read_head(path: &Path) -> Result<Option<RunPlan>, EvidenceError> {
    let file = match open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path, e)),
    };
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 16, file));
    let mut fields = None;
    let read = de.deserialize_map(UntilTrials { out: &mut fields });
    let fields = match (read, fields) {
        (Err(_), Some(fields)) => fields,
        (Err(e), None) => return Err(corrupt(path, e)),
        (Ok(()), _) => return Err(corrupt(path, "it has no trials")),
    };
    let h: HeadDoc =
        serde_json::from_value(serde_json::Value::Object(fields)).map_err(|e| corrupt(path, e))?;
    Ok(Some(RunPlan {
        schema: h.schema,
        run_id: h.run_id,
        run_key: h.run_key,
        spec_digest: h.spec_digest,
        stage: h.stage,
        created_at: h.created_at,
        trials: Vec::new(),
        summary: h.summary,
        digest: h.digest,
    }))
}

#[cfg(test)]
#[path = "plan_file_tests.rs"]
mod tests;
