//! Where the pages' data comes from: one [`Source`] trait, so the pages and routes are the
//! same code over a folder of records (`akbench view DIR`, in the `akbench` crate) and over a
//! coordinator (`akbench view --coordinator`, and the coordinator's own HTTP listener).
//!
//! A coordinator is reached through a [`Backend`] (its database in the coordinator process,
//! its gRPC `Control` service from `akbench`); [`Coordinated`] turns any backend into a
//! source: progress and the live status come from the coordinator's cheap status projection
//! on every request, while the run's aggregate view (rates, matrix, trial table) is built
//! from one compact row per done trial ([`Backend::rows`]) and cached until the finished
//! count moves, rebuilt at most once per
//! [`Coordinated::min_rebuild`] or four times the last build's duration, whichever is longer,
//! so a big live run is not re-aggregated on every poll. A run with more done trials than
//! [`Coordinated::aggregate_max`] is not aggregated at all: its page shows the status
//! projection's counts and rates and reads one page of trial rows per request
//! ([`Backend::page`], keyset on the trials' plan ordinals: [`TrialsPage`]).

use crate::compare::{of_views, CompareQuery, Compared};
use crate::live::Live;
use crate::model::{Progress, RunItem, RunList, RunView, TrialRow};
use akbench_core::record::RunRecord;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A source could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SourceError {
    /// Reading failed (database, gRPC, disk).
    #[error("failed to read {what}: {reason}")]
    Read {
        /// What was being read.
        what: String,
        /// Why it failed.
        reason: String,
    },
}

impl SourceError {
    /// A read error.
    pub fn read(what: impl Into<String>, reason: impl ToString) -> SourceError {
        SourceError::Read {
            what: what.into(),
            reason: reason.to_string(),
        }
    }
}

/// Trials per page unless asked otherwise; pages are capped at [`MAX_PER_PAGE`].
pub const PER_PAGE: usize = 50;
/// The largest page served.
pub const MAX_PER_PAGE: usize = 500;

/// Which page of a run's trials to read when the run is paged ([`TrialsPage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageAt {
    /// Trials whose plan ordinal is above this one (`None`: from the first).
    pub after: Option<u64>,
    /// Trials on the page.
    pub per: usize,
}

impl Default for PageAt {
    fn default() -> PageAt {
        PageAt {
            after: None,
            per: PER_PAGE,
        }
    }
}

/// One page of a run's done trials, read alone: the run page of a run too big to aggregate
/// (more done trials than [`Coordinated::aggregate_max`]).
#[derive(Debug, Clone)]
pub struct TrialsPage {
    /// The page's trials, in plan order.
    pub trials: Vec<TrialRow>,
    /// The page starts after this plan ordinal (`None`: the first page).
    pub after: Option<u64>,
    /// The `after` of the next page, when there is one.
    pub next: Option<u64>,
    /// The most done trials the viewer aggregates (why this run is paged).
    pub aggregate_max: u64,
}

/// What the run page needs.
#[derive(Debug, Clone)]
pub struct RunPage {
    /// The aggregate view (empty but for its key and planned count when the run is paged).
    pub view: Arc<RunView>,
    /// One page of trials instead of the aggregate view, for a run too big to aggregate.
    pub paged: Option<TrialsPage>,
    /// The live status, for a run on a coordinator.
    pub live: Option<Live>,
    /// The coordinator's progress (finished of planned), when the run is on one; the view's
    /// record count otherwise.
    pub progress: Progress,
}

/// Where a trial's artifacts (logs, diff) are read from.
#[derive(Debug, Clone)]
pub enum Artifacts {
    /// The folder that the record's artifact paths are relative to.
    Folder(PathBuf),
    /// Not available, and why (shown on the page).
    Unavailable(String),
}

/// One trial's record and its artifacts.
#[derive(Debug, Clone)]
pub struct TrialDoc {
    /// The record.
    pub record: RunRecord,
    /// Its artifacts.
    pub artifacts: Artifacts,
}

/// The data behind the pages. Every method reads; none writes.
pub trait Source: Send + Sync + 'static {
    /// Where the runs come from, in words (a folder, a coordinator's URL).
    fn origin(&self) -> String;
    /// The runs.
    fn runs(&self) -> impl Future<Output = Result<RunList, SourceError>> + Send;
    /// One run's page data (of a paged run, the trials page `at`); `None` when unknown.
    fn run(
        &self,
        run: &str,
        at: PageAt,
    ) -> impl Future<Output = Result<Option<RunPage>, SourceError>> + Send;
    /// One run's progress (what the live updates carry); `None` when unknown.
    fn progress(
        &self,
        run: &str,
    ) -> impl Future<Output = Result<Option<Progress>, SourceError>> + Send;
    /// One trial's record; `None` when unknown.
    fn trial(
        &self,
        trial: &str,
    ) -> impl Future<Output = Result<Option<TrialDoc>, SourceError>> + Send;
    /// Bumped when the source knows something changed (a folder was re-read); sources that
    /// cannot tell are polled by the event streams instead.
    fn changes(&self) -> watch::Receiver<u64>;

    /// Two runs compared (the compare page; `q` names both). By default from the runs' done
    /// trial rows ([`of_views`]); a source that has the runs' records and plans (a folder)
    /// compares them as `akbench run compare` does.
    fn compare(
        &self,
        q: &CompareQuery,
    ) -> impl Future<Output = Result<Compared, SourceError>> + Send {
        async move {
            let Some((l, r)) = q.runs() else {
                return Ok(Compared::Refused(
                    "failed to compare: pick two runs (left and right)".into(),
                ));
            };
            let Some(left) = self.run(l, PageAt::default()).await? else {
                return Ok(Compared::UnknownRun {
                    side: "left",
                    run: l.into(),
                });
            };
            let Some(right) = self.run(r, PageAt::default()).await? else {
                return Ok(Compared::UnknownRun {
                    side: "right",
                    run: r.into(),
                });
            };
            for side in [&left, &right] {
                if let Some(p) = &side.paged {
                    return Ok(Compared::Refused(format!(
                        "failed to compare: run `{}` has {} done trials, more than the viewer \
                         aggregates ({}); fix: compare its records with `akbench run compare`",
                        side.view.key, side.progress.done, p.aggregate_max
                    )));
                }
            }
            Ok(of_views(&left.view, &right.view, q))
        }
    }
}

/// A run's status on a coordinator.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Run key.
    pub run: String,
    /// The live status.
    pub live: Live,
    /// Finished trials by accounting bucket.
    pub outcomes: BTreeMap<String, u64>,
    /// Per agent: (pass rate, graded).
    pub agents: BTreeMap<String, (Option<f64>, u64)>,
}

impl Snapshot {
    /// The progress the live updates carry.
    pub fn progress(&self) -> Progress {
        Progress {
            run: self.run.clone(),
            done: self.live.finished,
            planned: Some(self.live.planned),
            counts: self.outcomes.clone(),
            agents: self.agents.clone(),
            live_html: Some(self.live.html()),
            live: Some(self.live.clone()),
        }
    }
}

/// Reads a coordinator (its database, or its gRPC API).
pub trait Backend: Send + Sync + 'static {
    /// The coordinator, in words.
    fn origin(&self) -> String;
    /// The newest runs (at most a page of them).
    fn runs(&self) -> impl Future<Output = Result<Vec<RunItem>, SourceError>> + Send;
    /// A run's status; `None` when unknown.
    fn status(
        &self,
        run: &str,
    ) -> impl Future<Output = Result<Option<Snapshot>, SourceError>> + Send;
    /// One compact row per done trial of a run (what the aggregate view is built from).
    fn rows(&self, run: &str) -> impl Future<Output = Result<Vec<TrialRow>, SourceError>> + Send;
    /// At most `limit` compact rows of a run's done trials whose plan ordinal is above `after`
    /// (from the first when `None`), in plan order, each with its ordinal: one page of a run
    /// too big to aggregate.
    fn page(
        &self,
        run: &str,
        after: Option<u64>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<TrialRow>, SourceError>> + Send;
    /// One trial's record; `None` when it has none (yet).
    fn record(
        &self,
        trial: &str,
    ) -> impl Future<Output = Result<Option<RunRecord>, SourceError>> + Send;
    /// Where the artifacts of `trial` are.
    fn artifacts(&self, trial: &str) -> Artifacts;
}

#[derive(Debug)]
struct Cached {
    finished: u64,
    view: Arc<RunView>,
    built_at: Instant,
    took: Duration,
}

/// A [`Source`] over a coordinator [`Backend`].
#[derive(Debug)]
pub struct Coordinated<B> {
    backend: B,
    cache: Mutex<HashMap<String, Cached>>,
    /// The shortest time between two rebuilds of one run's view.
    pub min_rebuild: Duration,
    /// The most done trials a run may have for its page to aggregate them all (rates with
    /// intervals, causes, the matrix, filters); a bigger run's page reads one page of trials.
    pub aggregate_max: u64,
    changes: watch::Sender<u64>,
}

/// [`Coordinated::aggregate_max`] unless set: a cold run page that reads and aggregates
/// 100,000 compact rows takes 1.72 s (docs/performance-notebook.md, "Viewer", at load 4-5), the most
/// under the run page's 2 s goal.
pub const AGGREGATE_MAX: u64 = 100_000;

impl<B: Backend> Coordinated<B> {
    /// A source over `backend`.
    pub fn new(backend: B) -> Coordinated<B> {
        Coordinated {
            backend,
            cache: Mutex::new(HashMap::new()),
            min_rebuild: Duration::from_secs(1),
            aggregate_max: AGGREGATE_MAX,
            changes: watch::channel(0).0,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    fn cached(&self, run: &str, finished: u64) -> Option<Arc<RunView>> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let c = cache.get(run)?;
        let fresh = c.finished == finished;
        let young = c.built_at.elapsed() < self.min_rebuild.max(c.took * 4);
        (fresh || young).then(|| c.view.clone())
    }
}

/// The trial's run key: the first segment of its key (`<run>/<task>/<agent>/r<n>`).
pub fn run_of_trial(trial: &str) -> &str {
    trial.split('/').next().unwrap_or("")
}

impl<B: Backend> Source for Coordinated<B> {
    fn origin(&self) -> String {
        self.backend.origin()
    }

    async fn runs(&self) -> Result<RunList, SourceError> {
        Ok(RunList {
            runs: self.backend.runs().await?,
            refused: Vec::new(),
        }
        .newest_first())
    }

    async fn run(&self, run: &str, at: PageAt) -> Result<Option<RunPage>, SourceError> {
        let Some(snap) = self.backend.status(run).await? else {
            return Ok(None);
        };
        let key = snap.run.clone();
        if snap.live.finished > self.aggregate_max {
            // One page more than shown tells whether there is a next page.
            let per = at.per.clamp(1, MAX_PER_PAGE);
            let limit = u32::try_from(per + 1).unwrap_or(u32::MAX);
            let mut trials = self.backend.page(&key, at.after, limit).await?;
            let next = if trials.len() > per {
                trials.truncate(per);
                trials.last().and_then(|t| t.ordinal)
            } else {
                None
            };
            return Ok(Some(RunPage {
                view: Arc::new(RunView {
                    key,
                    planned: Some(snap.live.planned),
                    ..RunView::default()
                }),
                paged: Some(TrialsPage {
                    trials,
                    after: at.after,
                    next,
                    aggregate_max: self.aggregate_max,
                }),
                progress: snap.progress(),
                live: Some(snap.live),
            }));
        }
        let view = match self.cached(&key, snap.live.finished) {
            Some(v) => v,
            None => {
                let start = Instant::now();
                let rows = self.backend.rows(&key).await?;
                let view = Arc::new(RunView::build(key.clone(), rows, Some(snap.live.planned)));
                self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(
                    key,
                    Cached {
                        finished: snap.live.finished,
                        view: view.clone(),
                        built_at: Instant::now(),
                        took: start.elapsed(),
                    },
                );
                view
            }
        };
        Ok(Some(RunPage {
            view,
            paged: None,
            progress: snap.progress(),
            live: Some(snap.live),
        }))
    }

    async fn progress(&self, run: &str) -> Result<Option<Progress>, SourceError> {
        Ok(self.backend.status(run).await?.map(|s| s.progress()))
    }

    async fn trial(&self, trial: &str) -> Result<Option<TrialDoc>, SourceError> {
        Ok(self.backend.record(trial).await?.map(|record| TrialDoc {
            artifacts: self.backend.artifacts(&record.trial.key),
            record,
        }))
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// The artifacts of `trial` under a folder laid out as `akbench up` / `sweep` leave it
/// (`<root>/<trial key>/a<n>/...`), or why not; a key with an empty, `.` or `..` segment is
/// refused.
pub fn artifacts_under(root: Option<&std::path::Path>, trial: &str) -> Artifacts {
    let Some(root) = root else {
        return Artifacts::Unavailable(
            "the artifacts (logs, diff) are in the workers' artifact store; give the viewer the \
             folder with --artifacts DIR to show them"
                .into(),
        );
    };
    let safe = !trial.is_empty()
        && trial
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
    if !safe {
        return Artifacts::Unavailable(format!("the trial key `{trial}` is not a safe path"));
    }
    Artifacts::Folder(root.join(trial))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_folders_stay_under_the_root() {
        let root = std::path::Path::new("/srv/out");
        let cases = [
            ("run-1/t/a/r0", Some("/srv/out/run-1/t/a/r0")),
            ("run-1/../../etc", None),
            ("run-1//x", None),
            ("", None),
            ("./x", None),
        ];
        for (key, want) in cases {
            let got = match artifacts_under(Some(root), key) {
                Artifacts::Folder(p) => Some(p.display().to_string()),
                Artifacts::Unavailable(_) => None,
            };
            assert_eq!(got.as_deref(), want, "{key}");
        }
        assert!(matches!(
            artifacts_under(None, "run-1/t/a/r0"),
            Artifacts::Unavailable(_)
        ));
    }

    #[test]
    fn the_run_of_a_trial_is_its_first_segment() {
        assert_eq!(
            run_of_trial("exp-20260101-ab12/t/a/r0"),
            "exp-20260101-ab12"
        );
        assert_eq!(run_of_trial(""), "");
    }
}
