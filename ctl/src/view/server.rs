//! The folder source of the viewer: an [`Index`] of a folder's records behind the viewer
//! crate's routes ([`akbench_viewer::server::router`]). Read-only: nothing writes to the
//! viewed folder.
//!
//! A background task re-reads the folder every `poll` interval ([`Index::refresh`], which
//! reads only changed files) and bumps a version that the event streams wait on.

use super::index::{Index, Scan};
use crate::cli::RemoteArgs;
use akbench_core::evidence::EvidenceStore;
use akbench_viewer::compare::{CompareDoc, CompareQuery, Compared, Conditions};
use akbench_viewer::model::{Progress, RunItem, RunList};
use akbench_viewer::source::{Artifacts, PageAt, RunPage, Source, SourceError, TrialDoc};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// Shared state of the server: the folder source.
#[derive(Debug, Clone)]
pub struct Viewer {
    index: Arc<RwLock<Index>>,
    /// Reading happens outside the index's lock: pages are served while a folder is walked.
    scan: Arc<std::sync::Mutex<Scan>>,
    version: watch::Sender<u64>,
}

impl Viewer {
    /// A viewer over an index (already refreshed once by the caller, or built in memory).
    pub fn new(mut index: Index) -> Viewer {
        let v = index.version;
        let scan = std::mem::take(&mut index.scan);
        Viewer {
            index: Arc::new(RwLock::new(index)),
            scan: Arc::new(std::sync::Mutex::new(scan)),
            version: watch::channel(v).0,
        }
    }

    /// Re-reads the folder; on change, wakes the event streams. Returns true on change.
    pub fn refresh(&self) -> bool {
        let update = self.scan.lock().unwrap_or_else(|e| e.into_inner()).update();
        let Some(update) = update else {
            return false;
        };
        let mut ix = self.index.write().unwrap_or_else(|e| e.into_inner());
        ix.apply(update);
        self.version.send_replace(ix.version);
        true
    }

    /// Event streams open right now.
    pub fn subscribers(&self) -> usize {
        self.version.receiver_count()
    }

    /// Refreshes the index every `poll` until the returned task is dropped or aborted.
    pub fn spawn_poller(&self, poll: Duration) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(poll);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let m = me.clone();
                if tokio::task::spawn_blocking(move || m.refresh())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Source for Viewer {
    fn origin(&self) -> String {
        self.read().root.display().to_string()
    }

    async fn runs(&self) -> Result<RunList, SourceError> {
        let ix = self.read();
        Ok(RunList {
            runs: ix
                .runs
                .values()
                .rev()
                .map(|r| RunItem {
                    key: r.key.clone(),
                    state: ix.meta.get(&r.key).and_then(|m| m.state.clone()),
                    created: ix.meta.get(&r.key).and_then(|m| m.created),
                    done: r.trials.len() as u64,
                    planned: r.planned,
                    agents: r.agents.clone(),
                    tasks: Some(r.tasks.len()),
                    pass_rate: r.summary.as_ref().and_then(|s| s.total.rates.pass_rate),
                    solve_rate: r.summary.as_ref().and_then(|s| s.total.rates.solve_rate),
                })
                .collect(),
            refused: ix.refused.clone(),
        }
        .newest_first())
    }

    async fn run(&self, run: &str, _: PageAt) -> Result<Option<RunPage>, SourceError> {
        // A folder's runs are aggregated whole (never paged).
        Ok(self.read().runs.get(run).map(|r| RunPage {
            progress: r.progress(),
            view: r.clone(),
            paged: None,
            live: None,
        }))
    }

    async fn progress(&self, run: &str) -> Result<Option<Progress>, SourceError> {
        Ok(self.read().runs.get(run).map(|r| r.progress()))
    }

    async fn trial(&self, trial: &str) -> Result<Option<TrialDoc>, SourceError> {
        let Some(file) = self.read().trial_file(trial).map(|p| p.to_path_buf()) else {
            return Ok(None);
        };
        let read = tokio::task::spawn_blocking(move || {
            crate::cmd::shared::records::read(&file).map(|r| (r, file))
        })
        .await
        .map_err(|e| SourceError::read(format!("the record of `{trial}`"), e))?;
        let (record, file) =
            read.map_err(|e| SourceError::read(format!("the record of `{trial}`"), e))?;
        let artifacts = match file.parent() {
            Some(dir) => Artifacts::Folder(dir.to_path_buf()),
            None => Artifacts::Unavailable("the record has no folder".into()),
        };
        Ok(Some(TrialDoc { record, artifacts }))
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// As `akbench run compare <out>/<left> <out>/<right>` compares: the records reconciled
    /// against the stored plans, the conditions checked, the same refusals.
    async fn compare(&self, q: &CompareQuery) -> Result<Compared, SourceError> {
        let Some((l, r)) = q.runs() else {
            return Ok(Compared::Refused(
                "failed to compare: pick two runs (left and right)".into(),
            ));
        };
        let (dirs, store) = {
            let ix = self.read();
            let store = ix.store.clone();
            let dir = |side, run: &str| {
                ix.run_dir(run).ok_or_else(|| Compared::UnknownRun {
                    side,
                    run: run.to_string(),
                })
            };
            let dirs = dir("left", l).and_then(|a| dir("right", r).map(|b| (a, b)));
            (dirs, store)
        };
        let (ldir, rdir) = match dirs {
            Ok(d) => d,
            Err(unknown) => return Ok(unknown),
        };
        let q = q.clone();
        tokio::task::spawn_blocking(move || compare_dirs(&ldir, &rdir, store, &q))
            .await
            .map_err(|e| SourceError::read("the compared runs", e))
    }
}

/// Loads two runs' folders as `run compare` does and compares them; bad input is a refusal.
fn compare_dirs(left: &Path, right: &Path, store: Option<PathBuf>, q: &CompareQuery) -> Compared {
    use crate::cmd::shared::compare::{compute, Settings};
    use crate::cmd::shared::source::Finder;
    // Without a store nothing is found in it (the records alone are compared).
    let store = EvidenceStore::new(store.unwrap_or_else(|| left.join(".no-store")));
    let remote = RemoteArgs::default();
    let finder = Finder {
        store: &store,
        out: left,
        remote: &remote,
    };
    let (la, ra) = q.agents();
    let settings = Settings {
        left_agent: la.map(str::to_string),
        right_agent: ra.map(str::to_string),
        allow_different: q.allowed(),
        seed: akbench_core::compare::stats::DEFAULT_SEED,
        resamples: akbench_core::compare::stats::DEFAULT_RESAMPLES,
    };
    let loaded = finder
        .load(&left.display().to_string())
        .and_then(|a| Ok((a, finder.load(&right.display().to_string())?)));
    let (a, b) = match loaded {
        Ok(x) => x,
        Err(e) => return Compared::Refused(format!("{e:#}")),
    };
    match compute(&a, &b, &settings) {
        Ok((checked, c)) => Compared::Done(Box::new(CompareDoc {
            left: a.run_key,
            right: b.run_key,
            conditions: Some(Conditions {
                by: checked.by.to_string(),
                changes: checked.diff.changes.iter().map(|c| c.to_string()).collect(),
                blocking: checked.blocking.len(),
            }),
            comparison: c,
        })),
        Err(e) => Compared::Refused(format!("{e:#}")),
    }
}

/// Serves the viewer's routes over the folder on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    v: Viewer,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // The folder's version wakes the event streams; the poll is only a fallback.
    let app = akbench_viewer::server::router(Arc::new(v), Duration::from_secs(5))
        .merge(akbench_viewer::server::assets());
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
