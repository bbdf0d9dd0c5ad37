//! [`Scheduler::reap`] (expired leases) and [`Scheduler::cancel_run`].

use akbench_core::lifecycle::State;
use chrono::{DateTime, Utc};
use std::time::Duration;
use uuid::Uuid;

use super::apply::{self, AttemptWrite, Effects, Ending};
use super::Heard;
use super::{CancelReport, Disposition, Reaped, RetryPolicy, Scheduler, SchedulerError};
use crate::rows::{col, parsed, RowError};
use crate::store::{StoreError, Tx};
use akbench_core::dispatch::replica::{self, holder, reap_across};
use akbench_core::dispatch::{close_lost, Backoff, LeaseFate, Loss};

use super::run_moves::{cancel_in, resume_in};

const REAP_EXPIRED_SQL: &str = include_str!("../../sql/scheduler/reap_expired.sql");
const LIVE_OF_CANCELLING_SQL: &str =
    include_str!("../../sql/scheduler/live_attempts_of_cancelling_runs.sql");
const MARK_LOST_SQL: &str = include_str!("../../sql/scheduler/mark_lost.sql");
const RELEASE_WORKER_SQL: &str = include_str!("../../sql/scheduler/release_worker.sql");
const EXTEND_HEARD_SQL: &str = include_str!("../../sql/scheduler/extend_heard_leases.sql");
const RESTART_LEASE_CLOCKS_SQL: &str = include_str!("../../sql/scheduler/restart_lease_clocks.sql");
const MARK_REPLICA_SQL: &str = include_str!("../../sql/scheduler/mark_replica.sql");
const OTHER_REPLICAS_SQL: &str = include_str!("../../sql/scheduler/other_replicas.sql");
const FORGET_REPLICAS_SQL: &str = include_str!("../../sql/scheduler/forget_replicas.sql");

impl Scheduler {
    /// Takes back every lease that expired at `now`, in one transaction: each attempt ends
    /// `infrastructure_error` (core's [`close_lost`]: a terminal transition after whatever its
    /// worker last reported, a `completed` whose record never arrived included; cause from
    /// [`Loss`]) and is fenced, so its epoch
    /// stays stale; the lease is deleted; the trial is re-queued, ready at once (no
    /// backoff: its worker was lost), while its retry budget lasts, else done. Leases whose attempt another transaction holds are left for the
    /// next pass.
    pub async fn reap(&self, now: DateTime<Utc>) -> Result<Vec<Reaped>, SchedulerError> {
        let reaped = self.reap_unwoken(now).await?;
        self.wake_if_requeued(&reaped);
        Ok(reaped)
    }

    /// Wakes one idle session when `reaped` put a trial back in the queue.
    pub fn wake_if_requeued(&self, reaped: &[Reaped]) {
        if reaped
            .iter()
            .any(|r| r.disposition == Disposition::Requeued)
        {
            self.wake_claimer();
        }
    }

    /// [`Scheduler::reap`] without waking a claimer: for a caller that has to act on the
    /// reaped leases first (the reaper marks their workers silent, so that a re-queued
    /// trial is not claimed by the silent worker's own session), then wakes one itself
    /// ([`Scheduler::wake_if_requeued`]).
    pub async fn reap_unwoken(&self, now: DateTime<Utc>) -> Result<Vec<Reaped>, SchedulerError> {
        let heard = std::sync::Arc::new(self.heard());
        let replica = self.replica;
        // No service gave a TTL (a scheduler driven by hand): none is recorded.
        let ttl = (!heard.ttl.is_zero()).then_some(heard.ttl);
        let reaped = self
            .store
            .tx(|tx| {
                let retry = self.rescue_policy();
                let heard = std::sync::Arc::clone(&heard);
                Box::pin(async move {
                    super::keyed_plans(tx).await?;
                    let ttl_ms: Option<i64> = ttl.map(super::ttl_ms);
                    let previous: Option<DateTime<Utc>> = col(
                        &tx.query_one(
                            &tx.prepare_cached(MARK_REPLICA_SQL).await?,
                            &[&replica, &now, &ttl_ms],
                        )
                        .await?,
                        "previous",
                    )?;
                    if let Some(ttl) = ttl {
                        forget_dead_replicas(tx, replica, previous, ttl).await?;
                    }
                    let rows = tx
                        .query(&tx.prepare_cached(REAP_EXPIRED_SQL).await?, &[&now])
                        .await?;
                    if rows.is_empty() {
                        // A safety net on every tick: end any run left with nothing to do.
                        let open: Vec<Uuid> = tx
                            .query(
                                "SELECT run_id FROM runs WHERE state IN ('running', 'cancelling')",
                                &[],
                            )
                            .await?
                            .iter()
                            .map(|r| col(r, "run_id"))
                            .collect::<Result<_, RowError>>()?;
                        super::machine::finish_runs(tx, &open).await?;
                        return Ok(Vec::new());
                    }
                    let me = Judge { replica, previous };
                    let expired = spare_heard(tx, &rows, &heard, me, now).await?;
                    close_in(tx, expired, Loss::WentSilent, &retry, now).await
                })
            })
            .await?;
        Ok(reaped)
    }

    /// The retry policy of a trial taken back from a lost worker: claimable again at once.
    /// The worker failed, not the attempt, and rescue takes at most TTL + the reaper's tick.
    /// (Before, it waited the retry backoff too: 1-2 s for the first rescue of a trial, 4-8 s
    /// for the third; found by the chaos check.) Infrastructure errors a worker reports still
    /// back off.
    fn rescue_policy(&self) -> RetryPolicy {
        RetryPolicy {
            backoff: Backoff::NONE,
            jitter: self.retry.jitter.clone(),
        }
    }

    /// Gives every live lease (except released ones) at least `grace` from now (a coordinator
    /// passes core's `LeaseTiming::restart_grace`): what a coordinator does once when it
    /// starts, before its first reap, because it has heard from no worker yet. Without it,
    /// leases that expired while the coordinator was down or restarting were reaped at its
    /// first pass, before their (healthy) workers could reconnect, and their agents ran
    /// again. Returns how many leases were extended.
    pub async fn restart_lease_clocks(
        &self,
        grace: std::time::Duration,
    ) -> Result<u64, SchedulerError> {
        let ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        let now = self.now();
        let client = self.store.client().await?;
        Ok(client
            .execute(RESTART_LEASE_CLOCKS_SQL, &[&ms, &now])
            .await?)
    }

    /// Resumes a started run: first takes back expired leases ([`Scheduler::reap`]), then, in
    /// one transaction, re-queues every trial without an accepted final outcome (cancelled
    /// before it ran, or ended `infrastructure_error`/`cancelled`, with a fresh retry budget)
    /// and moves the run back to `running` when it has work. Returns the trials now queued
    /// again by this call (by the reap or by the re-queue), each once.
    pub async fn resume_run(&self, run_id: Uuid) -> Result<Vec<Uuid>, SchedulerError> {
        let mut requeued: Vec<Uuid> = self
            .reap(self.now())
            .await?
            .into_iter()
            .filter(|r| r.disposition == Disposition::Requeued)
            .map(|r| r.trial_id)
            .collect();
        let now = self.now();
        let again = self
            .store
            .tx(|tx| Box::pin(async move { Ok(resume_in(tx, run_id, now).await?.0) }))
            .await?;
        requeued.extend(again);
        requeued.sort();
        requeued.dedup();
        if !requeued.is_empty() {
            self.wake_claimer();
        }
        Ok(requeued)
    }

    /// Takes back at once the leases of `worker_id` other than `keep`: its session broke and
    /// it did not come back within the grace (`only_if_disconnected`: unless a session of it
    /// is open on any replica; cause [`Loss::SessionBroke`]), or it came back without them
    /// ([`Loss::RevokedAtReconnect`]). They are closed in one transaction with that cause
    /// (never "went silent": the worker was heard to the end), then any other expired lease
    /// is reaped ([`Scheduler::reap`]). Returns what was done with them all.
    pub async fn release_worker(
        &self,
        worker_id: &str,
        keep: &[Uuid],
        only_if_disconnected: bool,
    ) -> Result<Vec<Reaped>, SchedulerError> {
        let loss = if only_if_disconnected {
            Loss::SessionBroke
        } else {
            Loss::RevokedAtReconnect
        };
        let (worker, keep) = (worker_id.to_string(), keep.to_vec());
        let now = self.now();
        let mut released = self
            .store
            .tx(|tx| {
                let retry = self.rescue_policy();
                let (worker, keep) = (worker.clone(), keep.clone());
                Box::pin(async move {
                    super::keyed_plans(tx).await?;
                    let rows = tx
                        .query(
                            &tx.prepare_cached(RELEASE_WORKER_SQL).await?,
                            &[&worker, &keep, &only_if_disconnected],
                        )
                        .await?;
                    let leases = lease_rows("release_worker.sql", &rows)?;
                    close_in(tx, leases, loss, &retry, now).await
                })
            })
            .await?;
        if released.is_empty() {
            return Ok(released);
        }
        self.wake_if_requeued(&released);
        released.extend(self.reap(self.now()).await?);
        Ok(released)
    }

    /// Cancels a run as core's run machine decides a cancel (`dispatch::machine::run_on`):
    /// a running run's queued items become `cancelled` at once and the run `cancelling`
    /// (`cancelled` when nothing is live: the idle rule, `machine::finish_runs`); a planned run
    /// is cancelled; an ended run (finished or cancelled) changes nothing, and the report says
    /// so ([`CancelReport::unchanged`]). Returns the live attempts and their workers, to be
    /// sent `Cancel`; when their workers report `cancelled` they finish normally (and an
    /// infrastructure error is no longer retried).
    pub async fn cancel_run(&self, run_id: Uuid) -> Result<CancelReport, SchedulerError> {
        let report = self
            .store
            .tx(|tx| Box::pin(async move { Ok(cancel_in(tx, run_id).await?.map(|r| r.1)) }))
            .await?;
        report.ok_or_else(|| SchedulerError::NotFound(format!("run {run_id}")))
    }

    /// The live attempts of every run being cancelled, with their workers: what each
    /// replica's reaper tells the workers of its own sessions, so a cancel taken by one
    /// replica reaches the workers connected to the others.
    pub async fn live_attempts_of_cancelling_runs(
        &self,
    ) -> Result<Vec<(Uuid, String)>, SchedulerError> {
        let client = self.store.client().await?;
        let rows = client
            .query(&client.prepare_cached(LIVE_OF_CANCELLING_SQL).await?, &[])
            .await
            .map_err(StoreError::from)?;
        let live = rows
            .iter()
            .map(|r| Ok((col(r, "attempt_id")?, col(r, "worker_id")?)))
            .collect::<Result<_, RowError>>()
            .map_err(|e| StoreError::from(e.in_query("live_attempts_of_cancelling_runs.sql")))?;
        Ok(live)
    }
}

/// The other replicas' marks and TTLs (`other_replicas.sql`).
async fn other_replicas(
    client: &impl deadpool_postgres::GenericClient,
    replica: Uuid,
) -> Result<Vec<(Uuid, replica::Marked)>, StoreError> {
    let rows = client
        .query(
            &client.prepare_cached(OTHER_REPLICAS_SQL).await?,
            &[&replica],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let id: Uuid = col(r, "replica_id")?;
            let ttl: Option<i64> = col(r, "ttl_ms")?;
            Ok((
                id,
                replica::Marked {
                    replica: id.to_string(),
                    seen: col(r, "seen_at")?,
                    ttl: ttl.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
                },
            ))
        })
        .collect::<Result<_, RowError>>()
        .map_err(|e| StoreError::from(e.in_query("other_replicas.sql")))
}

/// Deletes the rows of the replicas this one judges long dead ([`replica::forgotten`]
/// against its `previous` mark), each guarded by the mark it was judged on.
async fn forget_dead_replicas(
    tx: &Tx<'_>,
    me: Uuid,
    previous: Option<DateTime<Utc>>,
    ttl: Duration,
) -> Result<(), StoreError> {
    let (ids, marks): (Vec<Uuid>, Vec<DateTime<Utc>>) = other_replicas(tx, me)
        .await?
        .into_iter()
        .filter(|(_, m)| replica::forgotten(m.seen, previous, ttl))
        .map(|(id, m)| (id, m.seen))
        .unzip();
    if !ids.is_empty() {
        tx.execute(
            &tx.prepare_cached(FORGET_REPLICAS_SQL).await?,
            &[&ids, &marks],
        )
        .await?;
    }
    Ok(())
}

impl Scheduler {
    /// A live replica on this database whose lease TTL differs from `ttl`
    /// ([`replica::ttl_conflict`]), if any: replicas judge each other's marks and leases by
    /// their own TTL, so a coordinator refuses to start next to one. Call it before serving.
    pub async fn replica_ttl_conflict(
        &self,
        ttl: Duration,
    ) -> Result<Option<replica::Marked>, SchedulerError> {
        let client = self.store.client().await?;
        let others: Vec<replica::Marked> = other_replicas(&client, self.replica)
            .await?
            .into_iter()
            .map(|(_, m)| m)
            .collect();
        Ok(replica::ttl_conflict(&others, self.now(), ttl).cloned())
    }
}

/// The replica reaping: its id and its mark before this pass (`mark_replica.sql`).
#[derive(Debug, Clone, Copy)]
struct Judge {
    replica: Uuid,
    previous: Option<DateTime<Utc>>,
}

/// Where a lease's worker last had a session: that replica, its mark, and whether the
/// session ended (`reap_expired.sql`).
type SessionAt = (Option<Uuid>, Option<DateTime<Utc>>, bool);

/// Of the expired leases `rows` (locked by the caller; `reap_expired.sql`), the ones whose
/// worker's session is on another live replica are left to it, and the ones whose worker
/// was heard holding them here within the TTL live on (core's [`reap_across`]: their expiry
/// is moved to TTL after that heartbeat, in one statement); returns the others, to be taken
/// back.
async fn spare_heard(
    tx: &Tx<'_>,
    rows: &[tokio_postgres::Row],
    heard: &Heard,
    me: Judge,
    now: DateTime<Utc>,
) -> Result<Vec<LeaseRow>, StoreError> {
    let leases = lease_rows("reap_expired.sql", rows)?;
    let expiries = crate::rows::all("reap_expired.sql", rows, |r| {
        Ok((
            col::<i64>(r, "epoch")?,
            col::<DateTime<Utc>>(r, "expires_at")?,
        ))
    })?;
    let sessions: Vec<SessionAt> = crate::rows::all("reap_expired.sql", rows, |r| {
        Ok((
            col::<Option<Uuid>>(r, "replica")?,
            col::<Option<DateTime<Utc>>>(r, "replica_seen")?,
            col::<Option<bool>>(r, "disconnected")?.unwrap_or(true),
        ))
    })?;
    let (mut live_ids, mut live_until) = (Vec::new(), Vec::new());
    let mut expired = Vec::new();
    let mut theirs = 0usize;
    for ((lease, (epoch, stored)), (replica, seen, disconnected)) in
        leases.into_iter().zip(expiries).zip(sessions)
    {
        let listed = heard
            .leases
            .get(&lease.0)
            .filter(|h| h.worker_id == lease.1 && h.epoch == epoch)
            .map(|h| h.at);
        let session = replica.map(|r| (r == me.replica, seen));
        let holder = holder(session, disconnected, me.previous, heard.ttl);
        match reap_across(stored, listed, holder, now, heard.ttl) {
            LeaseFate::Live(until) => {
                live_ids.push(lease.0);
                live_until.push(until);
            }
            LeaseFate::Reap => expired.push(lease),
            LeaseFate::Theirs => theirs += 1,
        }
    }
    if theirs > 0 {
        tracing::debug!(
            leases = theirs,
            "expired leases left to the live replicas holding their workers' sessions"
        );
    }
    if !live_ids.is_empty() {
        tracing::info!(
            leases = live_ids.len(),
            "expired leases kept: their workers were heard holding them (the database did not \
             store those heartbeats)"
        );
        tx.execute(
            &tx.prepare_cached(EXTEND_HEARD_SQL).await?,
            &[&live_ids, &live_until],
        )
        .await?;
    }
    Ok(expired)
}

/// A lease taken back: its attempt, worker, last stored state and seq, trial, and the
/// attempt's number.
type LeaseRow = (Uuid, String, State, i32, Uuid, i32);

fn lease_rows(
    query: &'static str,
    rows: &[tokio_postgres::Row],
) -> Result<Vec<LeaseRow>, RowError> {
    crate::rows::all(query, rows, |r| {
        Ok((
            col::<Uuid>(r, "attempt_id")?,
            col::<String>(r, "worker_id")?,
            // An unknown stored state is an error, never taken as `pending`.
            parsed(r, "state", State::parse)?,
            col::<i32>(r, "last_seq")?,
            col::<Uuid>(r, "trial_id")?,
            col::<i32>(r, "number")?,
        ))
    })
}

/// Closes the attempts of `leases` (locked by the caller) taken back for `loss`, in `tx`:
/// each ends as core's [`close_lost`] says (the lifecycle's `Lost` step after whatever its
/// worker last reported, a `completed` whose record never arrived included, so the record
/// assembly accepts the history; its transition at `now`, the scheduler's clock) with the
/// cause [`Loss::cause`], and is fenced, so its epoch
/// stays stale; the lease is deleted; the trial is settled by `retry` and remembers the
/// worker that lost it.
async fn close_in(
    tx: &Tx<'_>,
    leases: Vec<LeaseRow>,
    loss: Loss,
    retry: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<Vec<Reaped>, StoreError> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let mut ids = Vec::new();
    let mut trials = Vec::new();
    let mut workers: Vec<String> = Vec::new();
    let mut effects = Effects::default();
    let mut endings = Vec::new();
    for (id, worker, state, mut seq, trial, number) in leases {
        let cause = loss.cause(&worker);
        let close = close_lost(state);
        let mut steps = Vec::new();
        if let Some(step) = close.step {
            seq += 1;
            steps.push((seq, step.as_str().to_string(), now, cause.clone()));
        }
        effects.attempts.push(AttemptWrite {
            attempt_id: id,
            state: close.step.unwrap_or(state),
            last_seq: u32::try_from(seq).unwrap_or(0),
            steps,
            terminal: Some(close.terminal),
            cause: Some(cause),
            fenced: true,
        });
        effects.leases_ended.push(id);
        endings.push(Ending {
            trial_id: trial,
            number,
            terminal: close.terminal,
            ok: None,
        });
        ids.push(id);
        trials.push(trial);
        workers.push(worker);
    }
    let settled = apply::apply(tx, effects, &endings, Default::default(), retry, now).await?;
    tx.execute(
        &tx.prepare_cached(MARK_LOST_SQL).await?,
        &[&trials, &workers],
    )
    .await?;
    Ok(ids
        .iter()
        .zip(trials.iter().zip(workers))
        .map(|(id, (trial, worker_id))| Reaped {
            attempt_id: *id,
            trial_id: *trial,
            worker_id,
            disposition: match settled.get(trial).map(|s| s.outcome) {
                Some(None) => Disposition::Requeued,
                Some(Some(outcome)) => Disposition::Done(outcome),
                None => Disposition::Done(State::InfrastructureError),
            },
        })
        .collect())
}
