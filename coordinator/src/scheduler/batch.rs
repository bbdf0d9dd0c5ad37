//! One batch of reports applied in one transaction ([`apply_batch`]): the snapshot read
//! (`report_snapshot.sql`, the stored content of re-sent transitions, the accepted records),
//! the decision as a pure value ([`decide`]: core's acceptance and lifecycle rules), then the
//! writes (records, attempt rows, settles, route pauses, budget stops, quarantine). The
//! entry points that group reports into batches are `report` and `rounds`; this module
//! imports neither.

use std::collections::HashMap;

use akbench_core::dispatch::{accept_finish, current, Acceptance, AttemptView};
use akbench_core::lifecycle::{is_worker_step, State};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::apply::{self, AttemptWrite, Effects, Ending, ItemView, StepWrite};
use super::record_store::NewRecord;
use super::{Disposition, Report, ReportAck, SchedulerError, TransitionIn};
use crate::rows::{self, col, count32, parsed, parsed_opt};
use crate::store::{StoreError, Tx};

const REPORT_SNAPSHOT_SQL: &str = include_str!("../../sql/scheduler/report_snapshot.sql");
const STORED_TRANSITIONS_SQL: &str = include_str!("../../sql/scheduler/stored_transitions.sql");
const SUBMISSIONS_OF_SQL: &str = include_str!("../../sql/scheduler/submissions_of.sql");
const INSERT_QUARANTINE_SQL: &str = include_str!("../../sql/scheduler/insert_quarantine.sql");

mod decide;
use decide::Decided;

pub type Outcome = Result<ReportAck, SchedulerError>;

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

/// Whether `outcome` frees the attempt's slot: it finished, or its epoch is stale.
pub fn frees(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Ok(ReportAck::Finished(_)) | Err(SchedulerError::StaleEpoch { .. })
    )
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
