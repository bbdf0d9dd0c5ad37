//! Placement by worker labels on a real private PostgreSQL: the claim SQL
//! (`claim_candidates.sql`) gives a run's items only to workers advertising every label the
//! run requires, exactly as `akbench_core::placement::eligible` decides (its table, run here
//! against the SQL), and status says when no connected worker has the labels.

mod common;

use std::time::Duration;

use akbench_coordinator::scheduler::Caps;
use akbench_core::placement::{eligible, row, TABLE};
use common::{enqueued, scheduler};

const TTL: Duration = Duration::from_secs(600);

#[tokio::test]
async fn the_claim_sql_follows_the_placement_table() {
    let s = scheduler().await;
    for (i, (required, labels, want)) in TABLE.iter().enumerate() {
        let (required, labels) = row(required, labels);
        assert_eq!(eligible(&required, &labels), *want, "row {i}: the table");
        let caps = Caps {
            worker_labels: required.clone(),
            ..Caps::default()
        };
        let run = enqueued(&s, 1, 0, &caps).await;
        let worker = format!("w{i}");
        s.register_worker(&worker, 1, &labels, "test")
            .await
            .unwrap();
        let got = s.claim(&worker, 1, TTL).await.unwrap();
        assert_eq!(
            got.len(),
            usize::from(*want),
            "row {i}: a worker with {labels:?} on a run requiring {required:?}"
        );
        if let Some(a) = got.first() {
            assert_eq!(a.trial_id, run.trial_ids[0]);
        }
        // Nothing of this row is left for the next one.
        s.cancel_run(run.run_id).await.unwrap();
    }
}

#[tokio::test]
async fn only_the_labelled_worker_claims_and_the_other_runs_stay_open_to_all() {
    let s = scheduler().await;
    let gpu = Caps {
        worker_labels: vec!["gpu".into()],
        ..Caps::default()
    };
    let needs_gpu = enqueued(&s, 2, 0, &gpu).await;
    s.register_worker("plain", 4, &Default::default(), "test")
        .await
        .unwrap();
    s.register_worker(
        "gpu",
        4,
        &[("gpu".to_string(), "a100".to_string())].into(),
        "test",
    )
    .await
    .unwrap();
    assert!(
        s.claim("plain", 4, TTL).await.unwrap().is_empty(),
        "an unlabelled worker takes nothing of a run that requires `gpu`"
    );
    let open = enqueued(&s, 1, 0, &Caps::default()).await;
    let plain = s.claim("plain", 4, TTL).await.unwrap();
    assert_eq!(
        plain.iter().map(|a| a.trial_id).collect::<Vec<_>>(),
        open.trial_ids,
        "a run without labels is open to any worker"
    );
    let mut got: Vec<_> = s
        .claim("gpu", 4, TTL)
        .await
        .unwrap()
        .iter()
        .map(|a| a.trial_id)
        .collect();
    got.sort();
    let mut want = needs_gpu.trial_ids.clone();
    want.sort();
    assert_eq!(got, want, "the labelled worker takes the run's trials");
}
