//! The run progress projection: one [`RunStatus`] value that gRPC (`GetStatus`,
//! `WatchStatus`), HTTP (`/api/runs/{run}/status`), the status page and the CLI all show.
//!
//! It is a handful of aggregate queries (`GROUP BY` over indexed columns, see
//! `sql/control/status_*.sql`) pipelined on one connection, so its cost and memory do not
//! depend on the plan's size beyond those scans. Outcomes are counted per planned trial from
//! its last finished attempt and that attempt's accepted record, in core's accounting
//! buckets: the scheduler stores each done trial's bucket (`work_items.bucket`, core's
//! `Bucket::settled`, the same mapping as [`bucket_of`]) when it settles the trial and when
//! that attempt's record arrives, so status groups one index; a `completed` attempt whose
//! record has not arrived is not counted yet. Every rate
//! goes through core's [`Rates`]: a rate over nothing is `None` (JSON `null`, shown "n/a").

use std::collections::BTreeMap;
use std::time::Duration;

use akbench_core::accounting::{Bucket, BucketCounts, Observation};
use akbench_core::grading::integrity::FlagCounts;
use akbench_core::lifecycle::State;
use akbench_core::rates::Rates;
use akbench_core::report::network::NetworkCounts;
use akbench_core::spend::SpendTotals;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::error::ControlError;
use crate::evidence::{find_run_with, RunSummary};
use crate::rows::{col, parsed, FromRow, RowError};
use crate::status_rows::{bucket_named, Clock, CountRow, Counts, Named};
use crate::store::Store;

const COUNTS_SQL: &str = include_str!("../sql/control/status_counts.sql");
const COMPACT_SQL: &str = include_str!("../sql/control/compact_counts.sql");
const PHASES_SQL: &str = include_str!("../sql/control/status_phases.sql");
const CLOCK_SQL: &str = include_str!("../sql/control/status_clock.sql");
const PLACEMENT_SQL: &str = include_str!("../sql/control/status_placement.sql");
const HAS_BUDGET_SQL: &str = include_str!("../sql/control/has_budget.sql");
/// The counters of several runs (also read by [`crate::queue_depth`]).
pub(crate) const RUNS_COUNTS_SQL: &str = include_str!("../sql/control/runs_counts.sql");
const RUNS_AGENTS_SQL: &str = include_str!("../sql/control/runs_agents.sql");
const PAUSED_ROUTES_SQL: &str = include_str!("../sql/routes/paused_routes_of_run.sql");
const FAILURES_SQL: &str = include_str!("../sql/control/status_failures.sql");
const FLAGS_SQL: &str = include_str!("../sql/control/flags_by_agent.sql");

/// The most recent finishes status reads to measure throughput (`status_clock.sql`): when
/// more finished within the window, the rate is read off the newest this many.
const RECENT_MAX: u64 = 10_000;

/// Trials finished per minute: `recent` finished within the last `window` seconds (or since
/// the run started, if later), or, when `recent` reached [`RECENT_MAX`], within the time
/// since the oldest of them (`recent_since`) finished. `None` when none finished or no time
/// passed.
fn throughput_per_minute(
    recent: u64,
    recent_since: Option<DateTime<Utc>>,
    as_of: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    window: f64,
) -> Option<f64> {
    let secs = |from: DateTime<Utc>| (as_of - from).num_milliseconds().max(0) as f64 / 1000.0;
    let span_secs = match recent_since {
        Some(since) if recent >= RECENT_MAX => secs(since),
        _ => started_at.map(secs).unwrap_or(window).min(window),
    };
    (recent > 0 && span_secs > 0.0).then(|| recent as f64 * 60.0 / span_secs)
}
const ACTION: &str = "read run status";
/// A run whose counters have more delta rows than this is folded after a status read.
const FOLD_AFTER_DELTAS: u64 = 512;

/// Windows of the projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusOptions {
    /// Throughput is measured over this much recent time (or since the start, if shorter).
    pub throughput_window: Duration,
    /// A worker with an open session heard from within this much time counts as connected
    /// (the server passes its lease TTL: alive as `core::dispatch::alive` says).
    pub worker_window: Duration,
}

impl Default for StatusOptions {
    fn default() -> Self {
        StatusOptions {
            throughput_window: Duration::from_secs(300),
            worker_window: Duration::from_secs(60),
        }
    }
}

/// The finished trials of one agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentStatus {
    /// Agent label.
    pub agent: String,
    /// Planned trials of this agent.
    pub planned: u64,
    /// Finished trials by bucket name (only non-zero buckets, `missing` left out).
    pub outcomes: BTreeMap<String, u64>,
    /// Rates over this agent's planned trials.
    pub rates: Rates,
    /// Tokens and cost over this agent's recorded attempts, and the cost per solved trial.
    pub spend: SpendTotals,
    /// This agent's done trials whose deciding grade was flagged (core's definition).
    pub flagged: FlagCounts,
    /// Its verdicts by grading place, undeclared hosts, grading-fetch infrastructure errors
    /// (core::report::network).
    pub network: NetworkCounts,
}

/// A provider route of the run that gets no new work for now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PausedRoute {
    /// The route.
    pub route: String,
    /// Provider failures in a row.
    pub consecutive_failures: u32,
    /// No new claims before this instant.
    pub paused_until: DateTime<Utc>,
    /// The last failure's cause.
    pub last_error: String,
}

/// A done trial that did not succeed, with why (the latest few are in the projection).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecentFailure {
    /// Trial key.
    pub trial: String,
    /// Its accounting bucket (`failed`, `agent_failed`, `timed_out`, ...).
    pub bucket: String,
    /// The cause of its last attempt; empty for a graded failure (the tests failed).
    pub cause: String,
    /// When it was settled.
    pub at: DateTime<Utc>,
}

impl FromRow for PausedRoute {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        let failures: i32 = col(row, "consecutive_failures")?;
        Ok(PausedRoute {
            route: col(row, "route")?,
            consecutive_failures: u32::try_from(failures).map_err(|_| RowError::Value {
                column: "consecutive_failures",
                problem: format!("{failures} is not a count"),
            })?,
            paused_until: col(row, "paused_until")?,
            last_error: col(row, "last_error")?,
        })
    }
}

/// `trial, bucket, cause, at`: a recent failure (`status_failures.sql`).
impl FromRow for RecentFailure {
    fn from_row(row: &Row) -> Result<Self, RowError> {
        Ok(RecentFailure {
            trial: col(row, "trial")?,
            bucket: parsed(row, "bucket", bucket_named)?.as_str().to_string(),
            cause: col(row, "cause")?,
            at: col(row, "at")?,
        })
    }
}

/// A run's progress projection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStatus {
    /// The run.
    pub run: RunSummary,
    /// Planned trials.
    pub planned: u64,
    /// Trials waiting for a worker (work items `ready`).
    pub queued: u64,
    /// Trials with a live lease whose attempt has started (work items `leased`, less the
    /// prefetched ones).
    pub running: u64,
    /// Trials leased to a worker whose attempt has not started: a prefetched assignment
    /// waiting for a slot (phase `prefetched`).
    pub prefetched: u64,
    /// Trials done (work items `done`).
    pub finished: u64,
    /// Work items by state.
    pub work_items: BTreeMap<String, u64>,
    /// Live attempts by lifecycle state.
    pub phases: BTreeMap<String, u64>,
    /// Finished trials by accounting bucket (non-zero only).
    pub outcomes: BTreeMap<String, u64>,
    /// Attempts made beyond the first of each trial.
    pub retries: u64,
    /// Workers seen recently.
    pub workers: u32,
    /// Rates over the run (core's `Rates`).
    pub rates: Rates,
    /// Per agent.
    pub agents: Vec<AgentStatus>,
    /// Tokens and cost over the run's recorded attempts, and the cost per solved trial.
    pub spend: SpendTotals,
    /// Done trials whose deciding grade was flagged, over the run.
    pub flagged: FlagCounts,
    /// Verdicts by grading place, undeclared hosts, grading-fetch infrastructure errors,
    /// over the run (core::report::network).
    pub network: NetworkCounts,
    /// The run's provider routes that are paused now.
    pub paused_routes: Vec<PausedRoute>,
    /// The latest done trials that did not succeed (at most 5, newest first).
    pub recent_failures: Vec<RecentFailure>,
    /// Spend against the run's `execution.budget`, when it has one. Serialized as its one
    /// line, as gRPC carries it, so HTTP and `run status --json` print the same document.
    #[serde(serialize_with = "budget_line")]
    pub budget: Option<akbench_core::budget::BudgetStatus>,
    /// Labels a worker must advertise to run the trials (`execution.worker_labels`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_labels: Vec<String>,
    /// Why queued trials wait when no connected worker can take them ("no connected worker
    /// has labels gpu: 3 trials wait"); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// What the run holds of the workers among the runs sharing them: priority, weight, live
    /// leases and the share they are (`crate::status_share`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<crate::status_share::RunShare>,
    /// Per multi-step task, its steps over its done trials (`crate::status_steps`, core's
    /// `report::steps`, as `run aggregate` counts them); empty, and left out of the JSON, for a
    /// run without multi-step tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<akbench_core::report::steps::TaskSteps>,
    /// Trials finished per minute over the recent window; `None` when none finished in it.
    pub throughput_per_minute: Option<f64>,
    /// When the remaining trials should be done at that throughput.
    pub eta: Option<DateTime<Utc>>,
    /// When the projection was taken (the database's clock).
    pub as_of: DateTime<Utc>,
}

impl RunStatus {
    /// True when the counts differ (the clock, throughput and ETA left aside): what
    /// `WatchStatus` sends an update for.
    pub fn progressed_from(&self, before: &RunStatus) -> bool {
        self.run.state != before.run.state
            || self.work_items != before.work_items
            || self.phases != before.phases
            || self.outcomes != before.outcomes
            || self.retries != before.retries
            || self.workers != before.workers
            || self.spend != before.spend
            || self.flagged != before.flagged
            || self.network != before.network
            || self.paused_routes != before.paused_routes
            || self.budget != before.budget
            || self.placement != before.placement
            || self.steps != before.steps
    }
}

/// The run's required worker labels and, when `queued` trials wait and no connected worker
/// advertises them all, a line saying so (`akbench_core::placement::unmet`).
fn placement(
    run_key: &str,
    row: &tokio_postgres::Row,
    queued: u64,
) -> Result<(Vec<String>, Option<String>), ControlError> {
    let corrupt = |what: &str, e: serde_json::Error| ControlError::Corrupt {
        run: run_key.to_string(),
        problem: format!("{what} does not parse: {e}"),
    };
    let bad_row = |e: RowError| ControlError::Corrupt {
        run: run_key.to_string(),
        problem: e.in_query("status_placement.sql").to_string(),
    };
    let required: Option<&str> = crate::rows::col(row, "required").map_err(bad_row)?;
    let workers: &str = crate::rows::col(row, "workers").map_err(bad_row)?;
    let required: Vec<String> = match required {
        Some(t) => serde_json::from_str(t).map_err(|e| corrupt("runs.caps.worker_labels", e))?,
        None => Vec::new(),
    };
    let workers: Vec<BTreeMap<String, String>> =
        serde_json::from_str(workers).map_err(|e| corrupt("workers.labels", e))?;
    let unmet = akbench_core::placement::unmet(&required, &workers);
    let line = (queued > 0 && !unmet.is_empty()).then(|| {
        format!(
            "no connected worker has labels {}: {queued} trials wait (start a worker with `--label` for each)",
            unmet.join(", ")
        )
    });
    Ok((required, line))
}

/// The bucket of a trial whose last finished attempt ended in `terminal_state` with an
/// accepted record saying `ok`; `None` for a `completed` attempt without its record yet, or a
/// state core does not know.
pub fn bucket_of(terminal_state: &str, ok: Option<bool>) -> Option<Bucket> {
    let state = State::parse(terminal_state).filter(|s| s.is_terminal())?;
    if state == State::Completed && ok.is_none() {
        return None;
    }
    Some(Bucket::of(&Observation {
        trial_id: Uuid::nil(),
        state,
        ok,
        score: None,
        attempt_id: None,
        source: None,
    }))
}

/// The rows of `flags_by_agent.sql`: per agent, its flagged trials (agents without one have
/// no row).
pub fn flags_of_rows(
    rows: &[tokio_postgres::Row],
) -> Result<BTreeMap<String, FlagCounts>, RowError> {
    use crate::rows::col;
    let mut out = BTreeMap::new();
    for row in rows {
        let agent: String = col(row, "agent")?;
        let count = |c: &'static str| -> Result<u64, RowError> {
            let n: i64 = col(row, c)?;
            u64::try_from(n).map_err(|_| RowError::Value {
                column: c,
                problem: format!("{n} is negative"),
            })
        };
        out.insert(
            agent,
            FlagCounts {
                tampered: count("tampered")?,
                withheld: count("withheld")?,
                unguarded: count("unguarded")?,
            },
        );
    }
    Ok(out)
}

fn add(c: &mut BucketCounts, bucket: Bucket, n: u64) {
    c.add_n(bucket, n);
}

/// Completes `counts` with `missing = planned - observed` and names the non-zero buckets.
fn finish_counts(counts: &mut BucketCounts, planned: u64) -> BTreeMap<String, u64> {
    counts.missing = planned.saturating_sub(counts.planned() - counts.missing);
    akbench_core::accounting::ALL_BUCKETS
        .iter()
        .filter(|b| **b != Bucket::Missing)
        .map(|b| (b.as_str().to_string(), counts.get(*b)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn budget_line<S: serde::Serializer>(
    b: &Option<akbench_core::budget::BudgetStatus>,
    ser: S,
) -> Result<S::Ok, S::Error> {
    match b {
        Some(b) => ser.serialize_some(&b.line()),
        None => ser.serialize_none(),
    }
}

/// Whether run `id`'s spec sets a budget. Specs are append-only, so the answer is kept for
/// the life of the process: the budget's spend query (which scans the run's attempts) runs
/// only for the runs that have one.
async fn has_budget(
    client: &tokio_postgres::Transaction<'_>,
    id: Uuid,
) -> Result<bool, tokio_postgres::Error> {
    static KNOWN: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<Uuid, bool>>> =
        std::sync::OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    if let Some(b) = known.lock().ok().and_then(|k| k.get(&id).copied()) {
        return Ok(b);
    }
    let b = match client.query_opt(HAS_BUDGET_SQL, &[&id]).await? {
        Some(row) => row.try_get("has_budget")?,
        None => false,
    };
    if let Ok(mut k) = known.lock() {
        k.insert(id, b);
    }
    Ok(b)
}

/// Folds the counter deltas of run `id` (migration 0015) on a connection of its own, after
/// the status read that saw many of them, so the next reads sum few rows. A failure only
/// leaves the deltas as they are (totals never change); it is logged.
fn fold_counts(store: &Store, id: Uuid) {
    let store = store.clone();
    tokio::spawn(async move {
        let client = match store.client().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(run = %id, "failed to fold the run's status counters: {e}");
                return;
            }
        };
        if let Err(e) = client.query_one(COMPACT_SQL, &[&id]).await {
            tracing::warn!(run = %id, "failed to fold the run's status counters: {e}");
        }
    });
}

/// The projection of the run named `run` (UUID or key).
pub async fn run_status(
    store: &Store,
    run: &str,
    options: StatusOptions,
) -> Result<RunStatus, ControlError> {
    let db = |e: tokio_postgres::Error| ControlError::store(ACTION)(e.into());
    let mut conn = store.client().await.map_err(ControlError::store(ACTION))?;
    // Every query of the projection reads one snapshot: the run's state, its counters and
    // its attempts are never from different moments (a run seen `planned` with the items its
    // start created a moment later, or `running` with a partial queue).
    let client = Store::snapshot(&mut conn)
        .await
        .map_err(ControlError::store(ACTION))?;
    let summary = find_run_with(&client, run).await?;
    let id = summary.run_id;
    let window = options.throughput_window.as_secs_f64();
    let workers_window = options.worker_window.as_secs_f64();
    let (counts, phases, clock, paused, failures, flags, network) = tokio::try_join!(
        async { client.query(COUNTS_SQL, &[&id]).await.map_err(db) },
        async { client.query(PHASES_SQL, &[&id]).await.map_err(db) },
        async {
            client
                .query_one(
                    CLOCK_SQL,
                    &[&id, &window, &workers_window, &(RECENT_MAX as i64)],
                )
                .await
                .map_err(db)
        },
        async { client.query(PAUSED_ROUTES_SQL, &[&id]).await.map_err(db) },
        async { client.query(FAILURES_SQL, &[&id]).await.map_err(db) },
        async { client.query(FLAGS_SQL, &[&id]).await.map_err(db) },
        async {
            client
                .query(crate::status_network::NETWORK_SQL, &[&id])
                .await
                .map_err(db)
        },
    )?;
    let placement_row = client
        .query_one(PLACEMENT_SQL, &[&id, &workers_window])
        .await
        .map_err(db)?;
    let share = crate::status_share::run_share(&client, id)
        .await
        .map_err(ControlError::store(ACTION))?;
    let steps = crate::status_steps::run_steps(&client, id)
        .await
        .map_err(|e| match e {
            crate::status_steps::StepsError::Store(e) => ControlError::store(ACTION)(e),
            crate::status_steps::StepsError::Row(e) => ControlError::Corrupt {
                run: summary.run_key.clone(),
                problem: e.to_string(),
            },
        })?;
    let budget = if has_budget(&client, id).await.map_err(db)? {
        crate::scheduler::budget_status(&client, id)
            .await
            .map_err(ControlError::store(ACTION))?
    } else {
        None
    };
    let corrupt = |e: RowError| ControlError::Corrupt {
        run: summary.run_key.clone(),
        problem: e.to_string(),
    };
    let paused_routes = PausedRoute::from_rows(&paused).map_err(corrupt)?;
    let mut flags_by_agent =
        flags_of_rows(&flags).map_err(|e| corrupt(e.in_query("flags_by_agent.sql")))?;
    let mut flagged = FlagCounts::default();
    for f in flags_by_agent.values() {
        flagged.tampered += f.tampered;
        flagged.withheld += f.withheld;
        flagged.unguarded += f.unguarded;
    }
    let (mut network_by_agent, network) = crate::status_network::network_of_rows(&network)
        .map_err(|e| corrupt(e.in_query("network_by_agent.sql")))?;
    let recent_failures = RecentFailure::from_rows(&failures)
        .map_err(|e| corrupt(e.in_query("status_failures.sql")))?;
    let counts =
        Counts::from_rows(&CountRow::from_rows(&counts).map_err(corrupt)?).map_err(|problem| {
            ControlError::Corrupt {
                run: summary.run_key.clone(),
                problem,
            }
        })?;
    if counts.deltas > FOLD_AFTER_DELTAS {
        fold_counts(store, id);
    }
    let mut spend_by_agent = counts.spend;
    let mut total_spend = SpendTotals::default();
    for s in spend_by_agent.values() {
        total_spend.spend = total_spend.spend.plus(&s.spend);
        total_spend.trials_without_cost += s.trials_without_cost;
    }
    let clock = Clock::from_row(&clock).map_err(corrupt)?;
    let as_of = clock.as_of;
    let by_agent: BTreeMap<String, u64> =
        serde_json::from_str(&clock.by_agent).map_err(|e| ControlError::Corrupt {
            run: summary.run_key.clone(),
            problem: format!("run_catalog.by_agent does not parse: {e}"),
        })?;
    let recent = clock.recent;
    let workers = u32::try_from(clock.workers).unwrap_or(u32::MAX);

    let phases: BTreeMap<String, u64> = Named::from_rows(&phases)
        .map_err(corrupt)?
        .into_iter()
        .map(|r| (r.name, r.n))
        .collect();
    let work_items = counts.work_items;
    let retries = counts.retries;

    let mut total = BucketCounts::default();
    let mut per_agent: BTreeMap<String, BucketCounts> = BTreeMap::new();
    for ((agent, bucket), n) in counts.outcomes {
        add(&mut total, bucket, n);
        add(per_agent.entry(agent).or_default(), bucket, n);
    }
    let planned = summary.trial_count;
    let outcomes = finish_counts(&mut total, planned);
    let agents = by_agent
        .iter()
        .map(|(agent, planned)| {
            let mut c = per_agent.remove(agent).unwrap_or_default();
            let outcomes = finish_counts(&mut c, *planned);
            AgentStatus {
                agent: agent.clone(),
                planned: *planned,
                outcomes,
                rates: Rates::from_counts(&c),
                spend: spend_by_agent
                    .remove(agent)
                    .unwrap_or_default()
                    .finish_from_counts(c.succeeded),
                flagged: flags_by_agent.remove(agent).unwrap_or_default(),
                network: crate::status_network::with_clean_room(
                    network_by_agent.remove(agent).unwrap_or_default(),
                    &c,
                ),
            }
        })
        .collect();

    let finished = work_items.get("done").copied().unwrap_or(0);
    let throughput_per_minute = throughput_per_minute(
        recent,
        clock.recent_since,
        as_of,
        summary.started_at,
        window,
    );
    let queued = work_items.get("ready").copied().unwrap_or(0);
    let (worker_labels, placement) = placement(&summary.run_key, &placement_row, queued)?;
    let remaining = planned.saturating_sub(finished + work_items.get("cancelled").unwrap_or(&0));
    let eta = match throughput_per_minute {
        Some(per_minute)
            if remaining > 0 && summary.state == akbench_core::dispatch::RunState::Running =>
        {
            let ms = (remaining as f64 / per_minute * 60_000.0).min(1e15) as i64;
            Some(as_of + chrono::Duration::milliseconds(ms))
        }
        _ => None,
    };
    // Leased but not started: shown as prefetched, never as running.
    let prefetched = phases.get("prefetched").copied().unwrap_or(0);
    Ok(RunStatus {
        recent_failures,
        planned,
        queued,
        running: work_items
            .get("leased")
            .copied()
            .unwrap_or(0)
            .saturating_sub(prefetched),
        prefetched,
        finished,
        work_items,
        phases,
        outcomes,
        retries,
        workers,
        rates: Rates::from_counts(&total),
        spend: total_spend.finish_from_counts(total.succeeded),
        flagged,
        network: crate::status_network::with_clean_room(network, &total),
        paused_routes,
        budget,
        worker_labels,
        placement,
        share,
        agents,
        steps,
        throughput_per_minute,
        eta,
        as_of,
        run: summary,
    })
}

/// What the runs list shows of a run: read from the runs' counters alone (no status
/// projection per run, no trial scanned).
#[derive(Debug, Clone, PartialEq)]
pub struct RunProgress {
    /// Trials done (work items `done`).
    pub finished: u64,
    /// The planned agents.
    pub agents: Vec<String>,
    /// Rates over the run, as [`RunStatus::rates`].
    pub rates: Rates,
}

/// The progress of `runs` in two queries over their counters (`sql/control/runs_counts.sql`,
/// `runs_agents.sql`); a run missing from the answer has no catalog row.
pub async fn runs_progress(
    store: &Store,
    runs: &[RunSummary],
) -> Result<BTreeMap<Uuid, RunProgress>, ControlError> {
    let client = store.client().await.map_err(ControlError::store(ACTION))?;
    let ids: Vec<Uuid> = runs.iter().map(|r| r.run_id).collect();
    let db = |e: tokio_postgres::Error| ControlError::store(ACTION)(e.into());
    let (counts, agents) = tokio::try_join!(
        async { client.query(RUNS_COUNTS_SQL, &[&ids]).await.map_err(db) },
        async { client.query(RUNS_AGENTS_SQL, &[&ids]).await.map_err(db) },
    )?;
    let mut by_run: BTreeMap<Uuid, Vec<CountRow>> = BTreeMap::new();
    let mut planned_agents: BTreeMap<Uuid, Vec<String>> = BTreeMap::new();
    for row in &agents {
        let id: Uuid = crate::rows::col(row, "run_id").map_err(|e| ControlError::Corrupt {
            run: "?".into(),
            problem: e.to_string(),
        })?;
        let text: String =
            crate::rows::col(row, "by_agent").map_err(|e| ControlError::Corrupt {
                run: id.to_string(),
                problem: e.to_string(),
            })?;
        let by_agent: BTreeMap<String, u64> =
            serde_json::from_str(&text).map_err(|e| ControlError::Corrupt {
                run: id.to_string(),
                problem: format!("run_catalog.by_agent does not parse: {e}"),
            })?;
        planned_agents.insert(id, by_agent.into_keys().collect());
    }
    for row in &counts {
        let corrupt = |e: RowError| ControlError::Corrupt {
            run: "?".into(),
            problem: e.to_string(),
        };
        let id: Uuid = crate::rows::col(row, "run_id").map_err(corrupt)?;
        by_run
            .entry(id)
            .or_default()
            .push(CountRow::from_row(row).map_err(corrupt)?);
    }
    let mut out = BTreeMap::new();
    for r in runs {
        let Some(agents) = planned_agents.remove(&r.run_id) else {
            continue;
        };
        let counts =
            Counts::from_rows(by_run.get(&r.run_id).map_or(&[][..], |v| v)).map_err(|problem| {
                ControlError::Corrupt {
                    run: r.run_key.clone(),
                    problem,
                }
            })?;
        let mut total = BucketCounts::default();
        for ((_, bucket), n) in counts.outcomes {
            add(&mut total, bucket, n);
        }
        finish_counts(&mut total, r.trial_count);
        out.insert(
            r.run_id,
            RunProgress {
                finished: counts.work_items.get("done").copied().unwrap_or(0),
                agents,
                rates: Rates::from_counts(&total),
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_is_read_off_the_window_or_the_newest_finishes() {
        let now = DateTime::parse_from_rfc3339("2026-12-02T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let ago = |s: i64| now - chrono::Duration::seconds(s);
        /// (recent, seconds since the oldest of them finished, seconds since the run started,
        /// window) -> per minute.
        type Row = (u64, Option<i64>, Option<i64>, f64, Option<f64>);
        let table: &[Row] = &[
            (0, None, Some(3600), 300.0, None),
            // Under the cap: over the window, or since the start if that is later.
            (600, Some(290), Some(3600), 300.0, Some(120.0)),
            (600, Some(50), Some(60), 300.0, Some(600.0)),
            (600, Some(290), None, 300.0, Some(120.0)),
            // At the cap: over the time the newest RECENT_MAX took.
            (RECENT_MAX, Some(30), Some(3600), 300.0, Some(20_000.0)),
            (RECENT_MAX, Some(0), Some(3600), 300.0, None),
        ];
        for (i, (recent, since, started, window, want)) in table.iter().enumerate() {
            let got =
                throughput_per_minute(*recent, since.map(ago), now, started.map(ago), *window);
            assert_eq!(got, *want, "row {i}");
        }
    }

    #[test]
    fn completed_needs_its_record_before_it_counts() {
        assert_eq!(bucket_of("completed", None), None);
        assert_eq!(bucket_of("completed", Some(true)), Some(Bucket::Succeeded));
        assert_eq!(bucket_of("completed", Some(false)), Some(Bucket::Failed));
        assert_eq!(bucket_of("timeout", None), Some(Bucket::TimedOut));
        assert_eq!(bucket_of("not_graded", None), Some(Bucket::NotGraded));
        assert_eq!(bucket_of("executing", None), None);
        assert_eq!(bucket_of("bogus", None), None);
    }

    #[test]
    fn every_bucket_is_found_by_its_name() {
        for b in akbench_core::accounting::ALL_BUCKETS {
            assert_eq!(bucket_named(b.as_str()), Some(b));
        }
        assert_eq!(bucket_named("bogus"), None);
    }

    #[test]
    fn missing_fills_up_to_planned() {
        let mut c = BucketCounts::default();
        add(&mut c, Bucket::Succeeded, 2);
        add(&mut c, Bucket::NotGraded, 1);
        let names = finish_counts(&mut c, 10);
        assert_eq!(c.missing, 7);
        assert_eq!(c.planned(), 10);
        assert_eq!(names.len(), 2);
    }
}
