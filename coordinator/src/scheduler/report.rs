//! [`Scheduler::report`]: transitions, finishes and records from workers, many per
//! transaction, each checked (epoch, lifecycle, digest) and accepted or refused on its own.
//! A refused report changes nothing.

use std::collections::HashMap;
use std::sync::Arc;

use akbench_core::dispatch::machine::{run_on, RunEvent, RunMove};
use akbench_core::dispatch::{accept_finish, current, Acceptance, AttemptView, RunState};
use akbench_core::lifecycle::{is_worker_step, State};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::apply::{self, AttemptWrite, Effects, Ending, ItemView, StepWrite};
use super::record::check_record;
use super::record_store::NewRecord;
use super::rounds::Round;
use super::{Assignment, Disposition, Report, ReportAck, Scheduler, SchedulerError, TransitionIn};
use crate::rows::{self, col, count32, parsed, parsed_opt};
use crate::store::{StoreError, Tx};

const REPORT_SNAPSHOT_SQL: &str = include_str!("../../sql/scheduler/report_snapshot.sql");
const STORED_TRANSITIONS_SQL: &str = include_str!("../../sql/scheduler/stored_transitions.sql");
pub(super) const FINISH_RUNS_SQL: &str = include_str!("../../sql/scheduler/finish_runs.sql");
const RUNS_STILL_PENDING_SQL: &str = include_str!("../../sql/scheduler/runs_still_pending.sql");
const LOCK_RUNS_SQL: &str = include_str!("../../sql/scheduler/lock_runs.sql");
const END_RUNS_SQL: &str = include_str!("../../sql/scheduler/end_runs.sql");
const SUBMISSIONS_OF_SQL: &str = include_str!("../../sql/scheduler/submissions_of.sql");
const INSERT_QUARANTINE_SQL: &str = include_str!("../../sql/scheduler/insert_quarantine.sql");

mod decide;
use decide::Decided;

pub(super) type Outcome = Result<ReportAck, SchedulerError>;

/// An attempt row, locked, with what this batch changes, and its work item as read.
struct AttemptRow {
    trial_id: Uuid,
    number: i32,
    item: ItemView,
    epoch: i64,
    fenced: bool,
    state: State,
    last_seq: u32,
    terminal: Option<State>,
    cause: Option<String>,
    /// Transitions this batch appends (stored with the row's write).
    steps: Vec<StepWrite>,
    dirty: bool,
}

impl AttemptRow {
    /// What core's acceptance rules read of it.
    fn view(&self) -> AttemptView {
        AttemptView {
            epoch: self.epoch,
            fenced: self.fenced,
            terminal: self.terminal,
        }
    }
}

/// A stored (or to-be-stored) transition's content, for comparing re-sends.
type Content = (State, i64, String);

fn content(t: &TransitionIn) -> Content {
    (t.state, t.at.timestamp_micros(), t.note.clone())
}

/// Rows to write at the end of a batch.
#[derive(Default)]
struct Writes {
    submissions: Vec<NewRecord>,
    quarantine: Vec<(Uuid, String, String, String)>,
}

impl Scheduler {
    /// Stores `reports` (as few transactions as their order allows, usually one) and returns
    /// one outcome per report, in order. Each report is accepted or refused on its own; a
    /// refused one changes nothing. A database failure refuses the reports of its
    /// transaction with [`SchedulerError::Store`].
    pub async fn report(&self, reports: &[Report]) -> Vec<Outcome> {
        self.report_and_claim(reports, None).await.0
    }

    /// [`Scheduler::report`], then, in the same (last) transaction, a claim for the
    /// session described by `claim`: up to its free slots plus those freed by these reports
    /// (finished or stale attempts it held). Saves a commit per dispatch round.
    pub async fn report_and_claim(
        &self,
        reports: &[Report],
        claim: Option<ClaimAfter>,
    ) -> (Vec<Outcome>, Vec<Assignment>) {
        let claim = claim.map(Arc::new);
        let mut assigned = Vec::new();
        let mut outcomes: Vec<Option<Outcome>> =
            reports.iter().map(|r| precheck(r).err().map(Err)).collect();
        // Chunks: a transition batch that follows a finish of the same attempt in the
        // current chunk starts a new one, so each chunk can be applied phase by phase.
        let mut chunks: Vec<Vec<usize>> = vec![Vec::new()];
        let mut finished_in_chunk: Vec<Uuid> = Vec::new();
        for (i, r) in reports.iter().enumerate() {
            if outcomes[i].is_some() {
                continue;
            }
            match r {
                Report::Transitions { attempt_id, .. }
                    if finished_in_chunk.contains(attempt_id) =>
                {
                    chunks.push(Vec::new());
                    finished_in_chunk.clear();
                }
                Report::Finished { attempt_id, .. } => finished_in_chunk.push(*attempt_id),
                _ => {}
            }
            if let Some(chunk) = chunks.last_mut() {
                chunk.push(i);
            }
        }
        chunks.retain(|c| !c.is_empty());
        let n_chunks = chunks.len();
        for (k, chunk) in chunks.iter().enumerate() {
            let claim = if k + 1 == n_chunks {
                claim.clone()
            } else {
                None
            };
            let earlier_freed = claim.as_ref().map_or(0, |c| freed(c, reports, &outcomes));
            let result = self
                .write_round(Round {
                    batch: chunk.iter().map(|&i| (i, reports[i].clone())).collect(),
                    claim,
                    earlier_freed,
                })
                .await;
            match result {
                Ok((results, got)) => {
                    assigned = got;
                    let requeued = results.iter().any(|(_, o)| {
                        matches!(o, Ok(ReportAck::Finished(Some(Disposition::Requeued))))
                    });
                    for (i, o) in results {
                        outcomes[i] = Some(o);
                    }
                    if requeued {
                        self.wake_claimer();
                    }
                }
                Err(error) => {
                    let text = error.to_string();
                    let mut first = Some(error);
                    for &i in chunk {
                        let e = first
                            .take()
                            .unwrap_or_else(|| StoreError::Unavailable(text.clone()));
                        outcomes[i] = Some(Err(SchedulerError::Store(e)));
                    }
                }
            }
        }
        let outcomes = outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Err(SchedulerError::malformed("a report", "not processed")))
            })
            .collect();
        (outcomes, assigned)
    }

    /// Stores transitions of one attempt; returns the highest seq now stored. See
    /// [`Scheduler::report`].
    pub async fn record_transitions(
        &self,
        attempt_id: Uuid,
        epoch: i64,
        transitions: &[TransitionIn],
    ) -> Result<u32, SchedulerError> {
        let report = Report::Transitions {
            attempt_id,
            epoch,
            transitions: transitions.to_vec(),
        };
        match self.report_one(report).await? {
            ReportAck::Transitions { last_seq } => Ok(last_seq),
            other => Err(unexpected(other)),
        }
    }

    /// Finishes an attempt in `terminal` and decides its trial: an infrastructure error with
    /// budget left is re-queued, anything else is done. `None` when the attempt had already
    /// finished identically.
    pub async fn finish(
        &self,
        attempt_id: Uuid,
        epoch: i64,
        terminal: State,
        cause: &str,
    ) -> Result<Option<Disposition>, SchedulerError> {
        let report = Report::Finished {
            attempt_id,
            epoch,
            terminal,
            cause: cause.to_string(),
        };
        match self.report_one(report).await? {
            ReportAck::Finished(d) => Ok(d),
            other => Err(unexpected(other)),
        }
    }

    /// Stores an attempt's record; `true` for the first upload, `false` for an identical
    /// re-upload. A different record is quarantined and refused.
    pub async fn upload_record(
        &self,
        attempt_id: Uuid,
        epoch: i64,
        record_json: &str,
        digest: &str,
    ) -> Result<bool, SchedulerError> {
        let report = Report::Record {
            attempt_id,
            epoch,
            record_json: record_json.to_string(),
            digest: digest.to_string(),
        };
        match self.report_one(report).await? {
            ReportAck::Record { stored } => Ok(stored),
            other => Err(unexpected(other)),
        }
    }

    async fn report_one(&self, report: Report) -> Outcome {
        self.report(std::slice::from_ref(&report))
            .await
            .pop()
            .unwrap_or_else(|| Err(SchedulerError::malformed("a report", "not processed")))
    }
}

/// A session's claim to make after its reports (see [`Scheduler::report_and_claim`]).
#[derive(Debug, Clone)]
pub struct ClaimAfter {
    /// The worker.
    pub worker_id: String,
    /// Slots free before these reports.
    pub free: usize,
    /// The most attempts to claim.
    pub slots: usize,
    /// Attempts the session holds (a finish or stale refusal of one frees its slot).
    pub held: std::collections::HashSet<Uuid>,
    /// Lease TTL in milliseconds.
    pub ttl_ms: i64,
    /// Another worker may claim: skip the items whose last lease this worker lost.
    pub others_eligible: bool,
    /// The labels the worker advertised, in one canonical form ([`placement_key`]): the
    /// claims of sessions with equal keys may be made together (scheduler/rounds.rs).
    pub placement: String,
}

/// The canonical form of a worker's advertised labels ([`ClaimAfter::placement`]).
pub fn placement_key(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k:?}={v:?}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Slots freed by the outcomes decided so far.
fn freed(c: &ClaimAfter, reports: &[Report], outcomes: &[Option<Outcome>]) -> usize {
    reports
        .iter()
        .zip(outcomes)
        .filter(|(r, o)| c.held.contains(&r.attempt_id()) && o.as_ref().is_some_and(frees))
        .count()
}

/// Whether `outcome` frees the attempt's slot: it finished, or its epoch is stale.
pub fn frees(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Ok(ReportAck::Finished(_)) | Err(SchedulerError::StaleEpoch { .. })
    )
}

fn unexpected(ack: ReportAck) -> SchedulerError {
    SchedulerError::malformed("a report", format!("unexpected acknowledgement {ack:?}"))
}

/// Checks that need no database.
fn precheck(report: &Report) -> Result<(), SchedulerError> {
    match report {
        Report::Transitions { transitions, .. } => {
            let Some(first) = transitions.first() else {
                return Err(SchedulerError::malformed(
                    "a transition batch",
                    "it is empty",
                ));
            };
            if first.seq == 0 {
                return Err(SchedulerError::Malformed {
                    what: "a transition batch".into(),
                    reason: "seqs start at 1".into(),
                    seq: 0,
                });
            }
            for pair in transitions.windows(2) {
                if pair[1].seq != pair[0].seq.saturating_add(1) {
                    return Err(SchedulerError::Malformed {
                        what: "a transition batch".into(),
                        reason: format!(
                            "seq {} follows seq {}: seqs must be contiguous and increasing",
                            pair[1].seq, pair[0].seq
                        ),
                        seq: pair[1].seq,
                    });
                }
            }
            Ok(())
        }
        Report::Finished {
            attempt_id,
            terminal,
            ..
        } if !terminal.is_terminal() => Err(SchedulerError::InvalidTransition {
            attempt_id: *attempt_id,
            seq: 0,
            reason: format!("{terminal} is not a terminal state"),
        }),
        Report::Finished { .. } => Ok(()),
        Report::Record {
            attempt_id,
            record_json,
            digest,
            ..
        } => check_record(*attempt_id, record_json, digest),
    }
}

fn stale(attempt_id: Uuid, epoch: i64) -> SchedulerError {
    SchedulerError::StaleEpoch { attempt_id, epoch }
}

/// Applies a chunk of prechecked reports in one transaction, at `now` by the scheduler's
/// clock (the time of the transitions it writes, of re-queued trials' backoff and of route
/// pauses).
pub(super) async fn apply_batch(
    tx: &Tx<'_>,
    batch: &[(usize, &Report)],
    retry: &super::RetryPolicy,
    budgeted: &super::budget::BudgetedRuns,
    now: DateTime<Utc>,
) -> Result<(Vec<(usize, Outcome)>, Vec<super::Revoked>), StoreError> {
    let mut revoked = Vec::new();
    let mut ids: Vec<Uuid> = batch.iter().map(|(_, r)| r.attempt_id()).collect();
    ids.sort();
    ids.dedup();
    let locked = tx
        .query(&tx.prepare_cached(REPORT_SNAPSHOT_SQL).await?, &[&ids])
        .await?;
    let mut rows: HashMap<Uuid, AttemptRow> = rows::all("report_snapshot.sql", &locked, |r| {
        Ok((
            col(r, "attempt_id")?,
            AttemptRow {
                trial_id: col(r, "trial_id")?,
                number: col(r, "number")?,
                item: ItemView::of(r)?,
                epoch: col(r, "epoch")?,
                fenced: col(r, "fenced")?,
                state: parsed(r, "state", State::parse)?,
                last_seq: count32(r, "last_seq")?,
                terminal: parsed_opt(r, "terminal_state", State::parse)?,
                cause: col(r, "cause")?,
                steps: Vec::new(),
                dirty: false,
            },
        ))
    })?
    .into_iter()
    .collect();

    // Stored content of re-sent seqs.
    let mut known: HashMap<(Uuid, u32), Content> = HashMap::new();
    let (mut q_ids, mut q_seqs) = (Vec::new(), Vec::new());
    for (_, r) in batch {
        if let Report::Transitions {
            attempt_id,
            transitions,
            ..
        } = r
        {
            let stored = rows.get(attempt_id).map_or(0, |row| row.last_seq);
            for t in transitions.iter().filter(|t| t.seq <= stored) {
                q_ids.push(*attempt_id);
                q_seqs.push(i32::try_from(t.seq).unwrap_or(i32::MAX));
            }
        }
    }
    if !q_ids.is_empty() {
        let stored = tx
            .query(
                &tx.prepare_cached(STORED_TRANSITIONS_SQL).await?,
                &[&q_ids, &q_seqs],
            )
            .await?;
        known.extend(rows::all("stored_transitions.sql", &stored, |r| {
            let at: DateTime<Utc> = col(r, "at")?;
            let key = (col(r, "attempt_id")?, count32(r, "seq")?);
            let state = parsed(r, "state", State::parse)?;
            Ok((key, (state, at.timestamp_micros(), col(r, "note")?)))
        })?);
    }

    // Accepted records, to tell identical re-uploads from conflicts, and their `ok` for the
    // bucket of the trials this batch settles.
    let record_ids: Vec<Uuid> = batch
        .iter()
        .filter(|(_, r)| matches!(r, Report::Record { .. } | Report::Finished { .. }))
        .map(|(_, r)| r.attempt_id())
        .collect();
    let mut accepted: HashMap<Uuid, String> = HashMap::new();
    let mut oks: HashMap<Uuid, Option<bool>> = HashMap::new();
    if !record_ids.is_empty() {
        let stored = tx
            .query(
                &tx.prepare_cached(SUBMISSIONS_OF_SQL).await?,
                &[&record_ids],
            )
            .await?;
        for (id, digest, ok) in rows::all("submissions_of.sql", &stored, |r| {
            Ok((col(r, "attempt_id")?, col(r, "digest")?, col(r, "ok")?))
        })? {
            accepted.insert(id, digest);
            oks.insert(id, ok);
        }
    }

    let Decided {
        mut out,
        writes,
        finishing,
    } = decide::decide(batch, &mut rows, &mut known, &mut accepted, now);

    // Records before the settle: a trial made done in this batch takes its bucket from its
    // record (migration 0018). The budget check stays after the settle, so a trial it
    // re-queues is cancelled with the others when the budget is spent.
    let (record_runs, stored_oks) = super::record_store::store(tx, &writes.submissions).await?;
    oks.extend(stored_oks);
    let mut effects = Effects::default();
    for (id, row) in rows.iter_mut().filter(|(_, r)| r.dirty) {
        effects.attempts.push(AttemptWrite {
            attempt_id: *id,
            state: row.state,
            last_seq: row.last_seq,
            steps: std::mem::take(&mut row.steps),
            terminal: row.terminal,
            cause: row.cause.clone(),
            fenced: row.fenced,
        });
    }
    let mut endings = Vec::new();
    let mut items = HashMap::new();
    for (_, id, trial, terminal) in &finishing {
        effects.leases_ended.push(*id);
        if let Some(row) = rows.get(id) {
            endings.push(Ending {
                trial_id: *trial,
                number: row.number,
                terminal: *terminal,
                ok: oks.get(id).copied().flatten(),
            });
            items.insert(*trial, row.item.clone());
        }
    }
    let settled = apply::apply(tx, effects, &endings, items, retry, now).await?;
    if !finishing.is_empty() {
        let trials: Vec<Uuid> = finishing.iter().map(|f| f.2).collect();
        let terminals: Vec<State> = finishing.iter().map(|f| f.3).collect();
        let causes: Vec<&str> = finishing
            .iter()
            .map(|f| {
                rows.get(&f.1)
                    .and_then(|r| r.cause.as_deref())
                    .unwrap_or("")
            })
            .collect();
        revoked.extend(
            super::routes::note_finished(tx, &trials, &terminals, &causes, &settled, now).await?,
        );
        for (i, _, trial, terminal) in &finishing {
            let d = match settled.get(trial).map(|s| s.outcome) {
                Some(None) => Disposition::Requeued,
                Some(Some(outcome)) => Disposition::Done(outcome),
                None => Disposition::Done(*terminal),
            };
            if let Some(slot) = out.iter_mut().find(|(j, _)| j == i) {
                slot.1 = Ok(ReportAck::Finished(Some(d)));
            }
        }
    }
    if !record_runs.is_empty() {
        let runs = budgeted.of(tx, &record_runs).await?;
        if !runs.is_empty() {
            revoked.extend(super::budget::enforce(tx, &runs, now).await?);
        }
    }
    if !writes.quarantine.is_empty() {
        let q = &writes.quarantine;
        let ids: Vec<Uuid> = q.iter().map(|r| r.0).collect();
        let digests: Vec<&str> = q.iter().map(|r| r.1.as_str()).collect();
        let records: Vec<&str> = q.iter().map(|r| r.2.as_str()).collect();
        let reasons: Vec<&str> = q.iter().map(|r| r.3.as_str()).collect();
        tx.execute(
            &tx.prepare_cached(INSERT_QUARANTINE_SQL).await?,
            &[&ids, &digests, &records, &reasons],
        )
        .await?;
    }
    Ok((out, revoked))
}

/// Ends the runs among `runs` that have nothing ready or leased.
///
/// Most calls settle one trial of a run with many left: a run with a ready or leased item
/// that no other transaction is changing stays open, and that item is share-locked until
/// commit (`runs_still_pending.sql`, never waits), so the transaction that later settles it
/// waits for this one's commit and sees its work. For the other runs the run rows are
/// locked (in a fixed order), so two transactions settling a run's last two trials at once
/// serialize here and the second one, taking a fresh snapshot after the lock, sees the
/// first one's work: a run can never stay `running` with all its items done. Whether and
/// how a locked run ends is core's run machine (`dispatch::machine::run_on`, the idle event) over the run's state and
/// whether it is idle (`finish_runs.sql`), applied by one guarded statement (`end_runs.sql`).
pub(super) async fn finish_runs(tx: &Tx<'_>, runs: &[Uuid]) -> Result<(), StoreError> {
    if runs.is_empty() {
        return Ok(());
    }
    let open = tx
        .query(&tx.prepare_cached(RUNS_STILL_PENDING_SQL).await?, &[&runs])
        .await?;
    let open: Vec<Uuid> = rows::all("runs_still_pending.sql", &open, |r| col(r, "run_id"))?;
    let undecided: Vec<Uuid> = runs.iter().filter(|r| !open.contains(r)).copied().collect();
    if undecided.is_empty() {
        return Ok(());
    }
    tx.query(&tx.prepare_cached(LOCK_RUNS_SQL).await?, &[&undecided])
        .await?;
    let rows = tx
        .query(&tx.prepare_cached(FINISH_RUNS_SQL).await?, &[&undecided])
        .await?;
    let (mut ids, mut from, mut to) = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        let run: Uuid = col(row, "run_id")?;
        let state = crate::rows::parsed(row, "state", RunState::parse)?;
        // Core's run machine decides the end of an idle run (running: finished; cancelling:
        // cancelled); every other state stays.
        let ended = match col::<bool>(row, "idle")?
            .then(|| run_on(state, RunEvent::Idle { all_enqueued: true }))
        {
            Some(Ok(RunMove::To(to))) => Some(to),
            _ => None,
        };
        if let Some(end) = ended {
            ids.push(run);
            from.push(state.as_str());
            to.push(end.as_str());
        }
    }
    if !ids.is_empty() {
        tx.execute(&tx.prepare_cached(END_RUNS_SQL).await?, &[&ids, &from, &to])
            .await?;
    }
    Ok(())
}

/// Whether a worker's transition at `last_seq + 1` to `to` is a step it may take (from the
/// implicit start when nothing is stored). The coordinator's own step (`Lost`) is not one.
fn step_allowed(row_state: State, last_seq: u32, to: State) -> bool {
    if last_seq == 0 {
        to == State::Pending || is_worker_step(State::Pending, to)
    } else {
        is_worker_step(row_state, to)
    }
}

fn transitions_of(
    id: Uuid,
    epoch: i64,
    transitions: &[TransitionIn],
    row: &mut AttemptRow,
    known: &mut HashMap<(Uuid, u32), Content>,
) -> Outcome {
    if !current(&row.view(), epoch) {
        return Err(stale(id, epoch));
    }
    let (mut state, mut last) = (row.state, row.last_seq);
    let mut added: Vec<&TransitionIn> = Vec::new();
    for t in transitions {
        if t.seq <= last {
            if known.get(&(id, t.seq)) != Some(&content(t)) {
                return Err(SchedulerError::InvalidTransition {
                    attempt_id: id,
                    seq: t.seq,
                    reason: format!(
                        "seq {} was already stored with different content (state, time or note)",
                        t.seq
                    ),
                });
            }
            continue;
        }
        if t.seq != last + 1 {
            return Err(SchedulerError::Malformed {
                what: format!("transitions of attempt {id}"),
                reason: format!(
                    "seq {} leaves a gap: the next expected seq is {}",
                    t.seq,
                    last + 1
                ),
                seq: t.seq,
            });
        }
        if !step_allowed(state, last, t.state) {
            return Err(SchedulerError::InvalidTransition {
                attempt_id: id,
                seq: t.seq,
                reason: format!("{state} -> {} is not a step the lifecycle allows", t.state),
            });
        }
        added.push(t);
        state = t.state;
        last = t.seq;
    }
    for t in added {
        known.insert((id, t.seq), content(t));
        row.steps.push((
            i32::try_from(t.seq).unwrap_or(i32::MAX),
            t.state.as_str().to_string(),
            t.at,
            t.note.clone(),
        ));
    }
    if last != row.last_seq {
        row.state = state;
        row.last_seq = last;
        row.dirty = true;
    }
    Ok(ReportAck::Transitions { last_seq: last })
}

fn finish_of(
    id: Uuid,
    epoch: i64,
    terminal: State,
    cause: &str,
    row: &mut AttemptRow,
    now: DateTime<Utc>,
) -> Outcome {
    let refuse = |reason: String| SchedulerError::InvalidTransition {
        attempt_id: id,
        seq: 0,
        reason,
    };
    match accept_finish(&row.view(), epoch, terminal) {
        Acceptance::Stale => return Err(stale(id, epoch)),
        // The accepted finish stays as it is, its cause included.
        Acceptance::Duplicate => return Ok(ReportAck::Finished(None)),
        Acceptance::Conflict => {
            let done = row.terminal.map_or("", State::as_str);
            return Err(refuse(format!(
                "the attempt already finished as {done}: {terminal} conflicts with it"
            )));
        }
        Acceptance::Accept => {}
    }
    if row.state != terminal {
        if !step_allowed(row.state, row.last_seq, terminal) {
            return Err(refuse(format!(
                "{} -> {terminal} is not a step the lifecycle allows",
                row.state
            )));
        }
        row.last_seq += 1;
        row.steps.push((
            i32::try_from(row.last_seq).unwrap_or(i32::MAX),
            terminal.as_str().to_string(),
            now,
            cause.to_string(),
        ));
        row.state = terminal;
    }
    row.terminal = Some(terminal);
    // An attempt that ended without a cause has none (NULL), as its record says (`cause:
    // null`), never an empty one: the viewer, status and exports read the same value.
    row.cause = (!cause.is_empty()).then(|| cause.to_string());
    row.dirty = true;
    // The disposition is filled in once the work item is settled.
    Ok(ReportAck::Finished(Some(Disposition::Done(terminal))))
}
