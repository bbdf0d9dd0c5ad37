//! The `Workers.Session` service over real gRPC on loopback, against a real PostgreSQL.

mod common;

use std::time::Duration;

use akbench_coordinator::scheduler::Caps;
use akbench_coordinator::workers_service::wire_state;
use akbench_core::lifecycle::State;
use akbench_proto::v1::{
    coordinator_message::Body as Out, worker_message::Body as In, Assignment, AttemptFinished,
    HeldLease, Hello, RecordUpload, RefusalCode, Subject,
};
use common::{batch, chain, counts, enqueued, record, scalar, scheduler, serve, Worker};

const TTL: Duration = Duration::from_secs(30);

fn finished(a: &Assignment, s: State, cause: &str) -> In {
    In::Finished(AttemptFinished {
        attempt_id: a.attempt_id.clone(),
        epoch: a.epoch,
        terminal_state: wire_state(s) as i32,
        cause: cause.into(),
        ..Default::default()
    })
}

fn upload(a: &Assignment, note: &str) -> In {
    let (record_json, digest) = record(a.attempt_id.parse().unwrap(), note);
    In::Record(RecordUpload {
        attempt_id: a.attempt_id.clone(),
        epoch: a.epoch,
        record_json,
        digest,
        ..Default::default()
    })
}

async fn assignment(w: &mut Worker) -> Assignment {
    match w.next().await {
        Out::Assignment(a) => a,
        other => panic!("expected an Assignment, got {other:?}"),
    }
}

async fn ack(w: &mut Worker, subject: Subject) -> u32 {
    match w.next().await {
        Out::Ack(a) if a.subject == subject as i32 => a.seq,
        other => panic!("expected an Ack of {subject:?}, got {other:?}"),
    }
}

async fn refusal(w: &mut Worker) -> (RefusalCode, u32) {
    match w.next().await {
        Out::Refusal(r) => (r.code(), r.seq),
        other => panic!("expected a Refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_worker_leases_streams_uploads_and_finishes() {
    let s = scheduler().await;
    let (_svc, addr) = serve(&s, TTL).await;
    let (mut w, welcome) = Worker::connect(
        addr,
        Hello {
            worker_id: "w1".into(),
            slots: 1,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(welcome.lease_ttl_ms, 30_000);
    assert_eq!(welcome.heartbeat_interval_ms, 10_000);
    // Work enqueued after the session opened wakes it.
    let run = enqueued(&s, 2, 0, &Caps::default()).await;
    let a = assignment(&mut w).await;
    assert_eq!(a.trial_id, run.trial_ids[0].to_string());
    assert_eq!(a.attempt_number, 1);
    let doc: serde_json::Value = serde_json::from_str(&a.work_item_json).unwrap();
    assert_eq!(doc["ordinal"], 0);
    assert_eq!(
        a.work_item_digest,
        akbench_core::digest::digest_bytes(a.work_item_json.as_bytes())
    );
    w.send(batch(&a, &chain(), 1)).await;
    assert_eq!(ack(&mut w, Subject::Transitions).await, 11);
    w.send(upload(&a, "x")).await;
    ack(&mut w, Subject::Record).await;
    w.send(finished(&a, State::NotGraded, "")).await;
    ack(&mut w, Subject::Finished).await;
    // The freed slot gets the next item.
    let b = assignment(&mut w).await;
    assert_eq!(b.trial_id, run.trial_ids[1].to_string());
    let done: i64 = scalar(
        &s,
        "SELECT count(*) FROM work_items WHERE outcome = 'not_graded'",
    )
    .await;
    assert_eq!(done, 1);
    assert_eq!(
        scalar::<i64>(&s, "SELECT count(*) FROM submissions").await,
        1
    );
}

#[tokio::test]
async fn an_expired_lease_is_requeued_and_the_late_worker_is_fenced() {
    let (s, clock) = common::clocked().await;
    // No reaper runs here: the test moves the scheduler's clock past the TTL and reaps, so
    // no window depends on how fast this machine is.
    let (_svc, addr) = serve(&s, TTL).await;
    enqueued(&s, 1, 1, &Caps::default()).await;
    let mut slow = Worker::simple(addr, "slow", 1).await;
    let a = assignment(&mut slow).await;
    w_send_and_ack(&mut slow, batch(&a, &chain()[..2], 1), Subject::Transitions).await;
    assert!(s.reap(s.now()).await.unwrap().is_empty(), "not expired yet");
    clock.advance(chrono::Duration::from_std(TTL).unwrap() + chrono::Duration::seconds(1));
    let reaped = s.reap(s.now()).await.unwrap();
    assert_eq!(reaped.len(), 1);
    let mut fast = Worker::simple(addr, "fast", 1).await;
    let b = assignment(&mut fast).await;
    assert_eq!(b.trial_id, a.trial_id);
    assert_eq!(b.attempt_number, 2);
    let before = counts(&s).await;
    for m in [
        batch(&a, &[State::Validating], 3),
        upload(&a, "late"),
        finished(&a, State::NotGraded, ""),
    ] {
        slow.send(m).await;
        assert_eq!(refusal(&mut slow).await.0, RefusalCode::StaleEpoch);
    }
    assert_eq!(counts(&s).await, before);
}

async fn w_send_and_ack(w: &mut Worker, m: In, subject: Subject) {
    w.send(m).await;
    ack(w, subject).await;
}

#[tokio::test]
async fn malformed_messages_are_refused_and_change_nothing() {
    let s = scheduler().await;
    let (_svc, addr) = serve(&s, TTL).await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    let mut w = Worker::simple(addr, "w", 1).await;
    let a = assignment(&mut w).await;
    w_send_and_ack(&mut w, batch(&a, &chain()[..2], 1), Subject::Transitions).await;
    let before = counts(&s).await;

    let unknown = Assignment {
        attempt_id: uuid::Uuid::now_v7().to_string(),
        ..a.clone()
    };
    w.send(batch(&unknown, &[State::Validating], 3)).await;
    assert_eq!(refusal(&mut w).await.0, RefusalCode::UnknownAttempt);
    let bad_id = Assignment {
        attempt_id: "not-a-uuid".into(),
        ..a.clone()
    };
    w.send(batch(&bad_id, &[State::Validating], 3)).await;
    assert_eq!(refusal(&mut w).await.0, RefusalCode::Malformed);
    let mut bad_state = batch(&a, &[State::Validating], 3);
    if let In::Transitions(b) = &mut bad_state {
        b.transitions[0].state = 99;
    }
    w.send(bad_state).await;
    assert_eq!(refusal(&mut w).await, (RefusalCode::Malformed, 3));
    w.send(batch(&a, &[State::Validating], 5)).await;
    assert_eq!(
        refusal(&mut w).await,
        (RefusalCode::Malformed, 5),
        "seq gap"
    );
    w.send(batch(&a, &[State::Executing], 3)).await;
    assert_eq!(refusal(&mut w).await, (RefusalCode::InvalidTransition, 3));
    w.send(finished(&a, State::Completed, "")).await;
    assert_eq!(refusal(&mut w).await.0, RefusalCode::InvalidTransition);
    let mut mismatch = upload(&a, "x");
    if let In::Record(r) = &mut mismatch {
        r.digest = akbench_core::digest::digest_bytes(b"something else");
    }
    w.send(mismatch).await;
    assert_eq!(refusal(&mut w).await.0, RefusalCode::DigestMismatch);
    let mut not_json = upload(&a, "x");
    if let In::Record(r) = &mut not_json {
        r.record_json = "{not json".into();
        r.digest = akbench_core::digest::digest_bytes(r.record_json.as_bytes());
    }
    w.send(not_json).await;
    assert_eq!(refusal(&mut w).await.0, RefusalCode::Malformed);
    w.tx.send(akbench_proto::v1::WorkerMessage { body: None })
        .await
        .unwrap();
    assert_eq!(refusal(&mut w).await.0, RefusalCode::Malformed);
    w.send(In::Hello(Hello::default())).await;
    assert_eq!(refusal(&mut w).await.0, RefusalCode::Malformed);
    assert_eq!(counts(&s).await, before);
    // The session still works.
    w_send_and_ack(
        &mut w,
        batch(&a, &[State::Validating], 3),
        Subject::Transitions,
    )
    .await;
}

#[tokio::test]
async fn many_messages_at_once_are_answered_in_order() {
    let s = scheduler().await;
    let (_svc, addr) = serve(&s, TTL).await;
    enqueued(&s, 4, 0, &Caps::default()).await;
    let mut w = Worker::simple(addr, "w", 4).await;
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(assignment(&mut w).await);
    }
    for a in &got {
        w.send(batch(a, &chain(), 1)).await;
        w.send(upload(a, "x")).await;
        w.send(finished(a, State::NotGraded, "")).await;
    }
    for _ in &got {
        assert_eq!(ack(&mut w, Subject::Transitions).await, 11);
        ack(&mut w, Subject::Record).await;
        ack(&mut w, Subject::Finished).await;
    }
    let done: i64 = scalar(&s, "SELECT count(*) FROM work_items WHERE state = 'done'").await;
    assert_eq!(done, 4);
}

#[tokio::test]
async fn reconnect_keeps_valid_leases_and_revokes_the_others() {
    let s = scheduler().await;
    let (_svc, addr) = serve(&s, TTL).await;
    enqueued(&s, 2, 0, &Caps::default()).await;
    let mut w = Worker::simple(addr, "w", 2).await;
    let a = assignment(&mut w).await;
    let b = assignment(&mut w).await;
    drop(w);
    let hello = Hello {
        worker_id: "w".into(),
        slots: 2,
        held_leases: vec![
            HeldLease {
                attempt_id: a.attempt_id.clone(),
                epoch: a.epoch,
            },
            HeldLease {
                attempt_id: b.attempt_id.clone(),
                epoch: b.epoch + 100,
            },
        ],
        ..Default::default()
    };
    let (mut w, welcome) = Worker::connect(addr, hello).await;
    assert_eq!(welcome.revoked_attempt_ids, vec![b.attempt_id.clone()]);
    w_send_and_ack(&mut w, batch(&a, &chain()[..1], 1), Subject::Transitions).await;
}

#[tokio::test]
async fn cancel_run_sends_cancel_and_the_attempt_finishes_cancelled() {
    let s = scheduler().await;
    let (svc, addr) = serve(&s, TTL).await;
    let run = enqueued(&s, 3, 0, &Caps::default()).await;
    let mut w = Worker::simple(addr, "w", 1).await;
    let a = assignment(&mut w).await;
    let report = svc.cancel_run(run.run_id).await.unwrap();
    assert_eq!(report.cancelled_items, 2);
    match w.next().await {
        Out::Cancel(c) => assert_eq!(c.attempt_id, a.attempt_id),
        other => panic!("expected Cancel, got {other:?}"),
    }
    w_send_and_ack(
        &mut w,
        finished(&a, State::Cancelled, "run cancelled"),
        Subject::Finished,
    )
    .await;
    let outcome: i64 = scalar(
        &s,
        "SELECT count(*) FROM work_items WHERE outcome = 'cancelled'",
    )
    .await;
    assert_eq!(outcome, 3);
    assert_eq!(svc.drain_all("shutting down"), 1);
    assert!(matches!(w.next().await, Out::Drain(_)));
}

/// Workers connected now (the status projection's count, without its recency window).
async fn connected(s: &akbench_coordinator::scheduler::Scheduler) -> i64 {
    scalar(
        s,
        "SELECT count(*) FROM workers WHERE disconnected_at IS NULL",
    )
    .await
}

#[tokio::test]
async fn a_worker_whose_session_ended_is_not_counted_as_connected() {
    let s = scheduler().await;
    let (_svc, addr) = serve(&s, TTL).await;
    let w = Worker::simple(addr, "w-gone", 1).await;
    assert_eq!(connected(&s).await, 1);
    drop(w);
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while connected(&s).await != 0 {
        assert!(
            std::time::Instant::now() < until,
            "the ended session is still counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_older_session_ending_leaves_the_newer_one_connected() {
    let s = scheduler().await;
    let labels = std::collections::BTreeMap::new();
    let first = s.register_worker("w-re", 1, &labels, "t").await.unwrap();
    let second = s.register_worker("w-re", 1, &labels, "t").await.unwrap();
    assert!(second > first);
    s.disconnect_worker("w-re", first).await.unwrap();
    assert_eq!(
        connected(&s).await,
        1,
        "the newer session is still connected"
    );
    s.disconnect_worker("w-re", second).await.unwrap();
    assert_eq!(connected(&s).await, 0);
    s.register_worker("w-re", 1, &labels, "t").await.unwrap();
    assert_eq!(connected(&s).await, 1, "reconnecting clears the disconnect");
}

/// Issue 28: `--heartbeat-interval-ms` (AKBENCH_HEARTBEAT_INTERVAL_MS) takes effect: the
/// coordinator asks its workers for that interval in `Welcome`; an interval longer than half
/// the lease TTL is refused at start with an error naming the flag, before anything listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_interval_flag_is_what_workers_are_asked_for() {
    use akbench_coordinator::pgcluster::test_support;
    use akbench_coordinator::server::{serve_with, Config, ServeError, Services};
    let url = test_support::fresh_database().await;
    let mut config = Config::local(url.clone());
    config.heartbeat_interval_ms = Some(400);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = serve_with(config, Services::default(), async move {
        let _ = stopped.await;
    })
    .await
    .expect("serves");
    let (_w, welcome) = Worker::connect(
        handle.grpc_addr,
        Hello {
            worker_id: "w-hb".into(),
            slots: 1,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(welcome.lease_ttl_ms, 30_000);
    assert_eq!(welcome.heartbeat_interval_ms, 400);
    let _ = stop.send(());

    let mut config = Config::local(url);
    config.heartbeat_interval_ms = Some(31_000);
    let Err(refused) = serve_with(config, Services::default(), std::future::pending()).await else {
        panic!("a heartbeat interval longer than the TTL is refused");
    };
    assert!(matches!(refused, ServeError::Timing(_)), "{refused:?}");
    let text = refused.to_string();
    assert!(
        text.contains("--heartbeat-interval-ms") && text.contains("31000 ms"),
        "{text}"
    );
}
