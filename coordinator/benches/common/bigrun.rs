//! A big run planned straight in the database, for the benches that need a million trials
//! in seconds (`fair_share`, `sessions`): its spec, planned trials and `planned` run in one
//! statement per table, and the caps and agent condition to start it with
//! (`Scheduler::start_run`, as `StartRun` does).

use akbench_coordinator::scheduler::{Caps, RunAgent};
use akbench_coordinator::store::Store;
use akbench_core::digest::digest_of;
use akbench_core::dispatch::share::Share;
use serde_json::json;
use uuid::Uuid;

/// Plans a run of `trials` no-op trials of agent "noop" in the database (spec, planned
/// trials, a `planned` run), in one statement per table, so that planning a million trials
/// takes seconds; returns the run and its trial ids (when `ids`).
pub async fn plan(store: &Store, trials: usize, ids: bool) -> (Uuid, Vec<Uuid>) {
    let run_id = Uuid::now_v7();
    let key = format!("run-{run_id}");
    let spec = json!({"run_id": run_id, "run_key": key, "kind": "bench"});
    let client = store.client().await.unwrap();
    client
        .execute(
            "INSERT INTO run_specs (run_id, run_key, digest, document) VALUES ($1, $2, $3, $4)",
            &[&run_id, &key, &digest_of(&spec), &spec],
        )
        .await
        .unwrap();
    let n = i32::try_from(trials).unwrap();
    let rows = client
        .execute(
            "INSERT INTO planned_trials (trial_id, run_id, ordinal, key, task_id, agent, \
             repetition, document) \
             SELECT gen_random_uuid(), $1, o, 'trial-' || o, 'noop', 'noop', 0, \
                    json_build_object('ordinal', o, 'task', 'noop', 'agent', 'noop', \
                                      'attempt', json_build_object('infrastructure_retries', 0)) \
             FROM generate_series(0, $2 - 1) AS o",
            &[&run_id, &n],
        )
        .await
        .unwrap();
    let _ = rows;
    let ids = if ids {
        client
            .query(
                "SELECT trial_id FROM planned_trials WHERE run_id = $1",
                &[&run_id],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, Uuid>("trial_id"))
            .collect()
    } else {
        Vec::new()
    };
    client
        .execute(
            "INSERT INTO runs (run_id, state) VALUES ($1, 'planned')",
            &[&run_id],
        )
        .await
        .unwrap();
    (run_id, ids)
}

/// Caps of a run of weight `weight` at priority 0, nothing else capped.
pub fn caps(weight: u32) -> Caps {
    Caps {
        share: Share {
            priority: 0,
            weight,
        },
        ..Caps::default()
    }
}

/// The one agent condition ("noop") of the runs [`plan`] makes.
pub fn agents() -> Vec<RunAgent> {
    vec![RunAgent {
        label: "noop".into(),
        provider_route: None,
        document: json!({"label": "noop"}),
    }]
}
