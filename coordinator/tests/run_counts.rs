//! The per-run status counters (migration 0014) against the raw tables: after a mix of
//! accepted, retried, fenced (stale), cancelled and resumed trials driven through the real
//! scheduler on a private PostgreSQL, the counters summed by status equal the recount of
//! `work_items`, `attempts` and `submissions` (`tests/sql/recount_run.sql`), and so does the
//! projection `run_status` builds from them; folding the deltas changes no total.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use akbench_coordinator::scheduler::{Caps, Disposition, Scheduler, SchedulerError, TransitionIn};
use akbench_coordinator::status::{run_status, StatusOptions};
use akbench_core::lifecycle::State;
use common::{enqueued, record};
use serde_json::json;
use uuid::Uuid;

const TTL: Duration = Duration::from_secs(30);
const COUNTS_SQL: &str = include_str!("../sql/control/status_counts.sql");
const RECOUNT_SQL: &str = include_str!("sql/recount_run.sql");

/// One summed key: (agent, kind, state, bucket) -> (n, n_cost, tokens in, cached, out, cost).
type Key = (String, String, String, Option<String>);
type Value = (i64, i64, Option<i64>, Option<i64>, Option<i64>, Option<f64>);

fn keyed(rows: &[tokio_postgres::Row]) -> BTreeMap<Key, Value> {
    rows.iter()
        .map(|r| {
            (
                (
                    r.get("agent"),
                    r.get("kind"),
                    r.get("state"),
                    r.get("bucket"),
                ),
                (
                    r.get("n"),
                    r.get("n_cost"),
                    r.get("input_tokens"),
                    r.get("cached_input_tokens"),
                    r.get("output_tokens"),
                    r.get("cost_usd"),
                ),
            )
        })
        // A key whose deltas cancel out (a done item whose bucket arrived later) counts
        // nothing, as a key the recount does not list.
        .filter(|(_, v)| *v != (0, 0, None, None, None, None))
        .collect()
}

/// The counters of `run` equal the recount from the raw tables, and the projection agrees.
async fn agree(s: &Scheduler, run: Uuid, step: &str) {
    let c = s.store().client().await.unwrap();
    let counted = keyed(&c.query(COUNTS_SQL, &[&run]).await.unwrap());
    let recounted = keyed(&c.query(RECOUNT_SQL, &[&run]).await.unwrap());
    assert_eq!(counted, recounted, "counters drifted after: {step}");

    let status = run_status(s.store(), &run.to_string(), StatusOptions::default())
        .await
        .unwrap();
    let raw = |q: &str| {
        let c = &c;
        let q = q.to_string();
        async move { c.query(&q, &[&run]).await.unwrap() }
    };
    let states: BTreeMap<String, u64> = raw(
        "SELECT state::text, count(*)::bigint FROM work_items WHERE run_id = $1 GROUP BY state",
    )
    .await
    .iter()
    .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
    .collect();
    assert_eq!(
        status.work_items, states,
        "work items by state after: {step}"
    );
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for r in raw(
        "SELECT CASE WHEN state = 'cancelled' THEN 'cancelled' ELSE bucket END, count(*)::bigint
         FROM work_items WHERE run_id = $1
           AND (state = 'cancelled' OR (state = 'done' AND bucket IS NOT NULL))
         GROUP BY 1",
    )
    .await
    {
        *outcomes.entry(r.get(0)).or_default() += r.get::<_, i64>(1) as u64;
    }
    assert_eq!(status.outcomes, outcomes, "outcomes after: {step}");
    let retries: i64 = raw(
        "SELECT count(*) FROM attempts a JOIN work_items w ON w.trial_id = a.trial_id
         WHERE w.run_id = $1 AND a.number > 1",
    )
    .await[0]
        .get(0);
    assert_eq!(status.retries, retries as u64, "retries after: {step}");
    let spend = &raw(
        "SELECT sum(s.input_tokens)::bigint, sum(s.cost_usd::numeric)::float8
         FROM submissions s JOIN attempts a ON a.attempt_id = s.attempt_id
         JOIN work_items w ON w.trial_id = a.trial_id WHERE w.run_id = $1",
    )
    .await[0];
    assert_eq!(
        status.spend.spend.input_tokens,
        spend.get::<_, Option<i64>>(0).map(|n| n as u64),
        "tokens after: {step}"
    );
    assert_eq!(
        status.spend.spend.cost_usd,
        spend.get::<_, Option<f64>>(1),
        "cost after: {step}"
    );
}

/// A record of `attempt` reporting `cost` (and 100 input tokens when it has a cost).
fn record_with(attempt: Uuid, note: &str, cost: Option<f64>) -> (String, String) {
    let (json, _) = record(attempt, note);
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    if let Some(cost) = cost {
        value["observations"] = json!({"input_tokens": 100, "cost_usd": cost});
    }
    let json = akbench_core::digest::canonical_json(&value);
    let digest = akbench_core::digest::digest_bytes(json.as_bytes());
    (json, digest)
}

/// Walks attempt `x` through the lifecycle up to `finalizing` (`steps` first states of the
/// chain) so that it may finish.
async fn walk(s: &Scheduler, x: &akbench_coordinator::scheduler::Assignment, steps: usize) {
    let at = chrono::DateTime::from_timestamp_millis(1_767_225_600_000).unwrap();
    let t: Vec<TransitionIn> = common::chain()[..steps]
        .iter()
        .enumerate()
        .map(|(i, st)| TransitionIn {
            seq: 1 + i as u32,
            state: *st,
            at,
            note: String::new(),
        })
        .collect();
    s.record_transitions(x.attempt_id, x.epoch, &t)
        .await
        .unwrap();
}

/// A run_catalog row for a seeded run, so `run_status` finds it by id.
async fn catalog(s: &Scheduler, run: Uuid, trials: i64, agent: &str) {
    s.store()
        .client()
        .await
        .unwrap()
        .execute(
            "INSERT INTO run_catalog (run_id, run_key, experiment, trial_count, by_agent,
                                      spec_digest, plan_digest)
             VALUES ($1, $4, 'counters', $2::bigint, jsonb_build_object($3::text, $2::bigint),
                     'sha256:' || repeat('0', 64), 'sha256:' || repeat('0', 64))",
            &[&run, &trials, &agent, &format!("run-{run}")],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn counters_equal_the_recount_through_accepts_retries_fencing_cancel_and_resume() {
    let (s, clock) = common::clocked().await;
    let run = enqueued(&s, 8, 1, &Caps::default()).await.run_id;
    catalog(&s, run, 8, "oracle").await;
    // A second run in the same tables: its changes must not move the first run's counters.
    // A lower priority, so claims serve the first run while it has ready work (runs of one
    // priority would share the claims: core::dispatch::share).
    let low = Caps {
        share: akbench_core::dispatch::share::Share {
            priority: -1,
            weight: 1,
        },
        ..Caps::default()
    };
    let other = enqueued(&s, 3, 0, &low).await.run_id;
    catalog(&s, other, 3, "oracle").await;
    for w in ["w1", "w2"] {
        s.register_worker(w, 8, &BTreeMap::new(), "test")
            .await
            .unwrap();
    }
    agree(&s, run, "enqueue").await;

    let got = s.claim("w1", 4, TTL).await.unwrap();
    agree(&s, run, "claim").await;
    let (a, b, c, d) = (&got[0], &got[1], &got[2], &got[3]);

    // Accepted: a record with a cost, then the finish.
    let (json, digest) = record_with(a.attempt_id, "a", Some(0.25));
    assert!(s
        .upload_record(a.attempt_id, a.epoch, &json, &digest)
        .await
        .unwrap());
    walk(&s, a, 10).await;
    s.finish(a.attempt_id, a.epoch, State::NotGraded, "")
        .await
        .unwrap();
    agree(&s, run, "an accepted trial").await;

    // Retried: an infrastructure error with a record of its own (tokens, no cost), then a
    // second attempt whose record reports a cost: the trial is counted once among those with
    // a record, and once among those with a cost when the second record arrives.
    let (json, digest) = record_with(b.attempt_id, "b1", None);
    s.upload_record(b.attempt_id, b.epoch, &json, &digest)
        .await
        .unwrap();
    assert_eq!(
        s.finish(
            b.attempt_id,
            b.epoch,
            State::InfrastructureError,
            "disk full"
        )
        .await
        .unwrap(),
        Some(Disposition::Requeued)
    );
    agree(&s, run, "an infrastructure error re-queued").await;

    // Fenced: c's lease expires and is taken back; its late record and finish are stale.
    clock.advance(chrono::Duration::seconds(31));
    let reaped = s.reap(s.now()).await.unwrap();
    assert!(reaped.iter().any(|r| r.attempt_id == c.attempt_id));
    agree(&s, run, "leases reaped").await;
    let (json, digest) = record_with(c.attempt_id, "late", Some(9.0));
    assert!(matches!(
        s.upload_record(c.attempt_id, c.epoch, &json, &digest).await,
        Err(SchedulerError::StaleEpoch { .. })
    ));
    agree(&s, run, "a stale record refused").await;

    // The re-queued trials run again on the other worker: second attempts (retries).
    let again = s.claim("w2", 3, TTL).await.unwrap();
    assert!(again.iter().any(|x| x.number > 1));
    agree(&s, run, "retries claimed").await;
    for (i, x) in again.iter().enumerate() {
        if x.trial_id == b.trial_id {
            let (json, digest) = record_with(x.attempt_id, "b2", Some(0.75));
            s.upload_record(x.attempt_id, x.epoch, &json, &digest)
                .await
                .unwrap();
        }
        if i % 3 == 0 || x.trial_id == b.trial_id {
            walk(&s, x, 10).await;
            s.finish(x.attempt_id, x.epoch, State::NotGraded, "")
                .await
                .unwrap();
        }
    }
    agree(&s, run, "retries finished").await;

    // Folding the deltas changes no total.
    let folded: bool = s
        .store()
        .client()
        .await
        .unwrap()
        .query_one(include_str!("../sql/control/compact_counts.sql"), &[&run])
        .await
        .unwrap()
        .get(0);
    assert!(folded);
    agree(&s, run, "folding").await;

    // Cancelled: queued items at once, the live ones when their workers report.
    let report = s.cancel_run(run).await.unwrap();
    assert!(report.cancelled_items > 0);
    agree(&s, run, "cancel").await;
    for (attempt, _) in &report.live {
        let epoch: i64 = s
            .store()
            .client()
            .await
            .unwrap()
            .query_one(
                "SELECT epoch FROM attempts WHERE attempt_id = $1",
                &[attempt],
            )
            .await
            .unwrap()
            .get(0);
        s.finish(*attempt, epoch, State::Cancelled, "run cancelled")
            .await
            .unwrap();
    }
    agree(&s, run, "live attempts cancelled").await;

    // The other run moves; this one's counters do not.
    let o = s.claim("w1", 8, TTL).await.unwrap();
    assert!(!o.is_empty() && o.iter().all(|x| x.trial_id != d.trial_id));
    for x in &o {
        let (json, digest) = record_with(x.attempt_id, "o", Some(1.0));
        s.upload_record(x.attempt_id, x.epoch, &json, &digest)
            .await
            .unwrap();
        walk(&s, x, 7).await;
        s.finish(x.attempt_id, x.epoch, State::Timeout, "slow")
            .await
            .unwrap();
    }
    agree(&s, run, "another run's trials").await;
    agree(&s, other, "its own trials").await;

    // Resumed: every trial without an accepted final outcome is queued again and runs.
    let requeued = s.resume_run(run).await.unwrap();
    assert!(!requeued.is_empty());
    agree(&s, run, "resume").await;
    let last = s.claim("w1", 8, TTL).await.unwrap();
    for (i, x) in last.iter().enumerate() {
        let cost = (i % 2 == 0).then_some(0.125);
        let (json, digest) = record_with(x.attempt_id, "r", cost);
        s.upload_record(x.attempt_id, x.epoch, &json, &digest)
            .await
            .unwrap();
        walk(&s, x, 10).await;
        s.finish(x.attempt_id, x.epoch, State::NotGraded, "")
            .await
            .unwrap();
    }
    agree(&s, run, "resumed trials finished").await;
    let status = run_status(s.store(), &run.to_string(), StatusOptions::default())
        .await
        .unwrap();
    assert_eq!(status.finished, 8, "{status:?}");
    assert!(status.retries > 0);
}

/// Migration 0020: no trigger runs on an UPDATE of `work_items` (claims, settles, cancels,
/// resumes): each statement that moves an item writes its own counters and bucket. The one
/// update trigger left fires only for a statement that sets `trial_id` or `run_id`, which
/// none of those does (`work_items_refs_fixed`, migration 0025: it refuses the change).
#[tokio::test]
async fn no_trigger_runs_on_work_item_updates() {
    let s = common::scheduler().await;
    let c = s.store().client().await.unwrap();
    // pg_trigger.tgtype: bit 4 (16) is UPDATE.
    let names: Vec<String> = c
        .query(
            "SELECT tgname::text FROM pg_trigger
             WHERE tgrelid = 'work_items'::regclass AND NOT tgisinternal
               AND (tgtype::int & 16) <> 0
               AND pg_get_triggerdef(oid) NOT LIKE '%BEFORE UPDATE OF trial_id, run_id ON%'
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(names.is_empty(), "update triggers on work_items: {names:?}");
}

/// A record that arrives after its trial was settled gives the trial core's bucket
/// (`Bucket::settled`, decided in Rust since migration 0023: `late_buckets.sql` loads,
/// `rebucket.sql` applies), for every terminal state and every `ok`; the counters follow the
/// move, and no SQL copy of the rule is left in the database.
#[tokio::test]
async fn a_late_records_bucket_is_cores() {
    use akbench_coordinator::scheduler::test_support::finish_trial;
    use akbench_core::accounting::Bucket;
    let s = common::scheduler().await;
    let cases: Vec<(State, Option<bool>)> = akbench_core::lifecycle::ALL_STATES
        .into_iter()
        .filter(|st| st.is_terminal())
        .flat_map(|st| [None, Some(true), Some(false)].map(|ok| (st, ok)))
        .collect();
    let seeded = enqueued(&s, cases.len(), 0, &Caps::default()).await;
    let c = s.store().client().await.unwrap();
    for (i, ((state, ok), trial)) in cases.iter().zip(&seeded.trial_ids).enumerate() {
        finish_trial(
            s.store(),
            *trial,
            &format!("late/{i}"),
            1,
            *state,
            *ok,
            json!({}),
        )
        .await
        .unwrap();
        let got: Option<String> = c
            .query_one(
                "SELECT bucket FROM work_items WHERE trial_id = $1",
                &[trial],
            )
            .await
            .unwrap()
            .get(0);
        let want = Bucket::settled(*state, *ok).map(|b| b.as_str().to_string());
        assert_eq!(got, want, "{state} ok {ok:?}");
    }
    catalog(&s, seeded.run_id, cases.len() as i64, "oracle").await;
    agree(&s, seeded.run_id, "late records of every terminal state").await;
    let copies: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_proc WHERE proname = 'akbench_bucket'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(copies, 0, "an SQL copy of the bucket rule is left");
}

/// No trigger keeps a counter or decides a dispatch rule: what is left on the dispatch
/// tables is integrity (append-only evidence, foreign keys checked per statement) and the
/// agent a work item inserted without one takes from its planned trial (migration 0023).
#[tokio::test]
async fn only_integrity_triggers_are_left_on_the_dispatch_tables() {
    let s = common::scheduler().await;
    let c = s.store().client().await.unwrap();
    let mut names: Vec<String> = c
        .query(
            "SELECT t.tgname::text FROM pg_trigger t \
             WHERE t.tgrelid IN ('work_items'::regclass, 'attempts'::regclass, \
             'submissions'::regclass, 'leases'::regclass, 'runs'::regclass) \
             AND NOT t.tgisinternal",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "attempts_no_delete",
            "attempts_no_truncate",
            "attempts_refs_exist",
            "attempts_refs_fixed",
            "runs_no_delete",
            "runs_no_truncate",
            "runs_run_id_fixed",
            "submissions_append_only",
            "submissions_attempt_exists",
            "submissions_no_truncate",
            "work_items_agent",
            "work_items_no_delete",
            "work_items_no_truncate",
            "work_items_refs_exist",
            "work_items_refs_fixed",
        ]
    );
}

/// The guard-retry path of the settle (`scheduler::apply`): a run cancelled between the
/// snapshot a report was decided on and the guarded write. The worker reports `cancelled`
/// (its drain cut the attempt) while the run is running: on that snapshot, an
/// infrastructure error with retries left, re-queued. The user's cancel commits before the
/// write (the test hook between the two statements): the guard fails, the trial is read and
/// decided again, and ends `cancelled`, not re-queued into a cancelling run; the run ends
/// cancelled and the counters equal the recount.
#[tokio::test]
async fn a_run_cancelled_between_the_snapshot_and_the_write_is_decided_again() {
    use akbench_coordinator::scheduler::settle_hook;
    use std::sync::{Arc, Mutex};
    let s = common::scheduler().await;
    let seeded = enqueued(&s, 1, 1, &Caps::default()).await;
    let (run, trial) = (seeded.run_id, seeded.trial_ids[0]);
    catalog(&s, run, 1, "oracle").await;
    s.register_worker("w", 1, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let a = s.claim("w", 1, TTL).await.unwrap().remove(0);
    let rounds: Arc<Mutex<Vec<usize>>> = Arc::default();
    let (seen, canceller) = (Arc::clone(&rounds), s.clone());
    let hook: settle_hook::BeforeSettleWrite = Arc::new(move |round, trials: &[Uuid]| {
        let ours = trials.contains(&trial);
        if ours {
            seen.lock().unwrap().push(round);
        }
        let canceller = canceller.clone();
        Box::pin(async move {
            if ours && round == 0 {
                // Another transaction, committed while the report waits here.
                let report = canceller.cancel_run(run).await.unwrap();
                assert_eq!(report.live.len(), 1, "the attempt is still live");
            }
        })
    });
    settle_hook::set_before_settle_write(Some(hook));
    let d = s
        .finish(a.attempt_id, a.epoch, State::Cancelled, "drained")
        .await;
    settle_hook::set_before_settle_write(None);
    assert_eq!(
        *rounds.lock().unwrap(),
        vec![0, 1],
        "the guard failed once and the trial was decided again"
    );
    assert_eq!(d.unwrap(), Some(Disposition::Done(State::Cancelled)));
    let c = s.store().client().await.unwrap();
    let item = c
        .query_one(
            "SELECT state::text, outcome FROM work_items WHERE trial_id = $1",
            &[&trial],
        )
        .await
        .unwrap();
    let (state, outcome): (String, Option<String>) = (item.get(0), item.get(1));
    assert_eq!(
        (state.as_str(), outcome.as_deref()),
        ("done", Some("cancelled"))
    );
    let attempts: i64 = c
        .query_one("SELECT count(*) FROM attempts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(attempts, 1, "not re-queued");
    let run_state: String = c
        .query_one("SELECT state::text FROM runs WHERE run_id = $1", &[&run])
        .await
        .unwrap()
        .get(0);
    assert_eq!(run_state, "cancelled");
    agree(&s, run, "a cancel between the snapshot and the write").await;
}
