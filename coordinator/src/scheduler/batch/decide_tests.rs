//! The report batch's decision without a database: a snapshot in memory, a batch, and what
//! comes out.

use super::*;
use crate::scheduler::apply::ItemView;
use crate::scheduler::TransitionIn;
use akbench_core::dispatch::machine::ItemState;
use akbench_core::dispatch::RunState;
use chrono::TimeZone;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap()
}

/// A live attempt at `epoch`, `executing` after `last_seq` stored transitions.
fn live(epoch: i64, last_seq: u32) -> AttemptRow {
    AttemptRow {
        trial_id: Uuid::from_u128(7),
        number: 1,
        item: ItemView {
            state: ItemState::Leased,
            attempts_used: 1,
            budget_from: 0,
            retry_budget: 2,
            run: RunState::Running,
        },
        epoch,
        fenced: false,
        state: State::Executing,
        last_seq,
        terminal: None,
        cause: None,
        steps: Vec::new(),
        dirty: false,
    }
}

struct Snapshot {
    rows: HashMap<Uuid, AttemptRow>,
    known: HashMap<(Uuid, u32), Content>,
    accepted: HashMap<Uuid, String>,
}

fn snapshot(id: Uuid, row: AttemptRow) -> Snapshot {
    Snapshot {
        rows: [(id, row)].into_iter().collect(),
        known: HashMap::new(),
        accepted: HashMap::new(),
    }
}

fn run(s: &mut Snapshot, reports: &[Report]) -> Decided {
    let batch: Vec<(usize, &Report)> = reports.iter().enumerate().collect();
    decide(&batch, &mut s.rows, &mut s.known, &mut s.accepted, now())
}

fn finished(id: Uuid, epoch: i64, terminal: State) -> Report {
    Report::Finished {
        attempt_id: id,
        epoch,
        terminal,
        cause: "agent exited 1".into(),
    }
}

fn record(id: Uuid, epoch: i64, digest: &str) -> Report {
    Report::Record {
        attempt_id: id,
        epoch,
        record_json: "{}".into(),
        digest: digest.into(),
    }
}

#[test]
fn a_finish_at_the_current_epoch_is_accepted_and_settles_its_trial() {
    let id = Uuid::from_u128(1);
    let mut s = snapshot(id, live(3, 5));
    let d = run(&mut s, &[finished(id, 3, State::Failed)]);
    assert!(matches!(d.out[0].1, Ok(ReportAck::Finished(Some(_)))));
    assert_eq!(
        d.finishing,
        vec![(0, id, Uuid::from_u128(7), State::Failed)]
    );
    let row = &s.rows[&id];
    assert!(row.dirty);
    assert_eq!(row.terminal, Some(State::Failed));
    // The same finish again in the next batch is a duplicate that settles nothing.
    let d = run(&mut s, &[finished(id, 3, State::Failed)]);
    assert!(matches!(d.out[0].1, Ok(ReportAck::Finished(None))));
    assert!(d.finishing.is_empty());
}

#[test]
fn stale_and_conflicting_reports_are_refused_and_change_nothing() {
    let id = Uuid::from_u128(1);
    let mut s = snapshot(id, live(3, 5));
    let d = run(
        &mut s,
        &[finished(id, 2, State::Failed), record(id, 2, "sha256:a")],
    );
    assert!(d.out.iter().all(|(_, o)| o.is_err()), "stale epoch 2");
    assert!(d.finishing.is_empty() && d.writes.submissions.is_empty());
    assert!(!s.rows[&id].dirty);
    // A finish then a different one: the second conflicts.
    let d = run(
        &mut s,
        &[
            finished(id, 3, State::Failed),
            finished(id, 3, State::Timeout),
        ],
    );
    assert!(d.out[0].1.is_ok());
    assert!(d.out[1].1.is_err());
    assert_eq!(d.finishing.len(), 1);
    assert_eq!(s.rows[&id].terminal, Some(State::Failed));
}

#[test]
fn records_are_stored_once_and_a_different_digest_is_quarantined() {
    let id = Uuid::from_u128(1);
    let mut s = snapshot(id, live(3, 5));
    let d = run(
        &mut s,
        &[
            record(id, 3, "sha256:a"),
            record(id, 3, "sha256:a"),
            record(id, 3, "sha256:b"),
        ],
    );
    assert!(matches!(d.out[0].1, Ok(ReportAck::Record { stored: true })));
    assert!(matches!(
        d.out[1].1,
        Ok(ReportAck::Record { stored: false })
    ));
    assert!(matches!(
        d.out[2].1,
        Err(SchedulerError::RecordConflict { .. })
    ));
    assert_eq!(d.writes.submissions.len(), 1);
    assert_eq!(d.writes.quarantine.len(), 1);
    assert!(d.writes.quarantine[0].3.contains("sha256:a"));
}

#[test]
fn an_unknown_attempt_is_not_found_and_transitions_append_in_order() {
    let id = Uuid::from_u128(1);
    let mut s = snapshot(id, live(3, 1));
    let other = Uuid::from_u128(2);
    let t = |seq, state| TransitionIn {
        seq,
        state,
        at: now(),
        note: String::new(),
    };
    let d = run(
        &mut s,
        &[
            finished(other, 1, State::Failed),
            Report::Transitions {
                attempt_id: id,
                epoch: 3,
                transitions: vec![t(2, State::Collecting), t(3, State::Evaluating)],
            },
        ],
    );
    assert!(matches!(d.out[0].1, Err(SchedulerError::NotFound(_))));
    assert!(
        matches!(d.out[1].1, Ok(ReportAck::Transitions { last_seq: 3 })),
        "{:?}",
        d.out[1].1
    );
    assert_eq!(s.rows[&id].steps.len(), 2);
}
