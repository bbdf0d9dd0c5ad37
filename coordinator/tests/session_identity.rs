//! One live session per worker id, over real gRPC sessions on loopback against a real
//! PostgreSQL: a second worker process is refused while the first is alive and keeps
//! nothing from it; it gets the id once the first leaves or falls silent; the same process
//! reconnecting takes over its own session at once.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use akbench_coordinator::scheduler::{Caps, Scheduler};
use akbench_coordinator::workers_service::{wire_state, WorkersService};
use akbench_core::lifecycle::State;
use akbench_proto::v1::{
    coordinator_message::Body as Out, worker_message::Body as In, Assignment, HeldLease, Hello,
    Subject, Transition, TransitionBatch,
};
use common::{enqueued, scalar, scheduler, serve, Worker};

const TTL: Duration = Duration::from_secs(30);

fn hello(id: &str, instance: &str, held: Vec<HeldLease>) -> Hello {
    Hello {
        worker_id: id.into(),
        instance_id: instance.into(),
        slots: 1,
        held_leases: held,
        ..Default::default()
    }
}

fn lease(a: &Assignment) -> HeldLease {
    HeldLease {
        attempt_id: a.attempt_id.clone(),
        epoch: a.epoch,
    }
}

fn pending(a: &Assignment) -> In {
    In::Transitions(TransitionBatch {
        attempt_id: a.attempt_id.clone(),
        epoch: a.epoch,
        transitions: vec![Transition {
            seq: 1,
            state: wire_state(State::Pending) as i32,
            at_unix_ms: 1_767_225_600_000,
            note: String::new(),
        }],
        ..Default::default()
    })
}

async fn assignment(w: &mut Worker) -> Assignment {
    match w.next().await {
        Out::Assignment(a) => a,
        other => panic!("expected an Assignment, got {other:?}"),
    }
}

/// Waits until the service has no open session (the coordinator noticed a closed stream).
async fn no_sessions(service: &WorkersService) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while service.sessions() > 0 {
        assert!(
            Instant::now() < deadline,
            "the closed session was never forgotten"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn refused(addr: std::net::SocketAddr, h: Hello) -> tonic::Status {
    match Worker::try_connect(addr, h).await {
        Ok(_) => panic!("a second live session for one worker id was accepted"),
        Err(status) => status,
    }
}

/// A second worker process with the id of a live one is refused with ALREADY_EXISTS naming
/// the id and when the holder connected; the first keeps its session and its lease; once
/// the first leaves, the second gets the id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_is_refused_while_the_first_is_alive() {
    let s = scheduler().await;
    enqueued(&s, 2, 0, &Caps::default()).await;
    let (service, addr) = serve(&s, TTL).await;
    let (mut first, _) = Worker::try_connect(addr, hello("dup", "one", Vec::new()))
        .await
        .unwrap();
    let a = assignment(&mut first).await;
    for _ in 0..3 {
        let status = refused(addr, hello("dup", "two", Vec::new())).await;
        assert_eq!(status.code(), tonic::Code::AlreadyExists, "{status:?}");
        let m = status.message();
        assert!(
            m.contains("\"dup\"") && m.contains("connected since") && m.contains("--worker-id"),
            "{m}"
        );
    }
    // A worker without an instance id is another process too.
    let status = refused(addr, hello("dup", "", Vec::new())).await;
    assert_eq!(status.code(), tonic::Code::AlreadyExists, "{status:?}");
    // The first session is untouched: its report about its lease is accepted, its lease is
    // still its own and live, and it is the only session.
    first.send(pending(&a)).await;
    match first.next().await {
        Out::Ack(ack) => assert_eq!(ack.subject, Subject::Transitions as i32),
        other => panic!("the first worker lost its lease: {other:?}"),
    }
    let holder: String = scalar(
        &s,
        &format!(
            "SELECT worker_id FROM leases WHERE attempt_id = '{}' AND expires_at > now()",
            a.attempt_id
        ),
    )
    .await;
    assert_eq!(holder, "dup");
    let finished: i64 = scalar(
        &s,
        "SELECT count(*) FROM attempts WHERE finished_at IS NOT NULL",
    )
    .await;
    assert_eq!(finished, 0, "no attempt was ended by the refused sessions");
    assert_eq!(service.sessions(), 1);
    // The first leaves; the second is accepted.
    drop(first);
    no_sessions(&service).await;
    let (_second, welcome) = Worker::try_connect(addr, hello("dup", "two", Vec::new()))
        .await
        .unwrap();
    assert!(welcome.revoked_attempt_ids.is_empty());
    assert_eq!(service.sessions(), 1);
}

/// A holder silent past the TTL loses the id to a new process at once; its own stream ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_holder_loses_the_id_to_a_new_process() {
    let clock = Arc::new(akbench_core::clock::ManualClock::new(chrono::Utc::now()));
    let base = scheduler().await;
    let s =
        Scheduler::with_clock(base.store().clone(), clock.clone()).with_retry(base.retry().clone());
    let (service, addr) = serve(&s, TTL).await;
    let (mut silent, _) = Worker::try_connect(addr, hello("w", "old", Vec::new()))
        .await
        .unwrap();
    clock.advance(chrono::Duration::seconds(29));
    let status = refused(addr, hello("w", "new", Vec::new())).await;
    assert_eq!(status.code(), tonic::Code::AlreadyExists, "heard 29 s ago");
    clock.advance(chrono::Duration::seconds(2));
    let (_new, _) = Worker::try_connect(addr, hello("w", "new", Vec::new()))
        .await
        .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), silent.rx.message())
        .await
        .expect("the silent session ends");
    assert!(
        matches!(end, Ok(None) | Err(_)),
        "the replaced session got {end:?}"
    );
    assert_eq!(service.sessions(), 1);
}

/// The same worker process reconnecting (its stream broke, the coordinator has not noticed
/// yet) takes over its own session at once and keeps the lease it re-presents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_process_takes_over_its_own_session() {
    let s = scheduler().await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    let (service, addr) = serve(&s, TTL).await;
    let (mut before, _) = Worker::try_connect(addr, hello("w", "same", Vec::new()))
        .await
        .unwrap();
    let a = assignment(&mut before).await;
    let (mut after, welcome) = Worker::try_connect(addr, hello("w", "same", vec![lease(&a)]))
        .await
        .unwrap();
    assert!(welcome.revoked_attempt_ids.is_empty(), "{welcome:?}");
    after.send(pending(&a)).await;
    match after.next().await {
        Out::Ack(ack) => assert_eq!(ack.subject, Subject::Transitions as i32),
        other => panic!("the reconnected worker lost its lease: {other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(10), before.rx.message())
        .await
        .expect("the old session ends");
    assert!(matches!(end, Ok(None) | Err(_)), "{end:?}");
    assert_eq!(service.sessions(), 1);
}
