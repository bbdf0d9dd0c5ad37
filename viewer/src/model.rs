//! What the pages show, whatever the source: one compact row per trial ([`TrialRow`]),
//! grouped by run, with each run's summary, per-agent rates and task-by-agent matrix
//! aggregated here on the server ([`RunView`], never in the browser), the progress that the
//! live updates carry ([`Progress`]) and, for a run on a coordinator, its live status
//! ([`Live`]: ETA, workers, paused provider routes).

use akbench_core::accounting::{Bucket, BucketCounts, Observation, ALL_BUCKETS};
use akbench_core::grading::integrity::GradeFlags;
use akbench_core::interval::{wilson, Interval, Z95};
use akbench_core::lifecycle::State;
use akbench_core::record::RunRecord;
use akbench_core::report::{summarize, ReportTrial, Summary};
use akbench_core::spend::Spend;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

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
    /// Whether its grade was flagged tampered or withheld paths (core's definition; a
    /// coordinator's compact rows carry them from the last attempt's accepted record).
    #[serde(skip)]
    pub grading: GradeFlags,
    /// Wall time from start to finish, in milliseconds.
    pub duration_ms: i64,
    /// The record file (absolute; never sent to the browser).
    #[serde(skip)]
    pub file: PathBuf,
    /// The trial's ordinal in its run's plan, when the source knows it (a coordinator's
    /// compact rows: the cursor of the next page of a paged run page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordinal: Option<u64>,
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
            cause: r.cause(),
            attempts: r.outcome.attempts,
            cost_usd,
            tokens,
            spend,
            grading: GradeFlags::of_record(r),
            duration_ms: (r.finished_at - r.started_at).num_milliseconds(),
            file,
            ordinal: None,
        }
    }

    /// The row of a trial a coordinator reduced to its compact columns (its
    /// `view_rows.sql`, also what the `ListTrialRows` RPC carries): the task is read from the
    /// key, `ok` follows from the bucket (solved, graded and not solved, or no verdict, so the
    /// summary counts what status counts) and the tokens are input + output. One definition
    /// for the coordinator's HTTP viewer and `akbench view --coordinator`.
    pub fn compact(c: CompactTrial) -> TrialRow {
        TrialRow {
            task: c.key.split('/').nth(1).unwrap_or("").to_string(),
            ok: match c.bucket {
                "succeeded" => Some(true),
                "failed" => Some(false),
                _ => None,
            },
            cost_usd: c.spend.cost_usd,
            tokens: match (c.spend.input_tokens, c.spend.output_tokens) {
                (None, None) => None,
                (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
            },
            run: c.run,
            key: c.key,
            agent: c.agent,
            state: c.state,
            score: c.score,
            bucket: c.bucket,
            cause: c.cause,
            attempts: c.attempts,
            spend: c.spend,
            grading: c.grading,
            duration_ms: c.duration_ms,
            file: PathBuf::new(),
            ordinal: Some(c.ordinal),
        }
    }

    fn report_trial(&self) -> ReportTrial {
        ReportTrial {
            key: self.key.clone(),
            agent: self.agent.clone(),
            task: self.task.clone(),
            cause: self.cause.clone(),
            spend: self.spend,
            attempts: self.attempts,
            grading: self.grading,
            // Not in the viewer's compact rows.
            network: Default::default(),
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

/// A done trial as a coordinator stores it, reduced to what [`TrialRow::compact`] needs.
#[derive(Debug, Clone)]
pub struct CompactTrial {
    /// Run key.
    pub run: String,
    /// Trial key (`<run>/<task>/<agent>/r<n>`).
    pub key: String,
    /// Agent name.
    pub agent: String,
    /// The accounting bucket the coordinator stored.
    pub bucket: &'static str,
    /// Terminal state of the last finished attempt.
    pub state: State,
    /// Why the last finished attempt ended where it did.
    pub cause: Option<String>,
    /// Finished attempts.
    pub attempts: u32,
    /// The score in the last attempt's accepted record.
    pub score: Option<f64>,
    /// What the trial spent, summed over its attempts.
    pub spend: Spend,
    /// Wall time from the first attempt's start to the last one's end, in milliseconds.
    pub duration_ms: i64,
    /// The flags of the grade in the last attempt's accepted record (core's
    /// `GradeFlags::of_grade`, as the coordinator stored them: migration 0021).
    pub grading: GradeFlags,
    /// The trial's ordinal in its run's plan.
    pub ordinal: u64,
}

/// The bucket named `name` (`succeeded`, `agent_failed`, ...), when there is one.
pub fn bucket_named(name: &str) -> Option<&'static str> {
    ALL_BUCKETS.iter().map(|b| b.as_str()).find(|b| *b == name)
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
    pub counts: BTreeMap<String, u64>,
    /// Per agent: (pass rate, graded).
    pub agents: BTreeMap<String, (Option<f64>, u64)>,
    /// The live status, for a run on a coordinator.
    pub live: Option<crate::live::Live>,
    /// The live section's HTML (state, ETA, workers, paused routes), already escaped.
    pub live_html: Option<String>,
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
                .map(|b| (b.as_str().to_string(), counts.get(*b)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            agents: self
                .rates
                .iter()
                .map(|r| (r.agent.clone(), (r.row.rates.pass_rate, r.row.rates.graded)))
                .collect(),
            live: None,
            live_html: None,
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

/// One run of the runs list.
#[derive(Debug, Clone, Serialize)]
pub struct RunItem {
    /// Run key.
    pub key: String,
    /// The run's state: a coordinator's (planned, running, cancelling, cancelled,
    /// finished), or the local evidence store's (ready, running, finished, interrupted).
    pub state: Option<String>,
    /// When the run was created, when known.
    pub created: Option<chrono::DateTime<chrono::Utc>>,
    /// Trials done (with a record, or finished on the coordinator).
    pub done: u64,
    /// Planned trials, when known.
    pub planned: Option<u64>,
    /// Agents.
    pub agents: Vec<String>,
    /// Tasks, when known.
    pub tasks: Option<usize>,
    /// Pass rate over graded trials.
    pub pass_rate: Option<f64>,
    /// Solve rate over the trials with an outcome (folder), or coverage-based (coordinator).
    pub solve_rate: Option<f64>,
}

/// The runs list.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunList {
    /// Runs, newest first.
    pub runs: Vec<RunItem>,
    /// Records that were refused (folder sources).
    pub refused: Vec<Refused>,
}

impl RunList {
    /// Orders the runs newest first: by creation time, then (unknown times last) by key,
    /// descending.
    pub fn newest_first(mut self) -> RunList {
        self.runs.sort_by(|a, b| {
            b.created
                .is_some()
                .cmp(&a.created.is_some())
                .then(b.created.cmp(&a.created))
                .then(b.key.cmp(&a.key))
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_trial_reads_its_task_verdict_and_tokens() {
        // (bucket, input, output) -> (ok, tokens)
        let cases = [
            (
                "succeeded",
                Some(10u64),
                Some(5u64),
                Some(true),
                Some(15u64),
            ),
            ("failed", None, Some(7), Some(false), Some(7)),
            ("agent_failed", Some(3), None, None, Some(3)),
            ("infrastructure_error", None, None, None, None),
            ("not_graded", Some(0), Some(0), None, Some(0)),
        ];
        for (bucket, input, output, ok, tokens) in cases {
            let r = TrialRow::compact(CompactTrial {
                run: "e-20260101-abcd".into(),
                key: "e-20260101-abcd/task-7/oracle/r2".into(),
                agent: "oracle".into(),
                bucket: bucket_named(bucket).unwrap(),
                state: State::Completed,
                cause: Some("why".into()),
                attempts: 2,
                score: Some(0.5),
                spend: Spend {
                    input_tokens: input,
                    cached_input_tokens: Some(99),
                    output_tokens: output,
                    cost_usd: Some(0.25),
                },
                duration_ms: 1234,
                grading: GradeFlags {
                    tampered: bucket == "failed",
                    withheld: false,
                    unguarded: false,
                },
                ordinal: 7,
            });
            assert_eq!(r.grading.tampered, bucket == "failed", "{bucket}");
            assert_eq!(r.task, "task-7", "{bucket}");
            assert_eq!(r.ok, ok, "{bucket}");
            assert_eq!(r.tokens, tokens, "{bucket}");
            assert_eq!(r.cost_usd, Some(0.25), "{bucket}");
            assert_eq!((r.attempts, r.duration_ms), (2, 1234), "{bucket}");
            assert_eq!(r.bucket, bucket);
        }
    }

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
            grading: Default::default(),
            duration_ms: 10,
            file: PathBuf::new(),
            ordinal: None,
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

    #[test]
    fn runs_are_listed_newest_first_unknown_times_last() {
        let t = |s: &str| Some(s.parse::<chrono::DateTime<chrono::Utc>>().unwrap());
        let item = |key: &str, created| RunItem {
            key: key.into(),
            state: None,
            created,
            done: 0,
            planned: None,
            agents: Vec::new(),
            tasks: None,
            pass_rate: None,
            solve_rate: None,
        };
        let list = RunList {
            runs: vec![
                item("b-old", t("2026-01-01T00:00:00Z")),
                item("a-unknown", None),
                item("z-new", t("2026-03-01T00:00:00Z")),
                item("c-unknown", None),
                item("a-mid", t("2026-02-01T00:00:00Z")),
            ],
            refused: Vec::new(),
        }
        .newest_first();
        let keys: Vec<&str> = list.runs.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["z-new", "a-mid", "b-old", "c-unknown", "a-unknown"]);
    }
}
