//! A coordinator restart is not the workers' silence (found by the chaos check, issue 12):
//! leases that expired while the coordinator was down stay with their workers, which
//! re-present them and finish; the new coordinator restarts every lease's clock before its
//! first reap, for the restart grace (one TTL and the workers' longest reconnect wait).

mod common;

use std::time::Duration;

use akbench_coordinator::scheduler::Caps;
use akbench_coordinator::workers_service::wire_state;
use akbench_core::lease_timing::LeaseTiming;
use akbench_core::lifecycle::State;
use akbench_proto::v1::{
    coordinator_message::Body as Out, worker_message::Body as In, Assignment, AttemptFinished,
    HeldLease, Hello, Transition, TransitionBatch,
};
use common::{chain, enqueued, scalar, serve, Worker};

async fn assignment(w: &mut Worker) -> Assignment {
    loop {
        match w.next().await {
            Out::Assignment(a) => return a,
            Out::Ack(_) => continue,
            other => panic!("expected an Assignment, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_does_not_reap_leases_that_expired_while_it_was_down() {
    let ttl = Duration::from_secs(30);
    let s = common::scheduler().await;
    enqueued(&s, 1, 1, &Caps::default()).await;
    // The first coordinator hands out the trial; its worker stays connected to it (a
    // session that breaks would release the lease, which a killed coordinator never does).
    let (_first, first_addr) = serve(&s, ttl).await;
    let mut w = Worker::simple(first_addr, "steady", 1).await;
    let a = assignment(&mut w).await;
    // The coordinator was down longer than the TTL: in the database the lease has expired.
    let client = s.store().client().await.unwrap();
    client
        .execute(
            "UPDATE leases SET expires_at = now() - interval '1 second'",
            &[],
        )
        .await
        .unwrap();
    // A new coordinator starts on the same database, with its reaper.
    let (second, addr) = serve(&s, ttl).await;
    let _reaper = second.spawn_reaper();
    // Its first pass either restarts the lease's clock or reaps it.
    loop {
        let row = client
            .query_one(
                "SELECT (SELECT expires_at > now() FROM leases), \
                 (SELECT finished_at IS NOT NULL FROM attempts)",
                &[],
            )
            .await
            .unwrap();
        let (extended, finished): (Option<bool>, bool) = (row.get(0), row.get(1));
        assert!(
            !finished,
            "the lease of a live worker was reaped at the restart"
        );
        if extended == Some(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The worker reconnects, re-presents its lease and finishes: accepted.
    drop(w);
    let (again, welcome) = Worker::connect(
        addr,
        Hello {
            worker_id: "steady".into(),
            slots: 1,
            held_leases: vec![HeldLease {
                attempt_id: a.attempt_id.clone(),
                epoch: a.epoch,
            }],
            ..Default::default()
        },
    )
    .await;
    assert!(welcome.revoked_attempt_ids.is_empty(), "{welcome:?}");
    let mut again = again;
    again
        .send(In::Transitions(TransitionBatch {
            attempt_id: a.attempt_id.clone(),
            epoch: a.epoch,
            transitions: chain()
                .iter()
                .enumerate()
                .map(|(i, st)| Transition {
                    seq: 1 + i as u32,
                    state: wire_state(*st) as i32,
                    at_unix_ms: 1_767_225_600_000,
                    note: String::new(),
                })
                .collect(),
            ..Default::default()
        }))
        .await;
    again
        .send(In::Finished(AttemptFinished {
            attempt_id: a.attempt_id.clone(),
            epoch: a.epoch,
            terminal_state: wire_state(State::NotGraded) as i32,
            cause: String::new(),
            ..Default::default()
        }))
        .await;
    let outcome = loop {
        match again.next().await {
            Out::Ack(_) => {
                let o: Option<String> = scalar(&s, "SELECT outcome FROM work_items").await;
                if o.is_some() {
                    break o;
                }
            }
            other => panic!("expected acks, got {other:?}"),
        }
    };
    assert_eq!(outcome.as_deref(), Some("not_graded"));
    let attempts: i64 = scalar(&s, "SELECT count(*) FROM attempts").await;
    assert_eq!(attempts, 1, "the agent did not run again");
}

/// The restart grace (core's `LeaseTiming::restart_grace`) covers the workers' reconnect
/// schedule: a worker that comes back later than one TTL after the restarted coordinator's
/// first reaper pass (it was still backing off) keeps its lease, and a worker that never
/// comes back loses it once the grace has passed (found by the chaos check at TTL 2 s: four
/// healthy attempts taken back as "went silent"). Injected clock, no sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_back_later_than_one_ttl_after_a_restart_keeps_its_lease() {
    let ttl = Duration::from_secs(30);
    let grace = LeaseTiming::new(ttl, None).unwrap().restart_grace();
    assert!(grace > ttl, "{grace:?}");
    let (s, clock) = common::clocked().await;
    enqueued(&s, 2, 0, &Caps::default()).await;
    // The first coordinator hands out both trials. Its sessions stay open (it is "killed":
    // a killed coordinator releases nothing) and no reaper of it runs.
    let (_first, first_addr) = serve(&s, ttl).await;
    let mut back = Worker::simple(first_addr, "back", 1).await;
    let a = assignment(&mut back).await;
    let mut gone = Worker::simple(first_addr, "gone", 1).await;
    let b = assignment(&mut gone).await;
    // It was down ten minutes: both leases expired in the database.
    clock.advance(chrono::Duration::seconds(600));
    let (second, addr) = serve(&s, ttl).await;
    assert_eq!(second.restart_lease_clocks().await.unwrap(), 2);
    // Later than one TTL after that first pass, within the grace: nobody is back yet.
    let late = ttl + (grace - ttl) / 2;
    clock.advance(chrono::Duration::from_std(late).unwrap());
    assert_eq!(
        second.reap_once().await.unwrap(),
        0,
        "a lease was reaped {late:?} after the restart, within the grace {grace:?}"
    );
    // "back" comes back and presents its lease: kept.
    let (_again, welcome) = Worker::connect(
        addr,
        Hello {
            worker_id: "back".into(),
            slots: 1,
            held_leases: vec![HeldLease {
                attempt_id: a.attempt_id.clone(),
                epoch: a.epoch,
            }],
            ..Default::default()
        },
    )
    .await;
    assert!(welcome.revoked_attempt_ids.is_empty(), "{welcome:?}");
    // "gone" never comes back: its lease is taken back once the grace has passed.
    clock.advance(chrono::Duration::from_std(grace - late).unwrap() + chrono::Duration::seconds(1));
    assert_eq!(second.reap_once().await.unwrap(), 1);
    let finished: Vec<String> = s
        .store()
        .client()
        .await
        .unwrap()
        .query(
            "SELECT attempt_id::text FROM attempts WHERE finished_at IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        finished,
        vec![b.attempt_id.clone()],
        "only the worker that never came back lost its attempt"
    );
    drop((back, gone));
}

/// A trial taken back from a lost worker (its session broke) is ready again at once, even
/// under the default retry backoff: rescue is not delayed by the backoff that reported
/// infrastructure errors get (found by the chaos check: rescues took 6-9 s at TTL 2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescued_trial_is_ready_at_once_whatever_the_backoff() {
    let ttl = Duration::from_secs(30);
    let s = common::scheduler_with(akbench_coordinator::scheduler::RetryPolicy::default()).await;
    enqueued(&s, 1, 2, &Caps::default()).await;
    let (_service, addr) = serve(&s, ttl).await;
    let mut gone = Worker::simple(addr, "gone", 1).await;
    let a = assignment(&mut gone).await;
    drop(gone);
    let mut other = Worker::simple(addr, "other", 1).await;
    let b = assignment(&mut other).await;
    assert_eq!((b.trial_id, b.attempt_number), (a.trial_id, 2));
    // Re-queued in the reaper's transaction: ready at the instant the first attempt ended.
    let immediate: bool = scalar(
        &s,
        "SELECT w.ready_at <= a.finished_at FROM work_items w \
         JOIN attempts a ON a.trial_id = w.trial_id AND a.number = 1",
    )
    .await;
    assert!(immediate, "the rescued trial waited a backoff");
}

/// A `Hello`'s presented leases count as heard before the session asks the database
/// anything: a reaper pass that runs while the opening session waits on the database (a
/// restarted coordinator's grace ending, a loaded database) spares them. The session's
/// first statement is held on a row lock; the reaper passes meanwhile, past the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_presenting_a_lease_is_heard_before_the_database_answers() {
    let ttl = Duration::from_secs(30);
    let grace = LeaseTiming::new(ttl, None).unwrap().restart_grace();
    let (s, clock) = common::clocked().await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    let (_first, first_addr) = serve(&s, ttl).await;
    let mut w = Worker::simple(first_addr, "held", 1).await;
    let a = assignment(&mut w).await;
    // The first coordinator died; the second started, and its grace has passed: in the
    // database the lease is long expired.
    clock.advance(chrono::Duration::seconds(600));
    let (second, addr) = serve(&s, ttl).await;
    second.restart_lease_clocks().await.unwrap();
    clock.advance(chrono::Duration::from_std(grace).unwrap() + chrono::Duration::seconds(1));
    // The worker's row is locked: the new session's first statement (register_worker) waits.
    let mut side = s.store().client().await.unwrap();
    let lock = side.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM workers WHERE worker_id = 'held' FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let hello = Hello {
        worker_id: "held".into(),
        slots: 1,
        held_leases: vec![HeldLease {
            attempt_id: a.attempt_id.clone(),
            epoch: a.epoch,
        }],
        ..Default::default()
    };
    let opening = tokio::spawn(Worker::connect(addr, hello));
    // Until that statement waits on the lock (the Hello was received and noted before it).
    let watcher = s.store().client().await.unwrap();
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO workers%'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        second.reap_once().await.unwrap(),
        0,
        "the reaper took back a lease its worker had just presented in a Hello"
    );
    lock.rollback().await.unwrap();
    let (_again, welcome) = opening.await.unwrap();
    assert!(welcome.revoked_attempt_ids.is_empty(), "{welcome:?}");
    let finished: i64 = scalar(
        &s,
        "SELECT count(*) FROM attempts WHERE finished_at IS NOT NULL",
    )
    .await;
    assert_eq!(finished, 0, "the presented attempt was closed");
    drop(w);
}
