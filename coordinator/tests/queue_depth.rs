//! `akbench_queue_depth` is read off the run counters (`queue_depth::ready_by_route`), not by
//! counting the ready items at every scrape; it must say what counting them says: for runs
//! started through `StartRun` with agents on two routes and none, as items are leased, done
//! and cancelled, taken back from a lost worker, and for two running runs at once.

use std::collections::BTreeMap;
use std::time::Duration;

use akbench_coordinator::metrics::Metrics;
use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::queue_depth::ready_by_route;
use akbench_coordinator::scheduler::test_support::set_item_state;
use akbench_coordinator::scheduler::Scheduler;
use akbench_coordinator::store::Store;
use akbench_core::clock::SystemClock;
use akbench_core::plan::{plan, RunPlan};
use akbench_core::spec::{Provenance, ResolvedRunSpec, SpecAgent};
use akbench_core::testkit::{synthetic_agent, synthetic_condition};
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use tonic::transport::Channel;
use uuid::Uuid;

#[path = "common/done_trials.rs"]
mod done_trials;

/// What the gauge read before: the ready items of running runs, counted.
const COUNTED_SQL: &str = "SELECT s.run_key, coalesce(w.provider_route, '') AS route, \
     count(*)::bigint AS n FROM work_items w \
     JOIN runs r ON r.run_id = w.run_id AND r.state = 'running' \
     JOIN run_specs s ON s.run_id = w.run_id \
     WHERE w.state = 'ready' GROUP BY s.run_key, w.provider_route";

/// A spec of `tasks` x 3 agents x 2 repetitions: two agents on `route-a`, one on none.
fn run_docs(experiment: &str, tasks: usize) -> (ResolvedRunSpec, RunPlan) {
    let mut condition = synthetic_condition(tasks, 3, 2);
    condition.experiment = experiment.into();
    for (i, route) in [Some("route-a"), Some("route-a"), None]
        .into_iter()
        .enumerate()
    {
        let base = synthetic_agent(&format!("agent-{i:02}"), None);
        condition.agents[i] = SpecAgent::new(
            base.label.clone(),
            base.descriptor.clone(),
            None,
            BTreeMap::new(),
            route.map(str::to_string),
        );
    }
    let spec = ResolvedRunSpec::assemble(condition, Provenance::default(), &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    (spec, ready)
}

async fn submit_and_start(c: &mut ControlClient<Channel>, spec: &ResolvedRunSpec, ready: &RunPlan) {
    c.submit_plan(pb::SubmitPlanRequest {
        spec_json: akbench_core::digest::canonical_json(spec),
        spec_digest: spec.digest.clone(),
        plan_json: akbench_core::digest::canonical_json(ready),
        plan_digest: ready.digest.clone(),
    })
    .await
    .unwrap();
    c.start_run(pb::StartRunRequest {
        run: spec.identity.run_key.clone(),
    })
    .await
    .unwrap();
}

/// The gauge's figures and the counted ones, which must be the same.
async fn both(store: &Store) -> BTreeMap<(String, String), u64> {
    let client = store.client().await.unwrap();
    let from_counters = ready_by_route(&client).await.unwrap();
    let counted: BTreeMap<(String, String), u64> = client
        .query(COUNTED_SQL, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let n: i64 = r.get("n");
            (
                (r.get("run_key"), r.get("route")),
                u64::try_from(n).unwrap(),
            )
        })
        .collect();
    assert_eq!(from_counters, counted, "counters against counted items");
    from_counters
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_depth_from_the_counters_is_the_counted_one() {
    let url = test_support::fresh_database().await;
    let (_handle, _stop, mut c) = done_trials::serve(&url).await;
    let store = Store::connect(&url).await.unwrap();
    let (spec, ready) = run_docs("first", 4);
    let key = spec.identity.run_key.clone();
    submit_and_start(&mut c, &spec, &ready).await;

    // Started: 4 tasks x 2 repetitions per agent, two agents on route-a.
    let depth = both(&store).await;
    assert_eq!(depth[&(key.clone(), "route-a".to_string())], 16);
    assert_eq!(depth[&(key.clone(), String::new())], 8);

    // Leased: a worker takes five.
    let scheduler = Scheduler::new(store.clone());
    scheduler
        .register_worker("w1", 5, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let taken = scheduler
        .claim_for("w1", 5, Duration::from_secs(60), false)
        .await
        .unwrap();
    assert_eq!(taken.len(), 5);
    let depth = both(&store).await;
    assert_eq!(depth.values().sum::<u64>(), 24 - 5);

    // Three of them done, one cancelled while ready.
    let client = store.client().await.unwrap();
    let done: Vec<Uuid> = taken.iter().take(3).map(|a| a.trial_id).collect();
    set_item_state(&client, &done, "done", Some("completed"), None)
        .await
        .unwrap();
    let ready_one: Uuid = client
        .query_one(
            "SELECT trial_id FROM work_items WHERE state = 'ready' ORDER BY ordinal LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    set_item_state(
        &client,
        &[ready_one],
        "cancelled",
        Some("cancelled"),
        Some("user"),
    )
    .await
    .unwrap();
    let depth = both(&store).await;
    assert_eq!(depth.values().sum::<u64>(), 24 - 5 - 1);

    // A second worker takes two and is lost: the coordinator takes its leases back (re-queued
    // or ended by the run's retry policy) and the gauge follows the counted figure.
    scheduler
        .register_worker("w2", 2, &BTreeMap::new(), "test")
        .await
        .unwrap();
    let lost = scheduler
        .claim_for("w2", 2, Duration::from_secs(60), false)
        .await
        .unwrap();
    assert_eq!(lost.len(), 2);
    let released = scheduler.release_worker("w2", &[], false).await.unwrap();
    assert_eq!(released.len(), 2, "{released:?}");
    both(&store).await;

    // A second running run beside it: each reported under its own key.
    let (spec_b, ready_b) = run_docs("second", 2);
    submit_and_start(&mut c, &spec_b, &ready_b).await;
    let depth = both(&store).await;
    assert_eq!(
        depth[&(spec_b.identity.run_key.clone(), "route-a".to_string())],
        8
    );

    // The first cancelled: no longer running, no longer reported.
    scheduler.cancel_run(spec.identity.run_id).await.unwrap();
    let depth = both(&store).await;
    assert!(depth.keys().all(|(run, _)| *run != key), "{depth:?}");
    assert_eq!(depth.values().sum::<u64>(), 12);

    // `/metrics` renders the same figures.
    let metrics = Metrics::default();
    metrics.refresh(&store).await.unwrap();
    let text = metrics.render();
    let line = format!(
        "akbench_queue_depth{{run=\"{}\",provider_route=\"route-a\"}} 8",
        spec_b.identity.run_key
    );
    assert!(text.contains(&line), "{line} in {text}");
}
