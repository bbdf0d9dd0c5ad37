//! `SubmitPlanStream` end to end: a real private PostgreSQL, the coordinator served
//! in-process on loopback, a tonic client streaming the plan in chunks. A streamed plan is
//! stored exactly as a whole one; a refused, short or interrupted stream stores nothing.

mod common;

use std::time::Duration;

use akbench_coordinator::store::Store;
use akbench_core::digest::canonical_json;
use akbench_core::plan::{plan, RunPlan};
use akbench_core::spec::ResolvedRunSpec;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use common::control_plane::{clock, run_docs, Coordinator};
use tonic::transport::Channel;
use tonic::Code;

/// The stream's messages: the head first, then `per` trials a message (the first message
/// carries the first `per`).
fn chunks(spec: &ResolvedRunSpec, ready: &RunPlan, per: usize) -> Vec<pb::SubmitPlanChunk> {
    let texts: Vec<String> = ready.trials.iter().map(canonical_json).collect();
    let mut out: Vec<pb::SubmitPlanChunk> = texts
        .chunks(per)
        .map(|c| pb::SubmitPlanChunk {
            trials_json: c.to_vec(),
            ..Default::default()
        })
        .collect();
    if out.is_empty() {
        out.push(pb::SubmitPlanChunk::default());
    }
    out[0].spec_json = canonical_json(spec);
    out[0].spec_digest = spec.digest.clone();
    out[0].plan_head_json = canonical_json(&ready.head());
    out[0].plan_digest = ready.digest.clone();
    out
}

async fn send(
    client: &mut ControlClient<Channel>,
    messages: Vec<pb::SubmitPlanChunk>,
) -> Result<pb::SubmitPlanResponse, tonic::Status> {
    client
        .submit_plan_stream(tokio_stream::iter(messages))
        .await
        .map(|r| r.into_inner())
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_plan_is_stored_as_a_whole_one_and_resubmits_idempotently() {
    let coordinator = Coordinator::open().await;
    let mut client = coordinator.client().await;
    let (spec, ready) = run_docs(3, 5);
    let r = send(&mut client, chunks(&spec, &ready, 4)).await.unwrap();
    assert!(r.created);
    let run = r.run.unwrap();
    assert_eq!(
        (run.trial_count, run.plan_digest.as_str()),
        (30, ready.digest.as_str())
    );
    assert_eq!(row_counts(coordinator.store()).await, vec![1, 2, 30, 1, 1]);
    // The coordinator gives back the very plan that was streamed.
    let got = client
        .get_run(pb::GetRunRequest {
            run: ready.run_key.clone(),
            include_documents: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.plan_json, canonical_json(&ready));
    // Again, streamed in other chunks or whole: not created; another plan: a conflict.
    assert!(
        !send(&mut client, chunks(&spec, &ready, 7))
            .await
            .unwrap()
            .created
    );
    let whole = pb::SubmitPlanRequest {
        spec_json: canonical_json(&spec),
        spec_digest: spec.digest.clone(),
        plan_json: canonical_json(&ready),
        plan_digest: ready.digest.clone(),
    };
    assert!(
        !client
            .submit_plan(whole)
            .await
            .unwrap()
            .into_inner()
            .created
    );
    let replanned = plan(&spec, &clock()).ready();
    let e = send(&mut client, chunks(&spec, &replanned, 4))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists, "{e:?}");
    assert_eq!(row_counts(coordinator.store()).await, vec![1, 2, 30, 1, 1]);
    coordinator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_or_short_stream_stores_nothing() {
    let coordinator = Coordinator::open().await;
    let mut client = coordinator.client().await;
    let (spec, ready) = run_docs(2, 6);
    let good = chunks(&spec, &ready, 5);

    let mut short = good.clone();
    short.pop();
    let mut tampered = good.clone();
    tampered[1].trials_json[2] =
        tampered[1].trials_json[2].replacen("\"repetition\":", "\"repetition\":9", 1);
    let mut duplicated = good.clone();
    let first = duplicated[0].trials_json[0].clone();
    duplicated[1].trials_json[0] = first;
    let mut extra = good.clone();
    extra
        .last_mut()
        .unwrap()
        .trials_json
        .push(good[0].trials_json[0].clone());
    let mut not_json = good.clone();
    not_json[1].trials_json[0] = "{\"trial_id\":".into();
    let mut head_with_trials = good.clone();
    head_with_trials[0].plan_head_json = canonical_json(&ready);
    let mut bad_digest = good.clone();
    bad_digest[0].plan_digest = format!("sha256:{}", "0".repeat(64));

    let cases = [
        (
            "ends early",
            short,
            "ended after 20 of the plan's 24 trials",
        ),
        ("a trial altered", tampered, "does not match"),
        ("a trial twice", duplicated, "has ordinal 0, expected 5"),
        ("a trial too many", extra, "more trials"),
        (
            "a trial that is not JSON",
            not_json,
            "trial 5 is not a PlannedTrial",
        ),
        ("trials in the head", head_with_trials, "plan_head_json"),
        ("another digest", bad_digest, "plan_digest"),
        ("nothing", Vec::new(), "stream"),
    ];
    for (what, messages, says) in cases {
        let e = send(&mut client, messages).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{what}: {e:?}");
        assert!(e.message().contains(says), "{what}: {}", e.message());
        assert!(e.message().starts_with("failed to submit plan"), "{what}");
        assert_eq!(
            row_counts(coordinator.store()).await,
            vec![0, 0, 0, 0, 0],
            "{what}"
        );
    }
    // The coordinator still takes the plan.
    assert!(send(&mut client, good).await.unwrap().created);
    assert_eq!(row_counts(coordinator.store()).await, vec![1, 2, 24, 1, 1]);
    coordinator.stop().await;
}

/// Waits until the coordinator's submit transaction holds the submissions' advisory lock
/// (it has begun writing the run), polling PostgreSQL: that state sends no event.
async fn wait_for_a_submission_in_progress(store: &Store) {
    let client = store.client().await.unwrap();
    for _ in 0..3000 {
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no submission took the advisory lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_stream_stores_nothing_and_the_plan_can_be_sent_again() {
    let coordinator = Coordinator::open().await;
    let (spec, ready) = run_docs(2, 10);
    let mut messages = chunks(&spec, &ready, 3);
    let rest = messages.split_off(2);
    // The client sends the head and two chunks, then stalls; it is then cut off.
    let stalled = tokio_stream::StreamExt::chain(
        tokio_stream::iter(messages),
        tokio_stream::pending::<pb::SubmitPlanChunk>(),
    );
    let mut client = coordinator.client().await;
    let call = tokio::spawn(async move { client.submit_plan_stream(stalled).await });
    wait_for_a_submission_in_progress(coordinator.store()).await;
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    // Sending the whole plan again waits for the interrupted transaction's lock, then stores
    // the run once: the interrupted one committed nothing.
    let mut client = coordinator.client().await;
    let mut whole = chunks(&spec, &ready, 3);
    whole.truncate(2);
    whole.extend(rest);
    let r = send(&mut client, whole).await.unwrap();
    assert!(r.created, "the interrupted submission stored the run");
    assert_eq!(row_counts(coordinator.store()).await, vec![1, 2, 40, 1, 1]);
    coordinator.stop().await;
}
