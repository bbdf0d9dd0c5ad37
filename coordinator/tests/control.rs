//! The control plane end to end: a real private PostgreSQL, the coordinator served
//! in-process on loopback port 0, a tonic client speaking the real proto, and raw HTTP/1.1.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use akbench_coordinator::auth::{Role, Tokens};
use akbench_coordinator::server::Config;
use akbench_coordinator::store::Store;
use akbench_core::digest::canonical_json;
use akbench_core::plan::{plan, RunPlan};
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::testkit::synthetic_condition;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use common::control_plane::{clock, run_docs, submit_request, Coordinator};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;
use tonic::Code;
use uuid::Uuid;

const OPERATOR: &str = "operator-token-0123";
const VIEWER: &str = "viewer-token-4567";
const WORKER: &str = "worker-token-89ab";

/// Submits a run of `tasks` x 2 agents x `reps` trials through `client` and starts it when
/// `start`: its spec, ready plan, key and id.
async fn submitted<S>(
    client: &mut ControlClient<S>,
    tasks: usize,
    reps: u32,
    start: bool,
) -> (ResolvedRunSpec, RunPlan, String, Uuid)
where
    S: tonic::client::GrpcService<tonic::body::Body>,
    S::Error: Into<tonic::codegen::StdError>,
    S::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <S::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let (spec, ready) = run_docs(tasks, reps);
    client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    let key = spec.identity.run_key.clone();
    if start {
        client
            .start_run(pb::StartRunRequest { run: key.clone() })
            .await
            .unwrap();
    }
    let run_id = spec.identity.run_id;
    (spec, ready, key, run_id)
}

async fn row_counts(store: &Store) -> Vec<i64> {
    let client = store.client().await.unwrap();
    let mut out = Vec::new();
    for table in [
        "run_specs",
        "plans",
        "planned_trials",
        "runs",
        "run_catalog",
    ] {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        out.push(n);
    }
    out
}

/// A raw HTTP/1.1 GET: (status code, body).
async fn http_get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).to_string();
    let code = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// Creates the work items of a submitted run by hand (what the scheduler's start does).
async fn start_by_hand(store: &Store, run_id: Uuid) {
    let client = store.client().await.unwrap();
    akbench_coordinator::scheduler::test_support::insert_items_by_hand(&client, run_id)
        .await
        .unwrap();
    client
        .execute(
            "UPDATE runs SET state = 'running', started_at = now() - interval '1 minute' WHERE run_id = $1",
            &[&run_id],
        )
        .await
        .unwrap();
}

/// Finishes trial `ordinal` with one attempt ending in `terminal` and, when `ok` is given
/// (or the state is not `completed`), an accepted record.
async fn finish_trial(
    store: &Store,
    plan: &RunPlan,
    ordinal: usize,
    number: i32,
    terminal: &str,
    ok: Option<bool>,
) -> Uuid {
    finish_trial_observed(
        store,
        plan,
        ordinal,
        number,
        terminal,
        ok,
        serde_json::json!({}),
    )
    .await
}

/// [`finish_trial`] whose record reports `observations` (merged into the record's own:
/// accepted records are never changed once stored).
async fn finish_trial_observed(
    store: &Store,
    plan: &RunPlan,
    ordinal: usize,
    number: i32,
    terminal: &str,
    ok: Option<bool>,
    observations: serde_json::Value,
) -> Uuid {
    let trial = &plan.trials[ordinal];
    akbench_coordinator::scheduler::test_support::finish_trial(
        store,
        trial.trial_id,
        &trial.key,
        u32::try_from(number).unwrap(),
        akbench_core::lifecycle::State::parse(terminal).unwrap(),
        ok,
        observations,
    )
    .await
    .unwrap()
}

/// A live attempt on trial `ordinal` in lifecycle state `state`.
async fn live_attempt(store: &Store, plan: &RunPlan, ordinal: usize, state: &str) {
    let trial = &plan.trials[ordinal];
    let client = store.client().await.unwrap();
    client
        .execute(
            "INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch)
             VALUES ($1, $2, 1, 'execute', $3, 1)",
            &[&Uuid::now_v7(), &trial.trial_id, &state],
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE work_items SET state = 'leased', attempts_used = 1 WHERE trial_id = $1",
            &[&trial.trial_id],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_get_list_and_diff_runs() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (spec_a, plan_a) = run_docs(2, 2);
    let r = client
        .submit_plan(submit_request(&spec_a, &plan_a))
        .await
        .unwrap()
        .into_inner();
    assert!(r.created);
    let run = r.run.unwrap();
    assert_eq!(run.run_key, spec_a.identity.run_key);
    assert_eq!(run.trial_count, 8);
    assert_eq!(run.state, pb::RunState::Planned as i32);
    assert_eq!(run.plan_digest, plan_a.digest);

    for name in [run.run_key.clone(), run.run_id.clone()] {
        let got = client
            .get_run(pb::GetRunRequest {
                run: name,
                include_documents: true,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.run.as_ref().unwrap().run_id, run.run_id);
        assert_eq!(got.spec_json, canonical_json(&spec_a));
        assert_eq!(got.plan_json, canonical_json(&plan_a));
    }
    let missing = client
        .get_run(pb::GetRunRequest {
            run: "nope-20260101-0000".into(),
            include_documents: false,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);

    // A second run with one more task and another experiment name.
    let c = clock();
    let mut condition = synthetic_condition(3, 2, 2);
    condition.experiment = "other".into();
    let spec_b = ResolvedRunSpec::assemble(condition, Default::default(), &c);
    let plan_b = plan(&spec_b, &c).ready();
    client
        .submit_plan(submit_request(&spec_b, &plan_b))
        .await
        .unwrap();

    let page1 = client
        .list_runs(pb::ListRunsRequest {
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page1.runs.len(), 1);
    assert_eq!(
        page1.runs[0].run_key, spec_b.identity.run_key,
        "newest first"
    );
    let page2 = client
        .list_runs(pb::ListRunsRequest {
            page_size: 1,
            page_token: page1.next_page_token,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page2.runs[0].run_key, spec_a.identity.run_key);
    assert!(page2.next_page_token.is_empty());
    let other = client
        .list_runs(pb::ListRunsRequest {
            key_prefix: "other-".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(other.runs.len(), 1);
    let bad_token = client
        .list_runs(pb::ListRunsRequest {
            page_token: "garbage".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad_token.code(), Code::InvalidArgument);

    let d = client
        .diff_runs(pb::DiffRunsRequest {
            left: run.run_key.clone(),
            right: spec_b.identity.run_id.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!d.comparable);
    assert!(
        d.changes.iter().any(|c| c.section == "tasks"
            && c.path == "task-00002"
            && c.kind == pb::ChangeKind::Added as i32),
        "{:?}",
        d.changes
    );
    assert!(d.changes.iter().any(|c| c.section == "experiment"));
    let same = client
        .diff_runs(pb::DiffRunsRequest {
            left: run.run_key.clone(),
            right: run.run_key.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(same.comparable && same.changes.is_empty());
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubmission_is_idempotent_and_conflicts_are_refused() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (spec, ready) = run_docs(2, 1);
    client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    let before = row_counts(coordinator.store()).await;
    assert_eq!(before, vec![1, 2, 4, 1, 1]);

    let again = client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.created);
    // The plan alone, for the stored spec, is idempotent too.
    let mut plan_only = submit_request(&spec, &ready);
    plan_only.spec_json.clear();
    assert!(
        !client
            .submit_plan(plan_only)
            .await
            .unwrap()
            .into_inner()
            .created
    );

    // Planning the same spec again gives other trial UUIDs: a different plan.
    let replanned = plan(&spec, &clock()).ready();
    let conflict = client
        .submit_plan(submit_request(&spec, &replanned))
        .await
        .unwrap_err();
    assert_eq!(conflict.code(), Code::AlreadyExists, "{conflict:?}");
    assert!(
        conflict.message().starts_with("failed to submit plan"),
        "{}",
        conflict.message()
    );
    assert_eq!(row_counts(coordinator.store()).await, before);
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_submissions_are_refused_and_change_nothing() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (spec, ready) = run_docs(2, 1);
    let (other_spec, other_plan) = run_docs(3, 1);
    let good = submit_request(&spec, &ready);
    let before = row_counts(coordinator.store()).await;

    let mut bad_plan_digest = good.clone();
    bad_plan_digest.plan_digest = format!("sha256:{}", "0".repeat(64));
    let mut bad_spec_digest = good.clone();
    bad_spec_digest.spec_digest = "md5:1234".into();
    let mut broken_json = good.clone();
    broken_json
        .plan_json
        .truncate(broken_json.plan_json.len() / 2);
    let mut broken_spec = good.clone();
    broken_spec.spec_json = "{\"schema\": 1}".into();
    let mut tampered = good.clone();
    tampered.plan_json = tampered
        .plan_json
        .replacen("\"repetition\":1", "\"repetition\":7", 1);
    let mut unknown_spec = submit_request(&other_spec, &other_plan);
    unknown_spec.spec_json.clear();
    let mut wrong_spec = submit_request(&spec, &other_plan);
    wrong_spec.plan_digest = other_plan.digest.clone();
    let empty = pb::SubmitPlanRequest::default();

    let cases = [
        (
            "plan digest",
            bad_plan_digest,
            Code::InvalidArgument,
            "plan_digest",
        ),
        (
            "spec digest",
            bad_spec_digest,
            Code::InvalidArgument,
            "spec_digest",
        ),
        (
            "broken plan JSON",
            broken_json,
            Code::InvalidArgument,
            "plan_json",
        ),
        (
            "broken spec JSON",
            broken_spec,
            Code::InvalidArgument,
            "spec_json",
        ),
        (
            "tampered plan",
            tampered,
            Code::InvalidArgument,
            "plan_json",
        ),
        (
            "plan for an unknown spec",
            unknown_spec,
            Code::FailedPrecondition,
            "spec",
        ),
        (
            "plan of another spec",
            wrong_spec,
            Code::InvalidArgument,
            "plan_json",
        ),
        ("empty request", empty, Code::InvalidArgument, "plan_json"),
    ];
    for (what, request, code, field) in cases {
        let e = client.submit_plan(request).await.unwrap_err();
        assert_eq!(e.code(), code, "{what}: {e:?}");
        assert!(e.message().contains(field), "{what}: {}", e.message());
        assert!(
            e.message().starts_with("failed to"),
            "{what}: {}",
            e.message()
        );
    }
    assert_eq!(row_counts(coordinator.store()).await, before);
    assert_eq!(before, vec![0, 0, 0, 0, 0]);
    // The coordinator still works.
    client.submit_plan(good).await.unwrap();
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_projection_counts_work_attempts_and_outcomes() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (_, ready, key, _) = submitted(&mut client, 3, 1, false).await; // 3 tasks x 2 agents = 6 trials
    let http = coordinator.handle().http_addr;

    // Before the start: nothing graded, pass rate n/a (null), never 0.
    let (code, body) = http_get(http, &format!("/api/runs/{key}/status"), None).await;
    assert_eq!(code, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["planned"], 6);
    assert!(json["rates"]["pass_rate"].is_null(), "{json}");
    assert_eq!(json["rates"]["graded"], 0);
    let (_, page) = http_get(http, &format!("/runs/{key}/status"), None).await;
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"2\">"));
    assert!(page.contains("pass rate n/a"), "{page}");
    let s = client
        .get_status(pb::GetStatusRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.rates.unwrap().pass_rate, None);

    let store = coordinator.store();
    start_by_hand(store, ready.run_id).await;
    // Only not-graded outcomes: still n/a.
    finish_trial(store, &ready, 0, 1, "not_graded", None).await;
    let s = client
        .get_status(pb::GetStatusRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.finished, 1);
    assert_eq!(s.rates.as_ref().unwrap().pass_rate, None);
    assert_eq!(s.rates.as_ref().unwrap().graded, 0);

    finish_trial(store, &ready, 1, 1, "completed", Some(true)).await;
    finish_trial(store, &ready, 2, 2, "completed", Some(false)).await;
    finish_trial(store, &ready, 3, 1, "timeout", None).await;
    live_attempt(store, &ready, 4, "executing").await;
    let s = client
        .get_status(pb::GetStatusRequest {
            run: ready.run_id.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.planned, 6);
    assert_eq!(s.queued, 1);
    assert_eq!(s.running, 1);
    assert_eq!(s.finished, 4);
    assert_eq!(s.retries, 1);
    assert_eq!(s.run.as_ref().unwrap().state, pb::RunState::Running as i32);
    let count = |v: &[pb::StateCount], k: &str| v.iter().find(|c| c.state == k).map(|c| c.count);
    assert_eq!(count(&s.phases, "executing"), Some(1));
    assert_eq!(count(&s.outcomes, "succeeded"), Some(1));
    assert_eq!(count(&s.outcomes, "failed"), Some(1));
    assert_eq!(count(&s.outcomes, "timed_out"), Some(1));
    assert_eq!(s.prefetched, 0);
    // Issue 28: a lease whose attempt has not started (a worker's prefetched assignment) is
    // shown as prefetched, not running.
    live_attempt(store, &ready, 5, "pending").await;
    let s = client
        .get_status(pb::GetStatusRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((s.queued, s.running, s.prefetched), (0, 1, 1));
    assert_eq!(count(&s.phases, "prefetched"), Some(1));
    assert_eq!(count(&s.phases, "pending"), None);
    assert_eq!(count(&s.outcomes, "not_graded"), Some(1));
    assert_eq!(count(&s.work_items, "done"), Some(4));
    let rates = s.rates.unwrap();
    assert_eq!(rates.graded, 2);
    assert_eq!(rates.pass_rate, Some(0.5));
    assert!(s.throughput_per_minute.unwrap() > 0.0);
    assert!(s.eta_unix_ms.is_some());
    // Ordinals 0..=2 are task-00000 x agents: agent-00 has ordinals 0 and 2 (reps = 1).
    let agents: Vec<(&str, u64, Option<f64>)> = s
        .agents
        .iter()
        .map(|a| {
            (
                a.agent.as_str(),
                a.planned,
                a.rates.as_ref().unwrap().pass_rate,
            )
        })
        .collect();
    assert_eq!(
        agents,
        vec![("agent-00", 3, Some(0.0)), ("agent-01", 3, Some(1.0))]
    );

    let (_, body) = http_get(http, &format!("/api/runs/{}/status", ready.run_id), None).await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["rates"]["pass_rate"], 0.5);
    assert_eq!(json["outcomes"]["succeeded"], 1);
    let (_, page) = http_get(http, &format!("/runs/{key}/status"), None).await;
    assert!(page.contains("pass rate 50.0% (2 graded)"), "{page}");
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_roles_are_enforced_on_grpc_and_http() {
    let tokens = Tokens::from_pairs([
        (Role::Operator, OPERATOR),
        (Role::Viewer, VIEWER),
        (Role::Worker, WORKER),
    ]);
    let coordinator = Coordinator::start(tokens).await;
    let (spec, ready) = run_docs(1, 1);
    let key = spec.identity.run_key.clone();
    let status = || pb::GetStatusRequest { run: key.clone() };

    let mut anonymous = coordinator.client_as(None).await;
    let e = anonymous.get_status(status()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let mut wrong = coordinator.client_as(Some("operator-token-0124")).await;
    assert_eq!(
        wrong.get_status(status()).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    let mut worker = coordinator.client_as(Some(WORKER)).await;
    assert_eq!(
        worker.get_status(status()).await.unwrap_err().code(),
        Code::PermissionDenied
    );

    let mut viewer = coordinator.client_as(Some(VIEWER)).await;
    let e = viewer
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let mut operator = coordinator.client_as(Some(OPERATOR)).await;
    operator
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    viewer.get_status(status()).await.unwrap();
    let e = viewer
        .start_run(pb::StartRunRequest { run: key.clone() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let work_items = || async {
        coordinator
            .store()
            .client()
            .await
            .unwrap()
            .query_one("SELECT count(*) FROM work_items", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    assert_eq!(work_items().await, 0, "the viewer's start changed nothing");
    let started = operator
        .start_run(pb::StartRunRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.work_items_created, ready.trials.len() as u64);
    assert_eq!(work_items().await, ready.trials.len() as i64);
    // The operator may resume and cancel (the real scheduler's answers: nothing ran, so
    // nothing was lost and nothing is live; `start_creates_one_work_item_per_trial_once_cancel_ends_the_run_and_resume_requeues` checks
    // the numbers when there is something to re-queue).
    let resumed = operator
        .resume_run(pb::ResumeRunRequest {
            run: key.clone(),
            grade: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resumed.requeued, 0);
    let cancelled = operator
        .cancel_run(pb::CancelRunRequest {
            run: key.clone(),
            reason: "test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.attempts_cancelling, 0);
    let e = operator
        .start_run(pb::StartRunRequest {
            run: "unknown-run".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);

    let http = coordinator.handle().http_addr;
    let path = format!("/api/runs/{key}/status");
    assert_eq!(http_get(http, &path, None).await.0, 401);
    assert_eq!(http_get(http, &path, Some("nope")).await.0, 401);
    assert_eq!(http_get(http, &path, Some(WORKER)).await.0, 401);
    assert_eq!(http_get(http, &path, Some(VIEWER)).await.0, 200);
    assert_eq!(http_get(http, &path, Some(OPERATOR)).await.0, 200);
    assert_eq!(
        http_get(http, &format!("/runs/{key}/status"), None).await.0,
        401
    );
    // Health and metrics stay open.
    assert_eq!(http_get(http, "/healthz", None).await.0, 200);
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_health_readiness_metrics_and_unknown_runs() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let http = coordinator.handle().http_addr;
    assert_eq!(http_get(http, "/healthz", None).await, (200, "ok\n".into()));
    assert_eq!(
        http_get(http, "/readyz", None).await,
        (200, "ready\n".into())
    );
    let (code, text) = http_get(http, "/metrics", None).await;
    assert_eq!(code, 200);
    // Families with labels appear with their first sample; these have none.
    for name in [
        "akbench_retries_total 0",
        "akbench_lease_expiries_total 0",
        "akbench_assignments_total 0",
        "akbench_dispatch_latency_seconds_count 0",
        "akbench_live_leases 0",
        "akbench_free_slots 0",
    ] {
        assert!(text.contains(name), "{name} in {text}");
    }
    // The state gauges come from the database: no worker, no lease.
    assert!(text.contains("akbench_workers_connected 0"), "{text}");
    // A status answer is timed, a refused one too (what `run status` waited for).
    let mut client = coordinator.client_as(None).await;
    let refused = client
        .get_status(pb::GetStatusRequest {
            run: "nope-20260101-0000".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound);
    let (_, text) = http_get(http, "/metrics", None).await;
    assert!(
        text.contains("akbench_control_seconds_count{rpc=\"GetStatus\"} 1"),
        "{text}"
    );
    let (code, body) = http_get(http, "/api/runs/nope-20260101-0000/status", None).await;
    assert_eq!(code, 404);
    assert!(body.contains("failed to find run"), "{body}");
    assert_eq!(http_get(http, "/runs/nope", None).await.0, 404);
    assert_eq!(http_get(http, "/nothing", None).await.0, 404);
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_status_sends_a_new_status_after_a_change_and_ends_with_the_run() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (spec, ready) = run_docs(1, 2); // 4 trials
    client
        .submit_plan(submit_request(&spec, &ready))
        .await
        .unwrap();
    let store = coordinator.store().clone();
    start_by_hand(&store, ready.run_id).await;
    let mut stream = client
        .watch_status(pb::WatchStatusRequest {
            run: spec.identity.run_key.clone(),
            min_interval_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.finished, 0);
    finish_trial(&store, &ready, 0, 1, "completed", Some(true)).await;
    let next = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("an update within 10 s")
        .unwrap()
        .unwrap();
    assert_eq!(next.finished, 1);
    assert_eq!(next.rates.unwrap().pass_rate, Some(1.0));
    store
        .client()
        .await
        .unwrap()
        .execute(
            "UPDATE runs SET state = 'finished' WHERE run_id = $1",
            &[&ready.run_id],
        )
        .await
        .unwrap();
    let last = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(last.run.unwrap().state, pb::RunState::Finished as i32);
    let end = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "the stream ends with the run");
    let unknown = client
        .watch_status(pb::WatchStatusRequest {
            run: "nope".into(),
            min_interval_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    coordinator.stop().await;
}

/// A run's accounting read whole (`Reconcile`) and streamed (`ReconcileStream`).
async fn accounting_whole_and_streamed(
    client: &mut ControlClient<Channel>,
    run: &str,
    observations_json: &str,
    list: pb::TrialList,
    limit: u64,
) -> (
    akbench_core::accounting::RunAccounting,
    Vec<akbench_core::accounting::AccountedTrial>,
    akbench_core::accounting::RunAccounting,
) {
    let r = client
        .reconcile(pb::ReconcileRequest {
            run: run.to_string(),
            observations_json: observations_json.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    let whole = serde_json::from_str(&r.report_json).unwrap();
    let mut parts = client
        .reconcile_stream(pb::ReconcileStreamRequest {
            run: run.to_string(),
            observations_json: observations_json.to_string(),
            trials: list as i32,
            trials_limit: limit,
        })
        .await
        .unwrap()
        .into_inner();
    let (mut entries, mut summary, mut pages) = (Vec::new(), None, 0);
    while let Some(part) = parts.message().await.unwrap() {
        assert!(summary.is_none(), "a part after the summary");
        assert!(part.trials_json.len() <= 1000, "{}", part.trials_json.len());
        pages += usize::from(!part.trials_json.is_empty());
        for t in &part.trials_json {
            entries.push(serde_json::from_str(t).unwrap());
        }
        if let Some(s) = part.summary {
            assert_eq!(
                s.report_digest,
                akbench_core::digest::digest_bytes(s.report_json.as_bytes())
            );
            summary = Some(serde_json::from_str(&s.report_json).unwrap());
        }
    }
    assert_eq!(pages, entries.len().div_ceil(1000), "entries come in pages");
    (whole, entries, summary.expect("the summary, last"))
}

/// The streamed accounting (the planned trials read a page at a time, the coordinator's own
/// outcomes beside them, the entries sent in pages) is the whole one: with a file of
/// observations holding every kind of case (an identical and a conflicting duplicate, an
/// unexpected identity, missing trials) it is core's `reconcile` over the whole plan, and
/// with the coordinator's own records it is what `Reconcile` answers; the entries asked for
/// are the whole report's, in plan order, across pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streamed_accounting_equals_the_whole_plan_one() {
    use akbench_core::accounting::{reconcile, Bucket, Observation, RunAccounting};
    let coordinator = Coordinator::start(Tokens::default()).await;
    let channel = Channel::from_shared(format!("http://{}", coordinator.handle().grpc_addr))
        .unwrap()
        .connect()
        .await
        .expect("connects");
    let mut client = ControlClient::new(channel);
    let (_, ready, key, _) = submitted(&mut client, 601, 1, false).await; // 1,202 trials: two pages
    let store = coordinator.store().clone();
    start_by_hand(&store, ready.run_id).await;
    finish_trial(&store, &ready, 0, 1, "completed", Some(true)).await;
    finish_trial(&store, &ready, 2, 1, "infrastructure_error", None).await;
    finish_trial(&store, &ready, 1100, 1, "completed", Some(false)).await;
    finish_trial(&store, &ready, 1201, 1, "timeout", None).await;

    let t = &ready.trials;
    let o = |i: usize, state: &str, ok: Option<bool>| Observation {
        trial_id: t[i].trial_id,
        state: akbench_core::lifecycle::State::parse(state).unwrap(),
        ok,
        score: ok.map(|ok| if ok { 1.0 } else { 0.0 }),
        attempt_id: None,
        source: Some("file".into()),
    };
    let stranger = Observation {
        trial_id: Uuid::now_v7(),
        ..o(0, "not_graded", None)
    };
    let sent = vec![
        stranger.clone(),
        o(1150, "completed", Some(true)),
        o(0, "completed", Some(true)),
        o(1150, "completed", Some(true)),
        o(3, "completed", Some(true)),
        o(3, "failed", None),
        o(1201, "cancelled", None),
        stranger,
        o(5, "evaluation_error", None),
    ];
    let sent_json = serde_json::to_string(&sent).unwrap();
    let unaccounted = |a: &RunAccounting| -> Vec<_> {
        a.trials
            .iter()
            .filter(|e| matches!(e.bucket, Bucket::Missing | Bucket::Quarantined))
            .cloned()
            .collect()
    };
    for observations in ["", sent_json.as_str()] {
        let (whole, entries, summary) =
            accounting_whole_and_streamed(&mut client, &key, observations, pb::TrialList::All, 0)
                .await;
        if observations.is_empty() {
            assert!(whole.valid && whole.flagged.is_some(), "{whole:?}");
            assert_eq!(whole.observations, 4);
            assert_eq!(whole.counts.missing, 1198);
        } else {
            assert_eq!(whole, reconcile(&ready, &sent));
            assert_eq!((whole.duplicates.len(), whole.unexpected.len()), (2, 1));
            assert_eq!(whole.counts.quarantined, 1);
        }
        assert_eq!(whole.trials.len(), 1202);
        assert_eq!(entries, whole.trials);
        assert_eq!(
            summary,
            RunAccounting {
                trials: Vec::new(),
                ..whole.clone()
            }
        );
        let want = unaccounted(&whole);
        for (list, limit, expected) in [
            (pb::TrialList::Unaccounted, 0, want.clone()),
            (pb::TrialList::Unaccounted, 20, want[..20].to_vec()),
            (pb::TrialList::None, 0, Vec::new()),
        ] {
            let (_, entries, again) =
                accounting_whole_and_streamed(&mut client, &key, observations, list, limit).await;
            assert_eq!(entries, expected, "{list:?} {limit}");
            assert_eq!(again, summary);
        }
    }
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_and_fetch_records() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (spec, ready, key, _) = submitted(&mut client, 2, 1, false).await; // 4 trials
    let store = coordinator.store().clone();
    start_by_hand(&store, ready.run_id).await;
    finish_trial(&store, &ready, 2, 1, "completed", Some(true)).await;
    finish_trial(&store, &ready, 0, 1, "infrastructure_error", None).await;
    // The retry of trial 0 succeeds: its last attempt is the one that counts.
    finish_trial(&store, &ready, 0, 2, "completed", Some(false)).await;

    let r = client
        .reconcile(pb::ReconcileRequest {
            run: key.clone(),
            observations_json: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let count = |r: &pb::ReconcileResponse, k: &str| {
        r.partitions.iter().find(|c| c.state == k).unwrap().count
    };
    assert!(r.valid);
    assert_eq!(count(&r, "succeeded"), 1);
    assert_eq!(count(&r, "failed"), 1);
    assert_eq!(count(&r, "missing"), 2);
    assert_eq!(
        r.report_digest,
        akbench_core::digest::digest_bytes(r.report_json.as_bytes())
    );
    let report: serde_json::Value = serde_json::from_str(&r.report_json).unwrap();
    assert!(report["rates"]["pass_rate"] == 0.5);

    // Observations from elsewhere: a duplicate, a conflict and an unexpected identity.
    let obs = |id: Uuid, state: &str, ok: Option<bool>| serde_json::json!({"trial_id": id, "state": state, "ok": ok, "score": null, "attempt_id": null, "source": "file"});
    let t = &ready.trials;
    let observations = serde_json::json!([
        obs(t[0].trial_id, "completed", Some(true)),
        obs(t[0].trial_id, "completed", Some(true)),
        obs(t[1].trial_id, "completed", Some(true)),
        obs(t[1].trial_id, "failed", None),
        obs(Uuid::now_v7(), "not_graded", None),
    ]);
    let r = client
        .reconcile(pb::ReconcileRequest {
            run: key.clone(),
            observations_json: observations.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!r.valid);
    assert_eq!((r.duplicates, r.conflicts, r.unexpected), (1, 1, 1));
    assert_eq!(count(&r, "succeeded"), 1);
    assert_eq!(count(&r, "quarantined"), 1);
    let e = client
        .reconcile(pb::ReconcileRequest {
            run: key.clone(),
            observations_json: "[{\"trial_id\": 1}]".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("observations_json"), "{}", e.message());

    let mut records = client
        .fetch_records(pb::FetchRecordsRequest {
            run: key.clone(),
            trials: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(r) = records.message().await.unwrap() {
        assert_eq!(
            r.digest,
            akbench_core::digest::digest_bytes(r.record_json.as_bytes())
        );
        // Each is the trial's whole run_record.json: every attempt, validated.
        let record: akbench_core::record::RunRecord = serde_json::from_str(&r.record_json).unwrap();
        record.validate().unwrap();
        assert_eq!(record.trial.id.to_string(), r.trial_id);
        assert_eq!(record.run.key, spec.identity.run_key);
        // Its key comes with it: `run records` needs no copy of the plan to name it.
        assert_eq!(r.trial_key, t[r.ordinal as usize].key);
        if r.ordinal == 0 {
            let states: Vec<_> = record.attempts.iter().map(|a| a.state.as_str()).collect();
            assert_eq!(states, ["infrastructure_error", "completed"]);
            assert_eq!(record.outcome.ok, Some(false));
            assert_eq!(r.attempt_id, record.attempts[1].attempt.id.to_string());
        }
        got.push((r.ordinal, r.trial_id));
    }
    assert_eq!(
        got,
        vec![
            (0, t[0].trial_id.to_string()),
            (2, t[2].trial_id.to_string())
        ]
    );
    let mut one = client
        .fetch_records(pb::FetchRecordsRequest {
            run: key.clone(),
            trials: vec![t[2].key.clone()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one.message().await.unwrap().unwrap().ordinal, 2);
    assert!(one.message().await.unwrap().is_none());
    let e = client
        .fetch_records(pb::FetchRecordsRequest {
            run: key,
            trials: vec!["not-a-trial".into()],
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_creates_one_work_item_per_trial_once_cancel_ends_the_run_and_resume_requeues() {
    let coordinator = Coordinator::open().await;
    let mut client = coordinator
        .client()
        .await
        .max_encoding_message_size(64 << 20);
    let (spec, ready, key, _) = submitted(&mut client, 3, 2, false).await;
    let started = client
        .start_run(pb::StartRunRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(started.work_items_created, ready.trials.len() as u64);
    let again = client
        .start_run(pb::StartRunRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.work_items_created, 0, "a run starts once");
    // One work item per trial; what workers receive for each is tested in start_run.rs.
    let c = coordinator.store().client().await.unwrap();
    let items: i64 = c
        .query_one(
            "SELECT count(DISTINCT trial_id) FROM work_items WHERE run_id = $1",
            &[&spec.identity.run_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(items, ready.trials.len() as i64);
    let cancelled = client
        .cancel_run(pb::CancelRunRequest {
            run: key.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.attempts_cancelling, 0, "nothing was running");
    let state: String = c
        .query_one(
            "SELECT state::text FROM runs WHERE run_id = $1",
            &[&spec.identity.run_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "cancelled");
    // Resuming re-queues every trial without an accepted outcome (here: all of them, none
    // ran) and the run is running again; a second resume has nothing left to re-queue.
    let resumed = client
        .resume_run(pb::ResumeRunRequest {
            run: key.clone(),
            grade: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resumed.requeued, ready.trials.len() as u64);
    assert_eq!(resumed.grading, 0);
    let (state, queued): (String, i64) = {
        let r = c
            .query_one(
                "SELECT (SELECT state::text FROM runs WHERE run_id = $1), \
                 (SELECT count(*) FROM work_items WHERE run_id = $1 AND state = 'ready')",
                &[&spec.identity.run_id],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(state, "running");
    assert_eq!(queued, ready.trials.len() as i64);
    let again = client
        .resume_run(pb::ResumeRunRequest {
            run: key.clone(),
            grade: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.requeued, 0, "nothing left to re-queue");
    // Grading a cancelled run is refused: cancel again, then resume with grading.
    client
        .cancel_run(pb::CancelRunRequest {
            run: key.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let e = client
        .resume_run(pb::ResumeRunRequest {
            run: key.clone(),
            grade: true,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("cancelled"), "{e:?}");
    coordinator.stop().await;
}

/// Issue 48: cancelling a run that has ended changes nothing and says so; before, a finished
/// run was rewritten to `cancelled`, after which `resume --grade` refused it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_ended_run_changes_nothing_and_grading_it_still_works() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (_, ready, key, run_id) = submitted(&mut client, 2, 1, true).await;
    // Every trial executed, none graded; the report path's rule ends the idle run.
    for i in 0..ready.trials.len() {
        finish_trial(coordinator.store(), &ready, i, 1, "not_graded", None).await;
    }
    akbench_coordinator::scheduler::test_support::end_idle_runs(coordinator.store(), &[run_id])
        .await
        .unwrap();
    let state = |c: deadpool_postgres::Object| async move {
        c.query_one("SELECT state::text FROM runs WHERE run_id = $1", &[&run_id])
            .await
            .unwrap()
            .get::<_, String>(0)
    };
    assert_eq!(
        state(coordinator.store().client().await.unwrap()).await,
        "finished"
    );
    let written = |c: deadpool_postgres::Object| async move {
        c.query_one(
            "SELECT updated_at::text || (SELECT string_agg(state || updated_at::text, ',' \
             ORDER BY trial_id) FROM work_items WHERE run_id = $1) FROM runs WHERE run_id = $1",
            &[&run_id],
        )
        .await
        .unwrap()
        .get::<_, String>(0)
    };
    let before = written(coordinator.store().client().await.unwrap()).await;
    for _ in 0..2 {
        let r = client
            .cancel_run(pb::CancelRunRequest {
                run: key.clone(),
                reason: "late".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.attempts_cancelling, 0);
        assert!(r.unchanged.contains("already finished"), "{r:?}");
        assert_eq!(
            r.run.as_ref().map(|s| s.state),
            Some(pb::RunState::Finished as i32)
        );
    }
    assert_eq!(
        state(coordinator.store().client().await.unwrap()).await,
        "finished"
    );
    assert_eq!(
        written(coordinator.store().client().await.unwrap()).await,
        before,
        "nothing written"
    );
    // Grading the finished run is not refused (it was, once a cancel had rewritten it):
    // every trial owed a grade is taken up (the synthetic plan's documents cannot be graded,
    // so they are counted as such and the run stays finished).
    let graded = client
        .resume_run(pb::ResumeRunRequest {
            run: key.clone(),
            grade: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        graded.grading + graded.not_gradable,
        ready.trials.len() as u64,
        "{graded:?}"
    );
    coordinator.stop().await;
}

/// Core's run machine table (`akbench_core::dispatch::machine::run_on`), run against the
/// coordinator's PostgreSQL path: a run brought into each state by the product's own calls,
/// then each event through the control API (start, cancel, resume, grade) or the idle rule,
/// ends in the state core decides, and a refusal is a refusal that changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_machine_table_holds_on_the_postgresql_path() {
    use akbench_core::dispatch::machine::{run_on, RunEvent, RunMove};
    use akbench_core::dispatch::RunState;
    #[derive(Debug, Clone, Copy)]
    enum Ev {
        Start,
        Cancel,
        Resume,
        Grade,
        Idle,
    }
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let store = coordinator.store();
    let c = store.client().await.unwrap();
    let mut case = 0usize;
    for from in RunState::ALL {
        for ev in [Ev::Start, Ev::Cancel, Ev::Resume, Ev::Grade, Ev::Idle] {
            case += 1;
            // Bring the run into `from` by the product's own calls.
            let (_, ready, key, run_id) =
                submitted(&mut client, case, 1, from != RunState::Planned).await;
            match from {
                RunState::Cancelling => {
                    live_attempt(store, &ready, 0, "executing").await;
                }
                RunState::Finished => {
                    for i in 0..ready.trials.len() {
                        finish_trial(store, &ready, i, 1, "not_graded", None).await;
                    }
                    akbench_coordinator::scheduler::test_support::end_idle_runs(store, &[run_id])
                        .await
                        .unwrap();
                }
                _ => {}
            }
            if matches!(from, RunState::Cancelling | RunState::Cancelled) {
                client
                    .cancel_run(pb::CancelRunRequest {
                        run: key.clone(),
                        reason: "set-up".into(),
                    })
                    .await
                    .unwrap();
            }
            let state_of = || async {
                let s: String = c
                    .query_one("SELECT state::text FROM runs WHERE run_id = $1", &[&run_id])
                    .await
                    .unwrap()
                    .get(0);
                RunState::parse(&s).unwrap()
            };
            assert_eq!(state_of().await, from, "set-up of case {case}");
            let refused = match ev {
                Ev::Start => client
                    .start_run(pb::StartRunRequest { run: key.clone() })
                    .await
                    .err(),
                Ev::Cancel => client
                    .cancel_run(pb::CancelRunRequest {
                        run: key.clone(),
                        reason: "table".into(),
                    })
                    .await
                    .err(),
                Ev::Resume | Ev::Grade => client
                    .resume_run(pb::ResumeRunRequest {
                        run: key.clone(),
                        grade: matches!(ev, Ev::Grade),
                    })
                    .await
                    .err(),
                Ev::Idle => {
                    akbench_coordinator::scheduler::test_support::end_idle_runs(store, &[run_id])
                        .await
                        .unwrap();
                    None
                }
            };
            let has_work: bool = c
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM work_items WHERE run_id = $1 \
                     AND state IN ('ready', 'leased'))",
                    &[&run_id],
                )
                .await
                .unwrap()
                .get(0);
            let event = match ev {
                Ev::Start => RunEvent::Start,
                Ev::Cancel => RunEvent::Cancel,
                Ev::Resume => RunEvent::Resume { has_work },
                Ev::Grade => RunEvent::Grade { has_work },
                Ev::Idle => RunEvent::Idle { all_enqueued: true },
            };
            let after = state_of().await;
            let what = format!("{from} + {ev:?} (has_work {has_work})");
            if matches!(ev, Ev::Idle) && has_work {
                // Not idle: the idle event does not happen.
                assert_eq!(after, from, "{what}");
                continue;
            }
            if from == RunState::Planned && matches!(ev, Ev::Resume | Ev::Grade) {
                // The one documented exception: resuming a planned run starts it (core's
                // machine refuses the resume itself; the control API starts the run instead).
                assert!(refused.is_none(), "{what}: {refused:?}");
                assert_eq!(after, RunState::Running, "{what}");
                continue;
            }
            match run_on(from, event) {
                Ok(RunMove::To(to)) => {
                    assert!(refused.is_none(), "{what}: {refused:?}");
                    // A cancel of a run with nothing live ends it at once (the idle rule).
                    let to = if matches!(ev, Ev::Cancel) && !has_work {
                        to.when_idle(true).unwrap_or(to)
                    } else {
                        to
                    };
                    assert_eq!(after, to, "{what}");
                }
                Ok(RunMove::Stays(_)) => {
                    assert!(refused.is_none(), "{what}: {refused:?}");
                    assert_eq!(after, from, "{what}");
                }
                Err(why) => {
                    let e = refused.unwrap_or_else(|| panic!("{what}: not refused ({why})"));
                    assert_eq!(e.code(), Code::FailedPrecondition, "{what}: {e:?}");
                    assert_eq!(after, from, "{what}");
                }
            }
        }
    }
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_tokens_and_cost_per_agent_equal_to_the_sum_over_the_records() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (_, ready, key, _) = submitted(&mut client, 3, 1, false).await; // 3 tasks x 2 agents = 6 trials
    let store = coordinator.store();
    start_by_hand(store, ready.run_id).await;
    // agent-00: ordinals 0 and 2; agent-01: ordinal 1. Trial 0 has two attempts (a retried
    // infrastructure error that still spent tokens).
    let done = |ordinal, number, terminal, ok, obs| {
        finish_trial_observed(store, &ready, ordinal, number, terminal, ok, obs)
    };
    done(0, 1, "infrastructure_error", None, serde_json::json!({"input_tokens": 100, "cached_input_tokens": 10, "output_tokens": 1, "cost_usd": 0.25})).await;
    done(0, 2, "completed", Some(true), serde_json::json!({"input_tokens": 1000, "cached_input_tokens": 100, "output_tokens": 10, "cost_usd": 0.5})).await;
    done(
        2,
        1,
        "completed",
        Some(true),
        serde_json::json!({"input_tokens": 2000, "output_tokens": 20, "cost_usd": 0.75}),
    )
    .await;
    // agent-01 reports tokens but no cost (like codex).
    done(
        1,
        1,
        "completed",
        Some(false),
        serde_json::json!({"input_tokens": 7, "cached_input_tokens": 3, "output_tokens": 2}),
    )
    .await;

    let s = client
        .get_status(pb::GetStatusRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    let by = |name: &str| {
        s.agents
            .iter()
            .find(|a| a.agent == name)
            .unwrap()
            .spend
            .unwrap()
    };
    let a = by("agent-00");
    assert_eq!(a.input_tokens, Some(3100));
    assert_eq!(a.cached_input_tokens, Some(110));
    assert_eq!(a.output_tokens, Some(31));
    assert_eq!(a.cost_usd, Some(1.5));
    assert_eq!(a.trials_without_cost, 0);
    assert_eq!(a.cost_per_solved_usd, Some(0.75));
    let b = by("agent-01");
    assert_eq!(
        (b.input_tokens, b.cached_input_tokens, b.output_tokens),
        (Some(7), Some(3), Some(2))
    );
    assert_eq!(
        b.cost_usd, None,
        "no record reported a cost: absent, never 0"
    );
    assert_eq!(b.trials_without_cost, 1);
    assert_eq!(b.cost_per_solved_usd, None);
    let total = s.spend.unwrap();
    assert_eq!(total.input_tokens, Some(3107));
    assert_eq!(total.cost_usd, Some(1.5));
    assert_eq!(total.trials_without_cost, 1);

    let http = coordinator.handle().http_addr;
    let (_, body) = http_get(http, &format!("/api/runs/{key}/status"), None).await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["spend"]["input_tokens"], 3107, "{json}");
    assert_eq!(
        json["agents"][0]["spend"]["cost_per_solved_usd"], 0.75,
        "{json}"
    );
    let (_, page) = http_get(http, &format!("/runs/{key}/status"), None).await;
    assert!(
        page.contains(
            "tokens 3100 input, 110 cached, 31 output; cost $1.5000 ($0.7500 per solved trial)"
        ),
        "{page}"
    );
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_paused_provider_route_with_its_last_error() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (_, ready, key, _) = submitted(&mut client, 2, 1, false).await;
    let store = coordinator.store();
    start_by_hand(store, ready.run_id).await;
    let db = store.client().await.unwrap();
    db.execute(
        "UPDATE work_items SET provider_route = CASE WHEN agent = 'agent-00' THEN 'anthropic' ELSE 'openai' END WHERE run_id = $1",
        &[&ready.run_id],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO route_pauses (route, consecutive_failures, paused_until, last_error) VALUES
         ('anthropic', 2, now() + interval '1 minute', 'provider: unreachable after 6 failed requests: ECONNREFUSED'),
         ('openai', 1, now() - interval '1 minute', 'provider: old'),
         ('elsewhere', 3, now() + interval '1 minute', 'provider: another run''s route')",
        &[],
    )
    .await
    .unwrap();
    let s = client
        .get_status(pb::GetStatusRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    let routes: Vec<(&str, u32, &str)> = s
        .paused_routes
        .iter()
        .map(|p| {
            (
                p.route.as_str(),
                p.consecutive_failures,
                p.last_error.as_str(),
            )
        })
        .collect();
    assert_eq!(
        routes,
        [(
            "anthropic",
            2,
            "provider: unreachable after 6 failed requests: ECONNREFUSED"
        )],
        "only this run's routes, only those paused now"
    );
    assert!(s.paused_routes[0].paused_until_unix_ms > s.as_of_unix_ms);
    let http = coordinator.handle().http_addr;
    let (_, body) = http_get(http, &format!("/api/runs/{key}/status"), None).await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["paused_routes"][0]["route"], "anthropic", "{json}");
    let (_, page) = http_get(http, &format!("/runs/{key}/status"), None).await;
    assert!(page.contains("provider route anthropic paused"), "{page}");
    assert!(
        page.contains("after 2 failures in a row: provider: unreachable"),
        "{page}"
    );
    // An operator lifts the pause by hand (issue 48): the route is no longer paused, its last
    // error is answered; lifting again says it was not paused; an unknown route is named.
    let lifted = client
        .resume_route(pb::ResumeRouteRequest {
            route: "anthropic".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(lifted.was_paused, "{lifted:?}");
    assert!(lifted.last_error.contains("ECONNREFUSED"), "{lifted:?}");
    let s = client
        .get_status(pb::GetStatusRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert!(s.paused_routes.is_empty(), "{:?}", s.paused_routes);
    let again = client
        .resume_route(pb::ResumeRouteRequest {
            route: "anthropic".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.was_paused);
    let e = client
        .resume_route(pb::ResumeRouteRequest {
            route: "antropic".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(e.message().contains("antropic"), "{e:?}");
    coordinator.stop().await;
}

/// A cancelled run's numbers agree everywhere (issue 12): status, reconcile and the records
/// export count the same trials with an outcome over the same denominator, and a trial
/// cancelled before it ran is exported too (`cancelled`, its reason, no attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_runs_coverage_and_denominator_agree_in_status_reconcile_and_records() {
    // The real scheduler behind Control (its cancel is the one under test).
    let coordinator = Coordinator::open().await;
    let mut client = coordinator.client().await;
    let (_, ready, key, _) = submitted(&mut client, 4, 1, false).await; // 4 tasks x 2 agents = 8 trials
    let store = coordinator.store().clone();
    start_by_hand(&store, ready.run_id).await;
    finish_trial(&store, &ready, 0, 1, "completed", Some(true)).await;
    finish_trial(&store, &ready, 1, 1, "completed", Some(false)).await;
    // Trial 2 ended in an infrastructure error and waits for its retry when the run is
    // cancelled: it is cancelled, whatever its earlier attempt ended in.
    finish_trial(&store, &ready, 2, 1, "infrastructure_error", None).await;
    let c = store.client().await.unwrap();
    akbench_coordinator::scheduler::test_support::set_item_state(
        &c,
        &[ready.trials[2].trial_id],
        "ready",
        None,
        None,
    )
    .await
    .unwrap();
    // The run is cancelled mid-way: 2 trials done, 6 cancelled before they ran to an end.
    client
        .cancel_run(pb::CancelRunRequest {
            run: key.clone(),
            ..Default::default()
        })
        .await
        .unwrap();

    let (_, body) = http_get(
        coordinator.handle().http_addr,
        &format!("/api/runs/{key}/status"),
        None,
    )
    .await;
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["planned"], 8, "{status}");
    assert_eq!(status["outcomes"]["cancelled"], 6, "{status}");
    assert!(status["outcomes"].get("missing").is_none(), "{status}");
    assert_eq!(status["rates"]["coverage"], 0.25, "{status}");

    let r = client
        .reconcile(pb::ReconcileRequest {
            run: key.clone(),
            observations_json: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let report: serde_json::Value = serde_json::from_str(&r.report_json).unwrap();
    assert_eq!(report["planned"], 8);
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(report["counts"]["cancelled"], 6, "{report}");
    assert_eq!(
        report["rates"], status["rates"],
        "reconcile and status agree"
    );

    let mut stream = client
        .fetch_records(pb::FetchRecordsRequest {
            run: key.clone(),
            trials: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    let mut records = Vec::new();
    while let Some(m) = stream.message().await.unwrap() {
        let rec: akbench_core::record::RunRecord = serde_json::from_str(&m.record_json).unwrap();
        rec.validate().unwrap();
        records.push(rec);
    }
    assert_eq!(records.len(), 8, "every planned trial is exported");
    let cancelled: Vec<_> = records
        .iter()
        .filter(|r| r.outcome.state == akbench_core::lifecycle::State::Cancelled)
        .collect();
    assert_eq!(cancelled.len(), 6);
    for r in &cancelled {
        assert_eq!(r.outcome.cancelled.as_deref(), Some("cancelled"));
    }
    let waiting = records
        .iter()
        .find(|r| r.trial.id == ready.trials[2].trial_id)
        .unwrap();
    assert_eq!(waiting.attempts.len(), 1, "its earlier attempt is kept");
    assert_eq!(
        records
            .iter()
            .find(|r| r.trial.id == ready.trials[5].trial_id)
            .unwrap()
            .attempts
            .len(),
        0,
        "a trial that never started has no attempt"
    );
    // The records' own accounting (what `run aggregate` computes) is the same.
    let observations: Vec<akbench_core::accounting::Observation> = records
        .iter()
        .map(|r| akbench_core::accounting::Observation {
            trial_id: r.trial.id,
            state: r.outcome.state,
            ok: r.outcome.ok,
            score: r.outcome.score,
            attempt_id: None,
            source: None,
        })
        .collect();
    let a = akbench_core::accounting::reconcile(&ready, &observations);
    assert_eq!(
        serde_json::to_value(a.rates).unwrap(),
        status["rates"],
        "records and status agree"
    );
    coordinator.stop().await;
}

/// The status projection counts a worker as connected while it heartbeats: heard from
/// within one lease TTL, not for twice that after it went silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_counts_as_connected_only_while_it_heartbeats() {
    let coordinator = Coordinator::start(Tokens::default()).await;
    let mut client = coordinator.client_as(None).await;
    let (_, _, key, _) = submitted(&mut client, 1, 1, false).await;
    let ttl_ms = Config::local(String::new()).lease_ttl_ms as f64;
    let c = coordinator.store().client().await.unwrap();
    // Heard from now, heard from 1.5 TTL ago (silent: frozen), and disconnected.
    for (id, silent_ms, disconnected) in [
        ("w-live", 0.0, false),
        ("w-frozen", ttl_ms * 1.5, false),
        ("w-gone", 0.0, true),
    ] {
        c.execute(
            "INSERT INTO workers (worker_id, slots, labels, version, last_seen, disconnected_at)
             VALUES ($1, 1, '{}'::jsonb, 't', now() - $2 * interval '1 millisecond',
                     CASE WHEN $3 THEN now() END)",
            &[&id, &silent_ms, &disconnected],
        )
        .await
        .unwrap();
    }
    let s = client
        .get_status(pb::GetStatusRequest { run: key.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.workers, 1, "only the heartbeating worker is connected");
    coordinator.stop().await;
}
