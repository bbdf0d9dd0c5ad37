//! `StartRun` (issue 12): the work items are created by PostgreSQL from the stored plan, and
//! what a worker receives for each is exactly the canonical `WorkItem` core builds from the
//! planned trial and its agent condition (what the coordinator used to build and store per
//! item). A real private PostgreSQL, the coordinator served in-process, the real proto.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;
#[path = "common/done_trials.rs"]
mod done_trials;

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::scheduler::{Assignment, Scheduler, TransitionIn};
use akbench_coordinator::server::ServeHandle;
use akbench_core::clock::SystemClock;
use akbench_core::digest::canonical_json;
use akbench_core::lifecycle::State;
use akbench_core::plan::{plan, RunPlan};
use akbench_core::spec::{Provenance, ResolvedRunSpec, SpecAgent};
use akbench_core::testkit::{synthetic_agent, synthetic_condition};
use akbench_core::work::WorkItem;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use common::control_plane::submit_request;
use common::{chain, record};
use tokio::sync::oneshot;
use tonic::transport::Channel;

/// A spec whose documents exercise the composition: floats, nested parameters, a provider
/// route on one agent and a model on the other, retries, and its ready plan.
fn run_docs(tasks: usize, reps: u32) -> (ResolvedRunSpec, RunPlan) {
    let mut condition = synthetic_condition(tasks, 2, reps);
    let base = synthetic_agent("agent-00", None);
    let mut parameters = BTreeMap::new();
    parameters.insert("temperature".to_string(), serde_json::json!(0.7));
    parameters.insert("max_tokens".to_string(), serde_json::json!(4096));
    parameters.insert(
        "extra".to_string(),
        serde_json::json!({"stop": ["\n\n", "é"], "top_p": 1e-3, "none": null}),
    );
    condition.agents[0] = SpecAgent::new(
        base.label.clone(),
        base.descriptor.clone(),
        Some("model-a".into()),
        parameters,
        Some("route-a".into()),
    );
    condition.agents[1] = synthetic_agent("agent-01", Some("model-b"));
    condition.compute.agent_timeout_sec = Some(12.5);
    condition.execution.infrastructure_retries = 3;
    let spec = ResolvedRunSpec::assemble(condition, Provenance::default(), &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    (spec, ready)
}

async fn serve_fresh() -> (ServeHandle, oneshot::Sender<()>, ControlClient<Channel>) {
    done_trials::serve(&test_support::fresh_database().await).await
}

/// Submits the run of `docs` (a spec and its ready plan) through `client` and starts it;
/// the documents.
async fn started(
    client: &mut ControlClient<Channel>,
    docs: (ResolvedRunSpec, RunPlan),
) -> (ResolvedRunSpec, RunPlan) {
    let (spec, ready) = docs;
    client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    client
        .start_run(pb::StartRunRequest {
            run: spec.identity.run_key.clone(),
        })
        .await
        .unwrap();
    (spec, ready)
}

/// What the coordinator built and stored per item before issue 12 (and what `WorkItem`
/// digests are computed over): core's `WorkItem` of the trial and its spec agent.
fn expected_documents(spec: &ResolvedRunSpec, plan: &RunPlan) -> HashMap<uuid::Uuid, WorkItem> {
    plan.trials
        .iter()
        .map(|t| {
            let agent = spec
                .condition
                .agents
                .iter()
                .find(|a| a.label == t.agent.label)
                .unwrap();
            (
                t.trial_id,
                WorkItem {
                    trial: t.clone(),
                    agent: agent.clone(),
                    grade: None,
                },
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_creates_one_item_per_trial_and_workers_receive_the_core_work_item() {
    let (handle, stop, mut client) = serve_fresh().await;
    let (spec, ready) = run_docs(30, 2);
    let n = ready.trials.len();
    assert_eq!(n, 120);
    client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    let key = spec.identity.run_key.clone();
    let started = client
        .start_run(pb::StartRunRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.work_items_created, n as u64);
    let again = client
        .start_run(pb::StartRunRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.work_items_created, 0, "a run starts once");

    // Exactly one execute item per planned trial, with the plan's ordinal, agent, retry
    // budget and the agent's provider route.
    let c = handle.store.client().await.unwrap();
    let rows = c
        .query(
            "SELECT trial_id, ordinal, agent, provider_route, retry_budget, kind, state::text AS state \
             FROM work_items WHERE run_id = $1",
            &[&spec.identity.run_id],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), n);
    for r in &rows {
        let trial_id: uuid::Uuid = r.get("trial_id");
        let t = ready
            .trials
            .iter()
            .find(|t| t.trial_id == trial_id)
            .unwrap();
        let agent = spec
            .condition
            .agents
            .iter()
            .find(|a| a.label == t.agent.label)
            .unwrap();
        assert_eq!(i64::from(r.get::<_, i32>("ordinal")), t.ordinal as i64);
        assert_eq!(r.get::<_, String>("agent"), t.agent.label);
        assert_eq!(
            r.get::<_, Option<String>>("provider_route"),
            agent.provider_route
        );
        assert_eq!(
            r.get::<_, i32>("retry_budget"),
            i32::try_from(t.attempt.infrastructure_retries).unwrap()
        );
        assert_eq!(r.get::<_, String>("kind"), "execute");
        assert_eq!(r.get::<_, String>("state"), "ready");
    }

    // What workers receive: claim every item and compare with core's WorkItem, as a value
    // and byte for byte in the canonical JSON that travels on the wire.
    let s = Scheduler::new(handle.store.clone());
    s.register_worker("w-start", 200, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let mut expected = expected_documents(&spec, &ready);
    let mut claimed = Vec::new();
    loop {
        let got = s
            .claim("w-start", n, Duration::from_secs(3600))
            .await
            .unwrap();
        if got.is_empty() {
            break;
        }
        claimed.extend(got);
    }
    assert_eq!(claimed.len(), n, "every item is claimable once");
    for a in &claimed {
        let want = expected
            .remove(&a.trial_id)
            .unwrap_or_else(|| panic!("trial {} claimed twice or not planned", a.trial_id));
        assert_eq!(a.document, serde_json::to_value(&want).unwrap());
        assert_eq!(canonical_json(&a.document), canonical_json(&want));
        let (_, planned_digest) = want.encode();
        let decoded = WorkItem::decode(&canonical_json(&a.document), &planned_digest)
            .unwrap_or_else(|e| panic!("work item of trial {}: {e}", a.trial_id));
        assert_eq!(decoded, want);
    }
    assert!(expected.is_empty());
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

/// A run is `running` only once all its items exist: `GetStatus`, polled while the run is
/// started, never shows it running with fewer work items than trials.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_never_sees_a_running_run_with_fewer_items_than_trials() {
    let (handle, stop, mut client) = serve_fresh().await;
    let (spec, ready) = run_docs(1_000, 5);
    let n = ready.trials.len() as u64;
    client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    let key = spec.identity.run_key.clone();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (mut client, done, key) = (client.clone(), Arc::clone(&done), key.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                let st = client
                    .get_status(pb::GetStatusRequest { run: key.clone() })
                    .await
                    .unwrap()
                    .into_inner();
                let items: u64 = st.work_items.iter().map(|c| c.count).sum();
                seen.push((st.run.unwrap().state, items, st.queued));
                if finished {
                    return seen;
                }
            }
        })
    };
    let started = client
        .start_run(pb::StartRunRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.work_items_created, n);
    done.store(true, Ordering::SeqCst);
    let seen = watcher.await.unwrap();
    assert!(seen.len() >= 2, "the watcher looked: {seen:?}");
    for (state, items, queued) in &seen {
        match pb::RunState::try_from(*state) {
            Ok(pb::RunState::Planned) => assert_eq!(*items, 0),
            Ok(pb::RunState::Running) => {
                assert_eq!(*items, n, "running with a partial queue");
                assert_eq!(*queued, n);
            }
            other => panic!("the run became {other:?} while it was started ({items} items)"),
        }
    }
    assert_eq!(seen.last().unwrap().0, pb::RunState::Running as i32);
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

/// Grading composes the same document: an executed item of a started run, owed a grade, is
/// queued as grade work whose document is core's `WorkItem` of the trial and its agent with
/// the accepted record to grade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grade_work_of_a_started_run_carries_the_core_work_item() {
    let (handle, stop, mut client) = serve_fresh().await;
    let (spec, ready) = started(&mut client, run_docs(2, 1)).await;
    let s = Scheduler::new(handle.store.clone());
    s.register_worker("w-grade", 1, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let a = s
        .claim("w-grade", 1, Duration::from_secs(3600))
        .await
        .unwrap()
        .remove(0);
    executed_not_graded(&s, &a).await;
    let queued = akbench_coordinator::grade_work::queue_grading(&s, spec.identity.run_id)
        .await
        .unwrap();
    assert_eq!(queued.queued, 1, "{queued:?}");
    assert!(queued.skipped.is_empty(), "{queued:?}");
    let mut expected = expected_documents(&spec, &ready);
    let mut graded = None;
    loop {
        let got = s
            .claim("w-grade", 4, Duration::from_secs(3600))
            .await
            .unwrap();
        if got.is_empty() {
            break;
        }
        graded = graded.or(got.into_iter().find(|g| g.trial_id == a.trial_id));
    }
    let graded = graded.expect("the grade work was claimed");
    let work: WorkItem = serde_json::from_value(graded.document.clone()).unwrap();
    let want = expected.remove(&a.trial_id).unwrap();
    assert_eq!(work.trial, want.trial);
    assert_eq!(work.agent, want.agent);
    let source = work.grade.expect("a grade source");
    assert_eq!(source.attempt.attempt.id, a.attempt_id);
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

/// StartRun reads each trial's retry budget from `planned_trials.retries`, which the
/// submit writes (migration 0025), and parses the document only for a trial stored without
/// it (before that migration). The test stores the plan, then makes the column disagree with
/// the document on purpose (7 where set, NULL on odd ordinals: a plan stored earlier) to see
/// which one each item's budget comes from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_takes_the_retry_budget_from_the_column_and_the_document_without_it() {
    let (handle, stop, mut client) = serve_fresh().await;
    let (spec, ready) = run_docs(5, 2);
    let n = ready.trials.len();
    client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    let run_id = spec.identity.run_id;
    let c = handle.store.client().await.unwrap();
    let stored: i64 = c
        .query_one(
            "SELECT count(*) FROM planned_trials WHERE run_id = $1 AND retries = 3",
            &[&run_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, n as i64, "the submit writes every trial's retries");
    c.batch_execute(&format!(
        "ALTER TABLE planned_trials DISABLE TRIGGER planned_trials_append_only;
         UPDATE planned_trials SET retries = CASE WHEN ordinal % 2 = 0 THEN 7 END
         WHERE run_id = '{run_id}';
         ALTER TABLE planned_trials ENABLE TRIGGER planned_trials_append_only;"
    ))
    .await
    .unwrap();
    let started = client
        .start_run(pb::StartRunRequest {
            run: spec.identity.run_key.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.work_items_created, n as u64);
    let rows = c
        .query(
            "SELECT ordinal, retry_budget FROM work_items WHERE run_id = $1",
            &[&run_id],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), n);
    for r in &rows {
        let ordinal: i32 = r.get("ordinal");
        let want = if ordinal % 2 == 0 { 7 } else { 3 };
        assert_eq!(r.get::<_, i32>("retry_budget"), want, "item {ordinal}");
    }
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

/// The work items' references are checked once per statement (migration 0025) with the
/// guarantee the row-level foreign keys gave: an item naming a trial or a run that is not
/// stored is refused (SQLSTATE 23503 naming the same constraint), an item's trial and run
/// cannot be changed, and a run can be neither deleted nor truncated (SQLSTATE AKB01).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_items_refer_to_stored_trials_and_runs_for_good() {
    let (handle, stop, mut client) = serve_fresh().await;
    let (spec, ready) = started(&mut client, run_docs(2, 1)).await;
    let run_id = spec.identity.run_id;
    let trial = ready.trials[0].trial_id;
    let unknown = uuid::Uuid::now_v7();
    let mut c = handle.store.client().await.unwrap();
    let refused = |e: tokio_postgres::Error| {
        let db = e.as_db_error().expect("a database error").clone();
        (
            db.code().code().to_string(),
            db.constraint().map(str::to_string),
        )
    };
    let insert =
        "INSERT INTO work_items (trial_id, run_id, ordinal, agent) VALUES ($1, $2, 0, 'a')";
    let e = c.execute(insert, &[&unknown, &run_id]).await.unwrap_err();
    assert_eq!(
        refused(e),
        ("23503".into(), Some("work_items_trial_id_fkey".into()))
    );
    {
        // Work items are never deleted (migration 0029: attempts refer to them)...
        let e = c
            .execute("DELETE FROM work_items WHERE trial_id = $1", &[&trial])
            .await
            .unwrap_err();
        assert_eq!(refused(e).0, "AKB01");
        // ...so the trial's own item goes out of the way in a transaction rolled back, with
        // that refusal off in it, so that only the run is wrong.
        let tx = c.transaction().await.unwrap();
        tx.batch_execute("ALTER TABLE work_items DISABLE TRIGGER work_items_no_delete")
            .await
            .unwrap();
        tx.execute("DELETE FROM work_items WHERE trial_id = $1", &[&trial])
            .await
            .unwrap();
        let e = tx.execute(insert, &[&trial, &unknown]).await.unwrap_err();
        assert_eq!(
            refused(e),
            ("23503".into(), Some("work_items_run_id_fkey".into()))
        );
    }
    for sql in [
        "UPDATE work_items SET trial_id = $2 WHERE trial_id = $1",
        "UPDATE work_items SET run_id = $2 WHERE trial_id = $1",
    ] {
        let e = c.execute(sql, &[&trial, &unknown]).await.unwrap_err();
        assert_eq!(refused(e).0, "AKB01", "{sql}");
    }
    let e = c
        .execute(
            "UPDATE runs SET run_id = $2 WHERE run_id = $1",
            &[&run_id, &unknown],
        )
        .await
        .unwrap_err();
    assert_eq!(refused(e).0, "AKB01");
    for sql in ["DELETE FROM runs", "TRUNCATE runs CASCADE"] {
        let e = c.batch_execute(sql).await.unwrap_err();
        assert_eq!(refused(e).0, "AKB01", "{sql}");
    }
    // Nothing refused changed anything.
    let items: i64 = c
        .query_one(
            "SELECT count(*) FROM work_items WHERE run_id = $1",
            &[&run_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(items, ready.trials.len() as i64);
    let _ = stop.send(());
    handle.wait().await.unwrap();
}

/// Ends the claimed attempt `a` `not_graded` with an accepted record of an executed
/// workspace (its transitions, the record, the finish), so its trial is owed a grade.
async fn executed_not_graded(s: &Scheduler, a: &Assignment) {
    let at = chrono::DateTime::from_timestamp_millis(1_767_225_600_000).unwrap();
    let transitions: Vec<TransitionIn> = chain()
        .iter()
        .enumerate()
        .map(|(i, st)| TransitionIn {
            seq: 1 + i as u32,
            state: *st,
            at,
            note: String::new(),
        })
        .collect();
    s.record_transitions(a.attempt_id, a.epoch, &transitions)
        .await
        .unwrap();
    let (json, _) = record(a.attempt_id, "executed");
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["workspace"] = serde_json::json!({
        "kept": false, "tree_after_mutation": "t1", "tree_after_agent": "t2",
        "diff_path": "a1/agent.diff", "diff_digest": "sha256:00"
    });
    let json = canonical_json(&v);
    let digest = akbench_core::digest::digest_bytes(json.as_bytes());
    assert!(s
        .upload_record(a.attempt_id, a.epoch, &json, &digest)
        .await
        .unwrap());
    s.finish(a.attempt_id, a.epoch, State::NotGraded, "")
        .await
        .unwrap();
}

/// Executes every item of a started run but one to `not_graded` with an accepted record
/// (one worker, one attempt each), so those trials are owed a grade; the one left stays
/// leased, so the run is still running.
async fn execute_all_ungraded_but_one(s: &Scheduler, worker: &str) {
    let mut held = false;
    loop {
        let got = s.claim(worker, 8, Duration::from_secs(3600)).await.unwrap();
        if got.is_empty() {
            break;
        }
        for a in got {
            if !held {
                held = true;
                continue;
            }
            executed_not_graded(s, &a).await;
        }
    }
}

/// A cancel that commits while grade work is being queued for a running run (one item is
/// still leased; a page of one trial per transaction, so the cancel lands between pages,
/// before the first or after the last) never leaves ready work in the cancelled run: grading decides under the run's lock,
/// with core's run machine, before it moves an item, and the cancel takes back what was
/// queued before it (issue 48).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_the_queuing_of_grades_leaves_no_ready_work() {
    let (handle, stop, mut client) = serve_fresh().await;
    let s = Scheduler::new(handle.store.clone());
    s.register_worker("w-race", 64, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let mut outcomes = Vec::new();
    for round in 0..6u64 {
        let (spec, _) = started(&mut client, run_docs(4 + round as usize, 1)).await;
        execute_all_ungraded_but_one(&s, "w-race").await;
        let run_id = spec.identity.run_id;
        let grader = s.clone();
        let grading = tokio::spawn(async move {
            akbench_coordinator::grade_work::queue_grading_paged(&grader, run_id, 1).await
        });
        // A different moment each round: before the first page, between pages, after.
        tokio::time::sleep(Duration::from_millis(round * round)).await;
        s.cancel_run(run_id).await.unwrap();
        let queued = grading.await.unwrap().unwrap();
        let db = handle.store.client().await.unwrap();
        let ready_left: i64 = db
            .query_one(
                "SELECT count(*) FROM work_items WHERE run_id = $1 AND state = 'ready'",
                &[&run_id],
            )
            .await
            .unwrap()
            .get(0);
        let run_state: String = db
            .query_one("SELECT state::text FROM runs WHERE run_id = $1", &[&run_id])
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            ready_left, 0,
            "round {round}: {ready_left} ready items left in a {run_state} run ({} grades queued)",
            queued.queued
        );
        assert!(
            run_state == "cancelled" || run_state == "cancelling",
            "round {round}: the run is {run_state}"
        );
        outcomes.push(queued.queued);
    }
    // The rounds raced: at least one cancel landed after some grades were queued, so the
    // cancel's taking back queued work was exercised, not only the refusal.
    assert!(
        outcomes.iter().any(|q| *q > 0),
        "no round queued a grade before its cancel: {outcomes:?}"
    );
    let _ = stop.send(());
    handle.wait().await.unwrap();
}
