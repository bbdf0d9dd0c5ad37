//! One clock decides lease and readiness times: the scheduler's (injected), never the
//! database's `now()`. Each test runs a scheduler whose clock disagrees with the database's
//! by an hour, as a coordinator on a host with a wrong clock would (or a test's
//! `ManualClock`), and checks that leases expire, heartbeats extend and re-queued trials
//! become ready by that one clock. Before, claims and heartbeats took `now()` from
//! PostgreSQL while the reaper compared with the scheduler's clock: leases expired an hour
//! early or late (docs/testing.md, "Clocks").

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use akbench_coordinator::scheduler::{Caps, Disposition, RetryPolicy, Scheduler};
use akbench_core::clock::ManualClock;
use akbench_core::dispatch::Backoff;
use akbench_core::lifecycle::State;
use chrono::Utc;
use common::{enqueued, scheduler_with};

const TTL: Duration = Duration::from_secs(30);

fn secs(s: i64) -> chrono::Duration {
    chrono::Duration::seconds(s)
}

/// A scheduler on a fresh database whose clock is `offset` away from the database's, with
/// `backoff` for re-queued infrastructure errors, and one registered worker "w".
async fn skewed(offset: chrono::Duration, backoff: Backoff) -> (Scheduler, Arc<ManualClock>) {
    let base = scheduler_with(RetryPolicy::with_backoff(backoff)).await;
    let clock = Arc::new(ManualClock::new(Utc::now() + offset));
    let s =
        Scheduler::with_clock(base.store().clone(), clock.clone()).with_retry(base.retry().clone());
    s.register_worker("w", 8, &BTreeMap::new(), "test")
        .await
        .unwrap();
    (s, clock)
}

#[tokio::test]
async fn a_lease_expires_one_ttl_after_its_claim_by_the_schedulers_clock() {
    for offset in [secs(-3600), secs(3600)] {
        let (s, clock) = skewed(offset, Backoff::NONE).await;
        enqueued(&s, 1, 0, &Caps::default()).await;
        let claimed_at = s.now();
        let got = s.claim("w", 1, TTL).await.unwrap();
        assert_eq!(
            got.len(),
            1,
            "claimable by a clock {offset} off the database's"
        );
        assert!(
            s.reap(claimed_at + secs(29)).await.unwrap().is_empty(),
            "clock {offset} off: the lease has 1 s left"
        );
        clock.advance(secs(31));
        let reaped = s.reap(s.now()).await.unwrap();
        assert_eq!(reaped.len(), 1, "clock {offset} off: 1 s past the TTL");
    }
}

#[tokio::test]
async fn a_heartbeat_extends_a_lease_one_ttl_from_the_schedulers_now() {
    let (s, clock) = skewed(secs(-3600), Backoff::NONE).await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    let a = s.claim("w", 1, TTL).await.unwrap().remove(0);
    clock.advance(secs(20));
    let lost = s
        .heartbeat("w", &[(a.attempt_id, a.epoch)], TTL)
        .await
        .unwrap();
    assert!(lost.is_empty());
    clock.advance(secs(11));
    assert!(
        s.reap(s.now()).await.unwrap().is_empty(),
        "31 s after the claim, 11 s after the heartbeat"
    );
    clock.advance(secs(20));
    assert_eq!(s.reap(s.now()).await.unwrap().len(), 1, "31 s after it");
}

#[tokio::test]
async fn restarted_lease_clocks_count_from_the_schedulers_now() {
    let (s, clock) = skewed(secs(3600), Backoff::NONE).await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    s.claim("w", 1, TTL).await.unwrap();
    // The coordinator was "down" for ten minutes of its own clock.
    clock.advance(secs(600));
    assert_eq!(s.restart_lease_clocks(TTL).await.unwrap(), 1);
    clock.advance(secs(29));
    assert!(
        s.reap(s.now()).await.unwrap().is_empty(),
        "29 s after the restart"
    );
    clock.advance(secs(2));
    assert_eq!(s.reap(s.now()).await.unwrap().len(), 1, "31 s after it");
}

#[tokio::test]
async fn a_requeued_trial_is_ready_when_the_schedulers_clock_passes_its_backoff() {
    // One minute nominal (30-60 s with jitter), on a clock an hour ahead of the database's.
    let backoff = Backoff {
        base: Duration::from_secs(60),
        cap: Duration::from_secs(60),
    };
    let (s, clock) = skewed(secs(3600), backoff).await;
    let run = enqueued(&s, 1, 1, &Caps::default()).await;
    let a = s.claim("w", 1, TTL).await.unwrap().remove(0);
    let d = s
        .finish(
            a.attempt_id,
            a.epoch,
            State::InfrastructureError,
            "disk full",
        )
        .await
        .unwrap();
    assert_eq!(d, Some(Disposition::Requeued));
    clock.advance(secs(29));
    assert!(
        s.claim("w", 1, TTL).await.unwrap().is_empty(),
        "29 s into a backoff of at least 30 s"
    );
    clock.advance(secs(32));
    let again = s.claim("w", 1, TTL).await.unwrap();
    assert_eq!(again.len(), 1, "61 s later, past a backoff of at most 60 s");
    assert_eq!(again[0].trial_id, run.trial_ids[0]);
    assert_eq!(again[0].number, 2);
}
