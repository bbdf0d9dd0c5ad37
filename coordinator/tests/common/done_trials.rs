//! A run with done trials made by hand, the way the scheduler leaves them, for the tests and
//! benches that read done trials (the trial rows, the viewer, the records' export) without
//! running any: [`serve`] serves a coordinator in-process; [`submit_with_items`] submits the
//! plan over gRPC (or streamed: [`submit_streamed_with_items`]) and makes its work items as
//! `StartRun` would; [`end_trials`] ends trials
//! with one completed attempt each, its accepted record (the shape workers upload, stored by
//! the product's `store_records`), the work item done with its bucket and the run's counters
//! moved; [`stamp_ended`] sets when they ended. Included by path (`#[path]`) from
//! `tests/trial_row_pages.rs`, `tests/start_run.rs`, `benches/view.rs` and ctl's
//! `tests/ended_export.rs`.
#![allow(dead_code)]

use akbench_coordinator::scheduler::test_support::INSERT_ITEMS_BY_HAND_SQL;
use akbench_coordinator::scheduler::{store_records, NewRecord};
use akbench_coordinator::server::{serve_with, Config, ServeHandle, Services};
use akbench_coordinator::store::Store;
use akbench_core::digest::{canonical_json, digest_of};
use akbench_core::lifecycle::State;
use akbench_core::plan::{PlannedTrial, RunPlan};
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::testkit::attempt_record;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use tonic::transport::Channel;
use uuid::Uuid;

/// A coordinator served in-process on the database at `url` over loopback (its scheduler has
/// nothing to do: [`submit_with_items`] starts no run), and a control client of it (messages
/// up to 512 MiB). It serves while the handle and the sender are kept.
pub async fn serve(
    url: &str,
) -> (
    ServeHandle,
    tokio::sync::oneshot::Sender<()>,
    ControlClient<Channel>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = serve_with(
        Config::local(url.to_string()),
        Services::default(),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let channel = Channel::from_shared(format!("http://{}", handle.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client = ControlClient::new(channel)
        .max_encoding_message_size(512 << 20)
        .max_decoding_message_size(512 << 20);
    (handle, stop, client)
}

/// Submits `spec` and its ready plan `ready` to the coordinator `c` and makes the run's work
/// items by hand (no scheduler runs them); returns a connection to the database at `url`
/// and a store on it.
pub async fn submit_with_items(
    c: &mut ControlClient<Channel>,
    url: &str,
    spec: &ResolvedRunSpec,
    ready: &RunPlan,
) -> (tokio_postgres::Client, Store) {
    c.submit_plan(pb::SubmitPlanRequest {
        spec_json: canonical_json(spec),
        spec_digest: spec.digest.clone(),
        plan_json: canonical_json(ready),
        plan_digest: ready.digest.clone(),
    })
    .await
    .unwrap();
    with_items(url, spec).await
}

/// [`submit_with_items`] over `SubmitPlanStream` (as `akbench run submit` sends a plan),
/// cut as `akbench_proto::plan_chunks` cuts it: for plans above the unary call's message limit (a
/// million trials).
pub async fn submit_streamed_with_items(
    c: &mut ControlClient<Channel>,
    url: &str,
    spec: &ResolvedRunSpec,
    ready: &RunPlan,
) -> (tokio_postgres::Client, Store) {
    let chunks = akbench_proto::plan_chunks::PlanChunker::all(spec, ready);
    c.submit_plan_stream(tokio_stream::iter(chunks))
        .await
        .unwrap();
    with_items(url, spec).await
}

/// A connection to the database at `url` and a store on it, with the work items of the
/// submitted run `spec` made by hand.
async fn with_items(url: &str, spec: &ResolvedRunSpec) -> (tokio_postgres::Client, Store) {
    let (db, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let store = Store::connect(url).await.unwrap();
    db.execute(INSERT_ITEMS_BY_HAND_SQL, &[&spec.identity.run_id])
        .await
        .unwrap();
    (db, store)
}

/// Ends `trials` as the scheduler leaves them: one completed attempt each with an accepted
/// record, solved when `solved` says so (bucket `succeeded`, else `failed`), the work item
/// done (`updated_at` now) and the run's counters moved.
pub async fn end_trials<'a>(
    db: &tokio_postgres::Client,
    store: &Store,
    trials: impl IntoIterator<Item = &'a PlannedTrial>,
    solved: impl Fn(&PlannedTrial) -> bool,
) {
    end_trials_with(db, store, trials, |tr, id| {
        let ok = solved(tr);
        (
            attempt_record(id, &tr.key, 1, State::Completed, Some(ok)),
            if ok { "succeeded" } else { "failed" },
        )
    })
    .await
}

/// As [`end_trials`], each trial's one attempt record (and its bucket) made by `make` from
/// the trial and the attempt's id; the attempt's terminal state is the record's.
pub async fn end_trials_with<'a>(
    db: &tokio_postgres::Client,
    store: &Store,
    trials: impl IntoIterator<Item = &'a PlannedTrial>,
    make: impl Fn(&PlannedTrial, Uuid) -> (akbench_core::record::AttemptRecord, &'static str),
) {
    let mut ids = Vec::new();
    let mut attempts = Vec::new();
    let mut states = Vec::new();
    let mut new: Vec<NewRecord> = Vec::new();
    let mut buckets = Vec::new();
    for tr in trials {
        let id = Uuid::now_v7();
        let (record, bucket) = make(tr, id);
        states.push(record.state.as_str().to_string());
        let r = serde_json::to_value(record).unwrap();
        ids.push(tr.trial_id);
        attempts.push(id);
        new.push((id, digest_of(&r), r.to_string()));
        buckets.push(bucket.to_string());
    }
    db.execute(
        "INSERT INTO attempts (attempt_id, trial_id, number, kind, state, epoch, finished_at, terminal_state)
         SELECT a, t, 1, 'execute', s, 1, now(), s
         FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS x(a, t, s)",
        &[&attempts, &ids, &states],
    )
    .await
    .unwrap();
    // The product's statement (spend counted as for a real report).
    store_records(&store.client().await.unwrap(), &new)
        .await
        .unwrap();
    db.execute(
        "WITH done AS (
           UPDATE work_items w SET state = 'done', attempts_used = 1, bucket = x.b, updated_at = now()
           FROM unnest($1::uuid[], $2::text[]) AS x(t, b) WHERE w.trial_id = x.t
           RETURNING w.run_id, w.agent, w.bucket)
         INSERT INTO run_counts (run_id, agent, kind, state, bucket, n)
         SELECT run_id, agent, 'items', 'done', bucket, count(*) FROM done
         GROUP BY run_id, agent, bucket",
        &[&ids, &buckets],
    )
    .await
    .unwrap();
}

pub async fn stamp_ended(db: &tokio_postgres::Client, trials: &[&PlannedTrial], micros: i64) {
    let ids: Vec<Uuid> = trials.iter().map(|t| t.trial_id).collect();
    db.execute(
        "UPDATE work_items SET updated_at = 'epoch'::timestamptz + $2::bigint * interval '1 microsecond' \
         WHERE trial_id = ANY ($1)",
        &[&ids, &micros],
    )
    .await
    .unwrap();
}
