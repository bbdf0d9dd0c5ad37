//! Group commit of report rounds (`scheduler/rounds.rs`) on a real private PostgreSQL:
//! rounds that sessions submit while another is being written share the next transaction,
//! and each still gets its own outcomes and its own claim: as many assignments as its
//! reports freed, leased to its worker, only of runs its worker's labels allow.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use akbench_coordinator::scheduler::{
    placement_key, settle_hook, Caps, ClaimAfter, Disposition, Report, ReportAck, Scheduler,
};
use akbench_core::lifecycle::State;
use common::{enqueued, scheduler};
use tokio::sync::Notify;
use uuid::Uuid;

const TTL: Duration = Duration::from_secs(600);

/// A session's outcomes (errors as text) and the trials it was assigned.
type SessionGot = (Vec<Result<ReportAck, String>>, Vec<Uuid>);

/// A session of `worker` that holds `held` and finishes it (an infrastructure error, no
/// retry left), then claims what that freed.
fn finish_and_claim(
    s: &Scheduler,
    worker: &str,
    labels: &BTreeMap<String, String>,
    held: &akbench_coordinator::scheduler::Assignment,
) -> tokio::task::JoinHandle<SessionGot> {
    let s = s.clone();
    let report = Report::Finished {
        attempt_id: held.attempt_id,
        epoch: held.epoch,
        terminal: State::InfrastructureError,
        cause: "sandbox_failed".into(),
    };
    let claim = ClaimAfter {
        worker_id: worker.to_string(),
        free: 0,
        slots: 1,
        held: [held.attempt_id].into(),
        ttl_ms: TTL.as_millis() as i64,
        others_eligible: true,
        placement: placement_key(labels),
    };
    tokio::spawn(async move {
        let (outcomes, assigned) = s.report_and_claim(&[report], Some(claim)).await;
        (
            outcomes
                .into_iter()
                .map(|o| o.map_err(|e| e.to_string()))
                .collect(),
            assigned.iter().map(|a| a.trial_id).collect(),
        )
    })
}

async fn worker_of(s: &Scheduler, trial: Uuid) -> String {
    common::scalar(
        s,
        &format!(
            "SELECT a.worker_id FROM attempts a JOIN leases l USING (attempt_id) \
             WHERE a.trial_id = '{trial}'"
        ),
    )
    .await
}

#[tokio::test]
async fn rounds_waiting_together_share_a_transaction_and_each_gets_its_own_claim() {
    let s = scheduler().await.with_round_writers(1);
    let gpu_labels: BTreeMap<String, String> = [("gpu".to_string(), "a100".to_string())].into();
    let plain_labels = BTreeMap::new();
    // Run `open` takes any worker; run `gpu` only workers labelled `gpu`.
    let open = enqueued(&s, 5, 0, &Caps::default()).await;
    let gpu_caps = Caps {
        worker_labels: vec!["gpu".into()],
        ..Caps::default()
    };
    let gpu = enqueued(&s, 3, 0, &gpu_caps).await;
    for (w, labels) in [
        ("p1", &plain_labels),
        ("p2", &plain_labels),
        ("g1", &gpu_labels),
    ] {
        s.register_worker(w, 1, labels, "test").await.unwrap();
    }
    let held: Vec<_> = ["p1", "p2", "g1"]
        .iter()
        .map(|w| (*w).to_string())
        .collect();
    let mut leases = Vec::new();
    for w in &held {
        leases.push(s.claim(w, 1, TTL).await.unwrap().remove(0));
    }

    // The first round waits inside its transaction until the two others are queued.
    let release = Arc::new(Notify::new());
    let first_trial = leases[0].trial_id;
    let entered = Arc::new(Notify::new());
    let (gate, inside) = (Arc::clone(&release), Arc::clone(&entered));
    let hook: settle_hook::BeforeSettleWrite = Arc::new(move |round, trials: &[Uuid]| {
        let hold = round == 0 && trials == [first_trial];
        let (gate, inside) = (Arc::clone(&gate), Arc::clone(&inside));
        Box::pin(async move {
            if hold {
                inside.notify_one();
                gate.notified().await;
            }
        })
    });
    settle_hook::set_before_settle_write(Some(hook));
    let before = s.rounds_written();
    let first = finish_and_claim(&s, "p1", &plain_labels, &leases[0]);
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the first round's transaction reaches its settle");
    let second = finish_and_claim(&s, "p2", &plain_labels, &leases[1]);
    let third = finish_and_claim(&s, "g1", &gpu_labels, &leases[2]);
    tokio::time::timeout(Duration::from_secs(30), async {
        while s.rounds_waiting() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the two other rounds wait");
    release.notify_one();
    let results = [
        first.await.unwrap(),
        second.await.unwrap(),
        third.await.unwrap(),
    ];
    settle_hook::set_before_settle_write(None);

    let after = s.rounds_written();
    assert_eq!(
        (
            after.transactions - before.transactions,
            after.rounds - before.rounds
        ),
        (2, 3),
        "the two rounds that waited were written in one transaction: {after:?} after {before:?}"
    );
    let open_trials: HashSet<Uuid> = open.trial_ids.iter().copied().collect();
    let gpu_trials: HashSet<Uuid> = gpu.trial_ids.iter().copied().collect();
    for ((w, (outcomes, assigned)), lease) in held.iter().zip(&results).zip(&leases) {
        assert_eq!(
            outcomes,
            &vec![Ok(ReportAck::Finished(Some(Disposition::Done(
                State::InfrastructureError
            ))))],
            "{w}'s own finish"
        );
        assert_eq!(assigned.len(), 1, "{w} freed one slot and got one item");
        assert_ne!(assigned[0], lease.trial_id);
        assert_eq!(
            worker_of(&s, assigned[0]).await,
            *w,
            "the item is leased to {w}"
        );
        if w.starts_with('p') {
            assert!(
                open_trials.contains(&assigned[0]),
                "{w} has no `gpu` label: nothing of the gpu run"
            );
        } else {
            assert!(
                gpu_trials.contains(&assigned[0]) || open_trials.contains(&assigned[0]),
                "{w}"
            );
        }
    }
    let all: HashSet<Uuid> = results.iter().flat_map(|(_, a)| a.clone()).collect();
    assert_eq!(all.len(), 3, "no item was given twice");
}
