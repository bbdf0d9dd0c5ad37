//! A run's accounting (`Reconcile`, `ReconcileStream`) computed as its planned trials
//! stream from PostgreSQL, in memory flat in the plan's size: the ready plan's header is
//! read, then its planned trials in plan order a page at a time (their stored text fed to
//! the plan's sealer, so the digest is checked without a trial parsed), each accounted by
//! [`Accountant`] with its observations (the request's, through an [`ObservationIndex`], or
//! the coordinator's own outcomes read in plan order beside them in the same snapshot) and
//! handed to [`Entries`]: kept whole for `Reconcile`, sent in pages or left out for
//! `ReconcileStream`. A plan with best-of-N candidates keeps one small entry per planned
//! trial for its candidate section (which lists every trial).

use akbench_core::accounting::{
    Accountant, AccountedTrial, Observation, ObservationIndex, RunAccounting,
};
use akbench_core::candidates::CandidateOf;
use akbench_core::candidates::{account_entries, Entry};
use akbench_core::digest::canonical_json;
use akbench_core::lifecycle::State;
use akbench_core::plan::{PlanSealer, RunPlan};
use akbench_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_postgres::Row;
use tonic::Status;
use uuid::Uuid;

use crate::error::ControlError;
use crate::evidence::RunSummary;
use crate::rows::{col, parsed_opt, RowError};
use crate::store::Store;

const READY_PLAN_HEADER_SQL: &str = include_str!("../sql/control/ready_plan_header.sql");
const PLANNED_TRIAL_ROWS_SQL: &str = include_str!("../sql/control/planned_trial_rows.sql");
const OBSERVATIONS_SQL: &str = include_str!("../sql/control/observations.sql");
const FLAGS_SQL: &str = include_str!("../sql/control/flags_by_agent.sql");
const ACTION: &str = "reconcile";
/// Rows read from PostgreSQL at a time, and entries per `ReconcilePart`.
pub const PAGE: usize = 1000;

/// Where each accounted trial goes.
#[derive(Debug)]
pub enum Entries {
    /// Kept, in plan order (`Reconcile`'s whole report).
    Keep(Vec<AccountedTrial>),
    /// Sent in pages as they are accounted (`ReconcileStream`).
    Send(Pager),
}

impl Entries {
    /// Takes one trial; false when the client went away.
    async fn put(&mut self, t: AccountedTrial) -> bool {
        match self {
            Entries::Keep(all) => {
                all.push(t);
                true
            }
            Entries::Send(pager) => pager.put(t).await,
        }
    }
}

/// The entries `ReconcileStream` was asked for, in pages.
#[derive(Debug)]
pub struct Pager {
    list: pb::TrialList,
    /// Entries still to send; `None` for no limit.
    left: Option<u64>,
    page: Vec<String>,
    tx: mpsc::Sender<Result<pb::ReconcilePart, Status>>,
}

impl Pager {
    /// A pager of `list` entries (at most `limit`, 0 for all) to `tx`.
    pub fn new(
        list: pb::TrialList,
        limit: u64,
        tx: mpsc::Sender<Result<pb::ReconcilePart, Status>>,
    ) -> Pager {
        Pager {
            list,
            left: (limit > 0).then_some(limit),
            page: Vec::new(),
            tx,
        }
    }

    async fn put(&mut self, t: AccountedTrial) -> bool {
        use akbench_core::accounting::Bucket;
        let wanted = match self.list {
            pb::TrialList::None => false,
            pb::TrialList::Unaccounted => matches!(t.bucket, Bucket::Missing | Bucket::Quarantined),
            pb::TrialList::All => true,
        };
        if !wanted || self.left == Some(0) {
            return !self.tx.is_closed();
        }
        if let Some(n) = self.left.as_mut() {
            *n -= 1;
        }
        self.page.push(canonical_json(&t));
        if self.page.len() < PAGE {
            return true;
        }
        self.flush().await
    }

    /// Sends the page gathered; false when the client went away.
    pub async fn flush(&mut self) -> bool {
        if self.page.is_empty() {
            return true;
        }
        let part = pb::ReconcilePart {
            trials_json: std::mem::take(&mut self.page),
            summary: None,
        };
        self.tx.send(Ok(part)).await.is_ok()
    }
}

/// The accounting of `run` against its stored ready plan, with `sent` observations or,
/// without, the coordinator's own outcomes and the flags of their grades (one snapshot).
/// Its `trials` are those `entries` kept (none when sent). `None` when the client went
/// away before the end.
pub async fn account(
    store: &Store,
    run: &RunSummary,
    sent: Option<&[Observation]>,
    entries: &mut Entries,
) -> Result<Option<RunAccounting>, ControlError> {
    let db = |e: tokio_postgres::Error| ControlError::store(ACTION)(e.into());
    let corrupt = |problem: String| ControlError::Corrupt {
        run: run.run_key.clone(),
        problem,
    };
    let mut conn = store.client().await.map_err(ControlError::store(ACTION))?;
    // The outcomes and their flags from one snapshot, as status reads them: a trial settled
    // in between is in both or in neither.
    let tx = Store::snapshot(&mut conn)
        .await
        .map_err(ControlError::store(ACTION))?;
    let header = tx
        .query_one(READY_PLAN_HEADER_SQL, &[&run.run_id])
        .await
        .map_err(db)?;
    let text: &str = crate::rows::one("ready_plan_header.sql", &header, |r| col(r, "document"))
        .map_err(|e| corrupt(e.to_string()))?;
    let head: RunPlan = serde_json::from_str(text)
        .map_err(|e| corrupt(format!("the plan header does not parse: {e}")))?;
    let mut sealer = PlanSealer::new(&head);
    let mut accountant = Accountant::new(head.run_id, head.run_key.clone(), head.digest.clone());
    let mut index = sent.map(ObservationIndex::new);
    let mut own = match sent {
        Some(_) => None,
        None => Some(Own::new(
            tx.bind(OBSERVATIONS_SQL, &[&run.run_id])
                .await
                .map_err(db)?,
        )),
    };
    let planned = tx
        .bind(PLANNED_TRIAL_ROWS_SQL, &[&run.run_id])
        .await
        .map_err(db)?;
    let mut candidates: Vec<Entry> = Vec::new();
    let mut with_candidates: Option<bool> = None;
    loop {
        let rows = tx.query_portal(&planned, PAGE as i32).await.map_err(db)?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            let p = PlannedRow::read(row).map_err(|e| corrupt(e.to_string()))?;
            sealer.add(p.document);
            let seen: Vec<Observation> = match (&mut index, &mut own) {
                (Some(index), _) => index.take(p.trial_id).into_iter().cloned().collect(),
                (None, Some(own)) => own
                    .of(&tx, p.ordinal, p.trial_id)
                    .await
                    .map_err(|e| match e {
                        OwnError::Db(e) => db(e),
                        OwnError::Row(e) => corrupt(e.to_string()),
                    })?
                    .into_iter()
                    .collect(),
                (None, None) => Vec::new(),
            };
            let seen: Vec<&Observation> = seen.iter().collect();
            let ordinal = u64::try_from(p.ordinal).unwrap_or(0);
            let t = accountant.trial(ordinal, p.trial_id, p.key.to_string(), &seen);
            // A plan's candidate count is its spec's: every entry is a candidate or none is.
            let first = *with_candidates.get_or_insert(p.document.contains(CANDIDATE_KEY));
            if first {
                candidates.push(entry(candidate_of(p.document).map_err(corrupt)?, &t));
            }
            if !entries.put(t).await {
                return Ok(None);
            }
        }
    }
    let sealed = sealer.finish();
    if sealed.digest(head.stage) != head.digest || head.digest != run.plan_digest {
        return Err(corrupt("the plan does not match its digest".into()));
    }
    if let Entries::Send(pager) = entries {
        if !pager.flush().await {
            return Ok(None);
        }
    }
    let mut a = match (index, own) {
        (Some(index), _) => {
            let n = sent.map_or(0, |o| o.len() as u64);
            accountant.finish(n, index.unexpected())
        }
        (None, own) => {
            let n = own.map_or(0, |o| o.count);
            let rows = tx.query(FLAGS_SQL, &[&run.run_id]).await.map_err(db)?;
            let flags = crate::status::flags_of_rows(&rows)
                .map_err(|e| corrupt(e.in_query("flags_by_agent.sql").to_string()))?;
            accountant
                .finish(n, Vec::new())
                .with_flags_for(head.summary.by_agent.keys().map(String::as_str), flags)
        }
    };
    a.candidates = account_entries(candidates);
    if let Entries::Keep(all) = entries {
        a.trials = std::mem::take(all);
    }
    Ok(Some(a))
}

/// In a planned trial's text, the key of its candidate relation (unescaped quotes only
/// delimit keys and strings, so the text holds it only when some object has that key).
const CANDIDATE_KEY: &str = "\"candidate\":";

/// The candidate relation in a planned trial's stored text.
fn candidate_of(document: &str) -> Result<Option<CandidateOf>, String> {
    #[derive(serde::Deserialize)]
    struct Candidate {
        #[serde(default)]
        candidate: Option<CandidateOf>,
    }
    serde_json::from_str::<Candidate>(document)
        .map(|c| c.candidate)
        .map_err(|e| format!("a planned trial does not parse: {e}"))
}

fn entry(candidate: Option<CandidateOf>, t: &AccountedTrial) -> Entry {
    let o = t.outcome.as_ref();
    Entry {
        candidate,
        id: t.trial_id,
        key: t.key.clone(),
        bucket: t.bucket,
        score: o.and_then(|o| o.score),
        attempt_id: o.and_then(|o| o.attempt_id),
    }
}

/// One row of `planned_trial_rows.sql`.
struct PlannedRow<'a> {
    ordinal: i32,
    trial_id: Uuid,
    key: &'a str,
    document: &'a str,
}

impl<'a> PlannedRow<'a> {
    fn read(row: &'a Row) -> Result<PlannedRow<'a>, RowError> {
        Ok(PlannedRow {
            ordinal: col(row, "ordinal")?,
            trial_id: col(row, "trial_id")?,
            key: col(row, "key")?,
            document: col(row, "document")?,
        })
    }
}

enum OwnError {
    Db(tokio_postgres::Error),
    Row(RowError),
}

/// The coordinator's own outcomes (`observations.sql`, in plan order), read a page at a
/// time beside the planned trials.
struct Own {
    portal: tokio_postgres::Portal,
    page: std::collections::VecDeque<Row>,
    done: bool,
    /// Observations handed out.
    count: u64,
}

impl Own {
    fn new(portal: tokio_postgres::Portal) -> Own {
        Own {
            portal,
            page: Default::default(),
            done: false,
            count: 0,
        }
    }

    /// The outcome of the planned trial at `ordinal`, when it has one.
    async fn of(
        &mut self,
        tx: &tokio_postgres::Transaction<'_>,
        ordinal: i32,
        trial_id: Uuid,
    ) -> Result<Option<Observation>, OwnError> {
        if self.page.is_empty() && !self.done {
            let rows = tx
                .query_portal(&self.portal, PAGE as i32)
                .await
                .map_err(OwnError::Db)?;
            self.done = rows.len() < PAGE;
            self.page.extend(rows);
        }
        let Some(row) = self.page.front() else {
            return Ok(None);
        };
        let at: i32 = col(row, "ordinal").map_err(OwnError::Row)?;
        if at > ordinal {
            return Ok(None);
        }
        let row = self.page.pop_front().expect("a front row");
        if at < ordinal {
            // A work item whose ordinal is not a planned trial's.
            return Err(OwnError::Row(RowError::Value {
                column: "ordinal",
                problem: format!("work item {at} has no planned trial"),
            }));
        }
        let id: Uuid = col(&row, "trial_id").map_err(OwnError::Row)?;
        if id != trial_id {
            return Err(OwnError::Row(RowError::Value {
                column: "trial_id",
                problem: format!("work item {at} is trial {id}, planned as {trial_id}"),
            }));
        }
        let o = observation(&row).map_err(OwnError::Row)?;
        self.count += u64::from(o.is_some());
        Ok(o)
    }
}

/// The outcome of a row of `observations.sql`: none while its attempts are live or its
/// completed attempt's record has not arrived.
fn observation(row: &Row) -> Result<Option<Observation>, RowError> {
    let trial_id: Uuid = col(row, "trial_id")?;
    let attempt_id: Option<Uuid> = col(row, "attempt_id")?;
    let Some(terminal) = parsed_opt(row, "terminal", State::parse)? else {
        return Ok(None);
    };
    let record_state = parsed_opt(row, "record_state", State::parse)?;
    let ok: Option<bool> = col(row, "ok")?;
    let score: Option<f64> = col(row, "score")?;
    let state = record_state.unwrap_or(terminal);
    if !state.is_terminal() {
        return Err(RowError::Value {
            column: "terminal",
            problem: format!("`{state}` is not a terminal state"),
        });
    }
    if state == State::Completed && ok.is_none() {
        return Ok(None);
    }
    Ok(Some(Observation {
        trial_id,
        state,
        ok,
        score,
        attempt_id,
        source: Some(if record_state.is_some() {
            "coordinator:record".into()
        } else {
            "coordinator:attempt".into()
        }),
    }))
}
