//! The dispatch policy under faults, on a real private PostgreSQL and real gRPC sessions:
//! the start race, frozen workers, broken sessions, database outages, shutdowns, resume.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use akbench_coordinator::scheduler::test_support::{seed_run, set_item_state};
use akbench_coordinator::scheduler::{Caps, RunAgent};
use common::scheduler;

/// The one agent condition of a seeded run.
fn oracle() -> Vec<RunAgent> {
    vec![RunAgent {
        label: "oracle".into(),
        provider_route: None,
        document: serde_json::json!({"label": "oracle"}),
    }]
}

/// A run is `running` only once all its work items exist: a reader polling state and item
/// count in one snapshot never sees a running run with fewer items than planned, and the
/// reaper's end-of-run safety net, run all along, never ends it while it is being started.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_is_running_only_once_its_work_items_exist() {
    const N: usize = 20_000;
    let s = scheduler().await;
    let run = seed_run(s.store(), N, "oracle", &Caps::default())
        .await
        .unwrap();
    let c = s.store().client().await.unwrap();
    c.execute(
        "UPDATE runs SET state = 'planned', started_at = NULL WHERE run_id = $1",
        &[&run.run_id],
    )
    .await
    .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (s, done, run_id) = (s.clone(), Arc::clone(&done), run.run_id);
        tokio::spawn(async move {
            let c = s.store().client().await.unwrap();
            let mut seen = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                let row = c
                    .query_one(
                        "SELECT r.state::text, (SELECT count(*) FROM work_items w WHERE w.run_id = r.run_id) \
                         FROM runs r WHERE r.run_id = $1",
                        &[&run_id],
                    )
                    .await
                    .unwrap();
                seen.push((row.get::<_, String>(0), row.get::<_, i64>(1)));
                // The reaper's safety net ends any run with nothing ready or leased.
                s.reap(s.now()).await.unwrap();
                if finished {
                    return seen;
                }
            }
        })
    };
    let created = s
        .start_run(run.run_id, &Caps::default(), &oracle())
        .await
        .unwrap();
    assert_eq!(created, Some(N as u64));
    done.store(true, Ordering::SeqCst);
    let seen = watcher.await.unwrap();
    assert!(
        seen.len() >= 2,
        "the watcher looked during the start: {seen:?}"
    );
    for (state, items) in &seen {
        match state.as_str() {
            "planned" => assert_eq!(*items, 0),
            "running" => assert_eq!(*items, N as i64, "running with a partial queue"),
            other => panic!("the run became {other} while it was started ({items} items)"),
        }
    }
    assert_eq!(seen.last().unwrap(), &("running".to_string(), N as i64));
    // A second start creates nothing.
    assert_eq!(
        s.start_run(run.run_id, &Caps::default(), &oracle())
            .await
            .unwrap(),
        None
    );
}

use std::time::Duration;

use akbench_coordinator::scheduler::{Disposition, RetryPolicy, Scheduler};
use akbench_coordinator::workers_service::wire_state;
use akbench_core::dispatch::{self, Backoff, Ended, RunState, Settlement};
use akbench_core::lifecycle::State;
use akbench_proto::v1::{
    coordinator_message::Body as Out, worker_message::Body as In, Assignment, AttemptFinished,
    Heartbeat, HeldLease, Hello,
};
use common::{batch, chain, enqueued, scalar, serve, Worker};
use tokio::sync::mpsc;

fn finished(a: &Assignment, s: State) -> In {
    In::Finished(AttemptFinished {
        attempt_id: a.attempt_id.clone(),
        epoch: a.epoch,
        terminal_state: wire_state(s) as i32,
        cause: String::new(),
        ..Default::default()
    })
}

async fn assignment(w: &mut Worker) -> Assignment {
    for _ in 0..20 {
        match w.next().await {
            Out::Assignment(a) => return a,
            // Acks of reports, and the answer to a heartbeat that still lists a finished
            // attempt.
            Out::Ack(_) => continue,
            Out::Cancel(c) if c.reason == "lease lost" => continue,
            other => panic!("expected an Assignment, got {other:?}"),
        }
    }
    panic!("no Assignment among 20 messages");
}

fn lease(a: &Assignment) -> HeldLease {
    HeldLease {
        attempt_id: a.attempt_id.clone(),
        epoch: a.epoch,
    }
}

/// Sends a heartbeat listing `leases` every `every` until the returned sender is dropped
/// (a worker that keeps heartbeating).
fn heartbeats(w: &Worker, leases: Vec<HeldLease>, every: Duration) -> mpsc::Sender<()> {
    let (stop, mut stopped) = mpsc::channel::<()>(1);
    let tx = w.tx.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = stopped.recv() => return,
                _ = tick.tick() => {
                    let hb = In::Heartbeat(Heartbeat {
                        free_slots: 0,
                        leases: leases.clone(),
                        draining: false,
                    });
                    if tx.send(akbench_proto::v1::WorkerMessage { body: Some(hb) }).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    stop
}

/// Core's retry table, run through the report path's settle on a real database (decided by
/// core over the report's snapshot, applied by `apply_effects.sql`): the same decisions,
/// and the backoff applied to `ready_at`.
#[tokio::test]
async fn settling_in_the_database_follows_core_dispatch() {
    let backoff = Backoff {
        base: Duration::from_secs(40),
        cap: Duration::from_secs(100),
    };
    // A fixed jitter draw: the factor is 0.75.
    let retry = RetryPolicy {
        backoff,
        jitter: std::sync::Arc::new(|| 0.5),
    };
    let table = [
        (State::InfrastructureError, 1, 0, RunState::Running),
        (State::InfrastructureError, 1, 1, RunState::Running),
        (State::InfrastructureError, 2, 3, RunState::Running),
        (State::InfrastructureError, 1, 1, RunState::Cancelling),
        (State::Cancelled, 1, 1, RunState::Running),
        (State::Cancelled, 1, 0, RunState::Running),
        (State::Cancelled, 1, 1, RunState::Cancelling),
        (State::Failed, 1, 3, RunState::Running),
        (State::NotGraded, 1, 3, RunState::Running),
    ];
    for (terminal, used, budget, run) in table {
        let s = common::scheduler_with(retry.clone()).await;
        let seeded = enqueued(&s, 1, budget, &Caps::default()).await;
        s.register_worker("w", 1, &Default::default(), "t")
            .await
            .unwrap();
        let c = s.store().client().await.unwrap();
        // `used` attempts so far: this claim makes the last one.
        c.execute(
            "UPDATE work_items SET attempts_used = $1",
            &[&(used as i32 - 1)],
        )
        .await
        .unwrap();
        let a = s
            .claim("w", 1, Duration::from_secs(30))
            .await
            .unwrap()
            .remove(0);
        if run != RunState::Running {
            c.execute(
                "UPDATE runs SET state = $2::text::run_state WHERE run_id = $1",
                &[&seeded.run_id, &run.as_str()],
            )
            .await
            .unwrap();
        }
        // Up to executing (every failure may follow it), or finalizing for `not_graded`.
        let upto = if terminal == State::NotGraded { 10 } else { 7 };
        let steps: Vec<akbench_coordinator::scheduler::TransitionIn> = chain()[..upto]
            .iter()
            .enumerate()
            .map(|(i, st)| akbench_coordinator::scheduler::TransitionIn {
                seq: i as u32 + 1,
                state: *st,
                at: chrono::Utc::now(),
                note: String::new(),
            })
            .collect();
        s.record_transitions(a.attempt_id, a.epoch, &steps)
            .await
            .unwrap();
        let got = s.finish(a.attempt_id, a.epoch, terminal, "").await.unwrap();
        let want = dispatch::settle(
            &Ended {
                terminal,
                attempts_used: used,
                retry_budget: budget as u32,
                run,
            },
            &backoff,
            0.5,
        );
        let case = format!("{terminal:?} used {used} budget {budget} in {run}");
        match want {
            Settlement::Retry { after } => {
                assert_eq!(got, Some(Disposition::Requeued), "{case}");
                let delay: f64 = scalar(
                    &s,
                    "SELECT extract(epoch FROM ready_at - now())::float8 FROM work_items",
                )
                .await;
                // Within the statement's own runtime of the policy's delay.
                assert!(
                    (delay - after.as_secs_f64()).abs() < 5.0,
                    "{case}: delay {delay} want {after:?}"
                );
            }
            Settlement::Done(outcome) => {
                assert_eq!(got, Some(Disposition::Done(outcome)), "{case}");
                let stored: String = scalar(&s, "SELECT outcome FROM work_items").await;
                assert_eq!(stored, outcome.as_str(), "{case}");
            }
        }
    }
}

/// Core's run-ending table (`RunState::when_idle`) run against `finish_runs.sql` (through
/// the reaper's end-of-run safety net): a run with nothing ready or leased ends as core
/// says, one with work left never does.
#[tokio::test]
async fn ending_runs_in_the_database_follows_core_run_states() {
    for state in RunState::ALL {
        for idle in [false, true] {
            let s = common::scheduler().await;
            let seeded = enqueued(&s, 1, 0, &Caps::default()).await;
            let c = s.store().client().await.unwrap();
            if idle {
                set_item_state(&c, &seeded.trial_ids, "done", Some("not_graded"), None)
                    .await
                    .unwrap();
            }
            c.execute(
                "UPDATE runs SET state = $2::text::run_state WHERE run_id = $1",
                &[&seeded.run_id, &state.as_str()],
            )
            .await
            .unwrap();
            s.reap(s.now()).await.unwrap();
            let got: String = scalar(&s, "SELECT state::text FROM runs").await;
            let want = if idle {
                state.when_idle(true).unwrap_or(state)
            } else {
                state
            };
            assert_eq!(got, want.as_str(), "{state} idle {idle}");
        }
    }
}

/// A frozen worker (its stream open, nothing heard past the TTL) loses its leases, gets
/// nothing new, is not counted as connected, and its trials go to the healthy worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_gets_nothing_and_its_trials_go_to_others() {
    // The healthy worker heartbeats every TTL / 5: a TTL of 5 s keeps its leases even if
    // its heartbeat task is starved for seconds on a loaded 2-core machine.
    let ttl = Duration::from_secs(5);
    let s = common::scheduler().await;
    enqueued(&s, 2, 3, &Caps::default()).await;
    let (service, addr) = serve(&s, ttl).await;
    let _reaper = service.spawn_reaper();
    let mut frozen = Worker::simple(addr, "frozen", 4).await;
    let first = [assignment(&mut frozen).await, assignment(&mut frozen).await];
    // The healthy worker connects after the frozen one took everything, and heartbeats.
    let mut healthy = Worker::simple(addr, "healthy", 2).await;
    let beats = heartbeats(&healthy, Vec::new(), ttl / 5);
    let mut rescued = [
        assignment(&mut healthy).await,
        assignment(&mut healthy).await,
    ];
    drop(beats);
    let beats = heartbeats(&healthy, rescued.iter().map(lease).collect(), ttl / 5);
    rescued.sort_by(|a, b| a.trial_id.cmp(&b.trial_id));
    let mut lost: Vec<_> = first.iter().map(|a| a.trial_id.clone()).collect();
    lost.sort();
    assert_eq!(
        rescued
            .iter()
            .map(|a| a.trial_id.clone())
            .collect::<Vec<_>>(),
        lost
    );
    assert!(rescued.iter().all(|a| a.attempt_number == 2));
    // The frozen worker heard only that it lost them: no assignment came to it.
    for _ in 0..2 {
        match frozen.next().await {
            Out::Cancel(c) => assert_eq!(c.reason, "lease expired"),
            other => panic!("a frozen worker got {other:?}"),
        }
    }
    assert_eq!(service.connected(), 1, "the frozen worker does not count");
    assert_eq!(service.sessions(), 2, "its stream is still open");
    // New work while the healthy worker is full: the frozen one has free slots but gets
    // none of it; the healthy one takes it once it finishes a trial.
    let newer = enqueued(&s, 1, 0, &Caps::default()).await;
    let done = &rescued[0];
    drop(beats);
    let _beats = heartbeats(&healthy, vec![lease(&rescued[1])], ttl / 5);
    healthy.send(batch(done, &chain(), 1)).await;
    healthy.send(finished(done, State::NotGraded)).await;
    let next = assignment(&mut healthy).await;
    assert_eq!(next.trial_id, newer.trial_ids[0].to_string());
    let causes: i64 = scalar(
        &s,
        "SELECT count(*) FROM attempts WHERE worker_id = 'frozen' \
         AND terminal_state = 'infrastructure_error' AND cause LIKE 'lease expired%'",
    )
    .await;
    assert_eq!(causes, 2);
}

/// A worker whose leases the reaper took back for silence gets nothing new, even when a
/// report it sent after its last lease extension keeps it "heard" within the TTL (the chaos
/// check caught a frozen worker being given a new trial 5 ms after its lease was reaped).
/// The clock is the scheduler's (injected): the report arrives 27 s into a 30 s lease, the
/// reaper runs at 32 s, when the report is only 5 s old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_lease_expired_gets_nothing_though_heard_within_the_ttl() {
    let ttl = Duration::from_secs(30);
    let clock = Arc::new(akbench_core::clock::ManualClock::new(chrono::Utc::now()));
    let base = scheduler().await;
    let s =
        Scheduler::with_clock(base.store().clone(), clock.clone()).with_retry(base.retry().clone());
    enqueued(&s, 3, 3, &Caps::default()).await;
    // No reaper task: its pass is run by hand at the chosen instant.
    let (service, addr) = serve(&s, ttl).await;
    let mut silent = Worker::simple(addr, "silent", 2).await;
    let taken = [assignment(&mut silent).await, assignment(&mut silent).await];
    clock.advance(chrono::Duration::seconds(27));
    silent.send(batch(&taken[0], &chain()[..2], 1)).await;
    match silent.next().await {
        Out::Ack(_) => {}
        other => panic!("expected the report's ack, got {other:?}"),
    }
    assert_eq!(service.connected(), 1, "heard 0 s ago");
    clock.advance(chrono::Duration::seconds(5));
    assert_eq!(service.reap_once().await.unwrap(), 2, "both leases expired");
    for _ in 0..2 {
        match silent.next().await {
            Out::Cancel(c) => assert_eq!(c.reason, "lease expired"),
            other => panic!("a silent worker got {other:?}"),
        }
    }
    assert_eq!(
        service.connected(),
        0,
        "heard 5 s ago, but its leases expired for silence since"
    );
    // Another worker takes all three (the two rescued, the one never started); the silent
    // one took none of them.
    let mut healthy = Worker::simple(addr, "healthy", 3).await;
    let mut got: Vec<String> = Vec::new();
    for _ in 0..3 {
        got.push(assignment(&mut healthy).await.trial_id);
    }
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 3);
    let on_silent: i64 = scalar(
        &s,
        "SELECT count(*) FROM attempts WHERE worker_id = 'silent'",
    )
    .await;
    assert_eq!(on_silent, 2, "only the two attempts it lost");
}

/// A session that breaks with no reconnect releases its leases within the grace, long
/// before the TTL (30 s here; `Worker::next` gives up after 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_session_releases_its_leases_at_once() {
    let ttl = Duration::from_secs(30);
    let s = common::scheduler().await;
    enqueued(&s, 1, 1, &Caps::default()).await;
    let (service, addr) = serve(&s, ttl).await;
    let mut gone = Worker::simple(addr, "gone", 1).await;
    let a = assignment(&mut gone).await;
    drop(gone);
    let mut other = Worker::simple(addr, "other", 1).await;
    let b = assignment(&mut other).await;
    assert_eq!(b.trial_id, a.trial_id);
    assert_eq!(b.attempt_number, 2);
    let cause: String = scalar(
        &s,
        "SELECT terminal_state FROM attempts WHERE worker_id = 'gone'",
    )
    .await;
    assert_eq!(cause, "infrastructure_error");
    // Issue 28: the cause says what happened (the session broke), not "went silent".
    let cause: String = scalar(&s, "SELECT cause FROM attempts WHERE worker_id = 'gone'").await;
    assert_eq!(
        cause,
        akbench_core::dispatch::Loss::SessionBroke.cause("gone"),
        "{cause}"
    );
    assert!(
        cause.contains("session") && !cause.contains("silent"),
        "{cause}"
    );
    let last: String = scalar(
        &s,
        "SELECT t.note FROM transitions t JOIN attempts a USING (attempt_id) \
         WHERE a.worker_id = 'gone' ORDER BY t.seq DESC LIMIT 1",
    )
    .await;
    assert_eq!(last, cause);
    drop(service);
}

/// A worker that comes back without the leases the coordinator has for it (it restarted)
/// gets them released at once: the trial is assigned again right away, to it when no other
/// worker is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_back_without_its_leases_releases_them_at_once() {
    let ttl = Duration::from_secs(30);
    let s = common::scheduler().await;
    enqueued(&s, 1, 1, &Caps::default()).await;
    let (_service, addr) = serve(&s, ttl).await;
    let mut before = Worker::simple(addr, "w", 1).await;
    let a = assignment(&mut before).await;
    let (mut after, welcome) = Worker::connect(
        addr,
        Hello {
            worker_id: "w".into(),
            slots: 1,
            ..Default::default()
        },
    )
    .await;
    assert!(welcome.revoked_attempt_ids.is_empty());
    let b = assignment(&mut after).await;
    assert_eq!(b.trial_id, a.trial_id);
    assert_eq!(b.attempt_number, 2);
    // Issue 28: the cause says it came back without the lease, not "went silent".
    let cause: String = scalar(&s, "SELECT cause FROM attempts WHERE number = 1").await;
    assert_eq!(
        cause,
        akbench_core::dispatch::Loss::RevokedAtReconnect.cause("w"),
        "{cause}"
    );
    // A worker that re-presents its lease keeps it.
    let (mut again, welcome) = Worker::connect(
        addr,
        Hello {
            worker_id: "w".into(),
            slots: 2,
            held_leases: vec![lease(&b)],
            ..Default::default()
        },
    )
    .await;
    assert!(welcome.revoked_attempt_ids.is_empty());
    again.send(batch(&b, &chain(), 1)).await;
    again.send(finished(&b, State::NotGraded)).await;
    let outcome: Option<String> = loop {
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
}

/// A scheduler whose database sits behind a proxy the test can cut.
async fn behind_proxy() -> (Scheduler, Proxy) {
    let url = akbench_coordinator::pgcluster::test_support::fresh_database().await;
    let (prefix, rest) = url.split_once("@127.0.0.1:").unwrap();
    let (port, db) = rest.split_once('/').unwrap();
    let proxy = Proxy::start(port.parse().unwrap()).await;
    let proxied = format!("{prefix}@127.0.0.1:{}/{db}", proxy.port);
    let store = akbench_coordinator::store::Store::connect(&proxied)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let s = Scheduler::new(store).with_retry(RetryPolicy::with_backoff(Backoff::NONE));
    (s, proxy)
}

/// A TCP proxy to PostgreSQL that can be cut (every connection closed, new ones refused)
/// and restored: a database outage as the coordinator sees it.
struct Proxy {
    port: u16,
    up: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(target: u16) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (up, _) = tokio::sync::watch::channel(true);
        let watch = up.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut rx = watch.subscribe();
                if !*rx.borrow() {
                    continue; // refused: dropped at once
                }
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = rx.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Proxy { port, up }
    }

    fn set(&self, up: bool) {
        self.up.send_replace(up);
    }
}

/// A database outage longer than the TTL: the workers the coordinator kept hearing keep
/// their leases, and their results are accepted once the database is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_does_not_expire_the_leases_of_heartbeating_workers() {
    // Heartbeats every TTL / 5: a TTL of 5 s tolerates seconds of starvation on a loaded
    // 2-core machine.
    let ttl = Duration::from_secs(5);
    let (s, proxy) = behind_proxy().await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    let (service, addr) = serve(&s, ttl).await;
    let mut w = Worker::simple(addr, "steady", 1).await;
    let a = assignment(&mut w).await;
    let beats = heartbeats(&w, vec![lease(&a)], ttl / 5);
    proxy.set(false);
    // The outage lasts well past the TTL while the worker keeps heartbeating (the scenario's
    // length, not a wait for an event).
    tokio::time::sleep(ttl * 2).await;
    proxy.set(true);
    // The reaper's first pass after the outage takes back nothing.
    let reaped = loop {
        match service.reap_once().await {
            Ok(n) => break n,
            Err(_) => tokio::task::yield_now().await, // the pool reconnects
        }
    };
    assert_eq!(reaped, 0, "a heartbeating worker's lease was reaped");
    drop(beats);
    w.send(batch(&a, &chain(), 1)).await;
    w.send(finished(&a, State::NotGraded)).await;
    let mut acks = 0;
    while acks < 2 {
        match w.next().await {
            Out::Ack(_) => acks += 1,
            Out::Refusal(r) if r.code == akbench_proto::v1::RefusalCode::Unavailable as i32 => {
                panic!("database still unavailable: {r:?}")
            }
            other => panic!("the buffered result was refused: {other:?}"),
        }
    }
    let outcome: String = scalar(&s, "SELECT outcome FROM work_items").await;
    assert_eq!(outcome, "not_graded");
}

/// A frozen database (PostgreSQL's postmaster and backends stopped, `SIGSTOP`) for longer
/// than the TTL while a worker holds leases and keeps heartbeating: the coordinator's
/// session waits on the database the whole time, yet the worker was heard, so no lease is
/// taken back once the database runs again (before, every lease was reaped as "went silent"
/// at the first pass after the freeze and the result sent during it was refused as stale),
/// and every trial ends exactly once, with its one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_database_does_not_expire_the_leases_of_heartbeating_workers() {
    const N: usize = 3;
    // Heartbeats every TTL / 5, as in the outage test above.
    let ttl = Duration::from_secs(3);
    let s = common::scheduler().await;
    // No retries: a lease taken back ends its trial infrastructure_error.
    enqueued(&s, N, 0, &Caps::default()).await;
    let (service, addr) = serve(&s, ttl).await;
    let mut w = Worker::simple(addr, "steady", N as u32).await;
    let mut held = Vec::new();
    for _ in 0..N {
        held.push(assignment(&mut w).await);
    }
    for a in &held {
        w.send(batch(a, &chain()[..7], 1)).await;
    }
    let mut acks = 0;
    while acks < N {
        match w.next().await {
            Out::Ack(_) => acks += 1,
            other => panic!("expected the transitions' acks, got {other:?}"),
        }
    }
    let beats = heartbeats(&w, held.iter().map(lease).collect(), ttl / 5);
    // A pass before the freeze, as the reaper makes every interval (its connection is open).
    assert_eq!(service.reap_once().await.unwrap(), 0);
    let reaper = {
        let _frozen = akbench_coordinator::pgcluster::test_support::freeze(ttl * 10);
        // A result sent while the database is frozen: the session waits on it.
        w.send(batch(&held[0], &chain()[7..], 8)).await;
        w.send(finished(&held[0], State::NotGraded)).await;
        // The freeze lasts twice the TTL while the worker keeps heartbeating (the
        // scenario's length, not a wait for an event).
        tokio::time::sleep(ttl * 2).await;
        // The reaper's pass at the end of the freeze: it judges now, then waits on the
        // database with the session.
        let service = service.clone();
        tokio::spawn(async move { service.reap_once().await })
    };
    let reaped = reaper.await.unwrap().unwrap();
    assert_eq!(reaped, 0, "a heartbeating worker's lease was reaped");
    // And the next pass takes back nothing either.
    assert_eq!(service.reap_once().await.unwrap(), 0);
    drop(beats);
    for a in &held[1..] {
        w.send(batch(a, &chain()[7..], 8)).await;
        w.send(finished(a, State::NotGraded)).await;
    }
    let mut acks = 0;
    while acks < 2 * N {
        match w.next().await {
            Out::Ack(_) => acks += 1,
            // The answer to a heartbeat that listed an attempt finished meanwhile.
            Out::Cancel(c) if c.reason == "lease lost" => {}
            other => panic!("a result was refused after the freeze: {other:?}"),
        }
    }
    let attempts: i64 = scalar(&s, "SELECT count(*) FROM attempts").await;
    assert_eq!(attempts, N as i64, "one attempt per trial, none lost");
    let outcomes: Vec<(String, i64)> = {
        let c = s.store().client().await.unwrap();
        c.query(
            "SELECT coalesce(outcome, '-'), count(*) FROM work_items GROUP BY 1 ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
    };
    assert_eq!(outcomes, vec![("not_graded".to_string(), N as i64)]);
    let lost: i64 = scalar(
        &s,
        "SELECT count(*) FROM attempts WHERE state <> 'not_graded' OR fenced",
    )
    .await;
    assert_eq!(lost, 0, "an attempt was closed by the reaper");
}

/// `run resume` re-queues every trial without an accepted final outcome: the never-run
/// trials of a cancelled run and infrastructure errors whose budget is spent (with a fresh
/// budget), never an agent's failure; it returns exactly those.
#[tokio::test]
async fn resume_requeues_every_trial_without_an_accepted_outcome() {
    let ttl = Duration::from_secs(30);
    let s = common::scheduler().await;
    let run = enqueued(&s, 4, 0, &Caps::default()).await;
    s.register_worker("w", 2, &Default::default(), "t")
        .await
        .unwrap();
    let got = s.claim("w", 2, ttl).await.unwrap();
    let (infra, failed) = (&got[0], &got[1]);
    let upto: Vec<akbench_coordinator::scheduler::TransitionIn> = chain()[..7]
        .iter()
        .enumerate()
        .map(|(i, st)| akbench_coordinator::scheduler::TransitionIn {
            seq: i as u32 + 1,
            state: *st,
            at: chrono::Utc::now(),
            note: String::new(),
        })
        .collect();
    for a in [infra, failed] {
        s.record_transitions(a.attempt_id, a.epoch, &upto)
            .await
            .unwrap();
    }
    assert_eq!(
        s.finish(
            infra.attempt_id,
            infra.epoch,
            State::InfrastructureError,
            "disk full"
        )
        .await
        .unwrap(),
        Some(Disposition::Done(State::InfrastructureError)),
        "budget 0: spent"
    );
    s.finish(
        failed.attempt_id,
        failed.epoch,
        State::Failed,
        "agent gave up",
    )
    .await
    .unwrap();
    let cancelled = s.cancel_run(run.run_id).await.unwrap();
    assert_eq!(cancelled.cancelled_items, 2);
    let state: String = scalar(&s, "SELECT state::text FROM runs").await;
    assert_eq!(state, "cancelled");

    let mut requeued = s.resume_run(run.run_id).await.unwrap();
    requeued.sort();
    let mut want = vec![infra.trial_id, run.trial_ids[2], run.trial_ids[3]];
    want.sort();
    assert_eq!(
        requeued, want,
        "exactly the trials without an accepted outcome"
    );
    let state: String = scalar(&s, "SELECT state::text FROM runs").await;
    assert_eq!(state, "running");
    // Resuming again re-queues nothing more.
    assert!(s.resume_run(run.run_id).await.unwrap().is_empty());
    // The infrastructure error's trial has a fresh budget (0 retries: one more attempt).
    let again = s.claim("w", 3, ttl).await.unwrap();
    assert_eq!(again.len(), 3);
    let retried = again.iter().find(|a| a.trial_id == infra.trial_id).unwrap();
    assert_eq!(retried.number, 2);
    s.record_transitions(retried.attempt_id, retried.epoch, &upto)
        .await
        .unwrap();
    assert_eq!(
        s.finish(
            retried.attempt_id,
            retried.epoch,
            State::InfrastructureError,
            "again"
        )
        .await
        .unwrap(),
        Some(Disposition::Done(State::InfrastructureError))
    );
    let failed_outcome: String = scalar(
        &s,
        &format!(
            "SELECT outcome FROM work_items WHERE trial_id = '{}'",
            failed.trial_id
        ),
    )
    .await;
    assert_eq!(failed_outcome, "failed", "an agent failure stays");
}
