//! `execution.budget` in the coordinator, on a real private PostgreSQL: once the accepted
//! records' reported cost reaches the cap, the run's ready items are cancelled with the
//! reason "budget" (claims never get them), the leased ones finish, and the run ends.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use akbench_coordinator::scheduler::test_support::seed_run_with;
use akbench_coordinator::scheduler::{Assignment, Caps, Scheduler};
use akbench_core::lifecycle::State;
use common::{chain, enqueued, record, scalar, scheduler};

const TTL: Duration = Duration::from_secs(30);

fn transitions(from_seq: u32) -> Vec<akbench_coordinator::scheduler::TransitionIn> {
    let at = chrono::DateTime::from_timestamp_millis(1_767_225_600_000).unwrap();
    chain()
        .iter()
        .enumerate()
        .map(|(i, s)| akbench_coordinator::scheduler::TransitionIn {
            seq: from_seq + i as u32,
            state: *s,
            at,
            note: String::new(),
        })
        .collect()
}

/// Runs `a` to `not_graded` with a record reporting `cost` (absent when `None`).
async fn run_attempt(s: &Scheduler, a: &Assignment, cost: Option<f64>) {
    s.record_transitions(a.attempt_id, a.epoch, &transitions(1))
        .await
        .unwrap();
    let (json, _) = record(a.attempt_id, "spent");
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["observations"] =
        serde_json::json!({"cost_usd": cost, "input_tokens": 10, "output_tokens": 5});
    let json = akbench_core::digest::canonical_json(&v);
    let digest = akbench_core::digest::digest_bytes(json.as_bytes());
    assert!(s
        .upload_record(a.attempt_id, a.epoch, &json, &digest)
        .await
        .unwrap());
    s.finish(a.attempt_id, a.epoch, State::NotGraded, "")
        .await
        .unwrap();
}

async fn capped_run(s: &Scheduler, n: usize, budget: &str) -> uuid::Uuid {
    s.register_worker("w1", 8, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let budget: serde_json::Value = serde_json::from_str(budget).unwrap();
    let run = seed_run_with(
        s.store(),
        n,
        "oracle",
        &Caps::default(),
        serde_json::json!({"condition": {"execution": {"budget": budget}}}),
    )
    .await
    .unwrap();
    s.enqueue(run.run_id, &run.items("oracle", 0))
        .await
        .unwrap();
    run.run_id
}

async fn item_states(s: &Scheduler, run: uuid::Uuid) -> String {
    scalar(
        s,
        &format!(
            "SELECT string_agg(state || ':' || coalesce(cancel_reason, '-'), ' ' ORDER BY ordinal) \
             FROM work_items WHERE run_id = '{run}'"
        ),
    )
    .await
}

async fn run_state(s: &Scheduler, run: uuid::Uuid) -> String {
    scalar(
        s,
        &format!("SELECT state::text FROM runs WHERE run_id = '{run}'"),
    )
    .await
}

#[tokio::test]
async fn a_spent_usd_cap_cancels_the_ready_items_with_reason_budget_and_running_ones_finish() {
    let s = scheduler().await;
    let run = capped_run(&s, 5, r#"{"usd": 0.001}"#).await;
    let got = s.claim("w1", 2, TTL).await.unwrap();
    assert_eq!(got.len(), 2);
    // $0.0006 of $0.001: open, another trial starts.
    run_attempt(&s, &got[0], Some(0.0006)).await;
    let third = s.claim("w1", 1, TTL).await.unwrap();
    assert_eq!(third.len(), 1, "the budget is not spent yet");
    // It starts (a lease whose attempt has not started would be taken back: see
    // a_budget_stop_holds_for_prefetched_work).
    s.record_transitions(third[0].attempt_id, third[0].epoch, &transitions(1)[..2])
        .await
        .unwrap();
    // $0.0012: spent. The two items never started are cancelled; the leased one runs on.
    run_attempt(&s, &got[1], Some(0.0006)).await;
    assert_eq!(
        item_states(&s, run).await,
        "done:- done:- leased:- cancelled:budget cancelled:budget"
    );
    assert!(s.claim("w1", 8, TTL).await.unwrap().is_empty());
    assert_eq!(run_state(&s, run).await, "running");
    run_attempt(&s, &third[0], Some(0.0001)).await;
    assert_eq!(run_state(&s, run).await, "finished");
    // What the status projection (gRPC, HTTP, page, `run status`) shows: spend against the
    // cap (run_status calls budget_status; seeded runs have no catalog row for run_status).
    let client = s.store().client().await.unwrap();
    let b = akbench_coordinator::scheduler::budget_status(&client, run)
        .await
        .unwrap()
        .expect("a run with a budget shows it");
    assert_eq!(b.spent.attempts, 3);
    assert!((b.spent.cost_usd - 0.0013).abs() < 1e-12, "{b:?}");
    assert_eq!(
        b.line(),
        "budget: $0.0013 of $0.0010 (reached: spent $0.0013 of $0.0010; no new trial starts)"
    );
    // Accounting reads a queued-cancelled trial as `cancelled` (control/observations.sql).
    let cancelled: i64 = scalar(
        &s,
        &format!(
            "SELECT count(*) FROM ({}) o (ordinal, t, a, outcome, st, ok, score) WHERE o.outcome = 'cancelled'",
            include_str!("../sql/control/observations.sql")
                .lines()
                .filter(|l| !l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
                .replace("$1", &format!("'{run}'::uuid"))
        ),
    )
    .await;
    assert_eq!(cancelled, 2);
}

#[tokio::test]
async fn a_record_without_cost_under_a_usd_cap_stops_new_trials() {
    let s = scheduler().await;
    let run = capped_run(&s, 3, r#"{"usd": 100}"#).await;
    let got = s.claim("w1", 1, TTL).await.unwrap();
    run_attempt(&s, &got[0], None).await;
    assert_eq!(
        item_states(&s, run).await,
        "done:- cancelled:budget cancelled:budget"
    );
    assert_eq!(run_state(&s, run).await, "finished");
}

#[tokio::test]
async fn a_token_cap_counts_input_plus_output_and_a_run_without_budget_is_untouched() {
    let s = scheduler().await;
    let run = capped_run(&s, 3, r#"{"tokens": 16}"#).await;
    let got = s.claim("w1", 1, TTL).await.unwrap();
    run_attempt(&s, &got[0], None).await; // 15 tokens of 16: open
    assert_eq!(item_states(&s, run).await, "done:- ready:- ready:-");
    let free = enqueued(&s, 2, 0, &Caps::default()).await;
    let got = s.claim("w1", 1, TTL).await.unwrap();
    run_attempt(&s, &got[0], None).await; // 30 tokens: spent
    assert_eq!(item_states(&s, run).await, "done:- done:- cancelled:budget");
    assert_eq!(item_states(&s, free.run_id).await, "ready:- ready:-");
}

/// Issue 28: a budget stop holds for prefetched work. A lease whose attempt has not started
/// when the cap is reached (a worker's prefetched assignment waiting for a slot) is taken
/// back: its attempt ends `cancelled`, its worker is sent `Cancel`, its late reports are
/// refused, and its trial is cancelled with reason `budget`. A started attempt runs on.
#[tokio::test]
async fn a_budget_stop_holds_for_prefetched_work() {
    use akbench_coordinator::scheduler::{Revoked, SchedulerError};
    use std::sync::{Arc, Mutex};
    let s = scheduler().await;
    let seen: Arc<Mutex<Vec<Revoked>>> = Arc::default();
    let sink = Arc::clone(&seen);
    s.on_revoked(move |r| sink.lock().unwrap().extend(r.iter().cloned()));
    let run = capped_run(&s, 4, r#"{"usd": 0.001}"#).await;
    let got = s.claim("w1", 3, TTL).await.unwrap();
    assert_eq!(got.len(), 3);
    // got[1] has started; got[2] is prefetched (nothing reported yet).
    s.record_transitions(got[1].attempt_id, got[1].epoch, &transitions(1)[..3])
        .await
        .unwrap();
    run_attempt(&s, &got[0], Some(0.002)).await;
    assert_eq!(
        item_states(&s, run).await,
        "done:- leased:- cancelled:budget cancelled:budget"
    );
    let revoked = seen.lock().unwrap().clone();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0].attempt_id, got[2].attempt_id);
    assert_eq!(revoked[0].worker_id, "w1");
    assert!(revoked[0].reason.contains("budget"), "{revoked:?}");
    let (state, cause): (String, String) = {
        let row = s
            .store()
            .client()
            .await
            .unwrap()
            .query_one(
                "SELECT terminal_state, cause FROM attempts WHERE attempt_id = $1",
                &[&got[2].attempt_id],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(state, "cancelled");
    assert!(cause.starts_with("revoked before it started"), "{cause}");
    // Had its worker started it anyway, its reports are refused: nothing runs for it.
    let late = s
        .record_transitions(got[2].attempt_id, got[2].epoch, &transitions(1)[..2])
        .await
        .unwrap_err();
    assert!(
        matches!(late, SchedulerError::StaleEpoch { .. }),
        "{late:?}"
    );
    assert!(s.claim("w1", 8, TTL).await.unwrap().is_empty());
    // The started one runs on; then the run ends.
    run_attempt(&s, &got[1], Some(0.0001)).await;
    assert_eq!(
        item_states(&s, run).await,
        "done:- done:- cancelled:budget cancelled:budget"
    );
    assert_eq!(run_state(&s, run).await, "finished");
}
