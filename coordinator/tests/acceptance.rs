//! Core's acceptance table (`core::dispatch::{current, accept_finish, accept_record}`) run
//! against the report path on a real PostgreSQL: for each case the attempt is brought to
//! the state the case names (live, finished, reaped, with or without a record), the report
//! is sent through `Scheduler::report`, and the answer and the change to the tables are
//! compared with core's decision on the attempt as stored. Includes the cases where the
//! report path used to decide differently from core (issue 28): a finish re-sent with
//! another cause is a duplicate (acknowledged, the accepted cause stays), and another
//! terminal state is a conflict (refused `INVALID_TRANSITION`, nothing changes).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use akbench_coordinator::scheduler::{
    Caps, Report, ReportAck, Scheduler, SchedulerError, TransitionIn,
};
use akbench_core::dispatch::{accept_finish, accept_record, current, Acceptance, AttemptView};
use akbench_core::lifecycle::State;
use common::{chain, clocked, counts, enqueued, record, scalar};

const TTL: Duration = Duration::from_secs(30);

/// What the attempt is before the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Before {
    /// Leased, reported up to `finalizing`.
    Live,
    /// Finished `not_graded` with cause "first".
    Done,
    /// Finished, and its record (note "a") stored.
    DoneWithRecord,
    /// Its lease expired and the reaper took it back (fenced, `infrastructure_error`).
    Reaped,
}

/// The report of a case.
#[derive(Debug, Clone, Copy)]
enum Sent {
    /// A finish in this state with this cause.
    Finish(State, &'static str),
    /// A record with this note ("a" is the one `DoneWithRecord` stored).
    Record(&'static str),
    /// The next transition after `finalizing` (`not_graded`).
    Transition,
}

/// The attempt `before` says, and its assignment's epoch.
async fn prepare(before: Before) -> (Scheduler, uuid::Uuid, i64) {
    let (s, clock) = clocked().await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    s.register_worker("w", 1, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let a = s.claim("w", 1, TTL).await.unwrap().remove(0);
    let at = s.now();
    let steps: Vec<TransitionIn> = chain()[..10]
        .iter()
        .enumerate()
        .map(|(i, st)| TransitionIn {
            seq: i as u32 + 1,
            state: *st,
            at,
            note: String::new(),
        })
        .collect();
    s.record_transitions(a.attempt_id, a.epoch, &steps)
        .await
        .unwrap();
    match before {
        Before::Live => {}
        Before::Done | Before::DoneWithRecord => {
            s.finish(a.attempt_id, a.epoch, State::NotGraded, "first")
                .await
                .unwrap();
            if before == Before::DoneWithRecord {
                let (json, digest) = record(a.attempt_id, "a");
                assert!(s
                    .upload_record(a.attempt_id, a.epoch, &json, &digest)
                    .await
                    .unwrap());
            }
        }
        Before::Reaped => {
            clock.advance(chrono::Duration::from_std(TTL).unwrap() + chrono::Duration::seconds(1));
            assert_eq!(s.reap(s.now()).await.unwrap().len(), 1);
        }
    }
    (s, a.attempt_id, a.epoch)
}

/// The attempt as core sees it, read from its row.
async fn view(s: &Scheduler, id: uuid::Uuid) -> AttemptView {
    let c = s.store().client().await.unwrap();
    let r = c
        .query_one(
            "SELECT epoch, fenced, terminal_state FROM attempts WHERE attempt_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    AttemptView {
        epoch: r.get(0),
        fenced: r.get(1),
        terminal: r
            .get::<_, Option<String>>(2)
            .map(|t| State::parse(&t).unwrap()),
    }
}

/// How the report path answered, as core's acceptance.
fn answered(o: &Result<ReportAck, SchedulerError>) -> Acceptance {
    match o {
        Ok(ReportAck::Finished(Some(_)))
        | Ok(ReportAck::Record { stored: true })
        | Ok(ReportAck::Transitions { .. }) => Acceptance::Accept,
        Ok(ReportAck::Finished(None)) | Ok(ReportAck::Record { stored: false }) => {
            Acceptance::Duplicate
        }
        Err(SchedulerError::StaleEpoch { .. }) => Acceptance::Stale,
        Err(SchedulerError::InvalidTransition { .. } | SchedulerError::RecordConflict { .. }) => {
            Acceptance::Conflict
        }
        Err(other) => panic!("an answer outside the acceptance table: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_path_decides_as_core_acceptance_table() {
    use Before::*;
    use Sent::*;
    // (before, epoch offset from the assignment's, sent); the expectation is core's.
    let table = [
        (Live, 0, Finish(State::NotGraded, "")),
        (Live, 1, Finish(State::NotGraded, "")),
        (Live, 0, Transition),
        (Live, 1, Transition),
        (Done, 0, Finish(State::NotGraded, "first")),
        // Drifted: a re-send with another cause was refused by the report path.
        (Done, 0, Finish(State::NotGraded, "second")),
        // Drifted: another terminal state is core's conflict.
        (Done, 0, Finish(State::Failed, "first")),
        (Done, 1, Finish(State::NotGraded, "first")),
        (Reaped, 0, Finish(State::NotGraded, "")),
        (Reaped, 0, Finish(State::InfrastructureError, "")),
        (Reaped, 0, Transition),
        (Done, 0, Record("a")),
        (DoneWithRecord, 0, Record("a")),
        (DoneWithRecord, 0, Record("b")),
        (Done, 1, Record("a")),
        (Reaped, 0, Record("a")),
    ];
    for (before, offset, sent) in table {
        let case = format!("{before:?} epoch+{offset} {sent:?}");
        let (s, id, epoch) = prepare(before).await;
        let epoch = epoch + offset;
        let stored_digest = (before == DoneWithRecord).then(|| record(id, "a").1);
        let v = view(&s, id).await;
        let (report, want) = match sent {
            Finish(terminal, cause) => (
                Report::Finished {
                    attempt_id: id,
                    epoch,
                    terminal,
                    cause: cause.into(),
                },
                accept_finish(&v, epoch, terminal),
            ),
            Record(note) => {
                let (record_json, digest) = record(id, note);
                let want = accept_record(&v, epoch, stored_digest.as_deref(), &digest);
                (
                    Report::Record {
                        attempt_id: id,
                        epoch,
                        record_json,
                        digest,
                    },
                    want,
                )
            }
            Transition => (
                Report::Transitions {
                    attempt_id: id,
                    epoch,
                    transitions: vec![TransitionIn {
                        seq: 11,
                        state: State::NotGraded,
                        at: s.now(),
                        note: String::new(),
                    }],
                },
                if current(&v, epoch) {
                    Acceptance::Accept
                } else {
                    Acceptance::Stale
                },
            ),
        };
        let counts_before = counts(&s).await;
        let cause_before: Option<String> = scalar(&s, "SELECT cause FROM attempts").await;
        let got = s.report(std::slice::from_ref(&report)).await.remove(0);
        assert_eq!(answered(&got), want, "{case}: answered {got:?}");
        let counts_after = counts(&s).await;
        let quarantined =
            |c: &[(String, i64)]| c.iter().find(|(q, _)| q.contains("quarantine")).unwrap().1;
        match want {
            Acceptance::Accept => assert_ne!(counts_after, counts_before, "{case}: nothing stored"),
            // A conflicting record is quarantined, and nothing else changes.
            Acceptance::Conflict if matches!(sent, Record(_)) => {
                assert_eq!(
                    quarantined(&counts_after),
                    quarantined(&counts_before) + 1,
                    "{case}"
                );
                let others = |c: &[(String, i64)]| {
                    c.iter()
                        .filter(|(q, _)| !q.contains("quarantine"))
                        .cloned()
                        .collect::<Vec<_>>()
                };
                assert_eq!(others(&counts_after), others(&counts_before), "{case}");
            }
            _ => {
                assert_eq!(
                    counts_after, counts_before,
                    "{case}: a refusal changed something"
                );
                let cause: Option<String> = scalar(&s, "SELECT cause FROM attempts").await;
                assert_eq!(cause, cause_before, "{case}: the accepted cause changed");
            }
        }
    }
}
