//! [`Scheduler::claim`]: leasing ready work to a worker. The runs with ready work share the
//! claim's slots as `akbench_core::dispatch::share::divide` decides (priority, then weighted
//! fair share of the live leases): `claim_contenders.sql` reads each run's stored share,
//! `claim_run_live.sql` counts their live leases where they decide the division
//! (`share::live_decides`: two or more runs at the top priority), core divides, `claim_candidates.sql` takes that many ready items of each run
//! in plan order (`FOR UPDATE SKIP LOCKED`), and each item is admitted within its run's caps
//! (live attempts per run, per agent and per provider route). A run that yields fewer items
//! than it was given leaves the claim, and the next round divides what is still free among
//! the others.

use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use akbench_core::dispatch::hand_out::{hand_out, Claimant};
use akbench_core::dispatch::share::{self, Contender};
use uuid::Uuid;

use super::{ttl_ms, Assignment, Caps, Scheduler, SchedulerError, WorkKind};
use crate::rows::{self, col, json, parsed, RowError};
use crate::store::{StoreError, Tx};

const CONTENDERS_SQL: &str = include_str!("../../sql/scheduler/claim_contenders.sql");
const CANDIDATES_SQL: &str = include_str!("../../sql/scheduler/claim_candidates.sql");
const LOCK_RUNS_SQL: &str = include_str!("../../sql/scheduler/claim_lock_runs.sql");
const LIVE_COUNTS_SQL: &str = include_str!("../../sql/scheduler/claim_live_counts.sql");
const CREATE_SQL: &str = include_str!("../../sql/scheduler/claim_create.sql");

/// The item move of a claim (core's item machine), read once.
static CLAIM: std::sync::LazyLock<(&str, &str)> = std::sync::LazyLock::new(|| {
    use akbench_core::dispatch::machine::{live_move, ItemEvent};
    // Core's table test `claims_and_revokes_move_one_live_class` holds this.
    live_move(ItemEvent::Claim).expect("core's item machine moves one class on a claim")
});
const RUN_LIVE_SQL: &str = include_str!("../../sql/scheduler/claim_run_live.sql");

/// Candidate rounds per claim beyond one per contending run: each round takes rows, marks a
/// cap full or lets a run that yielded fewer items than it was given leave the claim.
const MAX_ROUNDS: usize = 8;

/// One ready row.
struct Candidate {
    trial_id: Uuid,
    run_id: Uuid,
    agent: String,
    route: Option<String>,
    /// The worker that lost its last attempt, if any.
    lost_by: Option<String>,
}

/// A run with ready work this worker may serve, as one claim sees it.
struct Run {
    run_id: Uuid,
    contender: Contender,
}

/// Caps and live counts of the capped runs seen so far in one claim.
#[derive(Default)]
struct CapState {
    /// Every contending run's caps (`None`: the run has no caps).
    caps: HashMap<Uuid, Option<Caps>>,
    /// The capped runs already locked and counted.
    loaded: HashSet<Uuid>,
    run_live: HashMap<Uuid, i64>,
    agent_live: HashMap<(Uuid, String), i64>,
    route_live: HashMap<(Uuid, String), i64>,
    full_runs: HashSet<Uuid>,
    full_agents: HashSet<(Uuid, String)>,
    full_routes: HashSet<(Uuid, String)>,
}

impl CapState {
    /// Locks and counts the capped runs among `runs` not counted yet (in a fixed order).
    async fn load(&mut self, tx: &Tx<'_>, runs: &[Uuid]) -> Result<(), StoreError> {
        let mut capped: Vec<Uuid> = runs
            .iter()
            .filter(|r| matches!(self.caps.get(r), Some(Some(c)) if !c.limits.is_empty()))
            .filter(|r| !self.loaded.contains(r))
            .copied()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        capped.sort();
        self.loaded.extend(capped.iter().copied());
        if capped.is_empty() {
            return Ok(());
        }
        tx.execute(&tx.prepare_cached(LOCK_RUNS_SQL).await?, &[&capped])
            .await?;
        let live = tx
            .query(&tx.prepare_cached(LIVE_COUNTS_SQL).await?, &[&capped])
            .await?;
        let live = rows::all("claim_live_counts.sql", &live, |row| {
            let run: Uuid = col(row, "run_id")?;
            let agent: String = col(row, "agent")?;
            let route: Option<String> = col(row, "provider_route")?;
            let n: i64 = col(row, "n")?;
            Ok((run, agent, route, n))
        })?;
        for (run, agent, route, n) in live {
            *self.run_live.entry(run).or_default() += n;
            *self.agent_live.entry((run, agent)).or_default() += n;
            if let Some(route) = route {
                *self.route_live.entry((run, route)).or_default() += n;
            }
        }
        Ok(())
    }

    /// Takes a place for `c` when its run's caps allow it.
    fn admit(&mut self, c: &Candidate) -> bool {
        let Some(Some(caps)) = self.caps.get(&c.run_id) else {
            return true;
        };
        let agent_key = (c.run_id, c.agent.clone());
        let route_key = c.route.clone().map(|r| (c.run_id, r));
        let live = akbench_core::dispatch::Live {
            run: self.run_live.get(&c.run_id).copied().unwrap_or(0),
            agent: self.agent_live.get(&agent_key).copied().unwrap_or(0),
            route: route_key
                .as_ref()
                .and_then(|k| self.route_live.get(k).copied())
                .unwrap_or(0),
        };
        let view = caps.limits.view(&c.agent, c.route.as_deref(), live);
        match akbench_core::dispatch::within_caps(&view) {
            Ok(()) => {}
            Err(akbench_core::dispatch::Full::Run) => {
                self.full_runs.insert(c.run_id);
                return false;
            }
            Err(akbench_core::dispatch::Full::Agent) => {
                self.full_agents.insert(agent_key);
                return false;
            }
            Err(akbench_core::dispatch::Full::Route) => {
                if let Some(k) = route_key {
                    self.full_routes.insert(k);
                }
                return false;
            }
        }
        *self.run_live.entry(c.run_id).or_default() += 1;
        *self.agent_live.entry(agent_key).or_default() += 1;
        if let Some(k) = route_key {
            *self.route_live.entry(k).or_default() += 1;
        }
        true
    }
}

impl Scheduler {
    /// Leases up to `n` ready work items to `worker_id` in ONE transaction: the slots divided
    /// among the runs with ready work by priority, then weighted fair share of their live
    /// leases (`akbench_core::dispatch::share::divide`), each run's ready items in plan order
    /// (`ORDER BY ordinal FOR UPDATE SKIP LOCKED`), within each run's caps
    /// per agent and per provider route (live attempts counted under a per-run advisory lock,
    /// so concurrent claimers cannot overshoot), each given a new attempt (number =
    /// attempts_used + 1, UUIDv7) and a lease with a new epoch expiring `ttl` from now.
    pub async fn claim(
        &self,
        worker_id: &str,
        n: usize,
        ttl: Duration,
    ) -> Result<Vec<Assignment>, SchedulerError> {
        self.claim_for(worker_id, n, ttl, false).await
    }

    /// [`Scheduler::claim`], skipping the items whose last lease this worker lost when
    /// `others_eligible` (another worker may take them: core::dispatch::may_take).
    pub async fn claim_for(
        &self,
        worker_id: &str,
        n: usize,
        ttl: Duration,
        others_eligible: bool,
    ) -> Result<Vec<Assignment>, SchedulerError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let ttl = ttl_ms(ttl);
        let now = self.now();
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        let worker_id = worker_id.to_string();
        let assignments = self
            .store
            .tx(|tx| {
                let worker_id = worker_id.clone();
                Box::pin(async move {
                    super::keyed_plans(tx).await?;
                    let avoid = others_eligible.then_some(worker_id.as_str());
                    claim_in(tx, &worker_id, limit, ttl, avoid, now).await
                })
            })
            .await?;
        Ok(assignments)
    }
}

/// Claims up to `limit` items for `worker_id` inside `tx` (see [`Scheduler::claim`]), at
/// `now` by the scheduler's clock: items ready by then, leases expiring `ttl_ms` after it.
pub(super) async fn claim_in(
    tx: &Tx<'_>,
    worker_id: &str,
    limit: i64,
    ttl_ms: i64,
    avoid_lost_by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<Assignment>, StoreError> {
    let claimant = Claimant {
        worker_id,
        wants: u64::try_from(limit).unwrap_or(0),
        avoids_lost: avoid_lost_by.is_some(),
    };
    let mut got = claim_many(tx, &[claimant], ttl_ms, now).await?;
    Ok(got.pop().unwrap_or_default())
}

/// One claim for several workers that advertise the same labels (so the same runs may use
/// them): as many items as they want in all, divided among the runs as for one worker, then
/// handed out by core ([`hand_out`]). Returns each claimant's assignments, in order.
pub(super) async fn claim_many(
    tx: &Tx<'_>,
    claimants: &[Claimant<'_>],
    ttl_ms: i64,
    now: DateTime<Utc>,
) -> Result<Vec<Vec<Assignment>>, StoreError> {
    let mut got: Vec<Vec<Assignment>> = claimants.iter().map(|_| Vec::new()).collect();
    let limit: u64 = claimants.iter().map(|c| c.wants).sum();
    let Some(first) = claimants.first() else {
        return Ok(got);
    };
    if limit == 0 {
        return Ok(got);
    }
    // One claimant skips the items it lost in the statement; several hand them to another.
    let avoid = (claimants.len() == 1 && first.avoids_lost).then_some(first.worker_id);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let chosen = choose(tx, first.worker_id, limit, avoid, now).await?;
    let lost_by: Vec<Option<&str>> = chosen.iter().map(|(_, l)| l.as_deref()).collect();
    let mut owner: HashMap<Uuid, usize> = HashMap::new();
    let (mut trials, mut workers) = (Vec::new(), Vec::new());
    for ((trial, _), k) in chosen.iter().zip(hand_out(&lost_by, claimants)) {
        if let Some(k) = k {
            owner.insert(*trial, k);
            trials.push(*trial);
            workers.push(claimants[k].worker_id);
        }
    }
    if trials.is_empty() {
        return Ok(got);
    }
    let created = create_leases(tx, &workers, &trials, ttl_ms, now).await?;
    for a in created {
        if let Some(&k) = owner.get(&a.trial_id) {
            got[k].push(a);
        }
    }
    Ok(got)
}

/// Leases `trials` (each to the worker of `workers` at its place) as core's item machine
/// moves a claim (`claim_create.sql`, guarded by the state the claim moves from): a new
/// attempt and lease each, for `ttl_ms` from `now`. Returns those leased (a trial no longer
/// ready is left alone).
pub(super) async fn create_leases(
    tx: &Tx<'_>,
    workers: &[&str],
    trials: &[Uuid],
    ttl_ms: i64,
    now: DateTime<Utc>,
) -> Result<Vec<Assignment>, StoreError> {
    let attempt_ids: Vec<Uuid> = trials.iter().map(|_| Uuid::now_v7()).collect();
    let rows = tx
        .query(
            &tx.prepare_cached(CREATE_SQL).await?,
            &[
                &workers,
                &trials,
                &attempt_ids,
                &ttl_ms,
                &now,
                &CLAIM.0,
                &CLAIM.1,
            ],
        )
        .await?;
    Ok(rows::all("claim_create.sql", &rows, |r| {
        Ok(Assignment {
            attempt_id: col(r, "attempt_id")?,
            trial_id: col(r, "trial_id")?,
            run_id: col(r, "run_id")?,
            number: col(r, "number")?,
            kind: parsed(r, "kind", WorkKind::parse)?,
            epoch: col(r, "epoch")?,
            document: col(r, "document")?,
        })
    })?)
}

/// The runs with ready work `worker_id` may serve, with their shares and live leases; their
/// caps go into `caps`.
async fn contenders(
    tx: &Tx<'_>,
    worker_id: &str,
    caps: &mut CapState,
) -> Result<Vec<Run>, StoreError> {
    let rows = tx
        .query(&tx.prepare_cached(CONTENDERS_SQL).await?, &[&worker_id])
        .await?;
    // Caps that do not decode are a bad row (an error), never "no caps".
    let runs = rows::all("claim_contenders.sql", &rows, |row| {
        let run_id: Uuid = col(row, "run_id")?;
        let stored: Caps = json(row, "caps")?;
        Ok((run_id, stored))
    })?;
    Ok(runs
        .into_iter()
        .map(|(run_id, stored)| {
            // Live leases are counted when they decide a division (`count_live`).
            let contender = Contender {
                share: stored.share,
                live: 0,
            };
            caps.caps
                .insert(run_id, (!stored.limits.is_empty()).then_some(stored));
            Run { run_id, contender }
        })
        .collect())
}

/// Adds each of `open`'s live leases (claim_run_live.sql) to what this claim has already
/// given it.
async fn count_live(tx: &Tx<'_>, open: &mut [Run]) -> Result<(), StoreError> {
    let ids: Vec<Uuid> = open.iter().map(|r| r.run_id).collect();
    let rows = tx
        .query(&tx.prepare_cached(RUN_LIVE_SQL).await?, &[&ids])
        .await?;
    let live = rows::all("claim_run_live.sql", &rows, |row| {
        let run_id: Uuid = col(row, "run_id")?;
        let n: i64 = col(row, "live")?;
        Ok::<_, RowError>((run_id, u64::try_from(n).unwrap_or(0)))
    })?;
    for (run_id, n) in live {
        if let Some(r) = open.iter_mut().find(|r| r.run_id == run_id) {
            r.contender.live += n;
        }
    }
    Ok(())
}

/// Picks up to `limit` ready items, divided among the runs by core's share rule and within
/// their caps, locked for this transaction; each with the worker that lost its last attempt.
async fn choose(
    tx: &Tx<'_>,
    worker_id: &str,
    limit: i64,
    avoid_lost_by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, Option<String>)>, StoreError> {
    let mut caps = CapState::default();
    let mut open = contenders(tx, worker_id, &mut caps).await?;
    let mut chosen: Vec<(Uuid, Option<String>)> = Vec::new();
    let mut refused: Vec<Uuid> = Vec::new();
    let mut live_counted = false;
    for _ in 0..MAX_ROUNDS + open.len() {
        let want = limit - chosen.len() as i64;
        open.retain(|r| !caps.full_runs.contains(&r.run_id));
        if want <= 0 || open.is_empty() {
            break;
        }
        if !live_counted
            && share::live_decides(&open.iter().map(|r| r.contender.share).collect::<Vec<_>>())
        {
            count_live(tx, &mut open).await?;
            live_counted = true;
        }
        let given = share::divide(
            &open.iter().map(|r| r.contender).collect::<Vec<_>>(),
            u64::try_from(want).unwrap_or(0),
        );
        let (runs, counts): (Vec<Uuid>, Vec<i64>) = open
            .iter()
            .zip(&given)
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (r.run_id, i64::try_from(*n).unwrap_or(i64::MAX)))
            .unzip();
        if runs.is_empty() {
            break;
        }
        let (fa_runs, fa_agents): (Vec<Uuid>, Vec<String>) =
            caps.full_agents.iter().cloned().unzip();
        let (fr_runs, fr_routes): (Vec<Uuid>, Vec<String>) =
            caps.full_routes.iter().cloned().unzip();
        // Rows this transaction already holds stay `ready` until the claim creates their
        // attempts: never offered again, whether chosen or refused.
        let seen: Vec<Uuid> = chosen
            .iter()
            .map(|(t, _)| t)
            .chain(&refused)
            .copied()
            .collect();
        let rows = tx
            .query(
                &tx.prepare_cached(CANDIDATES_SQL).await?,
                &[
                    &runs,
                    &counts,
                    &seen,
                    &fa_runs,
                    &fa_agents,
                    &fr_runs,
                    &fr_routes,
                    &avoid_lost_by,
                    &now,
                ],
            )
            .await?;
        let candidates: Vec<Candidate> = rows::all("claim_candidates.sql", &rows, |r| {
            Ok::<_, RowError>(Candidate {
                trial_id: col(r, "trial_id")?,
                run_id: col(r, "run_id")?,
                agent: col(r, "agent")?,
                route: col(r, "provider_route")?,
                lost_by: col(r, "lost_by")?,
            })
        })?;
        caps.load(tx, &runs).await?;
        let mut yielded: HashMap<Uuid, i64> = HashMap::new();
        for c in &candidates {
            *yielded.entry(c.run_id).or_default() += 1;
            if caps.admit(c) {
                chosen.push((c.trial_id, c.lost_by.clone()));
                if let Some(r) = open.iter_mut().find(|r| r.run_id == c.run_id) {
                    r.contender.live += 1;
                }
            } else {
                refused.push(c.trial_id);
            }
        }
        // A run that yielded fewer items than it was given has no more for this worker now
        // (exhausted, in backoff, held by other claimers, paused or capped): it leaves.
        let short: HashSet<Uuid> = runs
            .iter()
            .zip(&counts)
            .filter(|(run, n)| yielded.get(run).copied().unwrap_or(0) < **n)
            .map(|(run, _)| *run)
            .collect();
        open.retain(|r| !short.contains(&r.run_id));
    }
    Ok(chosen)
}
