//! The viewer's in-memory index of a folder of run records: one compact row per trial,
//! grouped by run, with each run's summary and task-by-agent matrix aggregated here (never in
//! the browser). Full records are read again from disk only when one trial is opened.
//!
//! Records are found and validated as `run aggregate` does; a record that fails validation is
//! listed as refused and never partly shown. [`Index::refresh`] re-reads only files whose size
//! or modification time changed, so polling a live sweep's `out/` stays cheap.

use akbench_core::accounting::{Bucket, BucketCounts, Observation, ALL_BUCKETS};
use akbench_core::evidence::EvidenceStore;
use akbench_core::interval::{wilson, Interval, Z95};
use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_core::report::{summarize, ReportTrial, Summary};
use akbench_core::spend::Spend;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One trial as the lists and the matrix need it.
#[derive(Debug, Clone, Serialize)]
pub struct TrialRow {
    /// Run key.
    pub run: String,
    /// Trial key.
    pub key: String,
    /// Task id.
    pub task: String,
    /// Agent name.
    pub agent: String,
    /// Terminal state of the last attempt.
    pub state: State,
    /// Solved, when graded.
    pub ok: Option<bool>,
    /// Score, when graded.
    pub score: Option<f64>,
    /// The accounting bucket.
    pub bucket: &'static str,
    /// Why the last attempt ended where it did.
    pub cause: Option<String>,
    /// Attempts.
    pub attempts: u32,
    /// Reported cost over all attempts, when any attempt reported one.
    pub cost_usd: Option<f64>,
    /// Input + output tokens over all attempts, when reported.
    pub tokens: Option<u64>,
    /// What the trial spent, summed over its attempts (not sent to the browser).
    #[serde(skip)]
    pub spend: Spend,
    /// Wall time from start to finish, in milliseconds.
    pub duration_ms: i64,
    /// The record file (absolute; never sent to the browser).
    #[serde(skip)]
    pub file: PathBuf,
}

impl TrialRow {
    /// The row of a validated record read from `file`.
    pub fn of(r: &RunRecord, file: PathBuf) -> TrialRow {
        let last = r.attempts.last();
        let obs = Observation {
            trial_id: r.trial.id,
            state: r.outcome.state,
            ok: r.outcome.ok,
            score: r.outcome.score,
            attempt_id: last.map(|a| a.attempt.id),
            source: None,
        };
        // One definition of what a trial spent (core::spend), as `run aggregate` counts it.
        let spend = Spend::of_record(r);
        let cost_usd = spend.cost_usd;
        let tokens = match (spend.input_tokens, spend.output_tokens) {
            (None, None) => None,
            (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
        };
        TrialRow {
            run: r.run.key.clone(),
            key: r.trial.key.clone(),
            task: r.task.release.id.clone(),
            agent: r.agent.name.clone(),
            state: r.outcome.state,
            ok: r.outcome.ok,
            score: r.outcome.score,
            bucket: Bucket::of(&obs).as_str(),
            cause: last.and_then(|a| a.cause.clone()),
            attempts: r.outcome.attempts,
            cost_usd,
            tokens,
            spend,
            duration_ms: (r.finished_at - r.started_at).num_milliseconds(),
            file,
        }
    }

    fn report_trial(&self) -> ReportTrial {
        ReportTrial {
            key: self.key.clone(),
            agent: self.agent.clone(),
            task: self.task.clone(),
            cause: self.cause.clone(),
            spend: self.spend,
            observation: Observation {
                trial_id: uuid::Uuid::nil(),
                state: self.state,
                ok: self.ok,
                score: self.score,
                attempt_id: None,
                source: None,
            },
        }
    }
}

/// One cell of the task-by-agent matrix.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cell {
    /// Trials in the cell.
    pub trials: u64,
    /// Solved.
    pub solved: u64,
    /// Graded, not solved.
    pub failed: u64,
    /// Everything else (agent failures, timeouts, infrastructure, not graded, ...).
    pub other: u64,
    /// The first trial of the cell (a link target).
    pub first: String,
}

impl Cell {
    /// A colour class: all solved, none solved, mixed, or no verdict.
    pub fn class(&self) -> &'static str {
        match (self.solved, self.failed + self.other) {
            (0, 0) => "c-empty",
            (_, 0) => "c-ok",
            (0, _) if self.failed > 0 => "c-bad",
            (0, _) => "c-none",
            _ => "c-mixed",
        }
    }
}

/// Per-agent rates with a 95% Wilson interval on the pass rate.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRates {
    /// Agent.
    pub agent: String,
    /// The summary row (counts and [`akbench_core::rates::Rates`]).
    pub row: akbench_core::report::Row,
    /// Interval of the pass rate (succeeded / graded); `None` when nothing was graded.
    pub pass_interval: Option<Interval>,
    /// Total reported cost, when any trial reported one.
    pub cost_usd: Option<f64>,
    /// Total reported tokens, when any trial reported them.
    pub tokens: Option<u64>,
}

/// A run as the run page shows it.
#[derive(Debug, Clone, Default)]
pub struct RunView {
    /// Run key.
    pub key: String,
    /// Trials with a record, sorted by key.
    pub trials: Vec<TrialRow>,
    /// Planned trials, when the run's plan was found in the evidence store.
    pub planned: Option<u64>,
    /// Summary over the records.
    pub summary: Option<Summary>,
    /// Tasks (rows of the matrix), sorted.
    pub tasks: Vec<String>,
    /// Agents (columns of the matrix), sorted.
    pub agents: Vec<String>,
    /// (task, agent) -> cell.
    pub matrix: HashMap<(String, String), Cell>,
    /// Cause text (first line, capped) -> trials, for trials that did not reach a verdict.
    pub causes: BTreeMap<String, u64>,
    /// Per-agent rates.
    pub rates: Vec<AgentRates>,
}

/// Progress of a run: what the progress bar and the live updates carry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// Run key.
    pub run: String,
    /// Trials with a record.
    pub done: u64,
    /// Planned trials, when known.
    pub planned: Option<u64>,
    /// Trials per bucket.
    pub counts: BTreeMap<&'static str, u64>,
    /// Per agent: (pass rate, graded).
    pub agents: BTreeMap<String, (Option<f64>, u64)>,
}

impl RunView {
    /// Aggregates `trials` (any order) into a run view.
    pub fn build(key: String, mut trials: Vec<TrialRow>, planned: Option<u64>) -> RunView {
        trials.sort_by(|a, b| a.key.cmp(&b.key));
        let summary = summarize(
            &trials
                .iter()
                .map(TrialRow::report_trial)
                .collect::<Vec<_>>(),
        );
        let mut matrix: HashMap<(String, String), Cell> = HashMap::new();
        let mut causes: BTreeMap<String, u64> = BTreeMap::new();
        let mut cost: BTreeMap<&str, (Option<f64>, Option<u64>)> = BTreeMap::new();
        for t in &trials {
            let c = matrix.entry((t.task.clone(), t.agent.clone())).or_default();
            if c.trials == 0 {
                c.first = t.key.clone();
            }
            c.trials += 1;
            match t.ok {
                Some(true) => c.solved += 1,
                Some(false) => c.failed += 1,
                None => c.other += 1,
            }
            if t.ok.is_none() {
                let cause = t.cause.as_deref().unwrap_or("(no cause recorded)");
                let line: String = cause
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(120)
                    .collect();
                *causes.entry(format!("{}: {line}", t.state)).or_default() += 1;
            }
            let e = cost.entry(&t.agent).or_default();
            if let Some(v) = t.cost_usd {
                e.0 = Some(e.0.unwrap_or(0.0) + v);
            }
            if let Some(v) = t.tokens {
                e.1 = Some(e.1.unwrap_or(0) + v);
            }
        }
        let mut tasks: Vec<String> = trials.iter().map(|t| t.task.clone()).collect();
        tasks.sort();
        tasks.dedup();
        let agents: Vec<String> = summary.by_agent.keys().cloned().collect();
        let rates = summary
            .by_agent
            .iter()
            .map(|(agent, row)| AgentRates {
                agent: agent.clone(),
                pass_interval: wilson(row.counts.succeeded, row.rates.graded, Z95),
                cost_usd: cost.get(agent.as_str()).and_then(|c| c.0),
                tokens: cost.get(agent.as_str()).and_then(|c| c.1),
                row: row.clone(),
            })
            .collect();
        RunView {
            key,
            trials,
            planned,
            summary: Some(summary),
            tasks,
            agents,
            matrix,
            causes,
            rates,
        }
    }

    /// Bucket counts over the records.
    pub fn counts(&self) -> BucketCounts {
        self.summary
            .as_ref()
            .map(|s| s.total.counts)
            .unwrap_or_default()
    }

    /// The run's progress.
    pub fn progress(&self) -> Progress {
        let counts = self.counts();
        Progress {
            run: self.key.clone(),
            done: self.trials.len() as u64,
            planned: self.planned,
            counts: ALL_BUCKETS
                .iter()
                .map(|b| (b.as_str(), counts.get(*b)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            agents: self
                .rates
                .iter()
                .map(|r| (r.agent.clone(), (r.row.rates.pass_rate, r.row.rates.graded)))
                .collect(),
        }
    }

    /// The trials matching a filter.
    pub fn filtered<'a>(&'a self, f: &'a TrialFilter) -> impl Iterator<Item = &'a TrialRow> + 'a {
        self.trials.iter().filter(move |t| f.matches(t))
    }
}

/// A filter over a run's trials (from the query string).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct TrialFilter {
    /// Only this agent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Only this bucket (`succeeded`, `failed`, `agent_failed`, ...).
    #[serde(default)]
    pub outcome: Option<String>,
    /// Substring of the trial key, task or cause.
    #[serde(default)]
    pub q: Option<String>,
}

impl TrialFilter {
    /// True when `t` passes.
    pub fn matches(&self, t: &TrialRow) -> bool {
        let nonempty =
            |o: &Option<String>| o.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
        if let Some(a) = nonempty(&self.agent) {
            if t.agent != a {
                return false;
            }
        }
        if let Some(o) = nonempty(&self.outcome) {
            if t.bucket != o {
                return false;
            }
        }
        if let Some(q) = nonempty(&self.q) {
            let q = q.to_lowercase();
            let hit = t.key.to_lowercase().contains(&q)
                || t.task.to_lowercase().contains(&q)
                || t.cause
                    .as_deref()
                    .is_some_and(|c| c.to_lowercase().contains(&q));
            if !hit {
                return false;
            }
        }
        true
    }
}

/// A record file that was refused, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Refused {
    /// The file, relative to the viewed folder.
    pub file: String,
    /// Why.
    pub reason: String,
}

/// Every run found under a folder.
#[derive(Debug, Default)]
pub struct Index {
    /// The viewed folder (canonical).
    pub root: PathBuf,
    /// Runs by key.
    pub runs: BTreeMap<String, RunView>,
    /// Trial key -> run key.
    pub trial_run: HashMap<String, String>,
    /// Records refused.
    pub refused: Vec<Refused>,
    /// Bumped whenever a refresh changed anything.
    pub version: u64,
    /// What was read so far (taken by the server, which scans outside the index's lock).
    pub scan: Scan,
}

/// The reading side of an [`Index`]: which files were read, at what size and time.
#[derive(Debug, Default)]
pub struct Scan {
    root: PathBuf,
    store: Option<PathBuf>,
    seen: HashMap<PathBuf, (u64, Option<SystemTime>, Option<TrialRow>)>,
    refused: Vec<Refused>,
}

/// A new state of the runs, built by [`Scan::update`] and swapped in by [`Index::apply`].
#[derive(Debug)]
pub struct Update {
    runs: BTreeMap<String, RunView>,
    trial_run: HashMap<String, String>,
    refused: Vec<Refused>,
}

impl Scan {
    /// Re-reads the records whose file changed; `None` when nothing changed.
    pub fn update(&mut self) -> Option<Update> {
        let mut files = Vec::new();
        crate::cmd::aggregate::find_records(&self.root, &mut files);
        let mut changed = files.len() != self.seen.len();
        let mut next = HashMap::with_capacity(files.len());
        for f in files {
            let meta = std::fs::symlink_metadata(&f).ok();
            let stamp = (
                meta.as_ref().map_or(0, |m| m.len()),
                meta.as_ref().and_then(|m| m.modified().ok()),
            );
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
                    let row = match crate::cmd::aggregate::read(&f) {
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
        };
        up.refused.sort_by(|a, b| a.file.cmp(&b.file));
        for (k, rows) in by_run {
            for r in &rows {
                up.trial_run.insert(r.key.clone(), k.clone());
            }
            let planned = self.planned(&k);
            up.runs.insert(k.clone(), RunView::build(k, rows, planned));
        }
        Some(up)
    }

    fn planned(&self, run: &str) -> Option<u64> {
        let store = EvidenceStore::new(self.store.as_ref()?);
        let stored = store.find(run).ok()?;
        stored.plan().map(|p| p.trials.len() as u64)
    }
}

impl Index {
    /// An index over `root` (a folder of records), reading plans from `store` when given.
    /// Empty until [`Index::refresh`].
    pub fn new(root: PathBuf, store: Option<PathBuf>) -> Index {
        Index {
            scan: Scan {
                root: root.clone(),
                store,
                ..Scan::default()
            },
            root,
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
            ix.runs.insert(k.clone(), RunView::build(k, rows, planned));
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
        self.version += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        task: &str,
        agent: &str,
        r: u32,
        state: State,
        ok: Option<bool>,
        cause: Option<&str>,
    ) -> TrialRow {
        let bucket = Bucket::of(&Observation {
            trial_id: uuid::Uuid::nil(),
            state,
            ok,
            score: None,
            attempt_id: None,
            source: None,
        })
        .as_str();
        TrialRow {
            run: "run-1".into(),
            key: format!("run-1/{task}/{agent}/r{r}"),
            task: task.into(),
            agent: agent.into(),
            state,
            ok,
            score: ok.map(|o| if o { 1.0 } else { 0.0 }),
            bucket,
            cause: cause.map(str::to_owned),
            attempts: 1,
            cost_usd: None,
            tokens: None,
            spend: Spend::default(),
            duration_ms: 10,
            file: PathBuf::new(),
        }
    }

    #[test]
    fn cells_are_coloured_by_outcome() {
        let cell = |solved, failed, other| Cell {
            trials: solved + failed + other,
            solved,
            failed,
            other,
            first: String::new(),
        };
        let cases = [
            (cell(0, 0, 0), "c-empty"),
            (cell(2, 0, 0), "c-ok"),
            (cell(0, 2, 0), "c-bad"),
            (cell(0, 1, 1), "c-bad"),
            (cell(0, 0, 2), "c-none"),
            (cell(1, 1, 0), "c-mixed"),
            (cell(1, 0, 1), "c-mixed"),
        ];
        for (c, want) in cases {
            assert_eq!(c.class(), want, "{c:?}");
        }
    }

    #[test]
    fn a_run_is_aggregated_on_the_server() {
        let rows = vec![
            row("t1", "a", 0, State::Completed, Some(true), None),
            row("t1", "a", 1, State::Completed, Some(false), None),
            row(
                "t1",
                "b",
                0,
                State::Failed,
                None,
                Some("the agent exited with code 3\nmore"),
            ),
            row(
                "t2",
                "b",
                0,
                State::InfrastructureError,
                None,
                Some("provider: 429"),
            ),
            row("t2", "a", 0, State::Completed, Some(true), None),
        ];
        let r = RunView::build("run-1".into(), rows, Some(8));
        assert_eq!(r.tasks, ["t1", "t2"]);
        assert_eq!(r.agents, ["a", "b"]);
        let c = &r.matrix[&("t1".to_string(), "a".to_string())];
        assert_eq!((c.trials, c.solved, c.failed, c.other), (2, 1, 1, 0));
        assert_eq!(c.first, "run-1/t1/a/r0");
        assert_eq!(
            r.causes.get("failed: the agent exited with code 3"),
            Some(&1)
        );
        assert_eq!(
            r.causes.get("infrastructure_error: provider: 429"),
            Some(&1)
        );
        let a = &r.rates[0];
        assert_eq!(a.row.rates.graded, 3);
        let iv = a.pass_interval.unwrap();
        assert!(iv.low < 2.0 / 3.0 && 2.0 / 3.0 < iv.high, "{iv:?}");
        assert_eq!(
            r.rates[1].pass_interval, None,
            "b has nothing graded: no interval"
        );
        let p = r.progress();
        assert_eq!((p.done, p.planned), (5, Some(8)));
        assert_eq!(p.counts.get("succeeded"), Some(&2));
        assert_eq!(p.counts.get("missing"), None, "empty buckets are left out");
    }

    #[test]
    fn filters_combine() {
        let rows = vec![
            row("t1", "a", 0, State::Completed, Some(true), None),
            row(
                "t1",
                "b",
                0,
                State::Failed,
                None,
                Some("Exited with code 3"),
            ),
            row("t2", "b", 0, State::Completed, Some(false), None),
        ];
        let r = RunView::build("run-1".into(), rows, None);
        let f = |agent: Option<&str>, outcome: Option<&str>, q: Option<&str>| TrialFilter {
            agent: agent.map(str::to_owned),
            outcome: outcome.map(str::to_owned),
            q: q.map(str::to_owned),
        };
        let cases = [
            (f(None, None, None), 3),
            (f(Some(""), Some(""), Some("")), 3),
            (f(Some("b"), None, None), 2),
            (f(Some("b"), Some("failed"), None), 1),
            (f(None, Some("agent_failed"), None), 1),
            (f(None, None, Some("code 3")), 1),
            (f(None, None, Some("T2")), 1),
            (f(Some("a"), Some("failed"), None), 0),
        ];
        for (filter, want) in cases {
            assert_eq!(r.filtered(&filter).count(), want, "{filter:?}");
        }
    }
}
