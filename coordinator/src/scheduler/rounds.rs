//! Group commit of report rounds. A session's report batch, with the claim that rides on it
//! ([`Scheduler::report_and_claim`]), is one round; the rounds that sessions submit while
//! earlier ones are being written wait, and the next free writer takes them all into ONE
//! transaction: one snapshot, one apply and one claim per group of same-labelled workers
//! for the lot. At most [`Scheduler::with_round_writers`] such transactions run at once
//! (default [`ROUND_WRITERS`]), a second one only when [`ROUND_TOGETHER`] reports wait, so
//! under load each carries the work of many sessions and a statement's executor start-up
//! and a commit are shared by all of it; when the coordinator is idle a round is written
//! at once, alone. River completes jobs the same way
//! (its batch completer gathers the completions of every producer into one statement).
//!
//! Each report is still accepted or refused on its own, by the same code; rounds that name
//! the same attempt never share a transaction (a later round may depend on an earlier
//! one's outcome). A transaction of several rounds that fails is not the failure of each:
//! every round in it is written again alone, so one round's database error reaches only
//! its own session, as before rounds were grouped. A round is written by a spawned writer
//! task: a caller that stops waiting (its session ended) does not withdraw it; like a
//! commit whose answer was lost, the worker re-sends what was not acknowledged (accepted
//! again as a duplicate) and a lease claimed for a session that ended is released when
//! its worker reconnects without it, or reaped.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use uuid::Uuid;

use akbench_core::dispatch::hand_out::Claimant;

use super::batch::{apply_batch, frees, Outcome};
use super::claim::claim_many;
use super::ClaimAfter;
use super::{Assignment, Report, Scheduler};
use crate::store::{StoreError, Tx};

/// Report transactions that may run at once by default: more than one uses more than one of
/// the database's cores; each beyond the first starts only when [`ROUND_TOGETHER`] reports
/// wait. Measured with the dispatch bench (docs/performance-notebook.md, "Group commit").
pub const ROUND_WRITERS: usize = 3;

/// Reports that must wait before another transaction starts beside a busy one (32 attempts'
/// transitions, finish and record). Fewer wait for a writer to finish and go with the rest:
/// a transaction's fixed cost (its statements' start-up, the claim's lookups, the commit) is
/// then shared by more attempts. With no writer busy a round is written at once.
pub const ROUND_TOGETHER: usize = 96;

/// Most reports in one transaction (a round larger than this is written alone).
const MAX_ROUND_REPORTS: usize = 2048;

/// One session's chunk of reports and the claim after them.
#[derive(Clone)]
pub(super) struct Round {
    /// Reports with their index in the session's call.
    pub batch: Vec<(usize, Report)>,
    /// The claim to make after them, if any.
    pub claim: Option<Arc<ClaimAfter>>,
    /// Slots freed by the session's earlier chunks of the same call.
    pub earlier_freed: usize,
}

/// What a round gets back: each report's outcome (by its index) and the claim's
/// assignments.
pub(super) type Written = (Vec<(usize, Outcome)>, Vec<Assignment>);

struct Waiting {
    round: Round,
    reply: oneshot::Sender<Result<Written, StoreError>>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    writers: usize,
    /// Transactions written so far, and the rounds they carried.
    written: RoundsWritten,
}

impl Queue {
    /// The reports of the waiting rounds.
    fn waiting_reports(&self) -> usize {
        self.waiting.iter().map(|w| w.round.batch.len()).sum()
    }
}

/// How many transactions wrote how many rounds (a scheduler's and its clones' so far).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundsWritten {
    /// Transactions committed.
    pub transactions: u64,
    /// Rounds they carried.
    pub rounds: u64,
}

/// The rounds waiting for a writer, shared by a scheduler's clones.
#[derive(Clone)]
pub(super) struct Rounds {
    queue: Arc<Mutex<Queue>>,
    writers: usize,
    /// Reports that must wait before a writer starts beside a busy one.
    together: usize,
}

impl std::fmt::Debug for Rounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rounds({} writers)", self.writers)
    }
}

impl Rounds {
    pub(super) fn new(writers: usize, together: usize) -> Self {
        Self {
            queue: Arc::default(),
            writers: writers.max(1),
            together,
        }
    }

    /// Whether a writer (counted in `q.writers`) may start a transaction now.
    fn may_write(&self, q: &Queue) -> bool {
        may_write(q.writers, q.waiting_reports(), self.together)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the waiting rounds that can share one transaction (in order, none naming an
    /// attempt another taken one names); `None` (and this writer stops) when none wait.
    fn take(&self) -> Option<Vec<Waiting>> {
        let mut q = self.lock();
        // A busy writer takes what is left once it committed.
        if q.waiting.is_empty() || !self.may_write(&q) {
            q.writers -= 1;
            return None;
        }
        let mut taken = Vec::new();
        let mut attempts: HashSet<Uuid> = HashSet::new();
        let mut reports = 0;
        let mut kept = VecDeque::new();
        while let Some(w) = q.waiting.pop_front() {
            let ids: HashSet<Uuid> = w.round.batch.iter().map(|(_, r)| r.attempt_id()).collect();
            let fits = taken.is_empty()
                || (reports + w.round.batch.len() <= MAX_ROUND_REPORTS
                    && ids.is_disjoint(&attempts));
            if fits {
                reports += w.round.batch.len();
                attempts.extend(ids);
                taken.push(w);
            } else {
                kept.push_back(w);
            }
        }
        q.waiting = kept;
        Some(taken)
    }
}

/// Whether a round just queued starts a writer, with `busy` writers (of at most `limit`) and
/// `waiting` reports queued: the first at once; another beside busy ones only when at least
/// `together` reports wait.
fn starts_writer(busy: usize, limit: usize, waiting: usize, together: usize) -> bool {
    busy == 0 || (busy < limit && waiting >= together)
}

/// Whether one of `writers` writers may start a transaction with `waiting` reports queued:
/// it is the only one, or enough wait to be worth a transaction beside another (fewer are
/// left to the busy writer, which takes them once it committed).
fn may_write(writers: usize, waiting: usize, together: usize) -> bool {
    writers <= 1 || waiting >= together
}

/// Gives a writer's place back if its task ends without taking the queue's last word (a
/// panic): another writer starts for the rounds still waiting.
struct WriterGuard {
    scheduler: Option<Scheduler>,
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        if let Some(s) = self.scheduler.take() {
            let restart = {
                let mut q = s.rounds.lock();
                q.writers -= 1;
                let restart = !q.waiting.is_empty();
                if restart {
                    q.writers += 1;
                }
                restart
            };
            if restart {
                tokio::spawn(s.write_rounds());
            }
        }
    }
}

impl Scheduler {
    /// This scheduler with at most `n` report transactions at once (see the module doc).
    pub fn with_round_writers(mut self, n: usize) -> Self {
        self.rounds = Rounds::new(n, self.rounds.together);
        self
    }

    /// This scheduler starting a report transaction beside a busy one only when at least
    /// `reports` wait (default [`ROUND_TOGETHER`]); fewer wait for a writer to finish.
    pub fn with_round_together(mut self, reports: usize) -> Self {
        self.rounds = Rounds::new(self.rounds.writers, reports);
        self
    }

    /// Rounds waiting for a writer now.
    pub fn rounds_waiting(&self) -> usize {
        self.rounds.lock().waiting.len()
    }

    /// How many transactions wrote how many rounds so far.
    pub fn rounds_written(&self) -> RoundsWritten {
        self.rounds.lock().written
    }

    /// Writes `round`, with whatever other rounds wait for the same transaction.
    pub(super) async fn write_round(&self, round: Round) -> Result<Written, StoreError> {
        let (reply, written) = oneshot::channel();
        let start = {
            let mut q = self.rounds.lock();
            q.waiting.push_back(Waiting { round, reply });
            let start = starts_writer(
                q.writers,
                self.rounds.writers,
                q.waiting_reports(),
                self.rounds.together,
            );
            if start {
                q.writers += 1;
            }
            start
        };
        if start {
            tokio::spawn(self.clone().write_rounds());
        }
        written.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the transaction writing this round ended without an answer".into(),
            ))
        })
    }

    /// One writer: takes the waiting rounds and writes them, until none wait.
    async fn write_rounds(self) {
        let mut guard = WriterGuard {
            scheduler: Some(self.clone()),
        };
        while let Some(taken) = self.rounds.take() {
            self.write_together(taken).await;
        }
        // `take` gave the place back.
        guard.scheduler = None;
    }

    /// Writes `taken` in one transaction; when that fails and there were several, each
    /// alone.
    async fn write_together(&self, taken: Vec<Waiting>) {
        let (rounds, replies): (Vec<Round>, Vec<_>) =
            taken.into_iter().map(|w| (w.round, w.reply)).unzip();
        let rounds = Arc::new(rounds);
        match self.write_in_one(&rounds).await {
            Ok(written) => {
                for (reply, w) in replies.into_iter().zip(written) {
                    let _ = reply.send(Ok(w));
                }
            }
            Err(error) if rounds.len() == 1 => {
                if let Some(reply) = replies.into_iter().next() {
                    let _ = reply.send(Err(error));
                }
            }
            Err(_) => {
                for (round, reply) in Arc::unwrap_or_clone(rounds).into_iter().zip(replies) {
                    let one = Arc::new(vec![round]);
                    let result = self
                        .write_in_one(&one)
                        .await
                        .map(|mut w| w.pop().unwrap_or_default());
                    let _ = reply.send(result);
                }
            }
        }
    }

    /// One transaction for `rounds`; their revocations are handed on once it committed.
    async fn write_in_one(&self, rounds: &Arc<Vec<Round>>) -> Result<Vec<Written>, StoreError> {
        let now = self.now();
        let (written, revoked) = self
            .store
            .tx(|tx| {
                let rounds = Arc::clone(rounds);
                let retry = self.retry.clone();
                let budgeted = self.budgeted.clone();
                Box::pin(async move {
                    super::keyed_plans(tx).await?;
                    rounds_in(tx, &rounds, &retry, &budgeted, now).await
                })
            })
            .await?;
        {
            let mut q = self.rounds.lock();
            q.written.transactions += 1;
            q.written.rounds += rounds.len() as u64;
        }
        self.revoked(&revoked);
        Ok(written)
    }
}

/// Sessions whose claims are made together: their workers' labels (placement) and TTL.
type ClaimGroup<'a> = (&'a str, i64);

/// Applies every round's reports as one batch, then each round's claim over the slots its
/// reports freed.
async fn rounds_in(
    tx: &Tx<'_>,
    rounds: &[Round],
    retry: &super::RetryPolicy,
    budgeted: &super::budget::BudgetedRuns,
    now: DateTime<Utc>,
) -> Result<(Vec<Written>, Vec<super::Revoked>), StoreError> {
    // One index space for the whole batch: the position in `owner`.
    let mut owner: Vec<(usize, usize)> = Vec::new();
    let mut batch: Vec<(usize, &Report)> = Vec::new();
    for (k, round) in rounds.iter().enumerate() {
        for (i, report) in &round.batch {
            batch.push((owner.len(), report));
            owner.push((k, *i));
        }
    }
    let (results, revoked) = apply_batch(tx, &batch, retry, budgeted, now).await?;
    let mut written: Vec<Written> = rounds.iter().map(|_| Written::default()).collect();
    let mut freed = vec![0usize; rounds.len()];
    for (g, outcome) in results {
        let (k, i) = owner[g];
        if let Some(c) = &rounds[k].claim {
            if frees(&outcome) && c.held.contains(&batch[g].1.attempt_id()) {
                freed[k] += 1;
            }
        }
        written[k].0.push((i, outcome));
    }
    // One claim per group of sessions whose workers advertise the same labels (the same runs
    // may use them) under the same lease TTL.
    let mut groups: Vec<(ClaimGroup, Vec<(usize, Claimant<'_>)>)> = Vec::new();
    for (k, round) in rounds.iter().enumerate() {
        let Some(c) = &round.claim else { continue };
        let wants = (c.free + round.earlier_freed + freed[k]).min(c.slots);
        if wants == 0 {
            continue;
        }
        let claimant = Claimant {
            worker_id: &c.worker_id,
            wants: u64::try_from(wants).unwrap_or(0),
            avoids_lost: c.others_eligible,
        };
        let key = (c.placement.as_str(), c.ttl_ms);
        match groups.iter_mut().find(|(g, _)| *g == key) {
            Some((_, members)) => members.push((k, claimant)),
            None => groups.push((key, vec![(k, claimant)])),
        }
    }
    for ((_, ttl_ms), members) in groups {
        let claimants: Vec<Claimant> = members.iter().map(|(_, c)| *c).collect();
        let got = claim_many(tx, &claimants, ttl_ms, now).await?;
        for ((k, _), assignments) in members.iter().zip(got) {
            written[*k].1 = assignments;
        }
    }
    Ok((written, revoked))
}

#[cfg(test)]
mod tests {
    use super::{may_write, starts_writer};

    #[test]
    fn a_writer_starts_at_once_when_none_is_busy_and_beside_busy_ones_only_for_enough() {
        // (busy, limit, waiting, together, starts)
        let table = [
            (0, 3, 1, 96, true),
            (0, 1, 1, 96, true),
            (1, 3, 95, 96, false),
            (1, 3, 96, 96, true),
            (2, 3, 500, 96, true),
            (3, 3, 500, 96, false),
            (1, 1, 500, 96, false),
            (1, 3, 0, 0, true),
        ];
        for (busy, limit, waiting, together, want) in table {
            assert_eq!(
                starts_writer(busy, limit, waiting, together),
                want,
                "busy {busy} of {limit}, {waiting} waiting, together {together}"
            );
        }
    }

    #[test]
    fn a_counted_writer_writes_alone_or_with_enough_waiting() {
        // (writers counting this one, waiting, together, may write)
        let table = [
            (1, 1, 96, true),
            (2, 1, 96, false),
            (2, 95, 96, false),
            (2, 96, 96, true),
            (3, 200, 96, true),
        ];
        for (writers, waiting, together, want) in table {
            assert_eq!(
                may_write(writers, waiting, together),
                want,
                "{writers} writers, {waiting} waiting, together {together}"
            );
        }
    }
}
