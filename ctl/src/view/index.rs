//! The viewer's in-memory index of a folder of run records: one compact row per trial,
//! grouped by run, with each run's summary and task-by-agent matrix aggregated by
//! [`akbench_viewer::model`] (never in the browser). Full records are read again from disk
//! only when one trial is opened.
//!
//! Records are found and validated as `run aggregate` does; a record that fails validation is
//! listed as refused and never partly shown. [`Index::refresh`] re-reads only files whose size
//! or modification time changed, so polling a live sweep's `out/` stays cheap.

use akbench_core::evidence::EvidenceStore;
pub use akbench_viewer::model::{Refused, RunView, TrialFilter, TrialRow};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// Every run found under a folder.
#[derive(Debug, Default)]
pub struct Index {
    /// The viewed folder (canonical).
    pub root: PathBuf,
    /// The local evidence store (specs, plans, outcomes), when given.
    pub store: Option<PathBuf>,
    /// Runs by key.
    pub runs: BTreeMap<String, Arc<RunView>>,
    /// Trial key -> run key.
    pub trial_run: HashMap<String, String>,
    /// Records refused.
    pub refused: Vec<Refused>,
    /// What the evidence store says of each run (state, created), when it holds the run.
    pub meta: HashMap<String, RunMeta>,
    /// Bumped whenever a refresh changed anything.
    pub version: u64,
    /// What was read so far (taken by the server, which scans outside the index's lock).
    pub scan: Scan,
}

/// A run as the local evidence store knows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMeta {
    /// `ready`, `running` (a sweep executes it), `finished`, `interrupted`, ...
    pub state: Option<String>,
    /// When the run was created (its spec resolved).
    pub created: Option<chrono::DateTime<chrono::Utc>>,
}

/// The reading side of an [`Index`]: which files were read, at what size and time.
#[derive(Debug, Default)]
pub struct Scan {
    root: PathBuf,
    store: Option<PathBuf>,
    seen: HashMap<PathBuf, (u64, Option<SystemTime>, Option<TrialRow>)>,
    refused: Vec<Refused>,
    /// Per run: the stamp of its `outcome.json` in the store (a sweep's state changes).
    outcomes: HashMap<String, (u64, Option<SystemTime>)>,
}

fn stamp(p: &Path) -> (u64, Option<SystemTime>) {
    let meta = std::fs::symlink_metadata(p).ok();
    (
        meta.as_ref().map_or(0, |m| m.len()),
        meta.as_ref().and_then(|m| m.modified().ok()),
    )
}

/// A new state of the runs, built by [`Scan::update`] and swapped in by [`Index::apply`].
#[derive(Debug)]
pub struct Update {
    runs: BTreeMap<String, Arc<RunView>>,
    trial_run: HashMap<String, String>,
    refused: Vec<Refused>,
    meta: HashMap<String, RunMeta>,
}

impl Scan {
    /// Re-reads the records whose file changed; `None` when nothing changed.
    pub fn update(&mut self) -> Option<Update> {
        let mut files = Vec::new();
        crate::cmd::shared::records::find_records(&self.root, &mut files);
        let mut changed = files.len() != self.seen.len();
        let mut next = HashMap::with_capacity(files.len());
        for f in files {
            let stamp = stamp(&f);
            match self.seen.remove(&f) {
                Some((len, mtime, row)) if (len, mtime) == stamp => {
                    next.insert(f, (len, mtime, row));
                }
                _ => {
                    changed = true;
                    let file = f
                        .strip_prefix(&self.root)
                        .unwrap_or(&f)
                        .display()
                        .to_string();
                    self.refused.retain(|x| x.file != file);
                    let row = match crate::cmd::shared::records::read(&f) {
                        Ok(r) => Some(TrialRow::of(&r, f.clone())),
                        Err(reason) => {
                            self.refused.push(Refused { file, reason });
                            None
                        }
                    };
                    next.insert(f, (stamp.0, stamp.1, row));
                }
            }
        }
        // Files that disappeared are forgotten, refused ones too.
        for gone in self.seen.keys() {
            let file = gone
                .strip_prefix(&self.root)
                .unwrap_or(gone)
                .display()
                .to_string();
            self.refused.retain(|x| x.file != file);
        }
        self.seen = next;
        // A run's state moves in the store (a sweep ends) without any record changing.
        if let Some(store) = &self.store {
            let runs: std::collections::HashSet<&str> = self
                .seen
                .values()
                .filter_map(|(_, _, r)| r.as_ref().map(|r| r.run.as_str()))
                .collect();
            let outcomes: HashMap<String, (u64, Option<SystemTime>)> = runs
                .into_iter()
                .map(|k| {
                    let f = store.join(k).join(akbench_core::evidence::OUTCOME_FILE);
                    (k.to_string(), stamp(&f))
                })
                .collect();
            changed |= outcomes != self.outcomes;
            self.outcomes = outcomes;
        }
        if !changed {
            return None;
        }
        let mut by_run: BTreeMap<String, Vec<TrialRow>> = BTreeMap::new();
        for (_, _, row) in self.seen.values() {
            if let Some(r) = row {
                by_run.entry(r.run.clone()).or_default().push(r.clone());
            }
        }
        let mut up = Update {
            runs: BTreeMap::new(),
            trial_run: HashMap::new(),
            refused: self.refused.clone(),
            meta: HashMap::new(),
        };
        up.refused.sort_by(|a, b| a.file.cmp(&b.file));
        for (k, rows) in by_run {
            for r in &rows {
                up.trial_run.insert(r.key.clone(), k.clone());
            }
            let (planned, meta) = self.stored(&k);
            up.meta.insert(k.clone(), meta);
            up.runs
                .insert(k.clone(), Arc::new(RunView::build(k, rows, planned)));
        }
        Some(up)
    }

    /// The planned trial count and the state and creation time of `run` in the store.
    fn stored(&self, run: &str) -> (Option<u64>, RunMeta) {
        let Some(store) = &self.store else {
            return (None, RunMeta::default());
        };
        match EvidenceStore::new(store).find(run) {
            Ok(s) => (
                s.plan().map(|p| p.trials.len() as u64),
                RunMeta {
                    state: Some(s.state().to_string()),
                    created: Some(s.spec.identity.created_at),
                },
            ),
            Err(_) => (None, RunMeta::default()),
        }
    }
}

impl Index {
    /// An index over `root` (a folder of records), reading plans from `store` when given.
    /// Empty until [`Index::refresh`].
    pub fn new(root: PathBuf, store: Option<PathBuf>) -> Index {
        Index {
            scan: Scan {
                root: root.clone(),
                store: store.clone(),
                ..Scan::default()
            },
            root,
            store,
            ..Index::default()
        }
    }

    /// An index built from rows already in memory (benchmarks, tests).
    pub fn from_rows(rows: Vec<TrialRow>, planned: Option<u64>) -> Index {
        let mut by_run: BTreeMap<String, Vec<TrialRow>> = BTreeMap::new();
        for r in rows {
            by_run.entry(r.run.clone()).or_default().push(r);
        }
        let mut ix = Index::default();
        for (k, rows) in by_run {
            for r in &rows {
                ix.trial_run.insert(r.key.clone(), k.clone());
            }
            ix.runs
                .insert(k.clone(), Arc::new(RunView::build(k, rows, planned)));
        }
        ix.version = 1;
        ix
    }

    /// Re-reads the records whose file changed; returns true when anything changed.
    pub fn refresh(&mut self) -> bool {
        match self.scan.update() {
            Some(up) => {
                self.apply(up);
                true
            }
            None => false,
        }
    }

    /// Swaps in a new state of the runs.
    pub fn apply(&mut self, up: Update) {
        self.runs = up.runs;
        self.trial_run = up.trial_run;
        self.refused = up.refused;
        self.meta = up.meta;
        self.version += 1;
    }

    /// The folder holding every record of `run` (the deepest folder above all of them: a
    /// sweep's `out/<run key>`), when the run is known.
    pub fn run_dir(&self, run: &str) -> Option<PathBuf> {
        let mut dirs = self
            .runs
            .get(run)?
            .trials
            .iter()
            .filter_map(|t| t.file.parent());
        let mut common = dirs.next()?.to_path_buf();
        for d in dirs {
            while !d.starts_with(&common) {
                common = common.parent()?.to_path_buf();
            }
        }
        Some(common)
    }

    /// The folder holding a trial's record, when the trial is known.
    pub fn trial_file(&self, trial: &str) -> Option<&Path> {
        let run = self.runs.get(self.trial_run.get(trial)?)?;
        let i = run
            .trials
            .binary_search_by(|t| t.key.as_str().cmp(trial))
            .ok()?;
        Some(&run.trials[i].file)
    }
}
