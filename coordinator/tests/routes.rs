//! Provider routes on a real private PostgreSQL: a provider failure on a route pauses new
//! claims for that route (other routes go on), the pause grows with consecutive failures,
//! and an attempt that ran against the provider resumes it.

mod common;

use std::time::Duration;

use akbench_coordinator::scheduler::test_support::seed_run;
use akbench_coordinator::scheduler::{Caps, Disposition, Scheduler, TransitionIn};
use akbench_core::lifecycle::State;
use common::{chain, scalar, scheduler};

const TTL: Duration = Duration::from_secs(30);

async fn routed(s: &Scheduler, n: usize, route: &str, budget: i32) -> uuid::Uuid {
    let run = seed_run(s.store(), n, "agent", &Caps::default())
        .await
        .unwrap();
    let mut items = run.items("agent", budget);
    for i in &mut items {
        i.provider_route = Some(route.into());
    }
    s.enqueue(run.run_id, &items).await.unwrap();
    run.run_id
}

async fn route_row(s: &Scheduler, route: &str) -> (i32, bool, Option<String>) {
    let row = s
        .store()
        .client()
        .await
        .unwrap()
        .query_one(
            "SELECT consecutive_failures, paused_until > now(), last_error FROM route_pauses WHERE route = $1",
            &[&route],
        )
        .await
        .unwrap();
    (
        row.get(0),
        row.get::<_, Option<bool>>(1).unwrap_or(false),
        row.get(2),
    )
}

/// Lifts every route's pause by hand (its end put a second in the past).
async fn lift_pauses(s: &Scheduler) {
    s.store()
        .client()
        .await
        .unwrap()
        .execute(
            "UPDATE route_pauses SET paused_until = now() - interval '1 second'",
            &[],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failing_route_is_paused_with_growing_backoff_and_resumed_by_a_success() {
    let s = scheduler().await;
    s.register_worker("w1", 8, &Default::default(), "test")
        .await
        .unwrap();
    let down = routed(&s, 3, "down-route", 2).await;
    let up = routed(&s, 3, "up-route", 0).await;

    // One attempt of each route.
    let first = s.claim("w1", 1, TTL).await.unwrap();
    assert_eq!(first[0].run_id, down);
    let cause = "provider: unreachable after 3 failed requests: Connection refused";
    let d = s
        .finish(
            first[0].attempt_id,
            first[0].epoch,
            State::InfrastructureError,
            cause,
        )
        .await
        .unwrap();
    assert_eq!(d, Some(Disposition::Requeued), "retried as infrastructure");
    let (failures, paused, last) = route_row(&s, "down-route").await;
    assert_eq!((failures, paused), (1, true));
    assert_eq!(last.as_deref(), Some(cause));
    let pause1: f64 = scalar(&s, "SELECT extract(epoch FROM paused_until - updated_at)::float8 FROM route_pauses WHERE route = 'down-route'").await;

    // No claim for the paused route; the other route is untouched.
    let got = s.claim("w1", 8, TTL).await.unwrap();
    assert!(!got.is_empty());
    assert!(
        got.iter().all(|a| a.run_id == up),
        "only the up route: {got:?}"
    );

    // A second failure (the pause is lifted by hand to let it be claimed) doubles the pause.
    lift_pauses(&s).await;
    let again = s.claim("w1", 1, TTL).await.unwrap();
    assert_eq!(again[0].run_id, down);
    s.finish(
        again[0].attempt_id,
        again[0].epoch,
        State::InfrastructureError,
        cause,
    )
    .await
    .unwrap();
    assert_eq!(route_row(&s, "down-route").await.0, 2);
    let pause2: f64 = scalar(&s, "SELECT extract(epoch FROM paused_until - updated_at)::float8 FROM route_pauses WHERE route = 'down-route'").await;
    assert!(pause2 > 1.9 * pause1, "{pause1} then {pause2}");

    // The provider is back: an attempt that ran against it resumes the route.
    lift_pauses(&s).await;
    let back = s.claim("w1", 1, TTL).await.unwrap();
    assert_eq!(back[0].run_id, down);
    let at = chrono::Utc::now();
    let ts: Vec<TransitionIn> = chain()
        .iter()
        .enumerate()
        .map(|(i, st)| TransitionIn {
            seq: 1 + i as u32,
            state: *st,
            at,
            note: String::new(),
        })
        .collect();
    s.record_transitions(back[0].attempt_id, back[0].epoch, &ts)
        .await
        .unwrap();
    s.finish(back[0].attempt_id, back[0].epoch, State::NotGraded, "")
        .await
        .unwrap();
    let (failures, paused, _) = route_row(&s, "down-route").await;
    assert_eq!((failures, paused), (0, false));
    // An infrastructure error that is not the provider's does not pause the route.
    let other = s.claim("w1", 1, TTL).await.unwrap();
    assert_eq!(other[0].run_id, down);
    s.finish(
        other[0].attempt_id,
        other[0].epoch,
        State::InfrastructureError,
        "failed to create the worktree",
    )
    .await
    .unwrap();
    assert_eq!(route_row(&s, "down-route").await.0, 0);
}

/// Issue 28: a route pause holds for prefetched work. When a provider failure pauses a
/// route, the leases on it whose attempts have not started are taken back (their workers are
/// sent `Cancel`): the trial goes back to the queue with its retry budget untouched and is not
/// claimed while the pause lasts.
#[tokio::test]
async fn a_route_pause_holds_for_prefetched_work() {
    use akbench_coordinator::scheduler::Revoked;
    use std::sync::{Arc, Mutex};
    let s = scheduler().await;
    let seen: Arc<Mutex<Vec<Revoked>>> = Arc::default();
    let sink = Arc::clone(&seen);
    s.on_revoked(move |r| sink.lock().unwrap().extend(r.iter().cloned()));
    s.register_worker("w1", 8, &Default::default(), "test")
        .await
        .unwrap();
    let run = routed(&s, 2, "down-route", 0).await;
    let got = s.claim("w1", 2, TTL).await.unwrap();
    assert_eq!(got.len(), 2);
    let cause = "provider: unreachable after 3 failed requests: Connection refused";
    s.finish(
        got[0].attempt_id,
        got[0].epoch,
        State::InfrastructureError,
        cause,
    )
    .await
    .unwrap();
    assert!(route_row(&s, "down-route").await.1, "paused");
    let revoked = seen.lock().unwrap().clone();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0].attempt_id, got[1].attempt_id);
    assert!(
        revoked[0].reason.contains("down-route is paused"),
        "{revoked:?}"
    );
    let item: String = scalar(
        &s,
        &format!(
            "SELECT state || ':' || (attempts_used - budget_from) FROM work_items \
             WHERE trial_id = '{}'",
            got[1].trial_id
        ),
    )
    .await;
    assert_eq!(item, "ready:0", "queued again, its retry budget untouched");
    assert!(
        s.claim("w1", 8, TTL).await.unwrap().is_empty(),
        "nothing while the route is paused"
    );
    // The pause ends: the trial runs (retries 0: the revoked attempt did not use its budget).
    lift_pauses(&s).await;
    let again = s.claim("w1", 1, TTL).await.unwrap();
    assert_eq!((again[0].trial_id, again[0].number), (got[1].trial_id, 2));
    let t: Vec<TransitionIn> = chain()
        .iter()
        .enumerate()
        .map(|(i, st)| TransitionIn {
            seq: i as u32 + 1,
            state: *st,
            at: chrono::Utc::now(),
            note: String::new(),
        })
        .collect();
    s.record_transitions(again[0].attempt_id, again[0].epoch, &t)
        .await
        .unwrap();
    s.finish(again[0].attempt_id, again[0].epoch, State::NotGraded, "")
        .await
        .unwrap();
    let outcome: String = scalar(
        &s,
        &format!(
            "SELECT outcome FROM work_items WHERE trial_id = '{}'",
            got[1].trial_id
        ),
    )
    .await;
    assert_eq!(outcome, "not_graded");
    let _ = run;
}
