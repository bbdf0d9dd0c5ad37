//! The scheduler on a real private PostgreSQL: claims, caps, fencing, retries, records.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use akbench_coordinator::scheduler::{
    Assignment, Caps, Disposition, Scheduler, SchedulerError, TransitionIn,
};
use akbench_coordinator::store::StoreError;
use akbench_core::dispatch::RunCaps;
use akbench_core::lifecycle::State;
use common::{chain, counts, enqueued, record, scalar, scheduler};

const TTL: Duration = Duration::from_secs(30);

fn transitions(states: &[State], from_seq: u32) -> Vec<TransitionIn> {
    let at = chrono::DateTime::from_timestamp_millis(1_767_225_600_000).unwrap();
    states
        .iter()
        .enumerate()
        .map(|(i, s)| TransitionIn {
            seq: from_seq + i as u32,
            state: *s,
            at,
            note: String::new(),
        })
        .collect()
}

async fn worker(s: &Scheduler, id: &str) {
    s.register_worker(id, 8, &BTreeMap::new(), "test")
        .await
        .unwrap();
}

fn capped(limits: RunCaps) -> Caps {
    Caps {
        limits,
        ..Caps::default()
    }
}

/// One attempt leased to `worker`.
async fn claim_one(s: &Scheduler, worker: &str) -> Assignment {
    s.claim(worker, 1, TTL).await.unwrap().remove(0)
}

/// Reports the first `n` steps of the chain for `a`.
async fn walk(s: &Scheduler, a: &Assignment, n: usize) {
    s.record_transitions(a.attempt_id, a.epoch, &transitions(&chain()[..n], 1))
        .await
        .unwrap();
}

/// One attempt leased to `worker` for `ttl`, its first three steps reported.
async fn leased_for(s: &Scheduler, worker: &str, ttl: chrono::Duration) -> Assignment {
    let a = s
        .claim(worker, 1, ttl.to_std().unwrap())
        .await
        .unwrap()
        .remove(0);
    walk(s, &a, 3).await;
    a
}

/// Uploads a record for `a`: whether it was stored (not there already).
async fn upload(s: &Scheduler, a: &Assignment, json: &str, digest: &str) -> bool {
    s.upload_record(a.attempt_id, a.epoch, json, digest)
        .await
        .unwrap()
}

/// Finishes `a` cancelled ("stop").
async fn stop(s: &Scheduler, a: &Assignment) {
    s.finish(a.attempt_id, a.epoch, State::Cancelled, "stop")
        .await
        .unwrap();
}

async fn run_state(s: &Scheduler, run: uuid::Uuid) -> String {
    scalar(
        s,
        &format!("SELECT state::text FROM runs WHERE run_id = '{run}'"),
    )
    .await
}

async fn bucket_of(s: &Scheduler, trial: uuid::Uuid) -> Option<String> {
    scalar(
        s,
        &format!("SELECT bucket FROM work_items WHERE trial_id = '{trial}'"),
    )
    .await
}

/// The canonical JSON of a record and its digest.
fn canonical(value: &serde_json::Value) -> (String, String) {
    let json = akbench_core::digest::canonical_json(value);
    let digest = akbench_core::digest::digest_bytes(json.as_bytes());
    (json, digest)
}

#[tokio::test]
async fn claim_streams_transitions_uploads_and_finishes() {
    let s = scheduler().await;
    let run = enqueued(&s, 3, 0, &Caps::default()).await;
    worker(&s, "w1").await;
    let got = s.claim("w1", 2, TTL).await.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].trial_id, run.trial_ids[0], "plan order");
    assert_eq!(got[0].number, 1);
    assert_eq!(got[0].document["ordinal"], 0);
    let a = &got[0];
    let last = s
        .record_transitions(a.attempt_id, a.epoch, &transitions(&chain(), 1))
        .await
        .unwrap();
    assert_eq!(last, 11);
    // An identical re-send is accepted; different content for a stored seq is refused.
    assert_eq!(
        s.record_transitions(a.attempt_id, a.epoch, &transitions(&chain()[..3], 1))
            .await
            .unwrap(),
        11
    );
    let mut changed = transitions(&chain()[..2], 1);
    changed[1].note = "different".into();
    assert!(matches!(
        s.record_transitions(a.attempt_id, a.epoch, &changed).await,
        Err(SchedulerError::InvalidTransition { seq: 2, .. })
    ));
    let (json, digest) = record(a.attempt_id, "x");
    assert!(upload(&s, a, &json, &digest).await);
    let d = s
        .finish(a.attempt_id, a.epoch, State::NotGraded, "")
        .await
        .unwrap();
    assert_eq!(d, Some(Disposition::Done(State::NotGraded)));
    // The same finish again is acknowledged without change.
    assert_eq!(
        s.finish(a.attempt_id, a.epoch, State::NotGraded, "")
            .await
            .unwrap(),
        None
    );
    // Upload after finish with the same epoch is fine.
    assert!(!upload(&s, a, &json, &digest).await);
    let outcome: Option<String> = scalar(
        &s,
        &format!(
            "SELECT outcome FROM work_items WHERE trial_id = '{}'",
            a.trial_id
        ),
    )
    .await;
    assert_eq!(outcome.as_deref(), Some("not_graded"));
    // Finished without a cause: none is stored (NULL, as the record's `cause: null`).
    let cause: Option<String> = scalar(
        &s,
        &format!(
            "SELECT cause FROM attempts WHERE attempt_id = '{}'",
            a.attempt_id
        ),
    )
    .await;
    assert_eq!(cause, None);
    assert_eq!(scalar::<i64>(&s, "SELECT count(*) FROM leases").await, 1);
    assert_eq!(
        scalar::<i64>(&s, "SELECT count(*) FROM transitions").await,
        11
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_never_get_the_same_item() {
    let s = scheduler().await;
    enqueued(&s, 300, 0, &Caps::default()).await;
    let mut tasks = Vec::new();
    for w in 0..6 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("w{w}");
            worker(&s, &id).await;
            let mut mine = Vec::new();
            loop {
                let got = s.claim(&id, 3, TTL).await.unwrap();
                if got.is_empty() {
                    break;
                }
                mine.extend(got.into_iter().map(|a| a.trial_id));
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let distinct: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 300);
    assert_eq!(distinct.len(), 300);
}

/// Finishes settled at once, from many transactions, never leave a run `running` with all
/// its items done: whichever transaction settles the last item ends the run (the reaper's
/// safety net is not running here).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_finishes_end_the_run() {
    let s = scheduler().await;
    worker(&s, "w1").await;
    for round in 0..6 {
        let n = 2 + round * 3;
        let run = enqueued(&s, n, 0, &Caps::default()).await;
        let mut leased = Vec::new();
        while leased.len() < n {
            leased.extend(s.claim("w1", n, TTL).await.unwrap());
        }
        let tasks: Vec<_> = leased
            .into_iter()
            .map(|a| {
                let s = s.clone();
                tokio::spawn(async move {
                    s.record_transitions(a.attempt_id, a.epoch, &transitions(&chain(), 1))
                        .await
                        .unwrap();
                    s.finish(a.attempt_id, a.epoch, State::NotGraded, "")
                        .await
                        .unwrap()
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), Some(Disposition::Done(State::NotGraded)));
        }
        let state = run_state(&s, run.run_id).await;
        assert_eq!(state, "finished", "round {round}, {n} items");
    }
}

#[tokio::test]
async fn the_runs_max_trials_caps_its_live_attempts_across_claims_and_workers() {
    let s = scheduler().await;
    let caps = capped(RunCaps {
        max_trials: Some(3),
        ..RunCaps::default()
    });
    let run = enqueued(&s, 6, 0, &caps).await;
    worker(&s, "w1").await;
    worker(&s, "w2").await;
    let first = s.claim("w1", 2, TTL).await.unwrap();
    assert_eq!(first.len(), 2);
    let second = s.claim("w2", 5, TTL).await.unwrap();
    assert_eq!(second.len(), 1, "one place left of 3");
    assert!(s.claim("w1", 5, TTL).await.unwrap().is_empty());
    // An uncapped run alongside is not held back by the full one.
    let other = enqueued(&s, 2, 0, &Caps::default()).await;
    let got = s.claim("w2", 5, TTL).await.unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|a| a.run_id == other.run_id));
    // A finished attempt frees its place.
    stop(&s, &first[0]).await;
    let next = s.claim("w1", 5, TTL).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].run_id, run.run_id);
}

#[tokio::test]
async fn caps_per_agent_and_per_provider_are_respected() {
    let s = scheduler().await;
    let caps = capped(RunCaps {
        per_agent: [("oracle".to_string(), 2)].into(),
        ..RunCaps::default()
    });
    enqueued(&s, 5, 0, &caps).await;
    worker(&s, "w1").await;
    let first = s.claim("w1", 5, TTL).await.unwrap();
    assert_eq!(first.len(), 2);
    assert!(s.claim("w1", 5, TTL).await.unwrap().is_empty());
    stop(&s, &first[0]).await;
    assert_eq!(s.claim("w1", 5, TTL).await.unwrap().len(), 1);

    // Per provider, across agents, and an uncapped run alongside is not blocked.
    let caps = capped(RunCaps {
        per_provider: [("anthropic".to_string(), 1)].into(),
        ..RunCaps::default()
    });
    let run = akbench_coordinator::scheduler::test_support::seed_run(s.store(), 3, "a", &caps)
        .await
        .unwrap();
    let mut items = run.items("a", 0);
    for i in &mut items {
        i.provider_route = Some("anthropic".into());
    }
    s.enqueue(run.run_id, &items).await.unwrap();
    enqueued(&s, 2, 0, &Caps::default()).await;
    let got = s.claim("w1", 10, TTL).await.unwrap();
    let capped = got.iter().filter(|a| a.run_id == run.run_id).count();
    assert_eq!(capped, 1);
    assert_eq!(
        got.len(),
        3,
        "one of the provider-capped run, two of the free run"
    );
}

#[tokio::test]
async fn an_expired_lease_requeues_and_fences_the_late_worker() {
    let (s, clock) = common::clocked().await;
    enqueued(&s, 1, 1, &Caps::default()).await;
    worker(&s, "slow").await;
    // The scheduler's clock is moved by the test: no window depends on how fast this
    // machine is. The lease runs for ten minutes from the claim; one minute short of that it
    // has not expired, one second past it has.
    let ttl = chrono::Duration::minutes(10);
    let a = leased_for(&s, "slow", ttl).await;
    assert!(s.reap(s.now()).await.unwrap().is_empty(), "not expired yet");
    clock.advance(ttl - chrono::Duration::minutes(1));
    assert!(
        s.reap(s.now()).await.unwrap().is_empty(),
        "not expired a minute before its TTL"
    );
    clock.advance(chrono::Duration::seconds(61));
    let reaped = s.reap(s.now()).await.unwrap();
    assert_eq!(reaped.len(), 1);
    assert_eq!(reaped[0].disposition, Disposition::Requeued);
    assert_eq!(reaped[0].worker_id, "slow");
    let cause: String = scalar(&s, "SELECT cause FROM attempts").await;
    assert_eq!(cause, "lease expired: worker slow went silent");
    let last: String = scalar(
        &s,
        "SELECT state FROM transitions ORDER BY seq DESC LIMIT 1",
    )
    .await;
    assert_eq!(last, "infrastructure_error");

    let before = counts(&s).await;
    let stale = |r: Result<_, SchedulerError>| {
        assert!(matches!(r, Err(SchedulerError::StaleEpoch { .. })), "{r:?}")
    };
    stale(
        s.record_transitions(
            a.attempt_id,
            a.epoch,
            &transitions(&[State::ConfiguringRuntime], 4),
        )
        .await
        .map(|_| ()),
    );
    let (json, digest) = record(a.attempt_id, "late");
    stale(
        s.upload_record(a.attempt_id, a.epoch, &json, &digest)
            .await
            .map(|_| ()),
    );
    stale(
        s.finish(a.attempt_id, a.epoch, State::NotGraded, "")
            .await
            .map(|_| ()),
    );
    assert!(
        s.heartbeat("slow", &[(a.attempt_id, a.epoch)], TTL)
            .await
            .unwrap()
            .len()
            == 1
    );
    assert_eq!(counts(&s).await, before, "refusals change nothing");

    let b = s.claim("fast", 1, TTL).await;
    assert!(
        b.is_err(),
        "an unregistered worker cannot lease (foreign key)"
    );
    worker(&s, "fast").await;
    let b = claim_one(&s, "fast").await;
    assert_eq!(b.trial_id, a.trial_id);
    assert_eq!(b.number, 2);
    assert!(b.epoch > a.epoch);
    // Budget exhausted: the second expiry ends the trial.
    clock.advance(ttl + chrono::Duration::seconds(60));
    let reaped = s.reap(s.now()).await.unwrap();
    assert_eq!(
        reaped[0].disposition,
        Disposition::Done(State::InfrastructureError)
    );
}

#[tokio::test]
async fn identical_reupload_is_accepted_once_and_a_conflict_is_quarantined() {
    let s = scheduler().await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    worker(&s, "w").await;
    let a = claim_one(&s, "w").await;
    let (json, digest) = record(a.attempt_id, "one");
    assert!(upload(&s, &a, &json, &digest).await);
    assert!(!upload(&s, &a, &json, &digest).await);
    let (other, other_digest) = record(a.attempt_id, "two");
    assert!(matches!(
        s.upload_record(a.attempt_id, a.epoch, &other, &other_digest)
            .await,
        Err(SchedulerError::RecordConflict { .. })
    ));
    assert_eq!(
        scalar::<i64>(&s, "SELECT count(*) FROM submissions").await,
        1
    );
    assert_eq!(
        scalar::<i64>(&s, "SELECT count(*) FROM quarantine").await,
        1
    );
    let kept: String = scalar(&s, "SELECT digest FROM submissions").await;
    assert_eq!(kept, digest);
}

#[tokio::test]
async fn infrastructure_errors_retry_within_budget_agent_failures_never() {
    let s = scheduler().await;
    let run = enqueued(&s, 2, 1, &Caps::default()).await;
    worker(&s, "w").await;
    let got = s.claim("w", 2, TTL).await.unwrap();
    let (infra, agent) = (&got[0], &got[1]);
    let d = s
        .finish(
            infra.attempt_id,
            infra.epoch,
            State::InfrastructureError,
            "disk full",
        )
        .await
        .unwrap();
    assert_eq!(d, Some(Disposition::Requeued));
    let d = s
        .record_transitions(
            agent.attempt_id,
            agent.epoch,
            &transitions(&chain()[..7], 1),
        )
        .await
        .unwrap();
    assert_eq!(d, 7);
    let d = s
        .finish(agent.attempt_id, agent.epoch, State::Failed, "exit 1")
        .await
        .unwrap();
    assert_eq!(d, Some(Disposition::Done(State::Failed)));
    let retry = s.claim("w", 2, TTL).await.unwrap();
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].trial_id, run.trial_ids[0]);
    assert_eq!(retry[0].number, 2);
    let d = s
        .finish(
            retry[0].attempt_id,
            retry[0].epoch,
            State::InfrastructureError,
            "again",
        )
        .await
        .unwrap();
    assert_eq!(d, Some(Disposition::Done(State::InfrastructureError)));
    assert!(s.claim("w", 2, TTL).await.unwrap().is_empty());
}

#[tokio::test]
async fn invalid_reports_are_refused_and_change_nothing() {
    let s = scheduler().await;
    enqueued(&s, 1, 0, &Caps::default()).await;
    worker(&s, "w").await;
    let a = claim_one(&s, "w").await;
    walk(&s, &a, 2).await;
    let before = counts(&s).await;
    let id = a.attempt_id;
    let e = a.epoch;
    let r = s
        .record_transitions(id, e, &transitions(&[State::Executing], 3))
        .await;
    assert!(
        matches!(r, Err(SchedulerError::InvalidTransition { seq: 3, .. })),
        "{r:?}"
    );
    let r = s
        .record_transitions(id, e, &transitions(&[State::Validating], 4))
        .await;
    assert!(
        matches!(r, Err(SchedulerError::Malformed { seq: 4, .. })),
        "{r:?}"
    );
    // A valid first step followed by an invalid one: the whole batch is refused.
    let r = s
        .record_transitions(
            id,
            e,
            &transitions(&[State::Validating, State::Completed], 3),
        )
        .await;
    assert!(
        matches!(r, Err(SchedulerError::InvalidTransition { seq: 4, .. })),
        "{r:?}"
    );
    let r = s
        .record_transitions(id, e + 1, &transitions(&[State::Validating], 3))
        .await;
    assert!(matches!(r, Err(SchedulerError::StaleEpoch { .. })), "{r:?}");
    let r = s
        .record_transitions(uuid::Uuid::now_v7(), e, &transitions(&[State::Pending], 1))
        .await;
    assert!(matches!(r, Err(SchedulerError::NotFound(_))), "{r:?}");
    let r = s.finish(id, e, State::Completed, "").await;
    assert!(
        matches!(r, Err(SchedulerError::InvalidTransition { .. })),
        "{r:?}"
    );
    let r = s.finish(id, e, State::Executing, "").await;
    assert!(
        matches!(r, Err(SchedulerError::InvalidTransition { .. })),
        "{r:?}"
    );
    let (json, digest) = record(id, "x");
    let r = s.upload_record(id, e, &json, "sha256:00").await;
    assert!(
        matches!(r, Err(SchedulerError::DigestMismatch { .. })),
        "{r:?}"
    );
    let r = s.upload_record(id, e, "not json", &digest).await;
    assert!(matches!(r, Err(SchedulerError::Malformed { .. })), "{r:?}");
    let (other, other_digest) = record(uuid::Uuid::now_v7(), "x");
    let r = s.upload_record(id, e, &other, &other_digest).await;
    assert!(matches!(r, Err(SchedulerError::Malformed { .. })), "{r:?}");
    assert_eq!(counts(&s).await, before);
}

#[tokio::test]
async fn cancel_run_cancels_queued_items_and_lists_live_attempts() {
    let s = scheduler().await;
    let run = enqueued(&s, 4, 1, &Caps::default()).await;
    worker(&s, "w").await;
    let a = claim_one(&s, "w").await;
    let report = s.cancel_run(run.run_id).await.unwrap();
    assert_eq!(report.cancelled_items, 3);
    assert_eq!(report.live, vec![(a.attempt_id, "w".to_string())]);
    assert!(s.claim("w", 4, TTL).await.unwrap().is_empty());
    // Even an infrastructure error is not retried once the run is being cancelled.
    let d = s
        .finish(a.attempt_id, a.epoch, State::Cancelled, "run cancelled")
        .await
        .unwrap();
    assert_eq!(d, Some(Disposition::Done(State::Cancelled)));
    assert!(matches!(
        s.cancel_run(uuid::Uuid::now_v7()).await,
        Err(SchedulerError::NotFound(_))
    ));
}

/// A graded, `completed` record of `attempt_id` saying `ok`.
fn completed_record(attempt_id: uuid::Uuid, ok: bool) -> (String, String) {
    let (json, _) = record(attempt_id, "graded");
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut path = chain();
    *path.last_mut().unwrap() = State::Completed;
    value["transitions"] = path
        .iter()
        .enumerate()
        .map(|(i, s)| serde_json::json!({"seq": i, "state": s, "at": "2026-01-01T00:00:00Z"}))
        .collect();
    value["state"] = serde_json::json!("completed");
    value["grade"] = serde_json::json!({
        "ok": ok, "score": if ok { 1.0 } else { 0.0 }, "source": "exit_code",
        "exit_code": 0, "tests": [], "report": "", "report_truncated": false,
        "tests_digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "graded_at": "2026-01-01T00:00:00Z", "duration_ms": 1,
    });
    canonical(&value)
}

/// Status counts `work_items.bucket`: a `completed` trial takes its bucket from its record's
/// `ok` whether the record arrives before the finish or after it (NULL in between).
#[tokio::test]
async fn done_items_take_their_bucket_in_either_order() {
    let s = scheduler().await;
    let run = enqueued(&s, 3, 0, &Caps::default()).await;
    worker(&s, "w1").await;
    let got = s.claim("w1", 3, TTL).await.unwrap();
    assert_eq!(got.len(), 3);
    let bucket = |trial| bucket_of(&s, trial);
    for (x, n) in got.iter().zip([10, 10, 7]) {
        walk(&s, x, n).await;
    }
    // Record first, then the finish.
    let a = &got[0];
    let (json, digest) = completed_record(a.attempt_id, true);
    assert!(upload(&s, a, &json, &digest).await);
    assert_eq!(bucket(a.trial_id).await, None, "not done yet");
    s.finish(a.attempt_id, a.epoch, State::Completed, "")
        .await
        .unwrap();
    assert_eq!(bucket(a.trial_id).await.as_deref(), Some("succeeded"));
    // The finish first: not counted until the record arrives.
    let b = &got[1];
    s.finish(b.attempt_id, b.epoch, State::Completed, "")
        .await
        .unwrap();
    assert_eq!(bucket(b.trial_id).await, None);
    let (json, digest) = completed_record(b.attempt_id, false);
    assert!(upload(&s, b, &json, &digest).await);
    assert_eq!(bucket(b.trial_id).await.as_deref(), Some("failed"));
    // Not completed: the state alone decides.
    let c = &got[2];
    s.finish(c.attempt_id, c.epoch, State::Timeout, "slow")
        .await
        .unwrap();
    assert_eq!(bucket(c.trial_id).await.as_deref(), Some("timed_out"));
    let agents: i64 = scalar(
        &s,
        &format!(
            "SELECT count(*) FROM work_items WHERE run_id = '{}' AND agent = 'oracle'",
            run.run_id
        ),
    )
    .await;
    assert_eq!(agents, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_a_runs_last_trials_at_once_always_ends_the_run() {
    // Two sessions finishing a run's last two attempts in concurrent transactions: whichever
    // commits second must see the first one's work and end the run. Repeated, so that both
    // interleavings (and a tie) happen; a run left `running` with every item done fails.
    let s = scheduler().await;
    worker(&s, "w1").await;
    for round in 0..40 {
        let run = enqueued(&s, 2, 0, &Caps::default()).await;
        let got = s.claim("w1", 2, TTL).await.unwrap();
        assert_eq!(got.len(), 2, "round {round}");
        let (a, b) = (&got[0], &got[1]);
        let (ra, rb) = tokio::join!(
            s.finish(a.attempt_id, a.epoch, State::Cancelled, "a"),
            s.finish(b.attempt_id, b.epoch, State::Cancelled, "b"),
        );
        ra.unwrap();
        rb.unwrap();
        let state = run_state(&s, run.run_id).await;
        assert_eq!(state, "finished", "round {round}");
    }
}

/// A record and the finish in one report batch (as the dispatch benchmark and a worker that
/// sends both at once do): the settle sees the record, so the trial's bucket comes from its
/// grade, whichever order the two reports have in the batch.
#[tokio::test]
async fn a_record_and_its_finish_in_one_batch_give_the_graded_bucket() {
    use akbench_coordinator::scheduler::Report;
    let s = scheduler().await;
    enqueued(&s, 2, 0, &Caps::default()).await;
    worker(&s, "w1").await;
    let got = s.claim("w1", 2, TTL).await.unwrap();
    for (x, ok, finish_first) in [(&got[0], true, false), (&got[1], false, true)] {
        let value = serde_json::to_value(akbench_core::testkit::attempt_record(
            x.attempt_id,
            "graded",
            1,
            State::Completed,
            Some(ok),
        ))
        .unwrap();
        let (json, digest) = canonical(&value);
        let path = akbench_core::lifecycle::CHAIN[..10].to_vec();
        let mut reports = vec![Report::Transitions {
            attempt_id: x.attempt_id,
            epoch: x.epoch,
            transitions: transitions(&path, 1),
        }];
        let record = Report::Record {
            attempt_id: x.attempt_id,
            epoch: x.epoch,
            record_json: json,
            digest,
        };
        let finish = Report::Finished {
            attempt_id: x.attempt_id,
            epoch: x.epoch,
            terminal: State::Completed,
            cause: String::new(),
        };
        if finish_first {
            reports.extend([finish, record]);
        } else {
            reports.extend([record, finish]);
        }
        for outcome in s.report(&reports).await {
            outcome.unwrap();
        }
        let bucket = bucket_of(&s, x.trial_id).await;
        let want = if ok { "succeeded" } else { "failed" };
        assert_eq!(
            bucket.as_deref(),
            Some(want),
            "finish first: {finish_first}"
        );
    }
}

/// A worker's batch (what its session sends together: transitions gathered for the linger,
/// then the record and the finish) is one `report` call: every transition of it is stored,
/// in seq order, in one transaction, and a member at a stale epoch (an attempt the worker
/// lost) is refused on its own without costing the others anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_workers_batch_is_stored_whole_in_one_transaction_and_a_stale_member_alone_refused() {
    use akbench_coordinator::scheduler::{Report, ReportAck};
    let (s, clock) = common::clocked().await;
    enqueued(&s, 3, 1, &Caps::default()).await;
    worker(&s, "w1").await;
    // The worker loses its first attempt: its lease expires (the test moves the clock) and
    // the reaper fences it.
    let ttl = chrono::Duration::minutes(1);
    let lost = leased_for(&s, "w1", ttl).await;
    clock.advance(ttl + chrono::Duration::seconds(1));
    assert_eq!(s.reap(s.now()).await.unwrap().len(), 1);
    let lost_rows =
        |id: uuid::Uuid| format!("SELECT count(*) FROM transitions WHERE attempt_id = '{id}'");
    let lost_before: i64 = scalar(&s, &lost_rows(lost.attempt_id)).await;
    let got = s.claim("w1", 2, TTL).await.unwrap();
    let (a, b) = (&got[0], &got[1]);
    let path = chain();
    let reports = vec![
        Report::Transitions {
            attempt_id: a.attempt_id,
            epoch: a.epoch,
            transitions: transitions(&path[..4], 1),
        },
        Report::Transitions {
            attempt_id: lost.attempt_id,
            epoch: lost.epoch,
            transitions: transitions(&path[3..5], 4),
        },
        Report::Transitions {
            attempt_id: b.attempt_id,
            epoch: b.epoch,
            transitions: transitions(&path[..6], 1),
        },
        Report::Transitions {
            attempt_id: a.attempt_id,
            epoch: a.epoch,
            transitions: transitions(&path[4..], 5),
        },
        {
            let (record_json, digest) = record(a.attempt_id, "batch");
            Report::Record {
                attempt_id: a.attempt_id,
                epoch: a.epoch,
                record_json,
                digest,
            }
        },
        Report::Finished {
            attempt_id: a.attempt_id,
            epoch: a.epoch,
            terminal: State::NotGraded,
            cause: String::new(),
        },
    ];
    let outcomes = s.report(&reports).await;
    assert_eq!(outcomes.len(), reports.len());
    assert!(
        matches!(outcomes[0], Ok(ReportAck::Transitions { last_seq: 4 })),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[1], Err(SchedulerError::StaleEpoch { attempt_id, .. }) if attempt_id == lost.attempt_id),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[2], Ok(ReportAck::Transitions { last_seq: 6 })),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[3], Ok(ReportAck::Transitions { last_seq: 11 })),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[4], Ok(ReportAck::Record { stored: true })),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            outcomes[5],
            Ok(ReportAck::Finished(Some(Disposition::Done(
                State::NotGraded
            ))))
        ),
        "{outcomes:?}"
    );

    // Every transition, in seq order, as sent.
    let stored = |id: uuid::Uuid| {
        let s = &s;
        async move {
            let rows = s
                .store()
                .client()
                .await
                .unwrap()
                .query(
                    // The attempt row's xmin: its transitions are part of it (migration 0028).
                    "SELECT t.seq, t.state, a.xmin::text FROM transitions t \
                     JOIN attempts a ON a.attempt_id = t.attempt_id \
                     WHERE t.attempt_id = $1 ORDER BY t.seq",
                    &[&id],
                )
                .await
                .unwrap();
            rows.iter()
                .map(|r| {
                    (
                        r.get::<_, i32>(0),
                        r.get::<_, String>(1),
                        r.get::<_, String>(2),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    let (sa, sb) = (stored(a.attempt_id).await, stored(b.attempt_id).await);
    let want = |n: usize| -> Vec<(i32, String)> {
        path[..n]
            .iter()
            .enumerate()
            .map(|(i, st)| (i as i32 + 1, st.as_str().to_string()))
            .collect()
    };
    let seqs = |v: &[(i32, String, String)]| -> Vec<(i32, String)> {
        v.iter().map(|(q, st, _)| (*q, st.clone())).collect()
    };
    assert_eq!(seqs(&sa), want(11));
    assert_eq!(seqs(&sb), want(6));
    // One transaction wrote them all (one transaction id).
    let xids: HashSet<&String> = sa.iter().chain(&sb).map(|(_, _, x)| x).collect();
    assert_eq!(xids.len(), 1, "{xids:?}");
    // A write that appends a transition without moving last_seq (or the reverse) is refused
    // by the row's CHECK (migration 0028), so the history and last_seq cannot drift apart.
    let c = s.store().client().await.unwrap();
    for sql in [
        "UPDATE attempts SET step_states = step_states || 'failed'::text, \
         step_ats = step_ats || now(), step_notes = step_notes || ''::text \
         WHERE attempt_id = $1",
        "UPDATE attempts SET last_seq = last_seq + 1 WHERE attempt_id = $1",
    ] {
        let err = StoreError::from(c.execute(sql, &[&a.attempt_id]).await.unwrap_err());
        assert!(matches!(err, StoreError::Invalid(_)), "{sql}: {err:?}");
    }
    assert_eq!(seqs(&stored(a.attempt_id).await), want(11));
    // The lost attempt's rows are as the reaper left them.
    assert_eq!(
        scalar::<i64>(&s, &lost_rows(lost.attempt_id)).await,
        lost_before
    );
    let state: String = scalar(
        &s,
        &format!(
            "SELECT state FROM attempts WHERE attempt_id = '{}'",
            lost.attempt_id
        ),
    )
    .await;
    assert_eq!(state, "infrastructure_error");
}
