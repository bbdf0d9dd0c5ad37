//! Core's one table of runs and work items (`dispatch::store::conformance`: every run state
//! with every run event over a set of item set-ups, every item class with every item event)
//! walked against the scheduler over PostgreSQL, through the same trait and the same test
//! body core's tests walk the memory store with (`dispatch::memory::tests`).

use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::scheduler::{RetryPolicy, Scheduler};
use akbench_coordinator::store::Store;
use akbench_core::dispatch::store::conformance;
use akbench_core::dispatch::Backoff;

#[tokio::test]
async fn the_table_of_runs_and_items_holds_on_the_postgresql_store() {
    let store = Store::connect(&test_support::fresh_database().await)
        .await
        .expect("connects");
    store.migrate().await.expect("migrates");
    let mut scheduler = Scheduler::new(store).with_retry(RetryPolicy::with_backoff(Backoff::NONE));
    let walked = conformance::walk(&mut scheduler)
        .await
        .unwrap_or_else(|e| panic!("the store failed: {e}"));
    assert!(
        walked.failures.is_empty(),
        "{} failures:\n{}",
        walked.failures.len(),
        walked.failures.join("\n")
    );
    // The same cases as the memory store's walk.
    assert_eq!((walked.run_cases, walked.item_cases), (153, 110));
}
