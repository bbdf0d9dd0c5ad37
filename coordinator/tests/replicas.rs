//! Two coordinator replicas (two schedulers, each with its own replica id and heard set) on
//! one database: who reaps an expired lease (core::dispatch::replica; docs/remote.md
//! "Replicas"). Both share one manual clock that the test moves, so no window depends on
//! how fast this machine is.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use akbench_coordinator::scheduler::{Caps, Heard, HeardLease, Scheduler};
use common::{clocked, enqueued, scalar};
use uuid::Uuid;

const TTL: Duration = Duration::from_secs(10);

/// A second replica on `a`'s database and clock.
fn replica_of(a: &Scheduler, clock: Arc<akbench_core::clock::ManualClock>) -> Scheduler {
    Scheduler::with_clock(a.store().clone(), clock).with_retry(a.retry().clone())
}

/// Gives `s` a heard set the test fills (what its sessions' readers would note).
fn hears(s: &Scheduler) -> Arc<Mutex<HashMap<Uuid, HeardLease>>> {
    let leases = Arc::new(Mutex::new(HashMap::new()));
    let from = Arc::clone(&leases);
    s.on_heard(move || Heard {
        leases: from.lock().unwrap().clone(),
        ttl: TTL,
    });
    leases
}

async fn register(s: &Scheduler, id: &str, slots: u32) {
    s.register_worker(id, slots, &BTreeMap::new(), "test")
        .await
        .expect("registers");
}

fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

#[tokio::test]
async fn a_worker_heard_only_by_replica_b_is_never_reaped_by_replica_a() {
    let (a, clock) = clocked().await;
    let b = replica_of(&a, clock.clone());
    assert_ne!(a.replica(), b.replica());
    hears(&a);
    let heard_by_b = hears(&b);
    enqueued(&a, 1, 1, &Caps::default()).await;
    register(&b, "w", 1).await;
    let lease = b.claim("w", 1, TTL).await.unwrap().remove(0);
    // Both replicas mark themselves alive on their reaper passes.
    assert!(a.reap(a.now()).await.unwrap().is_empty());
    assert!(b.reap(b.now()).await.unwrap().is_empty());
    // The database stores no heartbeat (down, frozen) while B hears the worker list its
    // lease every second, for six TTLs; both replicas keep reaping.
    for _ in 0..60 {
        clock.advance(secs(1));
        heard_by_b.lock().unwrap().insert(
            lease.attempt_id,
            HeardLease {
                worker_id: "w".into(),
                epoch: lease.epoch,
                at: a.now(),
            },
        );
        let by_a = a.reap(a.now()).await.unwrap();
        assert!(
            by_a.is_empty(),
            "replica A reaped B's heard lease: {by_a:?}"
        );
        let by_b = b.reap(b.now()).await.unwrap();
        assert!(
            by_b.is_empty(),
            "replica B reaped the lease it hears: {by_b:?}"
        );
    }
    // A database frozen for two TTLs: no pass of either replica ran, B's sessions kept
    // hearing the worker; after the thaw A happens to pass first.
    clock.advance(secs(20));
    heard_by_b.lock().unwrap().insert(
        lease.attempt_id,
        HeardLease {
            worker_id: "w".into(),
            epoch: lease.epoch,
            at: a.now() - secs(1),
        },
    );
    let by_a = a.reap(a.now()).await.unwrap();
    assert!(
        by_a.is_empty(),
        "replica A reaped after the freeze: {by_a:?}"
    );
    let by_b = b.reap(b.now()).await.unwrap();
    assert!(
        by_b.is_empty(),
        "replica B reaped after the freeze: {by_b:?}"
    );
    let live: i64 = scalar(&a, "SELECT count(*) FROM leases").await;
    assert_eq!(live, 1, "the lease is held");
    let fenced: bool = scalar(&a, "SELECT fenced FROM attempts").await;
    assert!(!fenced, "the attempt was never taken back");
}

#[tokio::test]
async fn a_worker_silent_on_both_replicas_is_reaped_once() {
    for disconnected in [false, true] {
        let (a, clock) = clocked().await;
        let b = replica_of(&a, clock.clone());
        hears(&a);
        hears(&b);
        enqueued(&a, 8, 1, &Caps::default()).await;
        let connected_at = b
            .register_worker("w", 8, &BTreeMap::new(), "test")
            .await
            .unwrap();
        let leased = b.claim("w", 8, TTL).await.unwrap();
        assert_eq!(leased.len(), 8);
        if disconnected {
            // Its session on B ended: nobody holds it, both replicas may reap.
            b.disconnect_worker("w", connected_at).await.unwrap();
        }
        assert!(a.reap(a.now()).await.unwrap().is_empty());
        assert!(b.reap(b.now()).await.unwrap().is_empty());
        clock.advance(secs(11));
        // Both reap at once, for as many passes as it takes (a lease the other pass holds
        // locked is skipped and left for the next).
        let mut reaped = Vec::new();
        for _ in 0..10 {
            let (by_a, by_b) = tokio::join!(a.reap(a.now()), b.reap(b.now()));
            reaped.extend(by_a.unwrap());
            reaped.extend(by_b.unwrap());
            if reaped.len() >= 8 {
                break;
            }
        }
        let mut ids: Vec<Uuid> = reaped.iter().map(|r| r.attempt_id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(
            ids.len(),
            reaped.len(),
            "an attempt reaped twice: {reaped:?}"
        );
        assert_eq!(reaped.len(), 8, "disconnected={disconnected}: {reaped:?}");
        let ended: i64 = scalar(
            &a,
            "SELECT count(*) FROM transitions WHERE state = 'infrastructure_error'",
        )
        .await;
        assert_eq!(ended, 8, "one terminal transition per attempt");
        let live: i64 = scalar(&a, "SELECT count(*) FROM leases").await;
        assert_eq!(live, 0);
        let attempts: i64 = scalar(&a, "SELECT count(*) FROM attempts").await;
        assert_eq!(attempts, 8, "no attempt made by a second reap");
    }
}

#[tokio::test]
async fn the_leases_of_a_dead_replicas_worker_are_reaped_once_it_stopped_marking() {
    let (a, clock) = clocked().await;
    let b = replica_of(&a, clock.clone());
    hears(&a);
    hears(&b);
    enqueued(&a, 1, 1, &Caps::default()).await;
    register(&b, "w", 1).await;
    let lease = b.claim("w", 1, TTL).await.unwrap().remove(0);
    assert!(a.reap(a.now()).await.unwrap().is_empty());
    assert!(b.reap(b.now()).await.unwrap().is_empty());
    // B dies (no more passes, its session never marked disconnected); the lease expires.
    clock.advance(secs(11));
    assert!(
        a.reap(a.now()).await.unwrap().is_empty(),
        "B marked within a TTL of A's previous pass: left to B"
    );
    clock.advance(secs(11));
    let reaped = a.reap(a.now()).await.unwrap();
    assert_eq!(
        reaped.iter().map(|r| r.attempt_id).collect::<Vec<_>>(),
        vec![lease.attempt_id],
        "B missed its marks for a TTL while A kept marking"
    );
}

/// A run cancelled through replica A reaches a worker connected to replica B: B's reaper
/// pass sends it `Cancel` for its live attempt of that run, once (issue 30: before, a cancel
/// reached only the cancelling replica's own sessions, and B's worker ran on).
#[tokio::test]
async fn a_run_cancelled_on_replica_a_reaches_a_worker_connected_to_replica_b() {
    use akbench_proto::v1::coordinator_message::Body as Out;
    let (a, clock) = clocked().await;
    let b = replica_of(&a, clock);
    let seeded = enqueued(&a, 2, 0, &Caps::default()).await;
    let (service_a, _) = common::serve(&a, TTL).await;
    let (service_b, addr_b) = common::serve(&b, TTL).await;
    let mut w = common::Worker::simple(addr_b, "w", 1).await;
    let Out::Assignment(x) = w.next().await else {
        panic!("expected an assignment")
    };
    let report = service_a.cancel_run(seeded.run_id).await.unwrap();
    assert_eq!(report.live.len(), 1, "one live attempt, on B's worker");
    // A has no session of that worker: only B can tell it.
    assert_eq!(service_b.tell_cancels().await.unwrap(), 1);
    match w.next().await {
        Out::Cancel(c) => {
            assert_eq!(c.attempt_id, x.attempt_id);
            assert_eq!(c.reason, "run cancelled by user");
        }
        other => panic!("expected Cancel, got {other:?}"),
    }
    // Told once: the next passes send nothing more while the worker stops it.
    assert_eq!(service_b.tell_cancels().await.unwrap(), 0);
    assert_eq!(service_a.tell_cancels().await.unwrap(), 0);
}

/// A replica's row is deleted once it missed ten TTLs of marks while another kept marking
/// (core::dispatch::replica::forgotten), and marks itself again when it comes back.
#[tokio::test]
async fn a_long_dead_replicas_row_is_deleted_and_comes_back_when_it_marks_again() {
    let (a, clock) = clocked().await;
    let b = replica_of(&a, clock.clone());
    hears(&a);
    hears(&b);
    let rows = |s: &Scheduler| {
        let s = s.clone();
        async move { scalar::<i64>(&s, "SELECT count(*) FROM replicas").await }
    };
    assert!(a.reap(a.now()).await.unwrap().is_empty());
    assert!(b.reap(b.now()).await.unwrap().is_empty());
    assert_eq!(rows(&a).await, 2);
    let ttl_ms: Vec<i64> = {
        let c = a.store().client().await.unwrap();
        c.query("SELECT ttl_ms FROM replicas", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    assert_eq!(ttl_ms, [10_000, 10_000], "each mark records its TTL");
    // B stops; A keeps marking every second for nine TTLs: B is dead, but kept.
    for _ in 0..90 {
        clock.advance(secs(1));
        a.reap(a.now()).await.unwrap();
    }
    assert_eq!(rows(&a).await, 2, "dead for nine TTLs: kept");
    for _ in 0..12 {
        clock.advance(secs(1));
        a.reap(a.now()).await.unwrap();
    }
    assert_eq!(rows(&a).await, 1, "dead for ten TTLs: forgotten");
    b.reap(b.now()).await.unwrap();
    assert_eq!(rows(&a).await, 2, "B marked itself again");
}

/// A coordinator does not start next to a live replica of the same database that runs with
/// another lease TTL (replicas judge each other's marks by their own TTL); with the same TTL
/// it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_with_another_ttl_than_a_live_replica_refuses_to_start() {
    use akbench_coordinator::server::{serve, Config, ServeError};
    let url = akbench_coordinator::pgcluster::test_support::fresh_database().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let first = serve(Config::local(url.clone()), async move {
        let _ = stopped.await;
    })
    .await
    .unwrap();
    // Its reaper's first pass marks it with its TTL.
    let db = first.store.client().await.unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let marked: i64 = db
            .query_one("SELECT count(*) FROM replicas WHERE ttl_ms = 30000", &[])
            .await
            .unwrap()
            .get(0);
        if marked == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the first replica never marked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut other = Config::local(url.clone());
    other.lease_ttl_ms = 5_000;
    let err = serve(other, std::future::pending())
        .await
        .expect_err("a second replica with another TTL starts");
    assert!(
        matches!(
            err,
            ServeError::ReplicaTtl {
                theirs: 30_000,
                ours: 5_000,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("--lease-ttl-ms"), "{err}");
    let (stop_same, stopped_same) = tokio::sync::oneshot::channel::<()>();
    let same = serve(Config::local(url), async move {
        let _ = stopped_same.await;
    })
    .await
    .expect("a second replica with the same TTL starts");
    let _ = stop_same.send(());
    let _ = stop.send(());
    same.wait().await.unwrap();
    first.wait().await.unwrap();
}
